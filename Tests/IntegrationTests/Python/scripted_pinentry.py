#!/usr/bin/python3
"""A pinentry for tests: speaks Assuan on stdin/stdout as GnuPG's pinentry does, answers each
question (GETPIN, CONFIRM) from a script, and records every command it receives.

Environment:
  SCRIPTED_PINENTRY_SCRIPT  a JSON file holding a list of answers. Each question takes the first
                            one and removes it from the file (under flock), so the answers of
                            a list are spent across several pinentry processes, one per dialog,
                            in order. An empty list (or no file) answers every question with
                            cancel and records {"exhausted": true}.
  SCRIPTED_PINENTRY_LOG     a file to which one JSON object per line is appended:
                            {"started": true, "pid": N} when the process starts, then for every
                            command received
                            {"command": "SETDESC", "argument": "...", "pid": N} with the argument
                            percent-unescaped (a %0A in SETDESC is a "\n" inside the string, so
                            every command stays one line of the log).

Answers (one JSON object each):
  {"pin": "123456"}            GETPIN: D with the PIN (escaped), OK
  {"pin": "1", "inquire": true}  first INQUIRE QUALITY (as a quality bar would) and wait for the
                               client's CAN or END, then as above
  {"cancel": true}             ERR 83886179 Operation cancelled (GPG_ERR_CANCELED, source pinentry)
  {"confirm": "ok"}            CONFIRM: OK
  {"confirm": "notok"}         CONFIRM: ERR 83886194 Not confirmed (GPG_ERR_NOT_CONFIRMED)
  {"confirm": "cancel"}        CONFIRM: ERR 83886179 Operation cancelled
  {"timeout": true}            S ERROR, then ERR 83886142 Timeout (GPG_ERR_TIMEOUT) at once
  {"hang": true}               never answers (SIGTERM ends it)
  {"hang": "stubborn"}         never answers and ignores SIGTERM (only SIGKILL ends it)
  {"crash": true}              exits with status 1 without answering
A question of the other kind than its answer (a pin for CONFIRM) answers ERR 536871187 and
records {"mismatch": ...}.
"""
import fcntl
import json
import os
import signal
import sys
import time

SOURCE = 5 << 24  # GPG_ERR_SOURCE_PINENTRY
LOG = os.environ.get("SCRIPTED_PINENTRY_LOG")
SCRIPT = os.environ.get("SCRIPTED_PINENTRY_SCRIPT")


def record(entry):
    if not LOG:
        return
    entry["pid"] = os.getpid()
    with open(LOG, "a", encoding="utf-8") as log:
        log.write(json.dumps(entry) + "\n")


def unescape(text):
    raw = text.encode("utf-8", "surrogateescape")
    out = bytearray()
    i = 0
    while i < len(raw):
        if raw[i] == 0x25 and i + 3 <= len(raw):
            try:
                out.append(int(raw[i + 1:i + 3], 16))
                i += 3
                continue
            except ValueError:
                pass
        out.append(raw[i])
        i += 1
    return out.decode("utf-8", "replace")


def escape_data(text):
    """A D line's payload: %, CR and LF escaped, as libassuan sends data."""
    data = bytearray()
    for byte in text.encode("utf-8"):
        data += (b"%%%02X" % byte) if byte in (0x25, 0x0A, 0x0D) else bytes([byte])
    return bytes(data)


def send(line):
    sys.stdout.buffer.write(line if isinstance(line, bytes) else line.encode("utf-8"))
    sys.stdout.buffer.write(b"\n")
    sys.stdout.buffer.flush()


def next_answer():
    if not SCRIPT or not os.path.exists(SCRIPT):
        return None
    with open(SCRIPT, "r+", encoding="utf-8") as script:
        fcntl.flock(script, fcntl.LOCK_EX)
        answers = json.load(script)
        if not answers:
            return None
        first = answers.pop(0)
        script.seek(0)
        script.truncate()
        json.dump(answers, script)
        return first


def read_line():
    line = sys.stdin.buffer.readline()
    if not line:
        sys.exit(0)
    return line.rstrip(b"\n").decode("utf-8", "surrogateescape")


def hang(answer):
    if answer.get("hang") == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(60)


def ask(command, answer):
    if answer is None:
        record({"exhausted": True})
        send("ERR %d Operation cancelled <Pinentry>" % (SOURCE | 99))
        return
    if answer.get("hang"):
        hang(answer)
    if answer.get("crash"):
        sys.exit(1)
    if answer.get("cancel"):
        send("ERR %d Operation cancelled <Pinentry>" % (SOURCE | 99))
        return
    if answer.get("timeout"):
        send("S ERROR scripted.? %d " % (SOURCE | 62))
        send("ERR %d Timeout <Pinentry>" % (SOURCE | 62))
        return
    if command == "GETPIN" and "pin" in answer:
        if answer.get("inquire"):
            send("INQUIRE QUALITY " + "x" * len(answer["pin"]))
            while True:
                reply = read_line()
                record({"command": reply.split(" ", 1)[0], "argument": ""})
                if reply.split(" ", 1)[0] in ("CAN", "END"):
                    break
        send("# scripted pinentry")
        send(b"D " + escape_data(answer["pin"]))
        send("OK")
        return
    if command == "CONFIRM" and "confirm" in answer:
        choice = answer["confirm"]
        if choice == "ok":
            send("OK")
        elif choice == "notok":
            send("ERR %d Not confirmed <Pinentry>" % (SOURCE | 114))
        else:
            send("ERR %d Operation cancelled <Pinentry>" % (SOURCE | 99))
        return
    record({"mismatch": answer, "question": command})
    send("ERR 536871187 Unknown IPC command <Scripted>")


def main():
    record({"started": True})
    send("OK Pleased to meet you, scripted pinentry")
    while True:
        line = read_line()
        command, _, argument = line.partition(" ")
        command = command.upper()
        record({"command": command, "argument": unescape(argument)})
        if command == "BYE":
            send("OK closing connection")
            return
        if command in ("GETPIN", "CONFIRM"):
            ask(command, next_answer())
        elif command == "GETINFO" and argument == "pid":
            send("D %d" % os.getpid())
            send("OK")
        elif command in ("OPTION", "SETTITLE", "SETDESC", "SETPROMPT", "SETERROR", "SETOK", "SETNOTOK",
                         "SETCANCEL", "SETTIMEOUT", "SETKEYINFO", "SETREPEAT", "SETQUALITYBAR", "RESET", "NOP"):
            send("OK")
        else:
            send("ERR 536871187 Unknown IPC command <Scripted>")


if __name__ == "__main__":
    main()
