import Foundation
import Protocol
import Testing
@testable import authd

/// The monitor reading BlueZ (python-dbusmock's `bluez5` template) beside the GeoClue2 stand-in.
@Suite("Presence: the monitor against a BlueZ stand-in")
struct PresenceBeaconSensorTests {
    static let desk = Hotspot.Beacon(address: "AA:BB:CC:00:00:01", latitude: 59.4371, longitude: 24.7537)
    static let kitchen = Hotspot.Beacon(address: "aa:bb:cc:00:00:02", latitude: 59.4369, longitude: 24.7535)
    static let hall = Hotspot.Beacon(address: "AA:BB:CC:00:00:03", latitude: 59.43705, longitude: 24.7536)
    static let office: Hotspot = {
        var office = PresenceSensorTests.office
        office.beacons = [desk, kitchen, hall]
        return office
    }()

    static func point(_ beacon: Hotspot.Beacon) -> PresencePlace.Point { .init(latitude: beacon.latitude, longitude: beacon.longitude) }

    /// Waits (at most 15 s) until hci0's discovering is `wanted`.
    static func discovering(_ rig: SensorBus, is wanted: Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(15)
        while try await rig.discovering() != wanted, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        return try await rig.discovering()
    }

    @Test("discovery only while inside a hotspot with beacons; a listed beacon in range pins its point, the strongest wins, a remembered one without RSSI never counts; leaving and stopping stop discovery")
    func beacons() async throws {
        let rig = try SensorBus()
        try await rig.startGeoClue()
        _ = try await rig.startNetworkManager()  // its call log counts the monitor's polls
        _ = try await rig.startBlueZ()
        try await rig.addRememberedDevice("AA:BB:CC:00:00:02")
        let watch = await PresenceSensorTests.Watch(rig, [Self.office])
        let (monitor, transitions) = (watch.monitor, watch.transitions)
        #expect(watch.status.reading == .reading, "\(rig.logs)")
        try await PresenceSensorTests.move(rig, metres: 2000)
        // Two polls outside: Bluetooth is left alone.
        try await rig.pollsPass(2)
        #expect(try await rig.discovering() == false, "outside every hotspot with beacons, nothing discovers")
        #expect(try await !rig.calls(SensorBus.bluez, "/org/bluez/hci0").contains("StartDiscovery"), "\(rig.logs)")

        try await PresenceSensorTests.move(rig, metres: 20)
        #expect(await transitions.wait(for: 1).map(\.change) == [.entered])
        #expect(try await Self.discovering(rig, is: true), "inside the office, discovery starts: \(rig.logs)")
        let desk = try await rig.addBluetoothDevice("AA:BB:CC:00:00:01", name: "desk")
        let pinned = await transitions.wait(for: 2)
        #expect(pinned.last == .init(hotspot: "hs_office", change: .pinned, time: pinned.last?.time ?? 0, point: Self.point(Self.desk)), "\(rig.logs)")
        // The hall at the same strength loses the tie to the lower address; stronger, it wins.
        let hall = try await rig.addBluetoothDevice("AA:BB:CC:00:00:03", name: "hall")
        try await rig.pollsPass(2)
        #expect(transitions.all.count == 2, "a tie keeps the desk")
        try await rig.setStrength(-40, of: hall)
        let moved = await transitions.wait(for: 3)
        #expect(moved.last?.change == .pinned && moved.last?.point == Self.point(Self.hall))
        // The desk first: with the hall gone first, a poll between the two would rightly pin
        // the desk, the strongest one left.
        try await rig.removeBluetoothDevice(desk)
        try await rig.removeBluetoothDevice(hall)
        try await rig.pollsPass(2)
        #expect(transitions.all.count == 3, "gone beacons leave the point standing; the remembered kitchen never counts")

        try await PresenceSensorTests.move(rig, metres: 2000)
        try await PresenceSensorTests.move(rig, metres: 2001)
        #expect(await transitions.wait(for: 4).last?.change == .left)
        #expect(try await Self.discovering(rig, is: false) == false, "out of the office, discovery stops")
        try await PresenceSensorTests.move(rig, metres: 10)
        #expect(await transitions.wait(for: 5).last?.change == .entered)
        #expect(try await Self.discovering(rig, is: true))
        await monitor.stop()
        #expect(try await rig.discovering() == false, "stop stops discovery before it returns")
        #expect(transitions.all.filter { $0.change == .pinned }.count == 2)
    }

    @Test("without BlueZ a hotspot with beacons is entered and left as ever, and nothing is pinned or failed")
    func withoutBlueZ() async throws {
        let rig = try SensorBus()
        try await rig.startGeoClue()
        _ = try await rig.startNetworkManager()  // its call log counts the monitor's polls
        let watch = await PresenceSensorTests.Watch(rig, [Self.office])
        let (monitor, transitions) = (watch.monitor, watch.transitions)
        try await PresenceSensorTests.move(rig, metres: 20)
        #expect(await transitions.wait(for: 1).map(\.change) == [.entered])
        // Two polls inside, each asking for beacons where there is no BlueZ.
        try await rig.pollsPass(2)
        #expect(monitor.status == .init(reading: .reading, inside: ["hs_office"]))
        #expect(transitions.changes == [.entered])
        await monitor.stop()
    }
}
