import Foundation
import Protocol
import Testing
@testable import authd

@Suite("Presence: distances on the sphere")
struct GeoTests {
    @Test("(0°, 0°) → (0.05°, 0.05°) is 7,862.7 m")
    func shortDiagonal() {
        let metres = Geo.distance(fromLatitude: 0, longitude: 0, toLatitude: 0.05, longitude: 0.05)
        #expect((metres * 10).rounded() / 10 == 7862.7)
    }

    @Test("Berlin → Paris is 877.46 km, both ways")
    func berlinParis() {
        let there = Geo.distance(fromLatitude: 52.5200, longitude: 13.4050, toLatitude: 48.8566, longitude: 2.3522)
        let back = Geo.distance(fromLatitude: 48.8566, longitude: 2.3522, toLatitude: 52.5200, longitude: 13.4050)
        #expect((there / 10).rounded() / 100 == 877.46)
        #expect(abs(there - back) < 1e-6)
    }

    @Test("a point is at no distance from itself", arguments: [(0.0, 0.0), (52.52, 13.405), (-33.8688, 151.2093), (90.0, 0.0), (-90.0, 180.0)])
    func zero(latitude: Double, longitude: Double) {
        #expect(Geo.distance(fromLatitude: latitude, longitude: longitude, toLatitude: latitude, longitude: longitude) == 0)
    }

    @Test("antipodal points are half the circumference apart, never NaN",
          arguments: [[0.0, 0.0, 0.0, 180.0], [90.0, 0.0, -90.0, 0.0], [52.52, 13.405, -52.52, -166.595]])
    func antipodes(points: [Double]) {
        let metres = Geo.distance(fromLatitude: points[0], longitude: points[1], toLatitude: points[2], longitude: points[3])
        // Within a metre: near the antipode h is 1 − ε and the rounding of ε costs √ε radians;
        // hotspots are never that far apart.
        #expect(!metres.isNaN)
        #expect(abs(metres - .pi * Geo.earthRadius) < 1)
    }

    @Test("one degree of latitude is the same length anywhere; longitude's shrinks with the cosine")
    func degreeLengths() {
        let degree = .pi * Geo.earthRadius / 180
        #expect(abs(Geo.distance(fromLatitude: 10, longitude: 5, toLatitude: 11, longitude: 5) - degree) < 1e-6)
        #expect(abs(Geo.distance(fromLatitude: 60, longitude: 5, toLatitude: 60, longitude: 5.001) - degree / 1000 / 2) < 0.01)
        #expect(abs(Geo.distance(fromLatitude: 0, longitude: 179.9995, toLatitude: 0, longitude: -179.9995) - degree / 1000) < 1e-6)
    }
}

@Suite("Presence: hotspot definitions")
struct HotspotRulesTests {
    let office = Hotspot.Circle(latitude: 59.437, longitude: 24.7536, radius: 150)

    @Test("a valid definition comes back normalised: name trimmed, BSSIDs in lower case, none is nil")
    func normalised() throws {
        let both = try HotspotRules.validated(name: "  Office  ", circle: office, bssids: ["AA:BB:CC:DD:EE:0F", "00:11:22:33:44:55"])
        #expect(both == HotspotRules.Definition(name: "Office", circle: office, bssids: ["aa:bb:cc:dd:ee:0f", "00:11:22:33:44:55"]))
        let circleOnly = try HotspotRules.validated(name: "Kohvik ☕️ 2", circle: office, bssids: [])
        #expect(circleOnly.bssids == nil && circleOnly.name == "Kohvik ☕️ 2")
        let accessPointsOnly = try HotspotRules.validated(name: String(repeating: "x", count: 64), circle: nil, bssids: ["0a:0b:0c:0d:0e:0f"])
        #expect(accessPointsOnly.circle == nil && accessPointsOnly.bssids == ["0a:0b:0c:0d:0e:0f"])
    }

    @Test("the edges of each range are allowed", arguments: [
        Hotspot.Circle(latitude: 90, longitude: 180, radius: 10),
        Hotspot.Circle(latitude: -90, longitude: -180, radius: 5000),
        Hotspot.Circle(latitude: 0, longitude: 0, radius: 10.5),
    ])
    func edges(circle: Hotspot.Circle) throws {
        #expect(try HotspotRules.validated(name: "Edge", circle: circle, bssids: nil).circle == circle)
    }

    struct Fault: Sendable, CustomTestStringConvertible {
        let name: String
        let circle: Hotspot.Circle?
        let bssids: [String]?
        let field: String
        init(_ name: String, _ circle: Hotspot.Circle?, _ bssids: [String]?, _ field: String) {
            (self.name, self.circle, self.bssids, self.field) = (name, circle, bssids, field)
        }
        var testDescription: String { "\(field): \(name.debugDescription) \(String(describing: circle)) \(String(describing: bssids))" }
    }

    static let faults: [Fault] = [
        Fault("", Hotspot.Circle(latitude: 0, longitude: 0, radius: 100), nil, "name"),
        Fault("   ", Hotspot.Circle(latitude: 0, longitude: 0, radius: 100), nil, "name"),
        Fault(String(repeating: "x", count: 65), Hotspot.Circle(latitude: 0, longitude: 0, radius: 100), nil, "name"),
        Fault("Office\n", Hotspot.Circle(latitude: 0, longitude: 0, radius: 100), nil, "name"),
        Fault("Off\u{7}ice", Hotspot.Circle(latitude: 0, longitude: 0, radius: 100), nil, "name"),
        Fault("Off\u{2028}ice", Hotspot.Circle(latitude: 0, longitude: 0, radius: 100), nil, "name"),
        Fault("Office", Hotspot.Circle(latitude: 90.0001, longitude: 0, radius: 100), nil, "circle.lat"),
        Fault("Office", Hotspot.Circle(latitude: -91, longitude: 0, radius: 100), nil, "circle.lat"),
        Fault("Office", Hotspot.Circle(latitude: .nan, longitude: 0, radius: 100), nil, "circle.lat"),
        Fault("Office", Hotspot.Circle(latitude: .infinity, longitude: 0, radius: 100), nil, "circle.lat"),
        Fault("Office", Hotspot.Circle(latitude: 0, longitude: 180.5, radius: 100), nil, "circle.lon"),
        Fault("Office", Hotspot.Circle(latitude: 0, longitude: -.infinity, radius: 100), nil, "circle.lon"),
        Fault("Office", Hotspot.Circle(latitude: 0, longitude: .nan, radius: 100), nil, "circle.lon"),
        Fault("Office", Hotspot.Circle(latitude: 0, longitude: 0, radius: 9.99), nil, "circle.radius_m"),
        Fault("Office", Hotspot.Circle(latitude: 0, longitude: 0, radius: 5000.01), nil, "circle.radius_m"),
        Fault("Office", Hotspot.Circle(latitude: 0, longitude: 0, radius: .nan), nil, "circle.radius_m"),
        Fault("Office", Hotspot.Circle(latitude: 0, longitude: 0, radius: -100), nil, "circle.radius_m"),
        Fault("Office", nil, nil, "circle"),
        Fault("Office", nil, [], "circle"),
        Fault("Office", nil, ["aa:bb:cc:dd:ee"], "bssids"),
        Fault("Office", nil, ["aa:bb:cc:dd:ee:ff:00"], "bssids"),
        Fault("Office", nil, ["aa-bb-cc-dd-ee-ff"], "bssids"),
        Fault("Office", nil, ["aabb.ccdd.eeff"], "bssids"),
        Fault("Office", nil, ["aa:bb:cc:dd:ee:fg"], "bssids"),
        Fault("Office", nil, ["a:bb:cc:dd:ee:fff"], "bssids"),
        Fault("Office", nil, ["aa:bb:cc:dd:ee:ff "], "bssids"),
        Fault("Office", nil, ["aa:bb:cc:dd:ee:１２"], "bssids"),
        Fault("Office", nil, ["aa:bb:cc:dd:ee:ff", "AA:BB:CC:DD:EE:FF"], "bssids"),
        Fault("Office", nil, (0...32).map { String(format: "00:00:00:00:00:%02x", $0) }, "bssids"),
    ]

    @Test("each fault is refused with the field it concerns", arguments: faults)
    func refused(fault: Fault) {
        #expect {
            _ = try HotspotRules.validated(name: fault.name, circle: fault.circle, bssids: fault.bssids)
        } throws: { error in
            (error as? InvalidParameter)?.field == fault.field
        }
    }

    @Test("thirty-two access points are allowed")
    func thirtyTwo() throws {
        let bssids = (0..<32).map { String(format: "00:00:00:00:00:%02x", $0) }
        #expect(try HotspotRules.validated(name: "Campus", circle: nil, bssids: bssids).bssids == bssids)
    }

    @Test("error messages never repeat the coordinates or BSSIDs they refuse")
    func noLocationInErrors() {
        let attempts: [(Hotspot.Circle?, [String]?)] = [
            (Hotspot.Circle(latitude: 95.1234, longitude: 24.7536, radius: 150), nil),
            (Hotspot.Circle(latitude: 59.4371, longitude: 200.5678, radius: 150), nil),
            (Hotspot.Circle(latitude: 59.4371, longitude: 24.7536, radius: 7777.25), nil),
            (nil, ["12:34:56:78:9a:bc", "12:34:56:78:9A:BC"]),
            (nil, ["12:34:56:78:9a:zz"]),
        ]
        for (circle, bssids) in attempts {
            do {
                _ = try HotspotRules.validated(name: "Office", circle: circle, bssids: bssids)
                Issue.record("accepted a faulty definition")
            } catch {
                for secret in ["95.1234", "24.7536", "200.5678", "59.4371", "7777", "12:34", "9a:bc", "9A:BC"] {
                    #expect(!error.message.contains(secret))
                }
            }
        }
    }
}

@Suite("Presence: the enter/leave state machine")
struct HotspotTrackerTests {
    typealias Transition = HotspotTracker.Transition
    static let centre = (latitude: 59.437, longitude: 24.7536)
    /// Metres per degree of latitude on the sphere.
    static let degree = .pi * Geo.earthRadius / 180

    static func circle(_ id: String, radius: Double) -> Hotspot {
        Hotspot(id: id, name: id, circle: .init(latitude: centre.latitude, longitude: centre.longitude, radius: radius), bssids: nil, shared: false)
    }

    static func accessPoints(_ id: String, _ bssids: [String]) -> Hotspot {
        Hotspot(id: id, name: id, circle: nil, bssids: bssids, shared: true)
    }

    /// A fix `metres` north of the centre.
    static func fix(_ metres: Double, accuracy: Double = 20, at time: Int64) -> HotspotTracker.Input {
        .fix(.init(latitude: centre.latitude + metres / degree, longitude: centre.longitude, accuracy: accuracy, time: time))
    }

    /// A tracker matching `hotspots` from time 0.
    static func tracker(_ hotspots: [Hotspot], absence: Int64 = 60) -> HotspotTracker {
        var tracker = HotspotTracker(bssidAbsence: absence)
        #expect(tracker.handle(.hotspots(hotspots, time: 0)).isEmpty)
        return tracker
    }

    /// Feeds fixes at `metres` from the centre, one a second from time 1, and returns every transition.
    static func walk(_ metres: [Double], accuracy: Double = 20, radius: Double = 100) -> [Transition] {
        var tracker = tracker([circle("hs_a", radius: radius)])
        return metres.enumerated().flatMap { tracker.handle(fix($1, accuracy: accuracy, at: Int64($0 + 1))) }
    }

    @Test("the helper's fixes lie where they say")
    func fixDistances() {
        guard case .fix(let fix) = Self.fix(120, at: 0) else { return }
        #expect(abs(Geo.distance(fromLatitude: Self.centre.latitude, longitude: Self.centre.longitude,
                                 toLatitude: fix.latitude, longitude: fix.longitude) - 120) < 1e-6)
    }

    @Test("a walk back and forth across the radius makes one enter and one leave")
    func edgeWalk() {
        // Radius 100 m, leave ring 120 m: crossing the radius and the ring's inside changes nothing.
        let transitions = Self.walk([150, 90, 105, 95, 110, 99, 119, 101, 95, 118, 121, 115, 125, 140])
        #expect(transitions == [Transition(hotspot: "hs_a", change: .entered, time: 2), Transition(hotspot: "hs_a", change: .left, time: 14)])
    }

    struct Walk: Sendable, CustomTestStringConvertible {
        let testDescription: String
        let metres: [Double]
        var accuracies: [Double]? = nil
        var radius: Double = 100
        /// (change, index of the fix that made it).
        let expected: [(Transition.Change, Int)]
    }

    static let walkCases: [Walk] = [
        Walk(testDescription: "outside and far: nothing", metres: [500, 300, 130, 101], expected: []),
        Walk(testDescription: "on the radius is inside", metres: [100], expected: [(.entered, 0)]),
        Walk(testDescription: "one far fix is not enough", metres: [50, 200], expected: [(.entered, 0)]),
        Walk(testDescription: "two far fixes leave", metres: [50, 200, 200], expected: [(.entered, 0), (.left, 2)]),
        Walk(testDescription: "a fix inside between two far ones resets the count", metres: [50, 200, 60, 200], expected: [(.entered, 0)]),
        Walk(testDescription: "a fix in the ring between two far ones resets the count", metres: [50, 200, 110, 200], expected: [(.entered, 0)]),
        Walk(testDescription: "just beyond the ring counts as far", metres: [50, 120.5, 120.5], expected: [(.entered, 0), (.left, 2)]),
        Walk(testDescription: "the ring of a large circle is 10 % of its radius", metres: [900, 1090, 1090, 1101, 1101], radius: 1000,
             expected: [(.entered, 0), (.left, 4)]),
        Walk(testDescription: "accuracy of 100 m counts for a small circle; worse does not", metres: [50, 50], accuracies: [101, 100],
             expected: [(.entered, 1)]),
        Walk(testDescription: "a large circle accepts accuracy up to its radius", metres: [50, 50], accuracies: [1001, 1000], radius: 1000,
             expected: [(.entered, 1)]),
        Walk(testDescription: "a coarse far fix does not leave, nor break the count", metres: [50, 200, 5000, 200],
             accuracies: [20, 20, 500, 20], expected: [(.entered, 0), (.left, 3)]),
        Walk(testDescription: "a coarse fix in the middle does not reset the count either", metres: [50, 200, 0, 200],
             accuracies: [20, 20, 150, 20], expected: [(.entered, 0), (.left, 3)]),
        Walk(testDescription: "back in after leaving enters again", metres: [50, 200, 200, 300, 80], expected: [(.entered, 0), (.left, 2), (.entered, 4)]),
    ]

    @Test("walks", arguments: walkCases)
    func walks(_ walk: Walk) {
        var tracker = Self.tracker([Self.circle("hs_a", radius: walk.radius)])
        var transitions: [Transition] = []
        for (index, metres) in walk.metres.enumerated() {
            transitions += tracker.handle(Self.fix(metres, accuracy: walk.accuracies?[index] ?? 20, at: Int64(index + 1)))
        }
        #expect(transitions == walk.expected.map { Transition(hotspot: "hs_a", change: $0.0, time: Int64($0.1 + 1)) })
    }

    @Test("fixes with a value that is not a number, or a negative accuracy, are ignored",
          arguments: [[Double.nan, 0, 10], [0, .infinity, 10], [0, 0, .nan], [0, 0, -1]])
    func nonsense(values: [Double]) {
        var tracker = Self.tracker([Self.circle("hs_a", radius: 100)])
        let fix = HotspotTracker.Fix(latitude: Self.centre.latitude + values[0], longitude: Self.centre.longitude + values[1],
                                     accuracy: values[2], time: 1)
        #expect(tracker.handle(.fix(fix)).isEmpty)
        #expect(tracker.inside.isEmpty)
    }

    @Test("an access point seen enters; gone for the absence, it leaves; back in time, nothing happens")
    func accessPointAbsence() {
        var tracker = Self.tracker([Self.accessPoints("hs_ap", ["aa:bb:cc:00:00:01", "aa:bb:cc:00:00:02"])], absence: 60)
        // NetworkManager reports upper case.
        #expect(tracker.handle(.accessPoints(["11:22:33:44:55:66", "AA:BB:CC:00:00:02"], time: 10)) == [.init(hotspot: "hs_ap", change: .entered, time: 10)])
        #expect(tracker.handle(.accessPoints(["11:22:33:44:55:66"], time: 20)).isEmpty)
        #expect(tracker.handle(.tick(time: 79)).isEmpty)
        #expect(tracker.handle(.accessPoints(["aa:bb:cc:00:00:01"], time: 79)).isEmpty)
        #expect(tracker.handle(.accessPoints([], time: 85)).isEmpty)
        #expect(tracker.handle(.tick(time: 144)).isEmpty)
        #expect(tracker.inside == ["hs_ap"])
        #expect(tracker.handle(.tick(time: 145)) == [.init(hotspot: "hs_ap", change: .left, time: 145)])
        #expect(tracker.handle(.tick(time: 500)).isEmpty)
        #expect(tracker.inside.isEmpty)
    }

    @Test("an access point still seen holds the machine in, whatever the fixes say")
    func accessPointHolds() {
        var hotspot = Self.circle("hs_both", radius: 100)
        hotspot.bssids = ["aa:bb:cc:00:00:01"]
        var tracker = Self.tracker([hotspot], absence: 30)
        #expect(tracker.handle(.accessPoints(["aa:bb:cc:00:00:01"], time: 1)).map(\.change) == [.entered])
        #expect(tracker.handle(Self.fix(5000, at: 2)).isEmpty)
        #expect(tracker.handle(Self.fix(5000, at: 3)).isEmpty)
        #expect(tracker.handle(.accessPoints([], time: 4)).isEmpty)
        // Not inside by position (it never was): the access point's absence decides.
        #expect(tracker.handle(.tick(time: 34)) == [.init(hotspot: "hs_both", change: .left, time: 34)])
    }

    @Test("inside by position, the access point going changes nothing; two far fixes then leave")
    func positionHolds() {
        var hotspot = Self.circle("hs_both", radius: 100)
        hotspot.bssids = ["aa:bb:cc:00:00:01"]
        var tracker = Self.tracker([hotspot], absence: 30)
        #expect(tracker.handle(.accessPoints(["aa:bb:cc:00:00:01"], time: 1)).map(\.change) == [.entered])
        #expect(tracker.handle(Self.fix(10, at: 2)).isEmpty)
        #expect(tracker.handle(.accessPoints([], time: 3)).isEmpty)
        #expect(tracker.handle(.tick(time: 100)).isEmpty)
        #expect(tracker.handle(Self.fix(300, at: 101)).isEmpty)
        #expect(tracker.handle(Self.fix(300, at: 102)) == [.init(hotspot: "hs_both", change: .left, time: 102)])
    }

    @Test("two hotspots at once: each decides for itself; one input may change both, in id order")
    func twoHotspots() {
        var tracker = Self.tracker([Self.circle("hs_small", radius: 100), Self.circle("hs_large", radius: 1000)])
        #expect(tracker.handle(Self.fix(500, at: 1)) == [.init(hotspot: "hs_large", change: .entered, time: 1)])
        #expect(tracker.handle(Self.fix(50, at: 2)) == [.init(hotspot: "hs_small", change: .entered, time: 2)])
        #expect(tracker.inside == ["hs_large", "hs_small"])
        #expect(tracker.handle(Self.fix(600, at: 3)).isEmpty)
        #expect(tracker.handle(Self.fix(600, at: 4)) == [.init(hotspot: "hs_small", change: .left, time: 4)])
        #expect(tracker.handle(Self.fix(3000, at: 5)).isEmpty)
        #expect(tracker.handle(Self.fix(3000, at: 6)) == [.init(hotspot: "hs_large", change: .left, time: 6)])
        #expect(tracker.handle(Self.fix(0, at: 7)) == [.init(hotspot: "hs_large", change: .entered, time: 7),
                                                        .init(hotspot: "hs_small", change: .entered, time: 7)])
        #expect(tracker.handle(Self.fix(9000, at: 8)).isEmpty)
        #expect(tracker.handle(Self.fix(9000, at: 9)) == [.init(hotspot: "hs_large", change: .left, time: 9),
                                                           .init(hotspot: "hs_small", change: .left, time: 9)])
    }

    @Test("a hotspot that disappears is left at once; a new one waits for the next fix or report")
    func definitions() {
        var tracker = Self.tracker([Self.circle("hs_a", radius: 100), Self.accessPoints("hs_ap", ["aa:bb:cc:00:00:01"])])
        #expect(tracker.handle(Self.fix(0, at: 1)).map(\.hotspot) == ["hs_a"])
        #expect(tracker.handle(.accessPoints(["aa:bb:cc:00:00:01"], time: 2)).map(\.hotspot) == ["hs_ap"])
        // hs_a goes, hs_b comes (the machine is in its circle and sees its access point already).
        var added = Self.circle("hs_b", radius: 200)
        added.bssids = ["aa:bb:cc:00:00:01"]
        #expect(tracker.handle(.hotspots([Self.accessPoints("hs_ap", ["aa:bb:cc:00:00:01"]), added], time: 3))
                == [.init(hotspot: "hs_a", change: .left, time: 3)])
        #expect(tracker.inside == ["hs_ap"])
        #expect(tracker.handle(.tick(time: 4)).isEmpty)
        #expect(tracker.handle(Self.fix(0, at: 5)) == [.init(hotspot: "hs_b", change: .entered, time: 5)])
        // Gone altogether: everything inside is left.
        #expect(tracker.handle(.hotspots([], time: 6)) == [.init(hotspot: "hs_ap", change: .left, time: 6), .init(hotspot: "hs_b", change: .left, time: 6)])
        #expect(tracker.inside.isEmpty && tracker.hotspots.isEmpty)
    }

    @Test("a changed definition keeps the machine's state: a grown circle changes nothing, a moved one is left through the hysteresis")
    func changedDefinition() {
        var tracker = Self.tracker([Self.circle("hs_a", radius: 100)])
        #expect(tracker.handle(Self.fix(50, at: 1)).map(\.change) == [.entered])
        #expect(tracker.handle(.hotspots([Self.circle("hs_a", radius: 500)], time: 2)).isEmpty)
        var moved = Self.circle("hs_a", radius: 100)
        moved.circle!.latitude += 1
        #expect(tracker.handle(.hotspots([moved], time: 3)).isEmpty)
        #expect(tracker.handle(Self.fix(50, at: 4)).isEmpty)
        #expect(tracker.handle(Self.fix(50, at: 5)) == [.init(hotspot: "hs_a", change: .left, time: 5)])
    }

    @Test("a definition that drops the access point seen drops that evidence at once")
    func droppedAccessPoint() {
        var tracker = Self.tracker([Self.accessPoints("hs_ap", ["aa:bb:cc:00:00:01"])])
        #expect(tracker.handle(.accessPoints(["aa:bb:cc:00:00:01"], time: 1)).map(\.change) == [.entered])
        #expect(tracker.handle(.hotspots([Self.accessPoints("hs_ap", ["aa:bb:cc:00:00:09"])], time: 2))
                == [.init(hotspot: "hs_ap", change: .left, time: 2)])
        #expect(tracker.handle(.hotspots([Self.accessPoints("hs_ap", ["aa:bb:cc:00:00:09", "aa:bb:cc:00:00:01"])], time: 3))
                == [.init(hotspot: "hs_ap", change: .entered, time: 3)])
    }
}
