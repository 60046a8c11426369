import Foundation
import Protocol
import Synchronization
import Testing
@testable import authd

/// The presence monitor against stand-ins for GeoClue2 and NetworkManager on a private system
/// bus (`SensorBus`): real D-Bus, real sd-bus, the monitor's own thread. In the unit-test target
/// because the monitor is internal to authd; the stand-ins are the integration tests' kind.
@Suite("Presence: the monitor against GeoClue2 and NetworkManager stand-ins")
struct PresenceSensorTests {
    static let office = Hotspot(id: "hs_office", name: "Office", circle: .init(latitude: 59.437, longitude: 24.7536, radius: 100),
                                bssids: nil, shared: true)
    static let wifiOnly = Hotspot(id: "hs_wifi", name: "Lab", circle: nil, bssids: ["aa:bb:cc:00:00:01"], shared: false)
    /// Metres per degree of latitude on the sphere.
    static let degree = .pi * Geo.earthRadius / 180

    /// Every transition the monitor reported, in order.
    final class Transitions: Sendable {
        private let seen = Mutex<[HotspotTracker.Transition]>([])
        var all: [HotspotTracker.Transition] { seen.withLock { $0 } }
        var changes: [HotspotTracker.Transition.Change] { all.map(\.change) }
        func record(_ transition: HotspotTracker.Transition) { seen.withLock { $0.append(transition) } }

        /// Waits (at most 15 s) until `count` transitions came.
        func wait(for count: Int) async -> [HotspotTracker.Transition] {
            let deadline = ContinuousClock.now + .seconds(15)
            while all.count < count, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(20)) }
            return all
        }
    }

    /// A monitor on the rig's bus, started on `hotspots`, with what it reported.
    struct Watch {
        let monitor: PresenceMonitor
        let transitions = Transitions()
        /// What `start` returned.
        let status: PresenceMonitor.Status

        init(_ rig: SensorBus, _ hotspots: [Hotspot], absence: Int64 = 60) async {
            monitor = PresenceMonitor(options: .init(busAddress: rig.address, bssidAbsenceSeconds: absence, pollInterval: .milliseconds(100)),
                                      logger: Logger(sink: MemorySink()))
            status = await monitor.start(hotspots: hotspots, onTransition: transitions.record)
        }

        var unavailable: PresenceUnavailable? {
            if case .unavailable(let why) = status.reading { why } else { nil }
        }
    }

    /// Moves the machine `metres` north of the office's centre.
    static func move(_ rig: SensorBus, metres: Double, accuracy: Double = 15) async throws {
        #expect(try await rig.setLocation(latitude: office.circle!.latitude + metres / degree, longitude: office.circle!.longitude, accuracy: accuracy))
    }

    @Test("walking in enters; GeoClue2 is asked as a desktop application would; no NetworkManager is needed")
    func walkIn() async throws {
        let rig = try SensorBus()
        try await rig.startGeoClue()
        let watch = await Watch(rig, [Self.office])
        let (monitor, transitions) = (watch.monitor, watch.transitions)
        #expect(watch.status == .init(reading: .reading, inside: []), "\(rig.logs)")
        let clients = try await rig.geoClueClients()
        #expect(clients.count == 1 && clients.first?.active == true && clients.first?.desktopID == "authd" && clients.first?.accuracyLevel == 8)
        try await Self.move(rig, metres: 2000)
        try await Self.move(rig, metres: 30)
        let seen = await transitions.wait(for: 1)
        #expect(seen.map(\.hotspot) == ["hs_office"] && seen.map(\.change) == [.entered])
        #expect(monitor.status == .init(reading: .reading, inside: ["hs_office"]))
        await monitor.stop()
    }

    @Test("standing at the edge with fixes on both sides of the radius does not flap; two far fixes leave")
    func edge() async throws {
        let rig = try SensorBus()
        try await rig.startGeoClue()
        // A small circle 400 m north: entering it marks the point where every fix before was taken.
        let kiosk = Hotspot(id: "hs_kiosk", name: "Kiosk", circle: .init(latitude: Self.office.circle!.latitude + 400 / Self.degree,
                                                                           longitude: Self.office.circle!.longitude, radius: 30),
                            bssids: nil, shared: true)
        let watch = await Watch(rig, [Self.office, kiosk])
        let (monitor, transitions) = (watch.monitor, watch.transitions)
        try await Self.move(rig, metres: 95)
        #expect(await transitions.wait(for: 1).map(\.change) == [.entered])
        // Radius 100 m, leave ring 120 m; a coarse fix far away counts for nothing; one far fix
        // followed by one inside starts the count again.
        for metres in [105.0, 97, 112, 99, 118, 101, 96, 119, 150, 90] { try await Self.move(rig, metres: metres) }
        try await Self.move(rig, metres: 3000, accuracy: 2000)
        try await Self.move(rig, metres: 400)
        try await Self.move(rig, metres: 400)
        // Fixes are taken in order: a flap at the edge would come before the kiosk's enter.
        let seen = await transitions.wait(for: 3)
        #expect(seen.map { "\($0.hotspot) \($0.change)" } == ["hs_office entered", "hs_kiosk entered", "hs_office left"])
        #expect(monitor.status.inside == ["hs_kiosk"])
        await monitor.stop()
        #expect(transitions.all.count == 3)
    }

    @Test("an access point of a hotspot appearing enters; gone for bssid_absence, it leaves")
    func accessPoint() async throws {
        let rig = try SensorBus()
        try await rig.startGeoClue()
        let device = try await rig.startNetworkManager()
        _ = try await rig.addAccessPoint("neighbour", bssid: "11:22:33:44:55:66", on: device)
        let watch = await Watch(rig, [Self.wifiOnly, Self.office], absence: 1)
        let (monitor, transitions) = (watch.monitor, watch.transitions)
        // NetworkManager reports upper case, the definition is lower case.
        let lab = try await rig.addAccessPoint("lab", bssid: "AA:BB:CC:00:00:01", on: device)
        let entered = await transitions.wait(for: 1)
        #expect(entered.map(\.hotspot) == ["hs_wifi"] && entered.map(\.change) == [.entered], "\(rig.logs)")
        let removedAt = Int64(Date().timeIntervalSince1970)
        try await rig.removeAccessPoint(lab, from: device)
        let seen = await transitions.wait(for: 2)
        #expect(seen.map(\.change) == [.entered, .left])
        if seen.count == 2 { #expect(seen[1].time >= removedAt + 1) }
        await monitor.stop()
    }

    @Test("without GeoClue2 the monitor is unavailable, says why, and reports nothing")
    func geoClueAbsent() async throws {
        let rig = try SensorBus()
        let device = try await rig.startNetworkManager()
        _ = try await rig.addAccessPoint("lab", bssid: "aa:bb:cc:00:00:01", on: device)
        let watch = await Watch(rig, [Self.wifiOnly])
        let (monitor, transitions) = (watch.monitor, watch.transitions)
        let why = try #require(watch.unavailable)
        #expect(why.message == "GeoClue2 is not running or not installed (nothing owns org.freedesktop.GeoClue2 on the system bus)")
        #expect(why.rpcError.reason.rawValue == "presence.unavailable")
        #expect(watch.status.inside.isEmpty && transitions.all.isEmpty)
        await monitor.stop()
        #expect(monitor.status == .init(reading: .off, inside: []))
    }

    @Test("GeoClue2 refusing authd makes the monitor unavailable with what GeoClue2 said", arguments: ["GetClient", "Start"])
    func geoClueRefuses(method: String) async throws {
        let rig = try SensorBus()
        try await rig.startGeoClue(refuse: (method, "org.freedesktop.DBus.Error.AccessDenied", "'authd' disallowed, no agent for UID 0"))
        let watch = await Watch(rig, [Self.office])
        let (monitor, transitions) = (watch.monitor, watch.transitions)
        let why = try #require(watch.unavailable)
        #expect(why.message.hasPrefix("GeoClue2 refused authd when asked to "))
        #expect(why.message.hasSuffix(": org.freedesktop.DBus.Error.AccessDenied: 'authd' disallowed, no agent for UID 0"))
        // A location arriving now reaches nobody: no client was started.
        #expect(try await rig.setLocation(latitude: 59.437, longitude: 24.7536, accuracy: 10) == false)
        #expect(transitions.all.isEmpty && monitor.status.inside.isEmpty)
        #expect(try await rig.geoClueCalls().last == method)
    }

    @Test("changed hotspots are matched at once; stop stops GeoClue2's client, closes the bus, and nothing more is read")
    func updateAndStop() async throws {
        let rig = try SensorBus()
        try await rig.startGeoClue()
        let watch = await Watch(rig, [Self.office])
        let (monitor, transitions) = (watch.monitor, watch.transitions)
        try await Self.move(rig, metres: 10)
        #expect(await transitions.wait(for: 1).map(\.change) == [.entered])
        monitor.update(hotspots: [])
        #expect(await transitions.wait(for: 2).map(\.change) == [.entered, .left])
        monitor.update(hotspots: [Self.office])
        try await Self.move(rig, metres: 20)
        #expect(await transitions.wait(for: 3).map(\.change) == [.entered, .left, .entered])
        let owner = try #require(try await rig.geoClueClients().first).owner

        await monitor.stop()
        #expect(monitor.status == .init(reading: .off, inside: []))
        #expect(try await rig.geoClueCalls() == ["GetClient", "Start", "Stop"])
        #expect(try await rig.geoClueClients().map(\.active) == [false])
        #expect(try await rig.isConnected(owner) == false)
        // The machine moves out: GeoClue2 has nobody to tell, and nothing is reported.
        #expect(try await rig.setLocation(latitude: 0, longitude: 0, accuracy: 10) == false)
        #expect(transitions.all.count == 3)
    }

    @Test("as MachinePresence drives it: watch, the state in words, transitions in order, stopWatching")
    func asHotspotWatcher() async throws {
        let rig = try SensorBus()
        try await rig.startGeoClue()
        let watcher: any HotspotWatcher = PresenceMonitor(
            options: .init(busAddress: rig.address, bssidAbsenceSeconds: 60, pollInterval: .milliseconds(100)), logger: Logger(sink: MemorySink()))
        let heard = Transitions()
        await watcher.watch([Self.office]) { heard.record($0) }
        #expect(await watcher.watchState() == ("reading", nil, []))
        for metres in [10.0, 500, 500, 20, 600, 600] { try await Self.move(rig, metres: metres) }
        #expect(await heard.wait(for: 4).map(\.change) == [.entered, .left, .entered, .left])
        // While reading, watch only replaces the definitions.
        await watcher.watch([]) { _ in Issue.record("a second handler was called") }
        await watcher.stopWatching()
        #expect(await watcher.watchState() == ("off", nil, []))
        #expect(try await rig.geoClueCalls() == ["GetClient", "Start", "Stop"])
    }
}
