import Protocol

/// Decides, on the machine, which hotspots the machine is in: a pure value with no I/O (the
/// shape of `ConnectionMachine`), fed what the sensors saw and the definitions the account's
/// authd sent, returning the entered/left transitions for the caller to report. Times are Unix
/// seconds as the caller's clock gives them.
///
/// The rules, with hysteresis so that a machine standing at a circle's edge does not flap:
/// - **Enter** when an accurate fix's centre lies inside the radius, or a listed BSSID is seen.
///   A fix is *accurate* for a hotspot when its accuracy is no worse than max(radius, 100 m).
/// - **Leave by position** only after two consecutive accurate fixes beyond the leave ring,
///   radius + max(10 % of the radius, 20 m). An accurate fix between the radius and the ring
///   (or inside) resets that count.
/// - **Leave by access point**: a listed BSSID not seen for `bssidAbsence` seconds, counted from
///   the first access-point report without it.
/// - Either kind of evidence holds the machine in: it leaves when neither position nor an
///   access point keeps it there (a machine inside by position does not leave when its access
///   point goes; one whose access point is still seen does not leave on far fixes, or the next
///   report would enter it again).
/// - A fix that is not accurate for a hotspot changes nothing there, and is invisible to the
///   count: two far accurate fixes with a coarse one between them are still consecutive, since
///   the coarse one says nothing about where the machine is. Fixes with a non-finite or negative
///   value are ignored altogether.
/// - A hotspot whose definition disappears is left at once; a new one is judged from the next
///   fix or access-point report (not from ones that came before it).
///
/// And the precise point, for a hotspot that lists Bluetooth beacons: while the machine is in
/// it, the strongest listed beacon of the last beacon report (ties: the lower address) is where
/// the machine is, reported as `pinned` with the beacon's point once it is not the beacon
/// pinned already. A beacon no longer seen leaves its point standing (the person has not
/// moved out of the hotspot, and a point of their own is better than none); leaving the
/// hotspot forgets it, so that the next stay pins afresh. Beacons are not evidence of being in
/// the hotspot: the circle and access points alone decide that.
struct HotspotTracker {
    /// One position fix: degrees (WGS 84) and metres.
    struct Fix: Equatable, Sendable {
        var latitude: Double
        var longitude: Double
        /// The radius in metres within which the true position lies (GeoClue's `Accuracy`).
        var accuracy: Double
        var time: Int64
    }

    enum Input: Equatable, Sendable {
        case fix(Fix)
        /// Every BSSID visible now (any case); an empty set is "none seen".
        case accessPoints(Set<String>, time: Int64)
        /// The Bluetooth addresses (any case) visible now, with their signal strength (RSSI,
        /// dBm); an empty dictionary is "none seen".
        case beacons([String: Int], time: Int64)
        /// Time passing, for the access points' absence.
        case tick(time: Int64)
        /// The hotspots to match from now on, replacing the previous ones.
        case hotspots([Hotspot], time: Int64)
    }

    struct Transition: Equatable, Sendable {
        /// `pinned`: the machine, inside, is at the point of a beacon of the hotspot.
        enum Change: String, Equatable, Sendable { case entered, left, pinned }
        let hotspot: String
        let change: Change
        let time: Int64
        /// The beacon's point, for `pinned`.
        let point: PresencePlace.Point?

        init(hotspot: String, change: Change, time: Int64, point: PresencePlace.Point? = nil) {
            self.hotspot = hotspot
            self.change = change
            self.time = time
            self.point = point
        }
    }

    /// The state kept for one hotspot.
    private struct Place {
        var hotspot: Hotspot
        /// The listed BSSIDs, lower case.
        var bssids: Set<String>
        var inside = false
        /// The last accurate fixes put the machine in the circle (and two far ones have not
        /// followed).
        var insideByPosition = false
        /// Consecutive accurate fixes beyond the leave ring while inside by position.
        var farFixes = 0
        /// Whether the last access-point report showed a listed BSSID.
        var accessPointSeen = false
        /// When a listed BSSID stopped being seen (nil: seen now, or never seen).
        var accessPointGoneSince: Int64?
        /// The listed beacons, by address in upper case.
        var beacons: [String: Hotspot.Beacon]
        /// The address of the beacon whose point was reported last in this stay.
        var pinnedBeacon: String?

        init(_ hotspot: Hotspot) {
            self.hotspot = hotspot
            bssids = Self.bssids(of: hotspot)
            beacons = Self.beacons(of: hotspot)
        }

        static func bssids(of hotspot: Hotspot) -> Set<String> {
            Set((hotspot.bssids ?? []).compactMap(HotspotRules.normalisedBSSID))
        }

        static func beacons(of hotspot: Hotspot) -> [String: Hotspot.Beacon] {
            var byAddress: [String: Hotspot.Beacon] = [:]
            for beacon in hotspot.beacons ?? [] {
                guard let address = HotspotRules.normalisedBeaconAddress(beacon.address) else { continue }
                byAddress[address] = beacon
            }
            return byAddress
        }

        /// The strongest listed beacon in `seen` (ties: the lower address), if any.
        func strongestBeacon(in seen: [String: Int]) -> String? {
            beacons.keys.compactMap { address in seen[address].map { (address, $0) } }
                .min { ($1.1, $0.0) < ($0.1, $1.0) }?.0
        }

        func heldByAccessPoint(at time: Int64, absence: Int64) -> Bool {
            if accessPointSeen { return true }
            guard let gone = accessPointGoneSince else { return false }
            return time - gone < absence
        }

        mutating func take(_ fix: Fix) {
            guard let circle = hotspot.circle, fix.accuracy <= max(circle.radius, 100) else { return }
            let distance = Geo.distance(fromLatitude: circle.latitude, longitude: circle.longitude,
                                        toLatitude: fix.latitude, longitude: fix.longitude)
            if distance <= circle.radius {
                insideByPosition = true
                farFixes = 0
            } else if distance <= circle.radius + max(circle.radius / 10, 20) {
                farFixes = 0
            } else if insideByPosition {
                farFixes += 1
                if farFixes >= 2 {
                    insideByPosition = false
                    farFixes = 0
                }
            }
        }

        mutating func take(accessPoints seen: Set<String>, at time: Int64) {
            let wasSeen = accessPointSeen
            accessPointSeen = !bssids.isDisjoint(with: seen)
            if accessPointSeen {
                accessPointGoneSince = nil
            } else if wasSeen {
                accessPointGoneSince = time
            }
        }
    }

    /// Seconds a listed BSSID may be missing before the machine leaves a hotspot it is in only
    /// by access point (`[presence] bssid_absence`).
    let bssidAbsence: Int64
    private var places: [String: Place] = [:]
    /// The last access-point report, normalised: what a changed BSSID list is judged against.
    private var accessPointsSeen: Set<String> = []
    /// The last beacon report: RSSI by address in upper case.
    private var beaconsSeen: [String: Int] = [:]

    init(bssidAbsence: Int64) {
        self.bssidAbsence = bssidAbsence
    }

    /// The ids of the hotspots the machine is in now, sorted.
    var inside: [String] { places.values.filter(\.inside).map(\.hotspot.id).sorted() }

    /// The hotspots being matched.
    var hotspots: [Hotspot] { places.values.map(\.hotspot).sorted { $0.id < $1.id } }

    /// Whether beacons matter now: the machine is in a hotspot that lists some. Reading
    /// Bluetooth costs power and radio time; while this is false nobody needs it.
    var wantsBeacons: Bool { places.values.contains { $0.inside && !$0.beacons.isEmpty } }

    /// Takes one input and returns what it changed, in hotspot id order.
    mutating func handle(_ input: Input) -> [Transition] {
        switch input {
        case .fix(let fix):
            guard [fix.latitude, fix.longitude, fix.accuracy].allSatisfy(\.isFinite), fix.accuracy >= 0 else { return [] }
            for id in places.keys { places[id]!.take(fix) }
            return settle(at: fix.time)
        case .accessPoints(let seen, let time):
            accessPointsSeen = Set(seen.compactMap(HotspotRules.normalisedBSSID))
            for id in places.keys { places[id]!.take(accessPoints: accessPointsSeen, at: time) }
            return settle(at: time)
        case .beacons(let seen, let time):
            beaconsSeen = [:]
            for (address, strength) in seen {
                guard let address = HotspotRules.normalisedBeaconAddress(address) else { continue }
                beaconsSeen[address] = max(strength, beaconsSeen[address] ?? .min)
            }
            return settle(at: time)
        case .tick(let time):
            return settle(at: time)
        case .hotspots(let hotspots, let time):
            return replace(with: hotspots, at: time)
        }
    }

    private mutating func replace(with hotspots: [Hotspot], at time: Int64) -> [Transition] {
        var next: [String: Place] = [:]
        for hotspot in hotspots {
            guard var place = places[hotspot.id] else {
                next[hotspot.id] = Place(hotspot)
                continue
            }
            // A changed definition keeps what was seen of the machine: a moved circle is left
            // through the same hysteresis; evidence the definition no longer covers is dropped.
            if hotspot.circle == nil {
                place.insideByPosition = false
                place.farFixes = 0
            }
            place.hotspot = hotspot
            let bssids = Place.bssids(of: hotspot)
            if bssids != place.bssids {
                // Judged against the last report at once: the grace of `bssidAbsence` is for
                // a scan that missed an access point, not for one the definition dropped.
                place.bssids = bssids
                place.accessPointSeen = !bssids.isDisjoint(with: accessPointsSeen)
                place.accessPointGoneSince = nil
            }
            // A beacon pinned that the definition dropped or moved is pinned no more: the next
            // beacon seen (the same one, at its new point) is reported afresh.
            let beacons = Place.beacons(of: hotspot)
            if let pinned = place.pinnedBeacon, beacons[pinned] != place.beacons[pinned] { place.pinnedBeacon = nil }
            place.beacons = beacons
            next[hotspot.id] = place
        }
        let gone = places.values.filter { $0.inside && next[$0.hotspot.id] == nil }.map(\.hotspot.id).sorted()
        places = next
        return gone.map { Transition(hotspot: $0, change: .left, time: time) } + settle(at: time)
    }

    /// Updates each hotspot's in/out from its evidence at `time`, then its beacon point.
    private mutating func settle(at time: Int64) -> [Transition] {
        var transitions: [Transition] = []
        for id in places.keys.sorted() {
            var place = places[id]!
            let inside = place.insideByPosition || place.heldByAccessPoint(at: time, absence: bssidAbsence)
            if !place.heldByAccessPoint(at: time, absence: bssidAbsence) { place.accessPointGoneSince = nil }
            if inside != place.inside {
                place.inside = inside
                transitions.append(Transition(hotspot: id, change: inside ? .entered : .left, time: time))
                // A new stay starts with no point: the home forgets the pin on entering.
                place.pinnedBeacon = nil
            }
            if place.inside, let strongest = place.strongestBeacon(in: beaconsSeen), strongest != place.pinnedBeacon,
               let beacon = place.beacons[strongest] {
                place.pinnedBeacon = strongest
                transitions.append(Transition(hotspot: id, change: .pinned, time: time,
                                              point: PresencePlace.Point(latitude: beacon.latitude, longitude: beacon.longitude)))
            }
            places[id] = place
        }
        return transitions
    }
}
