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
