import Protocol

/// Why the machine's position cannot be read: GeoClue2 is absent, refused authd, or went away.
/// One stable wire reason, `presence.unavailable`, with `message` as `data.detail`: it names
/// GeoClue2 and what it said (never a position: GeoClue's errors carry none, and ours add none).
struct PresenceUnavailable: WireErrorConvertible, Equatable {
    let message: String

    var rpcError: RPCError {
        .failure(.presenceUnavailable, "This machine cannot tell where it is: \(message).", details: ["detail": .string(message)])
    }
}

/// GeoClue2's D-Bus API (`org.freedesktop.GeoClue2`, 2.4 and later) over `Bus`, used the way a
/// desktop application uses it. Every call blocks: only for the presence monitor's queue.
enum GeoClue2 {
    static let service = "org.freedesktop.GeoClue2"
    static let managerPath = "/org/freedesktop/GeoClue2/Manager"
    static let managerInterface = "org.freedesktop.GeoClue2.Manager"
    static let clientInterface = "org.freedesktop.GeoClue2.Client"
    static let locationInterface = "org.freedesktop.GeoClue2.Location"
    /// The application id GeoClue's configuration allows or refuses (`[authd]` in geoclue.conf).
    static let desktopID = "authd"
    /// GCLUE_ACCURACY_LEVEL_EXACT: hotspots are as small as 10 m.
    static let exactAccuracy: UInt32 = 8
    /// GeoClue may be D-Bus activated and have to start its sources.
    static let callTimeout: Duration = .seconds(10)

    /// A failure of a GeoClue call, in words for people.
    static func unavailable(_ error: BusError, while step: String) -> PresenceUnavailable {
        switch error.name {
        case BusError.serviceUnknown, "org.freedesktop.DBus.Error.NameHasNoOwner":
            return PresenceUnavailable(message: "GeoClue2 is not running or not installed (nothing owns \(service) on the system bus)")
        case "":
            return PresenceUnavailable(message: "the system bus cannot be reached, so GeoClue2 cannot be asked")
        default:
            let said = Redaction.printable(error.message, limit: 200)
            return PresenceUnavailable(message: "GeoClue2 refused authd when asked to \(step): \(error.name)\(said.isEmpty ? "" : ": \(said)")")
        }
    }

    /// authd's GeoClue client on one connection: configured and started in `init`, stopped by
    /// `stop()` (closing the connection stops it too: GeoClue drops a vanished peer's clients).
    final class Client {
        let bus: Bus
        let path: String
        private var started = false

        /// Gets a client and names the application and the accuracy wanted. Subscribe through
        /// `locationUpdates` before `start()`, so that no update is missed.
        init(bus: Bus) throws(PresenceUnavailable) {
            self.bus = bus
            do throws(BusError) {
                path = try bus.call(service, managerPath, managerInterface, "GetClient", timeout: callTimeout).string("o")
            } catch {
                throw unavailable(error, while: "give it a client")
            }
            do throws(BusError) {
                try bus.setProperty(service, path, clientInterface, "DesktopId", .string(desktopID), timeout: callTimeout)
                try bus.setProperty(service, path, clientInterface, "RequestedAccuracyLevel", .uint32(exactAccuracy), timeout: callTimeout)
            } catch {
                throw unavailable(error, while: "configure its client")
            }
        }

        /// Calls `handler` with the new Location object's path on every `LocationUpdated`.
        func locationUpdates(_ handler: @escaping (String) -> Void) throws(PresenceUnavailable) -> BusSlot {
            do throws(BusError) {
                return try bus.match(sender: service, path: path, interface: clientInterface, member: "LocationUpdated") { message in
                    // (o old, o new): the second is the fix.
                    guard (try? message.string("o")) != nil, let new = try? message.string("o") else { return }
                    handler(new)
                }
            } catch {
                throw PresenceUnavailable(message: "GeoClue2's location updates cannot be followed (\(error))")
            }
        }

        func start() throws(PresenceUnavailable) {
            do throws(BusError) {
                _ = try bus.call(service, path, clientInterface, "Start", timeout: callTimeout)
                started = true
            } catch {
                throw unavailable(error, while: "start locating")
            }
        }

        /// The fix a `LocationUpdated` named; nil when it cannot be read (GeoClue replaced it already).
        func location(at locationPath: String) -> (latitude: Double, longitude: Double, accuracy: Double)? {
            func read(_ name: String) throws(BusError) -> Double {
                try bus.property(service, locationPath, locationInterface, name, contents: "d", timeout: callTimeout).double()
            }
            do throws(BusError) {
                return (try read("Latitude"), try read("Longitude"), try read("Accuracy"))
            } catch {
                return nil
            }
        }

        /// Stops locating (errors ignored: GeoClue may be gone already).
        func stop() {
            guard started else { return }
            started = false
            _ = try? bus.call(service, path, clientInterface, "Stop", timeout: .seconds(3))
        }
    }
}

/// The Wi-Fi access points NetworkManager (`org.freedesktop.NetworkManager`) sees, over `Bus`.
/// Read by polling rather than by following its signals: a poll every few seconds costs a few
/// calls (access points' addresses are remembered by object path, which NetworkManager never
/// reuses for another access point), and it needs no bookkeeping for devices that come and go,
/// nor for NetworkManager restarting. Every access point visible counts, not only the one
/// connected to: a hotspot's own access point in range says where the machine is, whatever
/// network it uses.
struct WiFiScanner {
    static let service = "org.freedesktop.NetworkManager"
    static let managerPath = "/org/freedesktop/NetworkManager"
    static let managerInterface = "org.freedesktop.NetworkManager"
    static let deviceInterface = "org.freedesktop.NetworkManager.Device"
    static let wirelessInterface = "org.freedesktop.NetworkManager.Device.Wireless"
    static let accessPointInterface = "org.freedesktop.NetworkManager.AccessPoint"
    /// NM_DEVICE_TYPE_WIFI.
    static let wifiDeviceType: UInt32 = 2
    static let callTimeout: Duration = .seconds(2)

    /// BSSID by access point object path, for the access points of the last scan.
    private var bssids: [String: String] = [:]

    /// The BSSIDs (lower case) every Wi-Fi device sees now. Throws when NetworkManager cannot be
    /// asked (absent, or not answering): the caller counts that as none seen.
    mutating func visibleBSSIDs(on bus: Bus) throws(BusError) -> Set<String> {
        let devices = try bus.call(Self.service, Self.managerPath, Self.managerInterface, "GetDevices", timeout: Self.callTimeout).stringArray("o")
        var accessPoints: [String] = []
        for device in devices {
            // A device may go between the two calls: it then sees nothing.
            guard (try? bus.property(Self.service, device, Self.deviceInterface, "DeviceType", contents: "u", timeout: Self.callTimeout).uint32())
                    == Self.wifiDeviceType,
                  let listed = try? bus.property(Self.service, device, Self.wirelessInterface, "AccessPoints", contents: "ao",
                                                 timeout: Self.callTimeout).stringArray("o")
            else { continue }
            accessPoints += listed
        }
        var known: [String: String] = [:]
        for accessPoint in accessPoints {
            if let bssid = bssids[accessPoint] ?? (try? bus.property(Self.service, accessPoint, Self.accessPointInterface, "HwAddress",
                                                                     contents: "s", timeout: Self.callTimeout).string())
                .flatMap(HotspotRules.normalisedBSSID) {
                known[accessPoint] = bssid
            }
        }
        bssids = known
        return Set(known.values)
    }
}

/// The Bluetooth devices BlueZ (`org.bluez`) sees, over `Bus`: which of a hotspot's beacons are
/// in range now. Polled like NetworkManager. One `GetManagedObjects` gives the adapters and every
/// device with its `Address` and, while the device was seen in the current discovery, its `RSSI`;
/// a device BlueZ merely remembers (paired, or seen earlier) has no `RSSI` and does not count.
/// Discovery is started on each adapter when beacons are first wanted and stopped by `stop`;
/// BlueZ also stops it by itself when authd's connection closes.
struct BeaconScanner {
    static let service = "org.bluez"
    static let adapterInterface = "org.bluez.Adapter1"
    static let deviceInterface = "org.bluez.Device1"
    static let objectManagerInterface = "org.freedesktop.DBus.ObjectManager"
    static let callTimeout: Duration = .seconds(2)

    /// The adapters this scanner started discovery on.
    private var discovering: Set<String> = []

    /// RSSI (dBm) by address (upper case) of each device seen in the current discovery, which
    /// it starts on every adapter not yet discovering for authd. Throws when BlueZ cannot be
    /// asked (absent, or not answering): the caller counts that as none seen.
    mutating func visibleBeacons(on bus: Bus) throws(BusError) -> [String: Int] {
        let reply = try bus.call(Self.service, "/", Self.objectManagerInterface, "GetManagedObjects", timeout: Self.callTimeout)
        var adapters: [String] = []
        var seen: [String: Int] = [:]
        // a{oa{sa{sv}}}: object → interface → property → value.
        guard try reply.enterContainer("a", "{oa{sa{sv}}}") else { return [:] }
        while try reply.enterContainer("e", "oa{sa{sv}}") {
            let path = try reply.string("o")
            _ = try reply.enterContainer("a", "{sa{sv}}")
            while try reply.enterContainer("e", "sa{sv}") {
                let interface = try reply.string()
                var address: String?
                var strength: Int?
                _ = try reply.enterContainer("a", "{sv}")
                while try reply.enterContainer("e", "sv") {
                    let name = try reply.string()
                    if interface == Self.deviceInterface && name == "Address" && (try? reply.enterContainer("v", "s")) == true {
                        address = try reply.string()
                        try reply.exitContainer()
                    } else if interface == Self.deviceInterface && name == "RSSI" && (try? reply.enterContainer("v", "n")) == true {
                        strength = Int(try reply.int16())
                        try reply.exitContainer()
                    } else {
                        try reply.skip("v")
                    }
                    try reply.exitContainer()
                }
                try reply.exitContainer()
                try reply.exitContainer()
                if interface == Self.adapterInterface { adapters.append(path) }
                if let address = address.flatMap(HotspotRules.normalisedBeaconAddress), let strength {
                    seen[address] = max(strength, seen[address] ?? .min)
                }
            }
            try reply.exitContainer()
            try reply.exitContainer()
        }
        try reply.exitContainer()
        for adapter in adapters where !discovering.contains(adapter) {
            // Refused (the adapter is off, or busy): tried again at the next poll.
            if (try? bus.call(Self.service, adapter, Self.adapterInterface, "StartDiscovery", timeout: Self.callTimeout)) != nil {
                discovering.insert(adapter)
            }
        }
        return seen
    }

    /// Stops the discoveries this scanner started (errors ignored: BlueZ or the adapter may be
    /// gone already).
    mutating func stop(on bus: Bus) {
        for adapter in discovering.sorted() {
            _ = try? bus.call(Self.service, adapter, Self.adapterInterface, "StopDiscovery", timeout: Self.callTimeout)
        }
        discovering = []
    }
}
