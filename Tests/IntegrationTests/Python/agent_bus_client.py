#!/usr/bin/python3
"""An app on the session bus, for the tests of authd's org.authd.Desktop (AgentBus).

  agent_bus_client.py call ADDRESS METHOD SIGNATURE ARGS_JSON [COUNT]
      Calls METHOD of org.authd.Desktop1 (COUNT times at once, from one connection) with
      ARGS_JSON as SIGNATURE; prints {"refused": ERROR-NAME} as each call fails, then, last,
      one JSON object: its pid and unique name, each call's reply or D-Bus error, and the
      Progress signals that reached it.
  agent_bus_client.py listen ADDRESS
      Listens for Progress signals from anyone; prints {"ready": NAME} once its match is in
      place, then, at a line (or the end) on stdin, {"signals": [...]}.

Signals are taken from any sender on purpose: the service must send Progress to its caller
alone, and a listener that would accept a broadcast is how the tests see that it does not.
"""
import json
import os
import select
import sys

import gi

gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib  # noqa: E402

NAME = "org.authd.Desktop"
PATH = "/org/authd/Desktop"
INTERFACE = "org.authd.Desktop1"


def connect(address):
    flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
    connection = Gio.DBusConnection.new_for_address_sync(address, flags, None, None)
    signals = []

    def on_signal(_connection, _sender, _path, _interface, _member, parameters):
        signals.append(list(parameters.unpack()))

    connection.signal_subscribe(None, INTERFACE, "Progress", PATH, None, Gio.DBusSignalFlags.NONE, on_signal)
    # The bus handles one connection's messages in order: once this answers, the AddMatch
    # that signal_subscribe sent has taken effect.
    connection.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetId",
                         None, None, Gio.DBusCallFlags.NONE, 10000, None)
    return connection, signals


def pump():
    context = GLib.MainContext.default()
    while context.pending():
        context.iteration(False)


def call(address, method, signature, arguments, count):
    connection, signals = connect(address)
    results = [None] * count
    loop = GLib.MainLoop()
    left = [count]

    def done(index):
        def finish(source, result):
            try:
                reply = source.call_finish(result)
                results[index] = {"reply": reply.unpack()[0]}
            except GLib.Error as error:
                name = Gio.DBusError.get_remote_error(error)
                # The message arrives as "GDBus.Error:NAME: MESSAGE".
                message = error.message.removeprefix("GDBus.Error:%s: " % name)
                results[index] = {"error": {"name": name, "message": message}}
                # Said at once, as a line of its own: a test may wait for a refusal.
                print(json.dumps({"refused": name}), flush=True)
            left[0] -= 1
            if left[0] == 0:
                loop.quit()
        return finish

    parameters = GLib.Variant("(" + signature + ")", tuple(arguments))
    for index in range(count):
        connection.call(NAME, PATH, INTERFACE, method, parameters, None, Gio.DBusCallFlags.NONE, 60000, None, done(index))
    GLib.timeout_add_seconds(70, loop.quit)
    loop.run()
    pump()
    print(json.dumps({"pid": os.getpid(), "name": connection.get_unique_name(), "results": results, "signals": signals}), flush=True)


def listen(address):
    connection, signals = connect(address)
    print(json.dumps({"ready": connection.get_unique_name()}), flush=True)
    while True:
        pump()
        readable, _, _ = select.select([sys.stdin], [], [], 0.05)
        if readable:
            sys.stdin.readline()
            break
    pump()
    print(json.dumps({"signals": signals}), flush=True)


def main():
    if sys.argv[1] == "call":
        count = int(sys.argv[6]) if len(sys.argv) > 6 else 1
        call(sys.argv[2], sys.argv[3], sys.argv[4], json.loads(sys.argv[5]), count)
    elif sys.argv[1] == "listen":
        listen(sys.argv[2])
    else:
        sys.exit("usage: agent_bus_client.py call|listen ADDRESS …")


if __name__ == "__main__":
    main()
