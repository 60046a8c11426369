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
