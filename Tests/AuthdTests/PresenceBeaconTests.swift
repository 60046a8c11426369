import Foundation
import Protocol
import Testing
@testable import authd

@Suite("Presence: beacons in hotspot definitions")
struct BeaconRulesTests {
    static let office = Hotspot.Circle(latitude: 59.437, longitude: 24.7536, radius: 150)
    /// About 11 m north-east of the office's centre.
    static let inside = (latitude: 59.4371, longitude: 24.7537)

    static func beacon(_ address: String, _ latitude: Double = inside.latitude, _ longitude: Double = inside.longitude) -> Hotspot.Beacon {
        Hotspot.Beacon(address: address, latitude: latitude, longitude: longitude)
    }

    @Test("beacons come back with their addresses in upper case, in the order given; none is nil")
    func normalised() throws {
        let valid = try HotspotRules.validated(name: "Office", circle: Self.office, bssids: nil,
                                               beacons: [Self.beacon("aa:bb:cc:dd:ee:0f"), Self.beacon("00:11:22:33:44:55", 59.437, 24.7536)])
        #expect(valid.beacons == [Self.beacon("AA:BB:CC:DD:EE:0F"), Self.beacon("00:11:22:33:44:55", 59.437, 24.7536)])
        #expect(try HotspotRules.validated(name: "Office", circle: Self.office, bssids: nil, beacons: []).beacons == nil)
        let sixteen = (0..<16).map { Self.beacon(String(format: "00:00:00:00:00:%02X", $0)) }
        #expect(try HotspotRules.validated(name: "Office", circle: Self.office, bssids: nil, beacons: sixteen).beacons == sixteen)
    }

    static let faults: [(Hotspot.Circle?, [Hotspot.Beacon])] = [
        (nil, [beacon("AA:BB:CC:DD:EE:FF")]),
        (office, [beacon("AA:BB:CC:DD:EE")]),
        (office, [beacon("AA-BB-CC-DD-EE-FF")]),
        (office, [beacon("AA:BB:CC:DD:EE:FG")]),
        (office, [beacon("AA:BB:CC:DD:EE:FF", 90.5, 24.7536)]),
        (office, [beacon("AA:BB:CC:DD:EE:FF", .nan, 24.7536)]),
        (office, [beacon("AA:BB:CC:DD:EE:FF", 59.437, 384.7536)]),
        (office, [beacon("AA:BB:CC:DD:EE:FF", 59.437, .infinity)]),
        (office, [beacon("AA:BB:CC:DD:EE:FF", 59.45, 24.7536)]),
        (office, [beacon("AA:BB:CC:DD:EE:FF"), beacon("aa:bb:cc:dd:ee:ff")]),
        (office, (0...16).map { beacon(String(format: "00:00:00:00:00:%02X", $0)) }),
    ]

    @Test("each fault is refused with the field 'beacons', and the message repeats no address or coordinate",
          arguments: faults.indices)
    func refused(index: Int) {
        let (circle, beacons) = Self.faults[index]
        do {
            // A hotspot without a circle needs access points to be one at all: the beacons' fault is what is left.
            _ = try HotspotRules.validated(name: "Office", circle: circle, bssids: circle == nil ? ["00:11:22:33:44:55"] : nil, beacons: beacons)
            Issue.record("accepted a faulty definition")
        } catch {
            #expect(error.field == "beacons")
            for secret in ["AA:BB", "aa:bb", "EE:F", "59.4", "24.75", "384", "90.5"] { #expect(!error.message.contains(secret), "\(error.message)") }
        }
    }
}


/// Beacons and `precise` where the account lives: stored, answered, and a machine's beacon point
/// pinned only inside the hotspot, told only when it changes.
@Suite("Presence: beacon definitions and points at the home")
struct PresenceBeaconBookTests {
    typealias World = PresenceBookTests.World

    @Test("beacons are stored with the hotspot and given back normalised; a faulty one stores nothing")
    func stored() async throws {
        let world = try await World()
        let session = world.sessions["alice"]!
        let added = try await world.service.addHotspot(session: session, HotspotDefinition(
            name: "Desk", circle: .init(latitude: 59.437, longitude: 24.7536, radius: 50), bssids: nil,
            beacons: [.init(address: "c0:ff:ee:00:00:01", latitude: 59.4371, longitude: 24.7537)]))
        #expect(added.hotspot.beacons == [.init(address: "C0:FF:EE:00:00:01", latitude: 59.4371, longitude: 24.7537)])
        let listed = try await world.service.hotspots(world.session("alice")).hotspots
        #expect(listed.first { $0.id == added.hotspot.id }?.beacons == added.hotspot.beacons)
        await #expect(throws: InvalidParameter.self) {
            _ = try await world.service.addHotspot(session: session, HotspotDefinition(
                name: "Far", circle: .init(latitude: 59.437, longitude: 24.7536, radius: 50), bssids: nil,
                beacons: [.init(address: "C0:FF:EE:00:00:02", latitude: 59.44, longitude: 24.7536)]))
        }
        #expect(try await world.service.hotspots(world.session("alice")).hotspots.count == listed.count, "nothing stored")
    }

    @Test("precise is manual by default, beacon when chosen, kept across other changes; anything else is refused by field")
    func precise() async throws {
        let world = try await World()
        let session = world.sessions["alice"]!
        #expect(try await world.service.settings(.init(session: session)).precise == "manual")
        #expect(try await world.service.settings(.init(session: session, precise: "beacon")).precise == "beacon")
        #expect(try await world.service.settings(.init(session: session, mode: "auto")).precise == "beacon")
        #expect(try await world.service.setEnabled(world.session("alice"), false).precise == "beacon")
        do {
            _ = try await world.service.settings(.init(session: session, precise: "gps"))
            Issue.record("accepted precise gps")
        } catch let error as InvalidParameter {
            #expect(error.field == "precise")
        }
        #expect(try await world.service.settings(.init(session: session)).precise == "beacon")
    }

    @Test("a report's pinned point: pinned with the enter, told again only when it changes, refused outside the circle or without entered")
    func reportPinned() async throws {
        let world = try await World()
        try await world.add("alice", "bob")
        try await world.share("alice", with: ["friends"])
        let alice = world.accounts["alice"]!
        let desk = PresencePlace.Point(latitude: 59.4371, longitude: 24.7537)
        #expect(try await world.book.report(alice, hotspot: world.office.id, entered: true, group: nil, pinned: desk) == 1)
        #expect(try await world.service.status(world.session("alice")).place?.pinned == desk)
        #expect(try await world.book.report(alice, hotspot: world.office.id, entered: true, group: nil, pinned: desk) == 0, "the same point: a refresh")
        let kitchen = PresencePlace.Point(latitude: 59.4369, longitude: 24.7535)
        #expect(try await world.book.report(alice, hotspot: world.office.id, entered: true, group: nil, pinned: kitchen) == 1, "a new point is told")
        #expect(try await world.book.report(alice, hotspot: world.office.id, entered: true, group: nil) == 0, "no point: the pin stands")
        #expect(try await world.service.status(world.session("alice")).place?.pinned == kitchen)
        for outside in [PresencePlace.Point(latitude: 59.45, longitude: 24.7536), .init(latitude: 59.4371, longitude: 24.7537 + 360),
                        .init(latitude: .nan, longitude: 24.7536)] {
            await #expect(throws: PresenceFailure.pinOutside) {
                _ = try await world.book.report(alice, hotspot: world.office.id, entered: true, group: nil, pinned: outside)
            }
        }
        await #expect(throws: InvalidParameter.self) {
            _ = try await world.book.report(alice, hotspot: world.office.id, entered: false, group: nil, pinned: desk)
        }
        #expect(try await world.service.status(world.session("alice")).place?.pinned == kitchen, "refused reports changed nothing")
    }
}
