import Protocol

/// What a hotspot definition must satisfy before anyone stores it (an admin's shared hotspot or
/// a person's private one). Strict, so that every machine matching it locally sees the same,
/// sane place. Errors name the field and never repeat the coordinates, BSSIDs or beacon
/// addresses given: they are location data, and error messages reach logs.
enum HotspotRules {
    static let nameLength = 1...64
    static let latitudes = -90.0...90.0
    static let longitudes = -180.0...180.0
    /// Smaller than a fix's usual accuracy is meaningless; larger is no longer a place.
    static let radii = 10.0...5000.0
    static let maxBSSIDs = 32
    static let maxBeacons = 16

    /// A definition as it is stored and sent to machines.
    struct Definition: Equatable, Sendable {
        /// Trimmed of surrounding white space.
        let name: String
        let circle: Hotspot.Circle?
        /// Lower case, in the order given; nil when none was given (never empty).
        let bssids: [String]?
        /// Addresses in upper case, in the order given; nil when none was given (never empty).
        var beacons: [Hotspot.Beacon]? = nil
    }

    /// Checks a definition and returns it normalised, or throws the first fault found.
    static func validated(name: String, circle: Hotspot.Circle?, bssids: [String]?,
                          beacons: [Hotspot.Beacon]? = nil) throws(InvalidParameter) -> Definition {
        let trimmed = try validatedName(name)
        if let circle { try check(circle) }
        let normalised = try validatedBSSIDs(bssids ?? [])
        guard circle != nil || !normalised.isEmpty else {
            throw InvalidParameter("A hotspot needs a circle, access points ('bssids'), or both.", field: "circle")
        }
        let placed = try validatedBeacons(beacons ?? [], in: circle)
        return Definition(name: trimmed, circle: circle, bssids: normalised.isEmpty ? nil : normalised, beacons: placed.isEmpty ? nil : placed)
    }

    /// Beacons are points inside the circle: a beacon seen pins the person there, and a pin is
    /// only ever inside the hotspot's circle (as `presence.pin` is), so a hotspot without a
    /// circle has no place for them.
    private static func validatedBeacons(_ beacons: [Hotspot.Beacon], in circle: Hotspot.Circle?) throws(InvalidParameter) -> [Hotspot.Beacon] {
        guard !beacons.isEmpty else { return [] }
        guard beacons.count <= maxBeacons else {
            throw InvalidParameter("Parameter 'beacons' holds more than \(maxBeacons) beacons.", field: "beacons")
        }
        guard let circle else {
            throw InvalidParameter("Parameter 'beacons' needs a 'circle': beacons are points inside it.", field: "beacons")
        }
        var seen = Set<String>()
        var normalised: [Hotspot.Beacon] = []
        for (index, beacon) in beacons.enumerated() {
            let entry = "Parameter 'beacons' entry \(index + 1)"
            guard let address = normalisedBeaconAddress(beacon.address) else {
                throw InvalidParameter("\(entry) has no Bluetooth address (six hex pairs such as 01:23:45:67:89:AB).", field: "beacons")
            }
            guard latitudes.contains(beacon.latitude) else {
                throw InvalidParameter("\(entry) must have a latitude from −90 to 90 degrees.", field: "beacons")
            }
            guard longitudes.contains(beacon.longitude) else {
                throw InvalidParameter("\(entry) must have a longitude from −180 to 180 degrees.", field: "beacons")
            }
            guard circle.contains(latitude: beacon.latitude, longitude: beacon.longitude) else {
                throw InvalidParameter("\(entry) lies outside the hotspot's circle.", field: "beacons")
            }
            guard seen.insert(address).inserted else {
                throw InvalidParameter("\(entry) repeats an earlier address.", field: "beacons")
            }
            normalised.append(Hotspot.Beacon(address: address, latitude: beacon.latitude, longitude: beacon.longitude))
        }
        return normalised
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
        isMACAddress(text) ? text.lowercased() : nil
    }

    /// `XX:XX:XX:XX:XX:XX` in hex, in upper case (as BlueZ's `Address` is); nil for anything else.
    static func normalisedBeaconAddress(_ text: String) -> String? {
        isMACAddress(text) ? text.uppercased() : nil
    }

    /// Six colon-separated hex pairs: a BSSID and a Bluetooth address are both EUI-48s.
    private static func isMACAddress(_ text: String) -> Bool {
        let groups = text.split(separator: ":", omittingEmptySubsequences: false)
        return groups.count == 6 && groups.allSatisfy { $0.utf8.count == 2 && $0.allSatisfy(\.isHexDigit) }
    }
}
