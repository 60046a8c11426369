'''A stand-in for fprintd (net.reactivated.Fprint) for authd's integration tests.

A python-dbusmock template, written for authd. Run it on a private bus (FprintdRig does this):

    DBUS_SYSTEM_BUS_ADDRESS=<private bus> /usr/bin/python3 -m dbusmock --template fprintd_mock.py -p '<json>'

Parameters (-p, a JSON object; every key is optional):
  enrolled  {"alice": ["right-index-finger"], ...}   user -> enrolled finger names (default: nobody)
  script    [["verify-retry-scan", false, 20], ["verify-match", true, 20], ...]
            VerifyStatus signals to send, as [result, done, delay_ms]. The delay counts from the
            previous entry of the same VerifyStart; a negative delay sends the signal before the
            VerifyStart reply. One VerifyStart consumes entries up to and including the next
            done=true entry (or a "MOCK: ..." entry); the rest waits for the next VerifyStart.
            An empty script sends nothing, so the client has to time out.
            Pseudo-results:  "MOCK: vanish"  the reader is unplugged: the device object goes away
                                             and InterfacesRemoved is sent from /net/reactivated/Fprint;
                             "MOCK: quit"    fprintd dies (the process exits, the name is dropped).
  device    true (default) or false (no reader: GetDevices is empty, GetDefaultDevice fails)

Objects: /net/reactivated/Fprint/Manager (net.reactivated.Fprint.Manager: GetDevices, GetDefaultDevice)
and /net/reactivated/Fprint/Device/0 (net.reactivated.Fprint.Device: ListEnrolledFingers, Claim,
Release, VerifyStart, VerifyStop; signals VerifyFingerSelected, VerifyStatus), with fprintd's error
names (net.reactivated.Fprint.Error.*). As in fprintd, after a done=true status the device keeps
verifying until VerifyStop: a second VerifyStart before it gets AlreadyInUse. Release ends both the
claim and the verification. Unlike fprintd, the claim is not tied to the caller's connection (no
sender checks, no release when the client disconnects) and nothing asks polkit.

Control interface net.reactivated.Fprint.Mock on the manager object:
  SetScript(a(sbi) steps)          replace the script
  SetEnrolled(a{sas} enrolled)     replace the enrolled map
  CallCounts() -> a{su}            fprintd method name -> calls so far (manager and device methods)
  ClaimedBy() -> s                 the user the device is claimed for, "" when it is not claimed
  StatusTimes() -> at              CLOCK_MONOTONIC microseconds at which each VerifyStatus was sent
                                   (authd-bench times the daemon from the match signal)

The file is exec'd twice by dbusmock (for the constants, then by AddTemplate), so all state lives
on the manager mock object, never in module globals.
'''

import os
import time

import dbus
from gi.repository import GLib
from dbusmock import mockobject

BUS_NAME = 'net.reactivated.Fprint'
MAIN_OBJ = '/net/reactivated/Fprint/Manager'
MAIN_IFACE = 'net.reactivated.Fprint.Manager'
SYSTEM_BUS = True

DEVICE_IFACE = 'net.reactivated.Fprint.Device'
CONTROL_IFACE = 'net.reactivated.Fprint.Mock'
OBJECT_MANAGER_PATH = '/net/reactivated/Fprint'
DEVICE_PATH = '/net/reactivated/Fprint/Device/0'
ERROR_PREFIX = 'net.reactivated.Fprint.Error.'
FINGERS = [side + '-' + finger for side in ('left', 'right')
           for finger in ('thumb', 'index-finger', 'middle-finger', 'ring-finger', 'little-finger')]
CONTROL_METHODS = {'SetScript', 'SetEnrolled', 'CallCounts', 'ClaimedBy', 'StatusTimes'}


def _error(name, message):
    return dbus.exceptions.DBusException(message, name=ERROR_PREFIX + name)


def _state():
    return mockobject.objects[MAIN_OBJ]


def _steps(entries):
    steps = []
    for entry in entries:
        result, done = str(entry[0]), bool(entry[1])
        delay = int(entry[2]) if len(entry) > 2 else 0
        steps.append((result, done, delay))
    return steps


def load(mock, parameters):
    mock.enrolled = {str(user): [str(f) for f in fingers] for user, fingers in parameters.get('enrolled', {}).items()}
    mock.script = _steps(parameters.get('script', []))
    mock.claimed = None        # the user name given to Claim, or None
    mock.verifying = False     # from VerifyStart until VerifyStop or Release, as in fprintd
    mock.pending = []          # GLib source ids of statuses not sent yet
    mock.sent_at = []          # CLOCK_MONOTONIC microseconds at which each VerifyStatus went out
    if parameters.get('device', True):
        mock.AddObject(DEVICE_PATH, DEVICE_IFACE, {
            'name': dbus.String('authd mock reader', variant_level=1),
            'scan-type': dbus.String('press', variant_level=1),
            'num-enroll-stages': dbus.Int32(5, variant_level=1),
            'finger-present': dbus.Boolean(False, variant_level=1),
            'finger-needed': dbus.Boolean(False, variant_level=1),
        }, [])


def _cancel_pending(state):
    for source in state.pending:
        GLib.source_remove(source)
    state.pending = []


def _device_paths():
    return sorted(path for path in mockobject.objects if path.startswith('/net/reactivated/Fprint/Device/'))


# --- net.reactivated.Fprint.Manager ---------------------------------------------------------------

@dbus.service.method(MAIN_IFACE, in_signature='', out_signature='ao')
def GetDevices(self):
    return dbus.Array([dbus.ObjectPath(p) for p in _device_paths()], signature='o')


@dbus.service.method(MAIN_IFACE, in_signature='', out_signature='o')
def GetDefaultDevice(self):
    paths = _device_paths()
    if not paths:
        raise _error('NoSuchDevice', 'No devices available')
    return dbus.ObjectPath(paths[-1])


# --- net.reactivated.Fprint.Device ----------------------------------------------------------------
# dbusmock puts these methods on the mock class, so the device object answers them; `self` is the
# object called, and the calls are logged in the manager's call_log.

@dbus.service.method(DEVICE_IFACE, in_signature='s', out_signature='as')
def ListEnrolledFingers(self, user):
    fingers = _state().enrolled.get(user)
    if not fingers:
        raise _error('NoEnrolledPrints', 'Failed to discover prints')
    return dbus.Array(fingers, signature='s')


@dbus.service.method(DEVICE_IFACE, in_signature='s', out_signature='')
def Claim(self, user):
    state = _state()
    if state.claimed is not None:
        raise _error('AlreadyInUse', 'Device was already claimed')
    state.claimed = str(user)


@dbus.service.method(DEVICE_IFACE, in_signature='', out_signature='')
def Release(self):
    state = _state()
    if state.claimed is None:
        raise _error('ClaimDevice', 'Device was not claimed before use')
    _cancel_pending(state)
    state.claimed = None
    state.verifying = False


@dbus.service.method(DEVICE_IFACE, in_signature='s', out_signature='')
def VerifyStart(self, finger):
    state = _state()
    if state.claimed is None:
        raise _error('ClaimDevice', 'Device was not claimed before use')
    if state.verifying:
        raise _error('AlreadyInUse', 'Verification already in progress')
    fingers = state.enrolled.get(state.claimed)
    if not fingers:
        raise _error('NoEnrolledPrints', 'No fingerprints enrolled')
    if finger != 'any':
        if finger not in FINGERS:
            raise _error('InvalidFingername', 'Invalid finger name')
        if finger not in fingers:
            raise _error('NoEnrolledPrints', 'No such print %d' % (FINGERS.index(finger) + 1))
        selected = finger
    else:
        selected = fingers[0] if len(fingers) == 1 else 'any'
    state.verifying = True
    device = self

    def finger_selected():
        device.EmitSignal(DEVICE_IFACE, 'VerifyFingerSelected', 's', [selected])
        return False
    GLib.idle_add(finger_selected)

    delay = 0
    while state.script:
        result, done, ms = state.script.pop(0)
        if ms < 0:
            _send(device, result, done, None)
        else:
            delay += ms
            holder = []
            holder.append(GLib.timeout_add(delay, _send, device, result, done, holder))
            state.pending.append(holder[0])
        if done or result.startswith('MOCK:'):
            break


def _send(device, result, done, holder):
    state = _state()
    if holder and holder[0] in state.pending:
        state.pending.remove(holder[0])
    if result == 'MOCK: vanish':
        _cancel_pending(state)
        state.claimed = None
        state.verifying = False
        if DEVICE_PATH in mockobject.objects:
            state.RemoveObject(DEVICE_PATH)
        state.EmitSignalDetailed('org.freedesktop.DBus.ObjectManager', 'InterfacesRemoved', 'oas',
                                 [dbus.ObjectPath(DEVICE_PATH), dbus.Array([DEVICE_IFACE], signature='s')],
                                 {'path': OBJECT_MANAGER_PATH})
    elif result == 'MOCK: quit':
        os._exit(0)
    else:
        state.sent_at.append(time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000)
        device.EmitSignal(DEVICE_IFACE, 'VerifyStatus', 'sb', [result, dbus.Boolean(done)])
    return False


@dbus.service.method(DEVICE_IFACE, in_signature='', out_signature='')
def VerifyStop(self):
    state = _state()
    if state.claimed is None:
        raise _error('ClaimDevice', 'Device was not claimed before use')
    if not state.verifying:
        raise _error('NoActionInProgress', 'No verification in progress')
    _cancel_pending(state)
    state.verifying = False


# --- net.reactivated.Fprint.Mock (test control) --------------------------------------------------

@dbus.service.method(CONTROL_IFACE, in_signature='a(sbi)', out_signature='')
def SetScript(self, script):
    _state().script = _steps(script)


@dbus.service.method(CONTROL_IFACE, in_signature='a{sas}', out_signature='')
def SetEnrolled(self, enrolled):
    _state().enrolled = {str(user): [str(f) for f in fingers] for user, fingers in enrolled.items()}


@dbus.service.method(CONTROL_IFACE, in_signature='', out_signature='a{su}')
def CallCounts(self):
    counts = {}
    for _time, name, _args in _state().call_log:
        if name not in CONTROL_METHODS:
            counts[name] = counts.get(name, 0) + 1
    return dbus.Dictionary(counts, signature='su')


@dbus.service.method(CONTROL_IFACE, in_signature='', out_signature='s')
def ClaimedBy(self):
    claimed = _state().claimed
    return '' if claimed is None else claimed


@dbus.service.method(CONTROL_IFACE, in_signature='', out_signature='at')
def StatusTimes(self):
    return dbus.Array(_state().sent_at, signature='t')
