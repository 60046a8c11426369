import FoundationEssentials
import Protocol

/// The friends, groups, hotspots and presence account methods where the account lives: checks
/// what the caller sends, finds the session's account, and asks the book (`PresenceBook`).
struct PresenceService: Sendable {
    let book: PresenceBook
    let directory: any MachineAccounts
    /// `friends.add` lookups per account (`[presence] lookups_per_hour`).
    let limiter: RateLimiter

    /// The longest timed share: 30 days.
    static let longestShare = 30 * 86400

    /// The machine whose session tokens this copy takes (nil: a process on this authd's socket);
    /// see `on(behalfOf:)`.
    private(set) var machine: DeviceID?

    /// This service for one call: the caller's tokens are used as that caller presents them
    /// (bound to its machine, `SessionBinding`).
    func on(behalfOf caller: Caller) -> PresenceService {
        var copy = self
        copy.machine = caller.machine
        return copy
    }

    private func account(_ session: String) async throws -> String {
        try await directory.authenticate(PresentedSession(session, machine: machine)).accountID
    }

    func addFriend(_ params: PersonParams) async throws -> FriendsAdd.Result {
        let email = try Registration.normalizeEmail(params.email)
        let account = try await account(params.session)
        // Counted before the lookup, found or not: the answer is what a harvester wants.
        try limiter.take(.friendLookup, account: account)
        guard let friend = try await book.account(byEmail: email) else { throw PresenceFailure.nobodyThere }
        guard friend.account != account else { throw PresenceFailure.friendSelf }
        let (added, isNew) = try await book.addFriend(account, friend)
        return FriendsAdd.Result(friend: added, added: isNew)
    }

    func friends(_ params: SessionParams) async throws -> FriendsList.Result {
        let (friends, followers) = try await book.friends(of: account(params.session))
        return FriendsList.Result(friends: friends, addedMe: followers.map { FriendsList.Follower(account: $0.account, email: $0.email, blocked: $0.blocked) })
    }

    func removeFriend(_ params: PersonParams) async throws -> FriendsRemove.Result {
        let email = try Registration.normalizeEmail(params.email)
        return FriendsRemove.Result(removed: try await book.removeFriend(account(params.session), email: email))
    }

    func block(_ params: FriendsBlock.Params) async throws -> FriendsBlock.Result {
        let email = try Registration.normalizeEmail(params.email)
        let blocked = params.blocked ?? true
        return FriendsBlock.Result(account: try await book.block(account(params.session), email: email, blocked: blocked), blocked: blocked)
    }

    func groups(_ params: SessionParams) async throws -> GroupsList.Result {
        GroupsList.Result(groups: try await book.groups(of: account(params.session)))
    }

    func createGroup(_ params: GroupParams) async throws -> GroupResult {
        try Self.checkName(params.name, field: "name")
        return GroupResult(group: try await book.createGroup(account(params.session), name: params.name))
    }

    func renameGroup(_ params: GroupParams) async throws -> GroupResult {
        guard let to = params.to else { throw InvalidParameter("Parameter 'to' (the new name) is required.", field: "to") }
        try Self.checkName(to, field: "to")
        return GroupResult(group: try await book.renameGroup(account(params.session), name: params.name, to: to))
    }

    func deleteGroup(_ params: GroupParams) async throws -> GroupsDelete.Result {
        try await book.deleteGroup(account(params.session), name: params.name)
        return GroupsDelete.Result(deleted: true)
    }

    func setMember(_ params: GroupParams, member: Bool) async throws -> GroupResult {
        guard let email = params.email else { throw InvalidParameter("Parameter 'email' (the friend's address) is required.", field: "email") }
        let normalized = try Registration.normalizeEmail(email)
        return GroupResult(group: try await book.setMember(account(params.session), group: params.name, email: normalized, member: member))
    }

    func settings(_ params: PresenceSettings.Params) async throws -> PresenceSettingsState {
        if let mode = params.mode, !PresenceBook.modes.contains(mode) {
            throw InvalidParameter("Parameter 'mode' must be 'ask' or 'auto'.", field: "mode")
        }
        if let precise = params.precise, !PresenceBook.preciseWays.contains(precise) {
            throw InvalidParameter("Parameter 'precise' must be 'manual' or 'beacon'.", field: "precise")
        }
        for name in params.groups ?? [] { try Self.checkName(name, field: "groups") }
        var until: Int64?
        if let seconds = params.forSeconds {
            guard params.groups != nil else { throw InvalidParameter("Parameter 'for' goes with 'groups' (whom to share with for that long).", field: "for") }
            guard seconds == 0 || (60...Self.longestShare).contains(seconds) else {
                throw InvalidParameter("Parameter 'for' must be 0 (until changed) or 60–\(Self.longestShare) seconds.", field: "for")
            }
            if seconds > 0 { until = Int64(book.now().timeIntervalSince1970) + Int64(seconds) }
        }
        let account = try await account(params.session)
        guard params.mode != nil || params.groups != nil || params.precise != nil else { return try await book.settings(of: account) }
        return try await book.setSettings(account, mode: params.mode, groups: params.groups, until: until, precise: params.precise)
    }

    func setEnabled(_ params: SessionParams, _ enabled: Bool) async throws -> PresenceSettingsState {
        try await book.setEnabled(account(params.session), enabled)
    }

    func status(_ params: SessionParams) async throws -> PresenceStatus.Result {
        let (settings, place) = try await book.status(of: account(params.session))
        return PresenceStatus.Result(settings: settings, place: place)
    }

    func nearby(_ params: SessionParams) async throws -> PresenceNearby.Result {
        PresenceNearby.Result(friends: try await book.nearby(account(params.session)).map {
            PresenceNearby.Nearby(account: $0.account, email: $0.email, place: $0.place, here: $0.here)
        })
    }

    func audience(_ params: SessionParams) async throws -> PresenceAudience.Result {
        let (audience, until) = try await book.audience(of: account(params.session))
        return PresenceAudience.Result(audience: audience, until: until)
    }

    func hotspots(_ params: SessionParams) async throws -> HotspotsList.Result {
        HotspotsList.Result(hotspots: try await book.hotspots(of: account(params.session)))
    }

    /// A hotspot of the session's account (nil session: an admin's shared one).
    func addHotspot(session: String?, _ definition: HotspotDefinition) async throws -> HotspotsAdd.Result {
        let valid = try HotspotRules.validated(name: definition.name, circle: definition.circle, bssids: definition.bssids, beacons: definition.beacons)
        let owner: String? = if let session { try await account(session) } else { nil }
        return HotspotsAdd.Result(hotspot: try await book.addHotspot(owner, HotspotDefinition(name: valid.name, circle: valid.circle, bssids: valid.bssids,
                                                                                              beacons: valid.beacons)))
    }

    func removeHotspot(session: String?, id: String) async throws -> HotspotsRemove.Result {
        let owner: String? = if let session { try await account(session) } else { nil }
        try await book.removeHotspot(owner, id: id)
        return HotspotsRemove.Result(removed: true)
    }

    /// Pins a point, only inside the circle of the hotspot the person is in now.
    func pin(_ params: PresencePin.Params) async throws -> PresencePlace {
        guard HotspotRules.latitudes.contains(params.latitude) else {  // a range holds no NaN or infinity
            throw InvalidParameter("Parameter 'lat' must be a latitude (−90 to 90).", field: "lat")
        }
        guard HotspotRules.longitudes.contains(params.longitude) else {
            throw InvalidParameter("Parameter 'lon' must be a longitude (−180 to 180).", field: "lon")
        }
        let point = PresencePlace.Point(latitude: params.latitude, longitude: params.longitude)
        return try await book.pin(account(params.session), point)
    }

    /// Group names: 1–64 printable characters.
    static func checkName(_ value: String, field: String) throws(InvalidParameter) {
        guard !value.isEmpty, value.unicodeScalars.count <= 64, value.first?.isWhitespace == false, value.last?.isWhitespace == false,
              !value.containsControlCharacter
        else { throw InvalidParameter("Parameter '\(field)' must be 1–64 printable characters, without spaces at either end.", field: field) }
    }
}
