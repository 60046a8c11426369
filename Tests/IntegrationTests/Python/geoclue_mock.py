'''A stand-in for GeoClue2 (org.freedesktop.GeoClue2) for authd's presence tests.

A python-dbusmock template, written for authd. Run it on a private system bus:

    DBUS_SYSTEM_BUS_ADDRESS=<private bus> /usr/bin/python3 -m dbusmock --template geoclue_mock.py -p '<json>'

Parameters (-p, a JSON object; every key is optional):
  refuse    {"method": "Start", "name": "org.freedesktop.DBus.Error.AccessDenied",
             "message": "'authd' disallowed, no agent for UID 0"}
            answer that method (GetClient, CreateClient or Start) with that error, as GeoClue does
            when its configuration does not allow the application (default: allow everything)

Objects, as in GeoClue 2.7:
  /org/freedesktop/GeoClue2/Manager (org.freedesktop.GeoClue2.Manager: GetClient, CreateClient,
      DeleteClient; properties InUse, AvailableAccuracyLevel)
  /org/freedesktop/GeoClue2/Client/N (org.freedesktop.GeoClue2.Client: Start, Stop; properties
      Location, DesktopId, RequestedAccuracyLevel, DistanceThreshold, TimeThreshold, Active;
      signal LocationUpdated(o old, o new)). As in GeoClue, Start fails with AccessDenied while
      DesktopId is empty, and LocationUpdated is sent only while the client is active: on Start
      when a location is known, and on every move.
  /org/freedesktop/GeoClue2/Location/N (org.freedesktop.GeoClue2.Location: Latitude, Longitude,
      Accuracy, Altitude, Speed, Heading, Description, Timestamp), a new one for every move.

Control interface org.freedesktop.GeoClue2.Mock on the manager object:
  SetLocation(d latitude, d longitude, d accuracy) -> b   move the machine; true when an active
                                                          client was told (LocationUpdated)
  SetRefusal(s method, s name, s message)          refuse that method from now on ("" : none)
  Calls() -> as                                    GeoClue methods answered so far, in order
                                                   (failed ones too), e.g. ["GetClient", "Start"]
  Clients() -> a(sbsu)                             each client: (caller's unique name, active,
                                                   DesktopId, RequestedAccuracyLevel)

The file is exec'd twice by dbusmock (for the constants, then by AddTemplate), so all state lives
on the manager mock object, never in module globals.
'''

import time

import dbus
from dbusmock import mockobject

BUS_NAME = 'org.freedesktop.GeoClue2'
MAIN_OBJ = '/org/freedesktop/GeoClue2/Manager'
MAIN_IFACE = 'org.freedesktop.GeoClue2.Manager'
SYSTEM_BUS = True

CLIENT_IFACE = 'org.freedesktop.GeoClue2.Client'
LOCATION_IFACE = 'org.freedesktop.GeoClue2.Location'
CONTROL_IFACE = 'org.freedesktop.GeoClue2.Mock'


def _state():
    return mockobject.objects[MAIN_OBJ]


def load(mock, parameters):
    refuse = parameters.get('refuse') or {}
    mock.refusal = (str(refuse.get('method', '')), str(refuse.get('name', 'org.freedesktop.DBus.Error.AccessDenied')),
                    str(refuse.get('message', "'authd' disallowed, no agent for UID 0")))
    mock.calls = []
    mock.clients = {}          # client path -> caller's unique name
    mock.location = None       # the newest Location object path
    mock.next_client = 1
    mock.next_location = 1
    mock.AddProperties(MAIN_IFACE, {'InUse': dbus.Boolean(False), 'AvailableAccuracyLevel': dbus.UInt32(8)})


def _answer(method):
    '''Logs the call; raises the configured refusal for it.'''
    state = _state()
    state.calls.append(method)
    refused, name, message = state.refusal
    if refused == method:
        raise dbus.exceptions.DBusException(message, name=name)


def _new_client(sender):
    state = _state()
    path = '/org/freedesktop/GeoClue2/Client/%d' % state.next_client
    state.next_client += 1
    state.AddObject(path, CLIENT_IFACE, {
        'Location': dbus.ObjectPath('/'),
        'DistanceThreshold': dbus.UInt32(0),
        'TimeThreshold': dbus.UInt32(0),
        'DesktopId': dbus.String(''),
        'RequestedAccuracyLevel': dbus.UInt32(0),
        'Active': dbus.Boolean(False),
    }, [])
    state.clients[path] = str(sender)
    return dbus.ObjectPath(path)


# --- org.freedesktop.GeoClue2.Manager ---------------------------------------------------------------

@dbus.service.method(MAIN_IFACE, in_signature='', out_signature='o', sender_keyword='sender')
def GetClient(self, sender=None):
    _answer('GetClient')
    state = _state()
    for path, owner in state.clients.items():
        if owner == sender:
            return dbus.ObjectPath(path)
    return _new_client(sender)


@dbus.service.method(MAIN_IFACE, in_signature='', out_signature='o', sender_keyword='sender')
def CreateClient(self, sender=None):
    _answer('CreateClient')
    return _new_client(sender)


@dbus.service.method(MAIN_IFACE, in_signature='o', out_signature='')
def DeleteClient(self, path):
    _answer('DeleteClient')
    state = _state()
    if str(path) in state.clients:
        del state.clients[str(path)]
        state.RemoveObject(str(path))


# --- org.freedesktop.GeoClue2.Client ------------------------------------------------------------------
# dbusmock puts these methods on the mock class, so every object answers them; `self` is the
# client called.

@dbus.service.method(CLIENT_IFACE, in_signature='', out_signature='')
def Start(self):
    _answer('Start')
    if not str(self.Get(CLIENT_IFACE, 'DesktopId')):
        raise dbus.exceptions.DBusException("'DesktopId' property must be set", name='org.freedesktop.DBus.Error.AccessDenied')
    self.Set(CLIENT_IFACE, 'Active', dbus.Boolean(True))
    location = _state().location
    if location is not None:
        _tell(self, location)


@dbus.service.method(CLIENT_IFACE, in_signature='', out_signature='')
def Stop(self):
    _answer('Stop')
    self.Set(CLIENT_IFACE, 'Active', dbus.Boolean(False))


def _tell(client, location):
    old = client.Get(CLIENT_IFACE, 'Location')
    client.Set(CLIENT_IFACE, 'Location', dbus.ObjectPath(location))
    client.EmitSignal(CLIENT_IFACE, 'LocationUpdated', 'oo', [old, dbus.ObjectPath(location)])


# --- org.freedesktop.GeoClue2.Mock (test control) ------------------------------------------------------

@dbus.service.method(CONTROL_IFACE, in_signature='ddd', out_signature='b')
def SetLocation(self, latitude, longitude, accuracy):
    state = _state()
    path = '/org/freedesktop/GeoClue2/Location/%d' % state.next_location
    state.next_location += 1
    now = time.time()
    state.AddObject(path, LOCATION_IFACE, {
        'Latitude': dbus.Double(latitude),
        'Longitude': dbus.Double(longitude),
        'Accuracy': dbus.Double(accuracy),
        'Altitude': dbus.Double(-1.7976931348623157e308),
        'Speed': dbus.Double(-1.0),
        'Heading': dbus.Double(-1.0),
        'Description': dbus.String('authd test location'),
        'Timestamp': dbus.Struct((dbus.UInt64(int(now)), dbus.UInt64(int(now * 1e6) % 1000000)), signature='tt'),
    }, [])
    state.location = path
    told = False
    for client_path in list(state.clients):
        client = mockobject.objects[client_path]
        if client.Get(CLIENT_IFACE, 'Active'):
            _tell(client, path)
            told = True
    return dbus.Boolean(told)


@dbus.service.method(CONTROL_IFACE, in_signature='sss', out_signature='')
def SetRefusal(self, method, name, message):
    _state().refusal = (str(method), str(name), str(message))


@dbus.service.method(CONTROL_IFACE, in_signature='', out_signature='as')
def Calls(self):
    return dbus.Array(_state().calls, signature='s')


@dbus.service.method(CONTROL_IFACE, in_signature='', out_signature='a(sbsu)')
def Clients(self):
    result = []
    for path, owner in _state().clients.items():
        client = mockobject.objects[path]
        result.append((owner, bool(client.Get(CLIENT_IFACE, 'Active')), str(client.Get(CLIENT_IFACE, 'DesktopId')),
                       int(client.Get(CLIENT_IFACE, 'RequestedAccuracyLevel'))))
    return dbus.Array(result, signature='(sbsu)')
