// Friends, groups, hotspots and presence (DESIGN §11): friends, groups and hotspots live where
// the account lives (a hub, or a standalone authd); where the machine is stays on the machine,
// which tells only "entered/left hotspot H" to the audience the person chose.

/// A named place: a circle and/or Wi-Fi access points. A machine is in it when its position fix
/// lies inside the circle (accurately enough), or when it sees one of its access points. Its
/// Bluetooth beacons, if any, give a precise point inside it to people who chose `precise`
/// `beacon`.
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
    /// Bluetooth beacons at fixed points inside the circle, at most 16; location data like the
    /// BSSIDs (sent only to the machines that match the hotspot, never shown to friends).
    public var beacons: [Beacon]?
    /// True for an admin's hotspot, which everyone sees; false for a person's own.
    public var shared: Bool

    public init(id: String, name: String, circle: Circle?, bssids: [String]?, beacons: [Beacon]? = nil, shared: Bool) {
        self.id = id
        self.name = name
        self.circle = circle
        self.bssids = bssids
        self.beacons = beacons
        self.shared = shared
    }

    /// A Bluetooth device (a beacon) fixed at a known point: a machine that sees it is there.
    public struct Beacon: Codable, Sendable, Equatable {
        /// The beacon's Bluetooth address, `AA:BB:CC:DD:EE:FF` (upper case, as BlueZ reports it).
        public var address: String
        /// −90…90.
        public var latitude: Double
        /// −180…180.
        public var longitude: Double

        public init(address: String, latitude: Double, longitude: Double) {
            self.address = address
            self.latitude = latitude
            self.longitude = longitude
        }

        enum CodingKeys: String, CodingKey { case address, latitude = "lat", longitude = "lon" }
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

// MARK: Friends and groups

/// Another person, as a friend list shows them: their account and the email address they were
/// found by (nil when they no longer have one).
public struct PresencePerson: Codable, Sendable, Equatable {
    public var account: String
    public var email: String?
    public init(account: String, email: String?) {
        self.account = account
        self.email = email
    }
}

/// A person the caller added, and the caller's groups they are in.
public struct Friend: Codable, Sendable, Equatable {
    public var account: String
    public var email: String?
    public var groups: [String]
    public init(account: String, email: String?, groups: [String]) {
        self.account = account
        self.email = email
        self.groups = groups
    }
}

/// Params naming another person by email address.
public struct PersonParams: Codable, Sendable, Equatable {
    public var session: String
    public var email: String
    public init(session: String, email: String) {
        self.session = session
        self.email = email
    }
}

/// `friends.add` — looks the address up (at most `[presence] lookups_per_hour` per account:
/// `rate.limited`); not found → `friend.not_found`. Found: the person joins the caller's group
/// "friends" (`added` false when already there) and is told (a `friend.added` event in their
/// log). Adding grants nothing by itself: they see only what the caller shares with a group of
/// theirs.
public enum FriendsAdd: RPCMethod {
    public static let name = "friends.add"
    public typealias Params = PersonParams
    public struct Result: Codable, Sendable, Equatable {
        public var friend: Friend
        public var added: Bool
        public init(friend: Friend, added: Bool) {
            self.friend = friend
            self.added = added
        }
    }
}

/// `friends.list` — the people the caller added (with the caller's groups they are in), and
/// the people who added the caller (with whether the caller blocked them).
public enum FriendsList: RPCMethod {
    public static let name = "friends.list"
    public typealias Params = SessionParams
    public struct Result: Codable, Sendable, Equatable {
        public var friends: [Friend]
        public var addedMe: [Follower]
        public init(friends: [Friend], addedMe: [Follower]) {
            self.friends = friends
            self.addedMe = addedMe
        }
        enum CodingKeys: String, CodingKey { case friends, addedMe = "added_me" }
    }

    public struct Follower: Codable, Sendable, Equatable {
        public var account: String
        public var email: String?
        public var blocked: Bool
        public init(account: String, email: String?, blocked: Bool) {
            self.account = account
            self.email = email
            self.blocked = blocked
        }
    }
}

/// `friends.remove` — the friend leaves every group of the caller's at once: their next query no
/// longer shows the caller. `friend.not_found` when the address is not a friend's.
public enum FriendsRemove: RPCMethod {
    public static let name = "friends.remove"
    public typealias Params = PersonParams
    public struct Result: Codable, Sendable, Equatable {
        public var removed: Bool
        public init(removed: Bool) { self.removed = removed }
    }
}

/// `friends.block` — a person who added the caller (or whom the caller added): their pings never
/// reach the caller, and the caller's `presence.nearby` never shows them. `blocked: false` lifts it.
public enum FriendsBlock: RPCMethod {
    public static let name = "friends.block"
    public struct Params: Codable, Sendable, Equatable {
        public var session: String
        public var email: String
        public var blocked: Bool?
        public init(session: String, email: String, blocked: Bool?) {
            self.session = session
            self.email = email
            self.blocked = blocked
        }
    }
    public struct Result: Codable, Sendable, Equatable {
        public var account: String
        public var blocked: Bool
        public init(account: String, blocked: Bool) {
            self.account = account
            self.blocked = blocked
        }
    }
}

/// One of the caller's groups: an audience the caller may share presence with.
public struct PresenceGroup: Codable, Sendable, Equatable {
    public var name: String
    public var members: [PresencePerson]
    public init(name: String, members: [PresencePerson]) {
        self.name = name
        self.members = members
    }
}

/// Params naming one of the caller's groups (and, for renames, its new name; for membership,
/// a friend).
public struct GroupParams: Codable, Sendable, Equatable {
    public var session: String
    public var name: String
    public var to: String?
    public var email: String?
    public init(session: String, name: String, to: String? = nil, email: String? = nil) {
        self.session = session
        self.name = name
        self.to = to
        self.email = email
    }
}

/// The answer of every `groups.*` change: the group as it is now.
public struct GroupResult: Codable, Sendable, Equatable {
    public var group: PresenceGroup
    public init(group: PresenceGroup) { self.group = group }
}

/// `groups.create {name}`; `group.exists` when the caller has one of that name.
public enum GroupsCreate: RPCMethod {
    public static let name = "groups.create"
    public typealias Params = GroupParams
    public typealias Result = GroupResult
}

/// `groups.rename {name, to}`; the default group "friends" keeps its name (`group.default`).
public enum GroupsRename: RPCMethod {
    public static let name = "groups.rename"
    public typealias Params = GroupParams
    public typealias Result = GroupResult
}

/// `groups.delete {name}`; its members stop seeing what was shared with it at once. Not the
/// default group (`group.default`).
public enum GroupsDelete: RPCMethod {
    public static let name = "groups.delete"
    public typealias Params = GroupParams
    public struct Result: Codable, Sendable, Equatable {
        public var deleted: Bool
        public init(deleted: Bool) { self.deleted = deleted }
    }
}

/// `groups.add {name, email}` — a friend (someone the caller added: `friend.not_found`
/// otherwise) joins the group.
public enum GroupsAdd: RPCMethod {
    public static let name = "groups.add"
    public typealias Params = GroupParams
    public typealias Result = GroupResult
}

/// `groups.remove {name, email}` — the member leaves the group at once.
public enum GroupsRemove: RPCMethod {
    public static let name = "groups.remove"
    public typealias Params = GroupParams
    public typealias Result = GroupResult
}

/// `groups.list` — the caller's groups, "friends" first.
public enum GroupsList: RPCMethod {
    public static let name = "groups.list"
    public typealias Params = SessionParams
    public struct Result: Codable, Sendable, Equatable {
        public var groups: [PresenceGroup]
        public init(groups: [PresenceGroup]) { self.groups = groups }
    }
}

// MARK: Hotspots

/// A hotspot's definition as a person or an admin gives it.
public struct HotspotDefinition: Codable, Sendable, Equatable {
    public var name: String
    public var circle: Hotspot.Circle?
    public var bssids: [String]?
    public var beacons: [Hotspot.Beacon]?
    public init(name: String, circle: Hotspot.Circle?, bssids: [String]?, beacons: [Hotspot.Beacon]? = nil) {
        self.name = name
        self.circle = circle
        self.bssids = bssids
        self.beacons = beacons
    }
}

/// `hotspots.list` — the shared hotspots and the caller's own.
public enum HotspotsList: RPCMethod {
    public static let name = "hotspots.list"
    public typealias Params = SessionParams
    public struct Result: Codable, Sendable, Equatable {
        public var hotspots: [Hotspot]
        public init(hotspots: [Hotspot]) { self.hotspots = hotspots }
    }
}

/// `hotspots.add {name, circle?, bssids?, beacons?}` — a private hotspot of the caller's (at most
/// `[presence] max_hotspots`: `hotspot.limit`; a name the caller already sees: `hotspot.exists`).
public enum HotspotsAdd: RPCMethod {
    public static let name = "hotspots.add"
    public struct Params: Codable, Sendable, Equatable {
        public var session: String
        public var name: String
        public var circle: Hotspot.Circle?
        public var bssids: [String]?
        public var beacons: [Hotspot.Beacon]?
        public init(session: String, name: String, circle: Hotspot.Circle?, bssids: [String]?, beacons: [Hotspot.Beacon]? = nil) {
            self.session = session
            self.name = name
            self.circle = circle
            self.bssids = bssids
            self.beacons = beacons
        }
    }
    public struct Result: Codable, Sendable, Equatable {
        public var hotspot: Hotspot
        public init(hotspot: Hotspot) { self.hotspot = hotspot }
    }
}

/// `hotspots.remove {id}` — one of the caller's own (`hotspot.not_found` otherwise).
public enum HotspotsRemove: RPCMethod {
    public static let name = "hotspots.remove"
    public typealias Params = SessionItemParams
    public struct Result: Codable, Sendable, Equatable {
        public var removed: Bool
        public init(removed: Bool) { self.removed = removed }
    }
}

/// `admin.hotspots.list` — the shared hotspots (admins).
public enum AdminHotspotsList: RPCMethod {
    public static let name = "admin.hotspots.list"
    public typealias Params = NoParams
    public typealias Result = HotspotsList.Result
}

/// `admin.hotspots.add {name, circle?, bssids?, beacons?}` — a hotspot everyone sees (admins).
public enum AdminHotspotsAdd: RPCMethod {
    public static let name = "admin.hotspots.add"
    public typealias Params = HotspotDefinition
    public typealias Result = HotspotsAdd.Result
}

/// `admin.hotspots.remove {id}` — a shared hotspot (admins); whoever is in it is taken out.
public enum AdminHotspotsRemove: RPCMethod {
    public static let name = "admin.hotspots.remove"
    public struct Params: Codable, Sendable, Equatable {
        public var id: String
        public init(id: String) { self.id = id }
    }
    public typealias Result = HotspotsRemove.Result
}

// MARK: Presence

/// How a person shares: `mode` `ask` (asked on entering a hotspot which group to tell, or none)
/// or `auto` (`groups` are told on entering, without asking); `until` (RFC 3339) when a timed
/// share ends at the hub; `enabled` false after `presence.off`; `precise` how a precise point
/// inside a hotspot is given: `manual` (only `presence.pin`) or `beacon` (also the point of a
/// hotspot's Bluetooth beacon the machine sees).
public struct PresenceSettingsState: Codable, Sendable, Equatable {
    public var enabled: Bool
    public var mode: String
    public var groups: [String]
    public var until: String?
    public var precise: String
    public init(enabled: Bool, mode: String, groups: [String], until: String?, precise: String = "manual") {
        self.enabled = enabled
        self.mode = mode
        self.groups = groups
        self.until = until
        self.precise = precise
    }

    enum CodingKeys: String, CodingKey { case enabled, mode, groups, until, precise }

    /// `precise` absent (an authd from before it existed) is `manual`, the default.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        enabled = try container.decode(Bool.self, forKey: .enabled)
        mode = try container.decode(String.self, forKey: .mode)
        groups = try container.decode([String].self, forKey: .groups)
        until = try container.decodeIfPresent(String.self, forKey: .until)
        precise = try container.decodeIfPresent(String.self, forKey: .precise) ?? "manual"
    }
}

/// `presence.settings {mode?, groups?, for?, precise?}` — changes what is given (`for`: seconds
/// the share lasts, 60 s – 30 days; 0 or absent with `groups`: until changed; `precise`
/// `manual` or `beacon`) and answers the settings. Audited at the hub.
public enum PresenceSettings: RPCMethod {
    public static let name = "presence.settings"
    public struct Params: Codable, Sendable, Equatable {
        public var session: String
        public var mode: String?
        public var groups: [String]?
        public var forSeconds: Int?
        public var precise: String?
        public init(session: String, mode: String? = nil, groups: [String]? = nil, forSeconds: Int? = nil, precise: String? = nil) {
            self.session = session
            self.mode = mode
            self.groups = groups
            self.forSeconds = forSeconds
            self.precise = precise
        }
        enum CodingKeys: String, CodingKey { case session, mode, groups, forSeconds = "for", precise }
    }
    public typealias Result = PresenceSettingsState
}

/// Where a person is, as the hub holds it.
public struct PresencePlace: Codable, Sendable, Equatable {
    public var hotspot: HotspotName
    /// RFC 3339: when they entered.
    public var since: String
    /// A point they pinned inside the hotspot, when they chose to share it.
    public var pinned: Point?
    public init(hotspot: HotspotName, since: String, pinned: Point?) {
        self.hotspot = hotspot
        self.since = since
        self.pinned = pinned
    }

    public struct HotspotName: Codable, Sendable, Equatable {
        public var id: String
        public var name: String
        public init(id: String, name: String) {
            self.id = id
            self.name = name
        }
    }

    public struct Point: Codable, Sendable, Equatable {
        public var latitude: Double
        public var longitude: Double
        public init(latitude: Double, longitude: Double) {
            self.latitude = latitude
            self.longitude = longitude
        }
        enum CodingKeys: String, CodingKey { case latitude = "lat", longitude = "lon" }
    }
}

/// `presence.status` — the caller's settings and where the hub holds them to be.
public enum PresenceStatus: RPCMethod {
    public static let name = "presence.status"
    public typealias Params = SessionParams
    public struct Result: Codable, Sendable, Equatable {
        public var settings: PresenceSettingsState
        public var place: PresencePlace?
        public init(settings: PresenceSettingsState, place: PresencePlace?) {
            self.settings = settings
            self.place = place
        }
    }
}

/// `presence.on` — starts sharing again from nothing (the settings are kept).
public enum PresenceOn: RPCMethod {
    public static let name = "presence.on"
    public typealias Params = SessionParams
    public typealias Result = PresenceSettingsState
}

/// `presence.off` — deletes the caller's presence, pinned point and in/out state at the hub in
/// one transaction; every later query about them finds nothing, and nothing is reported until
/// `presence.on`.
public enum PresenceOff: RPCMethod {
    public static let name = "presence.off"
    public typealias Params = SessionParams
    public typealias Result = PresenceSettingsState
}

/// `presence.nearby` — the friends who share with the caller now and are in a hotspot, those
/// in the caller's own hotspot first. An empty list is an answer.
public enum PresenceNearby: RPCMethod {
    public static let name = "presence.nearby"
    public typealias Params = SessionParams
    public struct Result: Codable, Sendable, Equatable {
        public var friends: [Nearby]
        public init(friends: [Nearby]) { self.friends = friends }
    }

    public struct Nearby: Codable, Sendable, Equatable {
        public var account: String
        public var email: String?
        public var place: PresencePlace
        /// In the caller's own hotspot now.
        public var here: Bool
        public init(account: String, email: String?, place: PresencePlace, here: Bool) {
            self.account = account
            self.email = email
            self.place = place
            self.here = here
        }
    }
}

/// `presence.audience` — exactly who can see the caller now, and through which groups.
public enum PresenceAudience: RPCMethod {
    public static let name = "presence.audience"
    public typealias Params = SessionParams
    public struct Result: Codable, Sendable, Equatable {
        public var audience: [Friend]
        public var until: String?
        public init(audience: [Friend], until: String?) {
            self.audience = audience
            self.until = until
        }
    }
}

/// `presence.pin {lat, lon}` — a precise point, only inside the hotspot the caller is in now
/// (`presence.pin_outside` otherwise); the caller's audience is told.
public enum PresencePin: RPCMethod {
    public static let name = "presence.pin"
    public struct Params: Codable, Sendable, Equatable {
        public var session: String
        public var latitude: Double
        public var longitude: Double
        public init(session: String, latitude: Double, longitude: Double) {
            self.session = session
            self.latitude = latitude
            self.longitude = longitude
        }
        enum CodingKeys: String, CodingKey { case session, latitude = "lat", longitude = "lon" }
    }
    public typealias Result = PresencePlace
}

/// `link.presence.report`, from a machine: the person of `account` entered or left `hotspot`
/// at `at` (RFC 3339); `group` is who to tell on entering in `ask` mode (their answer);
/// `pinned`, with `entered`, the point of the hotspot's beacon the machine sees (for an account
/// whose `precise` is `beacon`): pinned as by `presence.pin` when it differs from the point held.
/// Only for an account the machine holds a live session of. Answers how many were told.
public enum LinkPresenceReport: RPCMethod {
    public static let name = "link.presence.report"
    public struct Params: Codable, Sendable, Equatable {
        public var account: String
        public var hotspot: String
        public var entered: Bool
        public var group: String?
        public var pinned: PresencePlace.Point?
        public init(account: String, hotspot: String, entered: Bool, group: String?, pinned: PresencePlace.Point? = nil) {
            self.account = account
            self.hotspot = hotspot
            self.entered = entered
            self.group = group
            self.pinned = pinned
        }
    }
    public struct Result: Codable, Sendable, Equatable {
        public var told: Int
        public init(told: Int) { self.told = told }
    }
}

/// `link.presence.accounts`, from a machine: for each account it holds a live session of, the
/// local users there who signed in, the account's settings, and the hotspots it matches against
/// (shared and the account's own, with their BSSIDs); and how often to say it is still in one
/// (`refresh`, seconds: the hub forgets a place not reported for longer than its expiry).
public enum LinkPresenceAccounts: RPCMethod {
    public static let name = "link.presence.accounts"
    public typealias Params = NoParams
    public struct Result: Codable, Sendable, Equatable {
        public var accounts: [Account]
        public var refresh: Int
        public init(accounts: [Account], refresh: Int) {
            self.accounts = accounts
            self.refresh = refresh
        }
    }

    public struct Account: Codable, Sendable, Equatable {
        public var account: String
        public var users: [UInt32]
        public var settings: PresenceSettingsState
        public var hotspots: [Hotspot]
        public init(account: String, users: [UInt32], settings: PresenceSettingsState, hotspots: [Hotspot]) {
            self.account = account
            self.users = users
            self.settings = settings
            self.hotspots = hotspots
        }
    }
}

/// `presence.answer {hotspot, group?}`, on the machine: the person's answer to a
/// `presence.ask` event (ask mode): tell `group` that they entered `hotspot`, or (no group)
/// nobody. Answers how many were told; `presence.not_asked` when no question is open.
public enum PresenceAnswer: RPCMethod {
    public static let name = "presence.answer"
    public struct Params: Codable, Sendable, Equatable {
        public var session: String
        public var hotspot: String
        public var group: String?
        public init(session: String, hotspot: String, group: String?) {
            self.session = session
            self.hotspot = hotspot
            self.group = group
        }
    }
    public typealias Result = LinkPresenceReport.Result
}

/// `presence.machine`, on the machine: whether it reads where it is for the session's account
/// (`state`: `reading`, `unavailable` with `detail`, `off` when the account's presence is off,
/// `disabled` without `[presence] enabled`), and the hotspots it is in now (names; location data
/// that stays on the machine).
public enum PresenceMachine: RPCMethod {
    public static let name = "presence.machine"
    public typealias Params = SessionParams
    public struct Result: Codable, Sendable, Equatable {
        public var state: String
        public var detail: String?
        public var inside: [String]
        public init(state: String, detail: String?, inside: [String]) {
            self.state = state
            self.detail = detail
            self.inside = inside
        }
    }
}

/// What a `presence.ask` event (on `events.subscribe`) asks the person: they entered
/// `hotspot`; whom of `groups` to tell (`presence.answer`), or nobody.
public struct PresenceAskEvent: Codable, Sendable, Equatable {
    public var account: String
    public var hotspot: PresencePlace.HotspotName
    public var groups: [String]
    public init(account: String, hotspot: PresencePlace.HotspotName, groups: [String]) {
        self.account = account
        self.hotspot = hotspot
        self.groups = groups
    }
}
