import Glibc
import Protocol

/// Distances on the Earth, taken as a sphere: hotspot radii are 10 m – 5 km, where the sphere's
/// error against the WGS 84 ellipsoid (under 0.5 %) is far below any position fix's accuracy.
enum Geo {
    /// The mean Earth radius (IUGG, R₁ = (2a + b) / 3), in metres.
    static let earthRadius = 6_371_008.8

    /// The great-circle distance in metres between two points given in degrees (latitude,
    /// longitude). Haversine rather than the spherical law of cosines: it stays exact for the
    /// short distances a hotspot's edge is about, where acos of a value near 1 loses metres.
    static func distance(fromLatitude latitude1: Double, longitude longitude1: Double,
                         toLatitude latitude2: Double, longitude longitude2: Double) -> Double {
        let φ1 = radians(latitude1), φ2 = radians(latitude2)
        let Δφ = radians(latitude2 - latitude1), Δλ = radians(longitude2 - longitude1)
        let sinΔφ = sin(Δφ / 2), sinΔλ = sin(Δλ / 2)
        let h = sinΔφ * sinΔφ + cos(φ1) * cos(φ2) * sinΔλ * sinΔλ
        // atan2 rather than asin(√h): as exact near the antipode as near the point itself, and
        // rounding that pushes h a hair above 1 cannot make it NaN.
        let clamped = min(1, max(0, h))
        return 2 * earthRadius * atan2(clamped.squareRoot(), (1 - clamped).squareRoot())
    }

    private static func radians(_ degrees: Double) -> Double { degrees * .pi / 180 }
}

extension Hotspot.Circle {
    /// Whether a point (degrees) lies inside the circle, its edge included: where a pin may be.
    func contains(latitude: Double, longitude: Double) -> Bool {
        Geo.distance(fromLatitude: self.latitude, longitude: self.longitude, toLatitude: latitude, longitude: longitude) <= radius
    }
}
