import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// Friends, groups, hotspots and where people are, kept where the account lives (a hub, or a
/// standalone authd). Every change is one transaction with its audit record; what others are
/// told (a friend added them, a friend entered or left a hotspot) is handed to their event logs
/// as authd's own events (`AccountNotice`), which the sync stream brings to their machines.
///
/// Who sees a person P: a member of one of P's groups P shares with now — in `auto` mode the
/// groups of P's settings, in `ask` mode the group P chose on entering the hotspot — while P's
/// presence is on, P's timed share has not ended, a machine of P's reported within
/// `[presence] expiry`, and the member has not blocked P.
struct PresenceBook: Sendable {
    let store: Store
    let config: ConfigHolder
    let now: @Sendable () -> Date

    /// The default group every person has: the people they add join it.
    static let defaultGroup = "friends"
    /// Groups one person may have.
    static let maxGroups = 50
    static let modes: Set<String> = ["ask", "auto"]
    /// How a precise point inside a hotspot is given: only by `presence.pin`, or also by the
    /// point of a hotspot's beacon the machine sees.
    static let preciseWays: Set<String> = ["manual", "beacon"]

    private var seconds: Int64 { Int64(now().timeIntervalSince1970) }

    /// Someone who added the person, and whether the person blocked them.
    struct Follower: Sendable, Equatable {
        let account: String
        let email: String?
        let blocked: Bool
    }

    /// Someone who shares where they are with the viewer, and whether it is the viewer's hotspot.
    struct Sighting: Sendable, Equatable {
        let account: String
        let email: String?
        let place: PresencePlace
        let here: Bool
    }

    // MARK: Friends

    /// The active account of an email address (normalised), if any.
    func account(byEmail email: String) async throws -> PresencePerson? {
        try await store.read { database in
            try database.queryOne("SELECT id, email FROM accounts WHERE email = ? AND deactivated_at IS NULL", [.text(email)]) {
                PresencePerson(account: $0.text(0), email: $0.optionalText(1))
            }
        }
    }

    /// Adds `friend` (to the default group); `added` false when they were already.
    func addFriend(_ account: String, _ friend: PresencePerson) async throws -> (friend: Friend, added: Bool) {
        let now = seconds
        return try await store.transaction { database in
            let group = try Self.defaultGroupID(of: account, in: database, now: now)
            try database.execute("INSERT INTO presence_friends (account_id, friend_id, added_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                                 [.text(account), .text(friend.account), .integer(now)])
            let added = database.changes > 0
            try database.execute("INSERT INTO presence_members (group_id, member_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
                                 [.text(group), .text(friend.account)])
            if added {
                try AuditScope.record(in: database, ["account": .string(account), "friend": .string(friend.account)])
                let email = try Self.email(of: account, in: database)
                try AuditScope.noticed(AccountNotice(account: friend.account, kind: "friend.added",
                                                     body: ["account": .string(account), "email": email.map(JSONValue.string) ?? .null]), in: database)
            }
            return (try Self.friend(friend.account, of: account, in: database), added)
        }
    }

    /// The people `account` added, and those who added it.
    func friends(of account: String) async throws -> (friends: [Friend], followers: [Follower]) {
        try await store.read { database in
            let friends = try database.query(
                "SELECT f.friend_id FROM presence_friends f WHERE f.account_id = ? ORDER BY f.added_at, f.friend_id", [.text(account)]) { $0.text(0) }
            let addedMe = try database.query(
                """
                SELECT f.account_id, a.email, EXISTS (SELECT 1 FROM presence_blocks b WHERE b.account_id = ? AND b.blocked_id = f.account_id)
                FROM presence_friends f JOIN accounts a ON a.id = f.account_id
                WHERE f.friend_id = ? AND a.deactivated_at IS NULL ORDER BY f.added_at, f.account_id
                """, [.text(account), .text(account)]) { Follower(account: $0.text(0), email: $0.optionalText(1), blocked: $0.int(2) != 0) }
            return (try friends.map { try Self.friend($0, of: account, in: database) }, addedMe)
        }
    }

    func removeFriend(_ account: String, email: String) async throws -> Bool {
        try await store.transaction { database in
            guard let friend = try Self.friendID(byEmail: email, of: account, in: database) else { throw PresenceFailure.friendNotFound }
            try database.execute(
                "DELETE FROM presence_members WHERE member_id = ? AND group_id IN (SELECT id FROM presence_groups WHERE account_id = ?)",
                [.text(friend), .text(account)])
            try database.execute("DELETE FROM presence_friends WHERE account_id = ? AND friend_id = ?", [.text(account), .text(friend)])
            try AuditScope.record(in: database, ["account": .string(account), "friend": .string(friend)])
            return true
        }
    }

    /// Blocks (or lets again) a person who added `account`, or whom it added; returns their account.
    func block(_ account: String, email: String, blocked: Bool) async throws -> String {
        let now = seconds
        return try await store.transaction { database in
            guard let person = try database.queryOne(
                """
                SELECT a.id FROM accounts a WHERE a.email = ? AND a.id != ? AND (
                    EXISTS (SELECT 1 FROM presence_friends f WHERE f.account_id = a.id AND f.friend_id = ?)
                    OR EXISTS (SELECT 1 FROM presence_friends f WHERE f.account_id = ? AND f.friend_id = a.id))
                """, [.text(email), .text(account), .text(account), .text(account)], row: { $0.text(0) })
            else { throw PresenceFailure.friendNotFound }
            if blocked {
                try database.execute("INSERT INTO presence_blocks (account_id, blocked_id, blocked_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                                     [.text(account), .text(person), .integer(now)])
            } else {
                try database.execute("DELETE FROM presence_blocks WHERE account_id = ? AND blocked_id = ?", [.text(account), .text(person)])
            }
            try AuditScope.record(in: database, ["account": .string(account), "person": .string(person), "blocked": .bool(blocked)])
            return person
        }
    }

    // MARK: Groups

    /// The person's groups, "friends" first (empty until made by a first change: a list is a
    /// read, never a write).
    func groups(of account: String) async throws -> [PresenceGroup] {
        try await store.read { database in
            let names = try database.query(
                "SELECT name FROM presence_groups WHERE account_id = ? ORDER BY name != ?, name", [.text(account), .text(Self.defaultGroup)]) { $0.text(0) }
            let groups = try names.map { try Self.group(named: $0, of: account, in: database) }
            return names.first == Self.defaultGroup ? groups : [PresenceGroup(name: Self.defaultGroup, members: [])] + groups
        }
    }

    func createGroup(_ account: String, name: String) async throws -> PresenceGroup {
        let now = seconds
        return try await store.transaction { database in
            _ = try Self.defaultGroupID(of: account, in: database, now: now)
            let count = try database.queryOne("SELECT count(*) FROM presence_groups WHERE account_id = ?", [.text(account)]) { $0.int(0) } ?? 0
            guard count < Self.maxGroups else { throw PresenceFailure.groupLimit(Self.maxGroups) }
            guard try Self.groupID(named: name, of: account, in: database) == nil else { throw PresenceFailure.groupExists }
            try database.execute("INSERT INTO presence_groups (id, account_id, name, created_at) VALUES (?, ?, ?, ?)",
                                 [.text(try Self.newID("grp_")), .text(account), .text(name), .integer(now)])
            try AuditScope.record(in: database, ["account": .string(account), "group": .string(name)])
            return try Self.group(named: name, of: account, in: database)
        }
    }

    func renameGroup(_ account: String, name: String, to newName: String) async throws -> PresenceGroup {
        try await store.transaction { database in
            guard name != Self.defaultGroup, newName != Self.defaultGroup else { throw PresenceFailure.groupDefault }
            guard let id = try Self.groupID(named: name, of: account, in: database) else { throw PresenceFailure.groupNotFound }
            guard try Self.groupID(named: newName, of: account, in: database) == nil else { throw PresenceFailure.groupExists }
            try database.execute("UPDATE presence_groups SET name = ? WHERE id = ?", [.text(newName), .text(id)])
            try AuditScope.record(in: database, ["account": .string(account), "group": .string(name), "to": .string(newName)])
            return try Self.group(named: newName, of: account, in: database)
        }
    }

    func deleteGroup(_ account: String, name: String) async throws {
        try await store.transaction { database in
            guard name != Self.defaultGroup else { throw PresenceFailure.groupDefault }
            guard let id = try Self.groupID(named: name, of: account, in: database) else { throw PresenceFailure.groupNotFound }
            // Members, shares and an ask-mode choice of it go with it (ON DELETE).
            try database.execute("DELETE FROM presence_groups WHERE id = ?", [.text(id)])
            try AuditScope.record(in: database, ["account": .string(account), "group": .string(name)])
        }
    }

    /// A friend of `account`'s joins (or leaves) its group `name`.
    func setMember(_ account: String, group name: String, email: String, member: Bool) async throws -> PresenceGroup {
        let now = seconds
        return try await store.transaction { database in
            _ = try Self.defaultGroupID(of: account, in: database, now: now)
            guard let id = try Self.groupID(named: name, of: account, in: database) else { throw PresenceFailure.groupNotFound }
            guard let friend = try Self.friendID(byEmail: email, of: account, in: database) else { throw PresenceFailure.friendNotFound }
            if member {
                try database.execute("INSERT INTO presence_members (group_id, member_id) VALUES (?, ?) ON CONFLICT DO NOTHING", [.text(id), .text(friend)])
            } else {
                try database.execute("DELETE FROM presence_members WHERE group_id = ? AND member_id = ?", [.text(id), .text(friend)])
            }
            try AuditScope.record(in: database, ["account": .string(account), "group": .string(name), "member": .string(friend), "in": .bool(member)])
            return try Self.group(named: name, of: account, in: database)
        }
    }

    // MARK: Hotspots

    /// The shared hotspots and `account`'s own (only the shared ones for nil).
    func hotspots(of account: String?) async throws -> [Hotspot] {
        try await store.read { database in try Self.hotspots(of: account, in: database) }
    }

    /// Adds a hotspot of `account`'s own, or a shared one (nil: an admin's).
    func addHotspot(_ account: String?, _ definition: HotspotDefinition) async throws -> Hotspot {
        let now = seconds
        let limit = config.current.presenceMaxHotspots
        return try await store.transaction { database in
            if let account {
                let count = try database.queryOne("SELECT count(*) FROM presence_hotspots WHERE account_id = ?", [.text(account)]) { $0.int(0) } ?? 0
                guard count < limit else { throw PresenceFailure.hotspotLimit(limit) }
            }
            // Names are unique among the hotspots one person sees: their own and the shared ones
            // (a shared one among all of them).
            let clash = try database.queryOne(
                "SELECT 1 FROM presence_hotspots WHERE name = ? AND (account_id IS NULL OR CAST(? AS TEXT) IS NULL OR account_id = ?)",
                [.text(definition.name), account.map(SQLValue.text) ?? .null, account.map(SQLValue.text) ?? .null]) { _ in true }
            guard clash == nil else { throw PresenceFailure.hotspotExists }
            let hotspot = Hotspot(id: try Self.newID("hs_"), name: definition.name, circle: definition.circle, bssids: definition.bssids,
                                  beacons: definition.beacons, shared: account == nil)
            try database.execute(
                """
                INSERT INTO presence_hotspots (id, account_id, name, latitude, longitude, radius, bssids, beacons, created_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [.text(hotspot.id), account.map(SQLValue.text) ?? .null, .text(hotspot.name),
                 hotspot.circle.map { .real($0.latitude) } ?? .null, hotspot.circle.map { .real($0.longitude) } ?? .null,
                 hotspot.circle.map { .real($0.radius) } ?? .null,
                 try hotspot.bssids.map { .text(try WireCodec.encodeJSONText($0)) } ?? .null,
                 try hotspot.beacons.map { .text(try WireCodec.encodeJSONText($0)) } ?? .null, .integer(now)])
            // No coordinates, BSSIDs or beacon addresses in the audit log: they are location data.
            try AuditScope.record(in: database, ["hotspot": .string(hotspot.id), "name": .string(hotspot.name), "account": account.map(JSONValue.string) ?? .null])
            return hotspot
        }
    }

    /// Removes a hotspot of `account`'s own, or a shared one (nil); whoever is in it is taken
    /// out without a ping (the place is gone, not left).
    func removeHotspot(_ account: String?, id: String) async throws {
        try await store.transaction { database in
            try database.execute("DELETE FROM presence_hotspots WHERE id = ? AND account_id IS NOT DISTINCT FROM ?", [.text(id), account.map(SQLValue.text) ?? .null])
            guard database.changes > 0 else { throw PresenceFailure.hotspotNotFound }
            try AuditScope.record(in: database, ["hotspot": .string(id), "account": account.map(JSONValue.string) ?? .null])
        }
    }

    // MARK: Settings

    func settings(of account: String) async throws -> PresenceSettingsState {
        try await store.read { database in try Self.settings(of: account, in: database, now: Int64(now().timeIntervalSince1970)) }
    }

    /// Changes the mode, the groups shared with (and how long) and/or how a precise point is
    /// given, in one change.
    func setSettings(_ account: String, mode: String?, groups: [String]?, until: Int64?, precise: String? = nil) async throws -> PresenceSettingsState {
        let now = seconds
        return try await store.transaction { database in
            _ = try Self.defaultGroupID(of: account, in: database, now: now)
            var current = try Self.stored(account, in: database)
            if let mode { current.mode = mode }
            if let precise { current.precise = precise }
            if let groups {
                var ids: [String] = []
                for name in groups {
                    guard let id = try Self.groupID(named: name, of: account, in: database) else { throw PresenceFailure.groupNotFound }
                    ids.append(id)
                }
                try database.execute("DELETE FROM presence_shares WHERE account_id = ?", [.text(account)])
                for id in Set(ids) {
                    try database.execute("INSERT INTO presence_shares (account_id, group_id) VALUES (?, ?)", [.text(account), .text(id)])
                }
                current.until = until
            }
            try Self.store(current, of: account, in: database)
            let settings = try Self.settings(of: account, in: database, now: now)
            try Self.changed(settings, of: account, in: database)
            try AuditScope.record(in: database, ["account": .string(account), "mode": .string(settings.mode),
                                                 "groups": .array(settings.groups.map(JSONValue.string)),
                                                 "until": settings.until.map(JSONValue.string) ?? .null, "precise": .string(settings.precise)])
            return settings
        }
    }

    /// `presence.off` (and a deactivation): the person's place, pinned point and in/out state
    /// go, in one transaction, and nothing more is taken until `presence.on`.
    func setEnabled(_ account: String, _ enabled: Bool) async throws -> PresenceSettingsState {
        let now = seconds
        return try await store.transaction { database in
            if !enabled { try Self.forget(account, in: database) }
            var current = try Self.stored(account, in: database)
            current.enabled = enabled
            try Self.store(current, of: account, in: database)
            try AuditScope.record(in: database, ["account": .string(account), "enabled": .bool(enabled)])
            let settings = try Self.settings(of: account, in: database, now: now)
            try Self.changed(settings, of: account, in: database)
            return settings
        }
    }

    /// Deletes what the hub holds of where `account` is, and turns presence off.
    static func forget(_ account: String, in database: Database) throws {
        try database.execute("DELETE FROM presence_places WHERE account_id = ?", [.text(account)])
        var current = try stored(account, in: database)
        current.enabled = false
        try store(current, of: account, in: database)
    }

    // MARK: Where people are

    /// A machine of `account` says it entered or left `hotspot` (in `ask` mode, `group` is whom
    /// the person chose to tell; none: nothing is kept). `pinned`, on entering, is the point of
    /// the hotspot's beacon the machine sees: pinned as by `pin`, and told, when it is not the
    /// point held already. Tells the audience, once per change; a report of what the hub holds
    /// already only refreshes it. Answers how many were told.
    func report(_ account: String, hotspot: String, entered: Bool, group: String?, pinned: PresencePlace.Point? = nil) async throws -> Int {
        let now = seconds
        let stale = now - Int64(config.current.presenceExpirySeconds)
        if pinned != nil && !entered {
            throw InvalidParameter("Parameter 'pinned' goes with 'entered': a point is pinned in the hotspot the person is in.", field: "pinned")
        }
        return try await store.transaction { database in
            let settings = try Self.stored(account, in: database)
            guard settings.enabled else { throw PresenceFailure.off }
            guard let place = try Self.hotspots(of: account, in: database).first(where: { $0.id == hotspot }) else { throw PresenceFailure.hotspotNotFound }
            if let pinned { try Self.check(pinned, inside: place) }
            let held = try database.queryOne(
                "SELECT hotspot_id, reported_at, pin_latitude, pin_longitude FROM presence_places WHERE account_id = ?", [.text(account)]) {
                (hotspot: $0.text(0), reportedAt: $0.int64(1),
                 pin: $0.isNull(2) ? nil : PresencePlace.Point(latitude: $0.double(2), longitude: $0.double(3)))
            }
            if !entered {
                guard held?.hotspot == hotspot else { return 0 }
                let audience = try Self.audience(of: account, in: database, now: now)
                try database.execute("DELETE FROM presence_places WHERE account_id = ?", [.text(account)])
                try Self.ping(audience, about: account, state: "left", hotspot: place, pinned: nil, now: now, in: database)
                return audience.count
            }
            if let held, held.hotspot == hotspot, held.reportedAt > stale {
                try database.execute("UPDATE presence_places SET reported_at = ? WHERE account_id = ?", [.integer(now), .text(account)])
                guard let pinned, pinned != held.pin else { return 0 }
                return try Self.setPin(pinned, of: account, in: place, now: now, in: database)
            }
            var chosen: String?
            if settings.mode == "ask" {
                guard let group else {
                    try database.execute("DELETE FROM presence_places WHERE account_id = ?", [.text(account)])
                    return 0
                }
                guard let id = try Self.groupID(named: group, of: account, in: database) else { throw PresenceFailure.groupNotFound }
                chosen = id
            }
            try database.execute(
                """
                INSERT INTO presence_places (account_id, hotspot_id, since, reported_at, group_id) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (account_id) DO UPDATE SET hotspot_id = excluded.hotspot_id, since = excluded.since, reported_at = excluded.reported_at,
                    pin_latitude = NULL, pin_longitude = NULL, group_id = excluded.group_id
                """, [.text(account), .text(hotspot), .integer(now), .integer(now), chosen.map(SQLValue.text) ?? .null])
            let audience = try Self.audience(of: account, in: database, now: now)
            try Self.ping(audience, about: account, state: "entered", hotspot: place, pinned: nil, now: now, in: database)
            try AuditScope.record(in: database, ["account": .string(account), "hotspot": .string(hotspot), "told": .integer(Int64(audience.count))])
            if let pinned { _ = try Self.setPin(pinned, of: account, in: place, now: now, in: database) }
            return audience.count
        }
    }

    /// Pins a point inside the circle of the hotspot `account` is in now; its audience is told.
    func pin(_ account: String, _ point: PresencePlace.Point) async throws -> PresencePlace {
        let now = seconds
        let stale = now - Int64(config.current.presenceExpirySeconds)
        return try await store.transaction { database in
            guard try Self.stored(account, in: database).enabled else { throw PresenceFailure.off }
            guard let held = try database.queryOne("SELECT hotspot_id FROM presence_places WHERE account_id = ? AND reported_at > ?",
                                                   [.text(account), .integer(stale)], row: { $0.text(0) }),
                  let hotspot = try Self.hotspots(of: account, in: database).first(where: { $0.id == held })
            else { throw PresenceFailure.pinOutside }
            try Self.check(point, inside: hotspot)
            _ = try Self.setPin(point, of: account, in: hotspot, now: now, in: database)
            return try Self.place(of: account, in: database, stale: stale)!
        }
    }

    /// A pinned point lies inside the hotspot's circle (a hotspot without one has no point).
    private static func check(_ point: PresencePlace.Point, inside hotspot: Hotspot) throws {
        // The ranges first: a longitude off by 360 degrees would otherwise measure as inside.
        guard HotspotRules.latitudes.contains(point.latitude), HotspotRules.longitudes.contains(point.longitude),
              hotspot.circle?.contains(latitude: point.latitude, longitude: point.longitude) == true
        else { throw PresenceFailure.pinOutside }
    }

    /// Keeps `point` as the pin of `account`'s place (in `hotspot`) and tells its audience;
    /// answers how many were told. No coordinates in the audit record: they are location data.
    private static func setPin(_ point: PresencePlace.Point, of account: String, in hotspot: Hotspot, now: Int64, in database: Database) throws -> Int {
        try database.execute("UPDATE presence_places SET pin_latitude = ?, pin_longitude = ? WHERE account_id = ?",
                             [.real(point.latitude), .real(point.longitude), .text(account)])
        let audience = try audience(of: account, in: database, now: now)
        try ping(audience, about: account, state: "pinned", hotspot: hotspot, pinned: point, now: now, in: database)
        try AuditScope.record(in: database, ["account": .string(account), "hotspot": .string(hotspot.id)])
        return audience.count
    }

    /// The person's settings, and where they are while presence is on.
    func status(of account: String) async throws -> (settings: PresenceSettingsState, place: PresencePlace?) {
        let now = seconds
        let stale = now - Int64(config.current.presenceExpirySeconds)
        return try await store.read { database in
            let settings = try Self.settings(of: account, in: database, now: now)
            return (settings, settings.enabled ? try Self.place(of: account, in: database, stale: stale) : nil)
        }
    }

    /// Who can see `account` now, and through which of its groups; until when its timed share runs.
    func audience(of account: String) async throws -> (audience: [Friend], until: String?) {
        let now = seconds
        return try await store.read { database in
            let audience = try Self.audience(of: account, in: database, now: now)
            let friends = try audience.map { member in
                let groups = try database.query(
                    """
                    SELECT g.name FROM presence_groups g JOIN presence_members m ON m.group_id = g.id
                    WHERE g.account_id = ? AND m.member_id = ? AND g.id IN (\(Self.sharedGroups)) ORDER BY g.name
                    """, [.text(account), .text(member), .text(account), .text(account)]) { $0.text(0) }
                return Friend(account: member, email: try Self.email(of: member, in: database), groups: groups)
            }
            return (friends, try Self.settings(of: account, in: database, now: now).until)
        }
    }

    /// The people who share with `viewer` now and are in a hotspot, those in the viewer's own
    /// hotspot first.
    func nearby(_ viewer: String) async throws -> [Sighting] {
        let now = seconds
        let stale = now - Int64(config.current.presenceExpirySeconds)
        return try await store.read { database in
            let own = try Self.place(of: viewer, in: database, stale: stale)?.hotspot.id
            let visible = try database.query(
                """
                SELECT p.account_id FROM presence_places p JOIN accounts a ON a.id = p.account_id
                WHERE p.account_id != ? AND a.deactivated_at IS NULL AND p.reported_at > ?
                  AND NOT EXISTS (SELECT 1 FROM presence_blocks b WHERE b.account_id = ? AND b.blocked_id = p.account_id)
                  AND EXISTS (SELECT 1 FROM presence_members m JOIN presence_groups g ON g.id = m.group_id
                              WHERE m.member_id = ? AND g.account_id = p.account_id)
                """, [.text(viewer), .integer(stale), .text(viewer), .text(viewer)]) { $0.text(0) }
            var found: [Sighting] = []
            for person in visible where try Self.audience(of: person, in: database, now: now).contains(viewer) {
                guard let place = try Self.place(of: person, in: database, stale: stale) else { continue }
                found.append(Sighting(account: person, email: try Self.email(of: person, in: database), place: place, here: place.hotspot.id == own))
            }
            return found.sorted { ($0.here ? 0 : 1, $0.place.since, $0.account) < ($1.here ? 0 : 1, $1.place.since, $1.account) }
        }
    }

    // MARK: - In the transaction

    private struct Stored {
        var enabled = true
        var mode = "ask"
        var until: Int64?
        var precise = "manual"
    }

    private static func stored(_ account: String, in database: Database) throws -> Stored {
        try database.queryOne("SELECT enabled, mode, until, precise FROM presence_settings WHERE account_id = ?", [.text(account)]) {
            Stored(enabled: $0.int(0) != 0, mode: $0.text(1), until: $0.optionalInt64(2), precise: $0.text(3))
        } ?? Stored()
    }

    private static func store(_ settings: Stored, of account: String, in database: Database) throws {
        try database.execute(
            """
            INSERT INTO presence_settings (account_id, enabled, mode, until, precise) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT (account_id) DO UPDATE SET enabled = excluded.enabled, mode = excluded.mode, until = excluded.until,
                precise = excluded.precise
            """, [.text(account), .integer(settings.enabled ? 1 : 0), .text(settings.mode), settings.until.map(SQLValue.integer) ?? .null,
                  .text(settings.precise)])
    }

    private static func settings(of account: String, in database: Database, now: Int64) throws -> PresenceSettingsState {
        let stored = try stored(account, in: database)
        let groups = try database.query(
            "SELECT g.name FROM presence_shares s JOIN presence_groups g ON g.id = s.group_id WHERE s.account_id = ? ORDER BY g.name",
            [.text(account)]) { $0.text(0) }
        let live = stored.until.map { $0 > now } ?? true
        return PresenceSettingsState(enabled: stored.enabled, mode: stored.mode, groups: live ? groups : [],
                                     until: live ? stored.until.map { Timestamp.rfc3339(epochSeconds: $0) } : nil, precise: stored.precise)
    }

    /// The ids of the groups `account` shares with now, as SQL taking `account` twice:
    /// in `auto` mode its settings' groups, in `ask` mode the group chosen for its stay; none
    /// once presence is off or a timed share ended (the caller checks `until`).
    private static let sharedGroups = """
        SELECT s.group_id FROM presence_shares s JOIN presence_settings t ON t.account_id = s.account_id
        WHERE s.account_id = ? AND t.mode = 'auto' AND t.enabled = 1
        UNION SELECT p.group_id FROM presence_places p LEFT JOIN presence_settings t ON t.account_id = p.account_id
        WHERE p.account_id = ? AND p.group_id IS NOT NULL AND COALESCE(t.mode, 'ask') = 'ask' AND COALESCE(t.enabled, 1) = 1
        """

    /// Who may see `account` now: the members of the groups it shares with, but not those who
    /// blocked it; nobody once its timed share ended.
    private static func audience(of account: String, in database: Database, now: Int64) throws -> [String] {
        let stored = try stored(account, in: database)
        guard stored.enabled, stored.until.map({ $0 > now }) ?? true else { return [] }
        return try database.query(
            """
            SELECT DISTINCT m.member_id FROM presence_members m JOIN accounts a ON a.id = m.member_id
            WHERE m.group_id IN (\(sharedGroups)) AND a.deactivated_at IS NULL
              AND NOT EXISTS (SELECT 1 FROM presence_blocks b WHERE b.account_id = m.member_id AND b.blocked_id = ?)
            ORDER BY m.member_id
            """, [.text(account), .text(account), .text(account)]) { $0.text(0) }
    }

    /// A `presence` event in each member's log: `account` entered, left or pinned in `hotspot`.
    private static func ping(_ audience: [String], about account: String, state: String, hotspot: Hotspot, pinned: PresencePlace.Point?,
                             now: Int64, in database: Database) throws {
        guard !audience.isEmpty else { return }
        var body: [String: JSONValue] = [
            "account": .string(account), "email": try email(of: account, in: database).map(JSONValue.string) ?? .null, "state": .string(state),
            "hotspot": ["id": .string(hotspot.id), "name": .string(hotspot.name)], "at": .string(Timestamp.rfc3339(epochSeconds: now)),
        ]
        if let pinned { body["pinned"] = ["lat": .double(pinned.latitude), "lon": .double(pinned.longitude)] }
        for member in audience { try AuditScope.noticed(AccountNotice(account: member, kind: "presence", body: body), in: database) }
    }

    /// The person's own machines hear of a change of their settings (a `presence.settings` event
    /// in their own log): a machine stops or starts reading where it is by it.
    private static func changed(_ settings: PresenceSettingsState, of account: String, in database: Database) throws {
        try AuditScope.noticed(AccountNotice(account: account, kind: "presence.settings", body: [
            "enabled": .bool(settings.enabled), "mode": .string(settings.mode), "groups": .array(settings.groups.map(JSONValue.string)),
            "until": settings.until.map(JSONValue.string) ?? .null, "precise": .string(settings.precise),
        ]), in: database)
    }

    private static func place(of account: String, in database: Database, stale: Int64) throws -> PresencePlace? {
        try database.queryOne(
            """
            SELECT p.hotspot_id, h.name, p.since, p.pin_latitude, p.pin_longitude FROM presence_places p
            JOIN presence_hotspots h ON h.id = p.hotspot_id WHERE p.account_id = ? AND p.reported_at > ?
            """, [.text(account), .integer(stale)]) {
            let pinned: PresencePlace.Point? = $0.isNull(3) ? nil : PresencePlace.Point(latitude: $0.double(3), longitude: $0.double(4))
            return PresencePlace(hotspot: .init(id: $0.text(0), name: $0.text(1)), since: Timestamp.rfc3339(epochSeconds: $0.int64(2)), pinned: pinned)
        }
    }

    private static func hotspots(of account: String?, in database: Database) throws -> [Hotspot] {
        try database.query(
            """
            SELECT id, name, latitude, longitude, radius, bssids, account_id IS NULL, beacons FROM presence_hotspots
            WHERE account_id IS NULL OR account_id = ? ORDER BY account_id IS NOT NULL, name
            """, [account.map(SQLValue.text) ?? .null]) { row in
            let circle = row.isNull(2) ? nil : Hotspot.Circle(latitude: row.double(2), longitude: row.double(3), radius: row.double(4))
            let bssids = row.optionalText(5).flatMap { try? WireCodec.decode([String].self, from: Data($0.utf8)) }
            let beacons = row.optionalText(7).flatMap { try? WireCodec.decode([Hotspot.Beacon].self, from: Data($0.utf8)) }
            return Hotspot(id: row.text(0), name: row.text(1), circle: circle, bssids: bssids, beacons: beacons, shared: row.int(6) != 0)
        }
    }

    private static func email(of account: String, in database: Database) throws -> String? {
        try database.queryOne("SELECT email FROM accounts WHERE id = ?", [.text(account)]) { $0.optionalText(0) } ?? nil
    }

    private static func friend(_ friend: String, of account: String, in database: Database) throws -> Friend {
        let groups = try database.query(
            "SELECT g.name FROM presence_groups g JOIN presence_members m ON m.group_id = g.id WHERE g.account_id = ? AND m.member_id = ? ORDER BY g.name",
            [.text(account), .text(friend)]) { $0.text(0) }
        return Friend(account: friend, email: try email(of: friend, in: database), groups: groups)
    }

    /// The friend of `account`'s with that email address, if any.
    private static func friendID(byEmail email: String, of account: String, in database: Database) throws -> String? {
        try database.queryOne("SELECT f.friend_id FROM presence_friends f JOIN accounts a ON a.id = f.friend_id WHERE f.account_id = ? AND a.email = ?",
                              [.text(account), .text(email)]) { $0.text(0) }
    }

    private static func groupID(named name: String, of account: String, in database: Database) throws -> String? {
        try database.queryOne("SELECT id FROM presence_groups WHERE account_id = ? AND name = ?", [.text(account), .text(name)]) { $0.text(0) }
    }

    private static func group(named name: String, of account: String, in database: Database) throws -> PresenceGroup {
        let members = try database.query(
            """
            SELECT m.member_id, a.email FROM presence_members m JOIN presence_groups g ON g.id = m.group_id JOIN accounts a ON a.id = m.member_id
            WHERE g.account_id = ? AND g.name = ? ORDER BY a.email, m.member_id
            """, [.text(account), .text(name)]) { PresencePerson(account: $0.text(0), email: $0.optionalText(1)) }
        return PresenceGroup(name: name, members: members)
    }

    /// The person's default group "friends", made the first time it is needed.
    private static func defaultGroupID(of account: String, in database: Database, now: Int64) throws -> String {
        if let id = try groupID(named: defaultGroup, of: account, in: database) { return id }
        let id = try newID("grp_")
        try database.execute("INSERT INTO presence_groups (id, account_id, name, created_at) VALUES (?, ?, ?, ?)",
                             [.text(id), .text(account), .text(defaultGroup), .integer(now)])
        return id
    }

    private static func newID(_ prefix: String) throws -> String { prefix + Base64URL.encode(try OpenSSL.randomBytes(12)) }
}
