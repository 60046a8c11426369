// Friends, groups, hotspots and presence (DESIGN §11): friends, groups and hotspots live where
// the account lives (a hub, or a standalone authd); where the machine is stays on the machine,
// which tells only "entered/left hotspot H" to the audience the person chose.

/// A named place: a circle and/or Wi-Fi access points. A machine is in it when its position fix
/// lies inside the circle (accurately enough), or when it sees one of its access points.
public struct Hotspot: Codable, Sendable, Equatable {
    /// `hs_…`, given by authd.
    public var id: String
    /// 1–64 printable characters, unique among the hotspots one person sees.
    public var name: String
    public var circle: Circle?
    /// BSSIDs (`aa:bb:cc:dd:ee:ff`, lower case), at most 32; location data: sent only to the
    /// machines of the hotspot's owner (or to every machine, for an admin's shared hotspot), never
    /// shown to friends.
    public var bssids: [String]?
    /// True for an admin's hotspot, which everyone sees; false for a person's own.
    public var shared: Bool

    public init(id: String, name: String, circle: Circle?, bssids: [String]?, shared: Bool) {
        self.id = id
        self.name = name
        self.circle = circle
        self.bssids = bssids
        self.shared = shared
    }

    /// Degrees (WGS 84) and metres.
    public struct Circle: Codable, Sendable, Equatable {
        /// −90…90.
        public var latitude: Double
        /// −180…180.
        public var longitude: Double
        /// 10…5,000 m.
        public var radius: Double

        public init(latitude: Double, longitude: Double, radius: Double) {
            self.latitude = latitude
            self.longitude = longitude
            self.radius = radius
        }

        enum CodingKeys: String, CodingKey { case latitude = "lat", longitude = "lon", radius = "radius_m" }
    }
}
