import Foundation
import Protocol
import Testing
@testable import authd

@Suite("Presence: the beacon point while inside")
struct BeaconTrackerTests {
    typealias Transition = HotspotTracker.Transition
    static let centre = (latitude: 59.437, longitude: 24.7536)
    static let desk = Hotspot.Beacon(address: "AA:BB:CC:00:00:01", latitude: 59.4371, longitude: 24.7537)
    static let kitchen = Hotspot.Beacon(address: "AA:BB:CC:00:00:02", latitude: 59.4369, longitude: 24.7535)
    static let office = Hotspot(id: "hs_office", name: "Office", circle: .init(latitude: centre.latitude, longitude: centre.longitude, radius: 100),
                                bssids: nil, beacons: [desk, kitchen], shared: true)

    static func point(_ beacon: Hotspot.Beacon) -> PresencePlace.Point { .init(latitude: beacon.latitude, longitude: beacon.longitude) }
    static func pinned(_ beacon: Hotspot.Beacon, at time: Int64) -> Transition {
        .init(hotspot: "hs_office", change: .pinned, time: time, point: point(beacon))
    }
    static let atCentre = HotspotTracker.Input.fix(.init(latitude: centre.latitude, longitude: centre.longitude, accuracy: 10, time: 1))
    static func farAway(_ time: Int64) -> HotspotTracker.Input {
        .fix(.init(latitude: centre.latitude + 0.01, longitude: centre.longitude, accuracy: 10, time: time))
    }

    static func tracker() -> HotspotTracker {
        var tracker = HotspotTracker(bssidAbsence: 60)
        _ = tracker.handle(.hotspots([office], time: 0))
        return tracker
    }

    @Test("outside, beacons are not wanted and pin nothing; inside, the strongest listed beacon pins its point, after the enter")
    func strongest() {
        var tracker = Self.tracker()
        #expect(!tracker.wantsBeacons)
        #expect(tracker.handle(.beacons(["aa:bb:cc:00:00:01": -40], time: 1)).isEmpty, "beacons do not enter")
        #expect(tracker.handle(Self.atCentre) == [.init(hotspot: "hs_office", change: .entered, time: 1), Self.pinned(Self.desk, at: 1)],
                "the last beacon report counts from the enter on")
        #expect(tracker.wantsBeacons)
        // An unlisted stronger device changes nothing; the kitchen stronger than the desk moves the pin.
        #expect(tracker.handle(.beacons(["AA:BB:CC:00:00:01": -70, "11:22:33:44:55:66": -20], time: 2)).isEmpty)
        #expect(tracker.handle(.beacons(["AA:BB:CC:00:00:01": -70, "aa:bb:cc:00:00:02": -60], time: 3)) == [Self.pinned(Self.kitchen, at: 3)])
        #expect(tracker.handle(.beacons(["AA:BB:CC:00:00:02": -61, "AA:BB:CC:00:00:01": -75], time: 4)).isEmpty, "the same beacon again: no new point")
        // None seen: the point stands.
        #expect(tracker.handle(.beacons([:], time: 5)).isEmpty)
        #expect(tracker.handle(.beacons(["AA:BB:CC:00:00:01": -50], time: 6)) == [Self.pinned(Self.desk, at: 6)])
    }

    @Test("equal strengths: the lower address wins, whatever the order")
    func ties() {
        var tracker = Self.tracker()
        _ = tracker.handle(Self.atCentre)
        #expect(tracker.handle(.beacons(["AA:BB:CC:00:00:02": -55, "AA:BB:CC:00:00:01": -55], time: 2)) == [Self.pinned(Self.desk, at: 2)])
    }

    @Test("leaving forgets the point: the next stay pins the same beacon afresh; beacons are not wanted outside")
    func newStay() {
        var tracker = Self.tracker()
        _ = tracker.handle(Self.atCentre)
        #expect(tracker.handle(.beacons(["AA:BB:CC:00:00:01": -50], time: 2)) == [Self.pinned(Self.desk, at: 2)])
        _ = tracker.handle(Self.farAway(3))
        #expect(tracker.handle(Self.farAway(4)).map(\.change) == [.left])
        #expect(!tracker.wantsBeacons)
        #expect(tracker.handle(.beacons(["AA:BB:CC:00:00:01": -50], time: 5)).isEmpty, "outside: nothing")
        #expect(tracker.handle(.fix(.init(latitude: Self.centre.latitude, longitude: Self.centre.longitude, accuracy: 10, time: 6)))
                == [.init(hotspot: "hs_office", change: .entered, time: 6), Self.pinned(Self.desk, at: 6)])
    }

    @Test("a definition without beacons pins nothing and wants none; one that moves the pinned beacon pins its new point")
    func definitions() {
        var tracker = Self.tracker()
        var plain = Self.office
        plain.beacons = nil
        _ = tracker.handle(.hotspots([plain], time: 1))
        _ = tracker.handle(Self.atCentre)
        #expect(!tracker.wantsBeacons)
        #expect(tracker.handle(.beacons(["AA:BB:CC:00:00:01": -50], time: 2)).isEmpty)
        #expect(tracker.handle(.hotspots([Self.office], time: 3)) == [Self.pinned(Self.desk, at: 3)], "the last report is judged at once")
        var moved = Self.office
        let desk = Hotspot.Beacon(address: Self.desk.address, latitude: 59.43705, longitude: 24.7536)
        moved.beacons = [desk, Self.kitchen]
        #expect(tracker.handle(.hotspots([moved], time: 4)) == [Self.pinned(desk, at: 4)])
        #expect(tracker.handle(.hotspots([moved], time: 5)).isEmpty)
    }
}

