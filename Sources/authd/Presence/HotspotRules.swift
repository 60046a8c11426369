import Protocol

/// What a hotspot definition must satisfy before anyone stores it (an admin's shared hotspot or
/// a person's private one). Strict, so that every machine matching it locally sees the same,
/// sane place. Errors name the field and never repeat the coordinates or BSSIDs given: they are
/// location data, and error messages reach logs.
enum HotspotRules {
    static let nameLength = 1...64
    static let latitudes = -90.0...90.0
    static let longitudes = -180.0...180.0
    /// Smaller than a fix's usual accuracy is meaningless; larger is no longer a place.
    static let radii = 10.0...5000.0
    static let maxBSSIDs = 32

    /// A definition as it is stored and sent to machines.
    struct Definition: Equatable, Sendable {
        /// Trimmed of surrounding white space.
        let name: String
        let circle: Hotspot.Circle?
        /// Lower case, in the order given; nil when none was given (never empty).
        let bssids: [String]?
    }

    /// Checks a definition and returns it normalised, or throws the first fault found.
    static func validated(name: String, circle: Hotspot.Circle?, bssids: [String]?) throws(InvalidParameter) -> Definition {
        let trimmed = try validatedName(name)
        if let circle { try check(circle) }
        let normalised = try validatedBSSIDs(bssids ?? [])
        guard circle != nil || !normalised.isEmpty else {
            throw InvalidParameter("A hotspot needs a circle, access points ('bssids'), or both.", field: "circle")
        }
        return Definition(name: trimmed, circle: circle, bssids: normalised.isEmpty ? nil : normalised)
    }

    private static func validatedName(_ name: String) throws(InvalidParameter) -> String {
        let unprintable = name.unicodeScalars.contains { scalar in
            [.control, .lineSeparator, .paragraphSeparator].contains(scalar.properties.generalCategory)
        }
        let scalars = name.unicodeScalars
        let start = scalars.firstIndex { !$0.properties.isWhitespace } ?? scalars.endIndex
        let end = scalars.lastIndex { !$0.properties.isWhitespace }.map(scalars.index(after:)) ?? start
        let trimmed = String(scalars[start..<max(start, end)])
        guard !unprintable, nameLength.contains(trimmed.count) else {
            throw InvalidParameter("Parameter 'name' must be 1–64 printable characters.", field: "name")
        }
        return trimmed
    }

    private static func check(_ circle: Hotspot.Circle) throws(InvalidParameter) {
        let checks = [("circle.lat", circle.latitude, latitudes, "a latitude from −90 to 90 degrees"),
                      ("circle.lon", circle.longitude, longitudes, "a longitude from −180 to 180 degrees"),
                      ("circle.radius_m", circle.radius, radii, "a radius from 10 to 5,000 metres")]
        // `contains` is false for NaN, and the bounds are finite, so this refuses every non-finite value.
        for (field, value, range, what) in checks where !range.contains(value) {
            throw InvalidParameter("Parameter '\(field)' must be \(what).", field: field)
        }
    }

    private static func validatedBSSIDs(_ bssids: [String]) throws(InvalidParameter) -> [String] {
        guard bssids.count <= maxBSSIDs else {
            throw InvalidParameter("Parameter 'bssids' holds more than \(maxBSSIDs) access points.", field: "bssids")
        }
        var seen = Set<String>()
        var normalised: [String] = []
        for (index, bssid) in bssids.enumerated() {
            guard let bssid = normalisedBSSID(bssid) else {
                throw InvalidParameter("Parameter 'bssids' entry \(index + 1) is not a BSSID (six hex pairs such as 00:11:22:aa:bb:cc).",
                                       field: "bssids")
            }
            guard seen.insert(bssid).inserted else {
                throw InvalidParameter("Parameter 'bssids' entry \(index + 1) repeats an earlier one.", field: "bssids")
            }
            normalised.append(bssid)
        }
        return normalised
    }

    /// `xx:xx:xx:xx:xx:xx` in hex, in lower case; nil for anything else. NetworkManager reports
    /// upper case, definitions are stored in lower case: both meet here.
    static func normalisedBSSID(_ text: String) -> String? {
        let groups = text.split(separator: ":", omittingEmptySubsequences: false)
        guard groups.count == 6, groups.allSatisfy({ $0.utf8.count == 2 && $0.allSatisfy(\.isHexDigit) }) else { return nil }
        return text.lowercased()
    }
}
