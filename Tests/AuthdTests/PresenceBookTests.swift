import Foundation
import Protocol
import Testing
@testable import authd

/// Who sees whom, where the account lives: friends, groups, blocks, the sharing modes, timed
/// shares, expiry and turning presence off, on a private store with a clock moved by hand.
@Suite("Presence: friends, groups and who sees whom")
struct PresenceBookTests {
    struct World {
        let fixture: TestDirectory
        let service: PresenceService
        let book: PresenceBook
        /// Session tokens and account ids of alice, bob, carol and dave.
        let sessions: [String: String]
        let accounts: [String: String]
        let office: Hotspot, park: Hotspot

        init(_ config: Config = Config()) async throws {
            fixture = try TestDirectory(config)
            book = PresenceBook(store: fixture.store, config: fixture.config, now: fixture.clock.closure)
            service = PresenceService(book: book, directory: fixture.directory, limiter: RateLimiter(config: fixture.config, now: fixture.clock.closure))
            var sessions: [String: String] = [:], accounts: [String: String] = [:]
            for (index, name) in ["alice", "bob", "carol", "dave"].enumerated() {
                let signedIn = try await fixture.register("+3725123456\(index)", device: name, email: "\(name)@example.org")
                sessions[name] = signedIn.session.token
                accounts[name] = signedIn.account.id
            }
            (self.sessions, self.accounts) = (sessions, accounts)
            office = try await book.addHotspot(nil, HotspotDefinition(name: "Office", circle: .init(latitude: 59.437, longitude: 24.7536, radius: 150), bssids: nil))
            park = try await book.addHotspot(nil, HotspotDefinition(name: "Park", circle: .init(latitude: 59.44, longitude: 24.76, radius: 300), bssids: nil))
        }

        func session(_ name: String) -> SessionParams { SessionParams(session: sessions[name]!) }

        /// Whom `name`'s nearby shows, by name.
        func sees(_ name: String) async throws -> [String] {
            try await service.nearby(session(name)).friends.map { person in accounts.first { $0.value == person.account }!.key }
        }

        func add(_ name: String, _ friend: String) async throws {
            _ = try await service.addFriend(PersonParams(session: sessions[name]!, email: "\(friend)@example.org"))
        }

        func share(_ name: String, mode: String = "auto", with groups: [String], for seconds: Int? = nil) async throws {
            _ = try await service.settings(PresenceSettings.Params(session: sessions[name]!, mode: mode, groups: groups, forSeconds: seconds))
        }

        @discardableResult
        func report(_ name: String, _ hotspot: Hotspot, entered: Bool = true, group: String? = nil) async throws -> Int {
            try await book.report(accounts[name]!, hotspot: hotspot.id, entered: entered, group: group)
        }

        func audience(_ name: String) async throws -> [String] {
            try await service.audience(session(name)).audience.map { person in accounts.first { $0.value == person.account }!.key }
        }
    }

    @Test("the access matrix: adding grants nothing; sharing with a group shows you to its members only; removing, regrouping and blocking take effect at the next query")
    func accessMatrix() async throws {
        let world = try await World()
        try await world.add("alice", "bob")
        try await world.report("alice", world.office)
        #expect(try await world.sees("bob") == [], "adding a friend grants nothing by itself (ask mode, nothing chosen)")

        try await world.share("alice", with: ["friends"])
        #expect(try await world.report("alice", world.park) == 1, "entering tells the one member")
        #expect(try await world.sees("bob") == ["alice"])
        #expect(try await world.sees("carol") == [], "not in any group of alice's")
        #expect(try await world.sees("dave") == [], "not in any group of alice's")
        #expect(try await world.audience("alice") == ["bob"])

        // A family group with carol only, shared instead of friends.
        try await world.add("alice", "carol")
        _ = try await world.service.createGroup(GroupParams(session: world.sessions["alice"]!, name: "family"))
        _ = try await world.service.setMember(GroupParams(session: world.sessions["alice"]!, name: "family", email: "carol@example.org"), member: true)
        try await world.share("alice", with: ["family"])
        #expect(try await world.sees("bob") == [])
        #expect(try await world.sees("carol") == ["alice"])
        #expect(try await world.audience("alice") == ["carol"])

        // Carol blocks alice: she no longer sees her, and is out of her audience.
        _ = try await world.service.block(FriendsBlock.Params(session: world.sessions["carol"]!, email: "alice@example.org", blocked: true))
        #expect(try await world.sees("carol") == [])
        #expect(try await world.audience("alice") == [])
        _ = try await world.service.block(FriendsBlock.Params(session: world.sessions["carol"]!, email: "alice@example.org", blocked: false))
        #expect(try await world.sees("carol") == ["alice"])

        // Removing carol as a friend takes her out of every group at once.
        _ = try await world.service.removeFriend(PersonParams(session: world.sessions["alice"]!, email: "carol@example.org"))
        #expect(try await world.sees("carol") == [])
        let family = try await world.service.groups(world.session("alice")).groups.first { $0.name == "family" }
        #expect(family?.members == [], "\(String(describing: family))")

        // Deleting the shared group: nobody.
        try await world.add("alice", "carol")
        _ = try await world.service.setMember(GroupParams(session: world.sessions["alice"]!, name: "family", email: "carol@example.org"), member: true)
        #expect(try await world.sees("carol") == ["alice"])
        _ = try await world.service.deleteGroup(GroupParams(session: world.sessions["alice"]!, name: "family"))
        #expect(try await world.sees("carol") == [])
        #expect(try await world.audience("alice") == [])
        await #expect(throws: PresenceFailure.groupDefault) { try await world.service.deleteGroup(GroupParams(session: world.sessions["alice"]!, name: "friends")) }
    }

    @Test("ask mode: entering with no group chosen keeps nothing; with one, only that group sees; leaving is seen by the same audience")
    func askMode() async throws {
        let world = try await World()
        try await world.add("alice", "bob")
        try await world.add("alice", "carol")
        _ = try await world.service.createGroup(GroupParams(session: world.sessions["alice"]!, name: "close"))
        _ = try await world.service.setMember(GroupParams(session: world.sessions["alice"]!, name: "close", email: "carol@example.org"), member: true)
        try await world.share("alice", mode: "ask", with: ["friends"])
        #expect(try await world.report("alice", world.office) == 0, "declined: nobody told")
        #expect(try await world.service.status(world.session("alice")).place == nil, "and nothing kept")
        #expect(try await world.report("alice", world.office, group: "close") == 1)
        #expect(try await world.sees("carol") == ["alice"], "only the chosen group, not the settings' groups")
        #expect(try await world.sees("bob") == [], "only the chosen group, not the settings' groups")
        #expect(try await world.report("alice", world.office, entered: false) == 1, "carol is told of the leaving")
        #expect(try await world.sees("carol") == [])
    }

    @Test("nearby puts those in my own hotspot first; a report of the same place only refreshes it; presence expires when machines stop reporting")
    func nearbyAndExpiry() async throws {
        var config = Config()
        config.presenceExpirySeconds = 300
        let world = try await World(config)
        for friend in ["alice", "carol"] {
            try await world.add(friend, "bob")
            try await world.share(friend, with: ["friends"])
        }
        try await world.report("alice", world.office)
        world.fixture.clock.advance(10)
        try await world.report("carol", world.park)
        try await world.share("bob", with: [])
        try await world.report("bob", world.park)
        let nearby = try await world.service.nearby(world.session("bob")).friends
        #expect(nearby.map(\.here) == [true, false] && nearby.first?.place.hotspot.name == "Park", "\(nearby)")
        #expect(try await world.report("alice", world.office) == 0, "the same place again tells nobody")

        world.fixture.clock.advance(295)
        try await world.report("alice", world.office)  // refreshed: alice's machine still reports
        world.fixture.clock.advance(10)
        #expect(try await world.sees("bob") == ["alice"], "carol's machine stopped reporting five minutes ago; alice's did not")
    }

    @Test("a timed share ends at the hub: nobody sees the person afterwards, whatever the clients do")
    func timedShare() async throws {
        let world = try await World()
        try await world.add("alice", "bob")
        try await world.share("alice", with: ["friends"], for: 120)
        try await world.report("alice", world.office)
        #expect(try await world.sees("bob") == ["alice"])
        #expect(try await world.service.status(world.session("alice")).settings.until != nil)
        world.fixture.clock.advance(121)
        #expect(try await world.sees("bob") == [])
        #expect(try await world.audience("alice") == [])
        #expect(try await world.service.status(world.session("alice")).settings.groups == [], "the share is over")
    }

    @Test("presence.off deletes the place in the store and refuses reports until presence.on, which starts from nothing; a deactivation does the same")
    func turnOff() async throws {
        let world = try await World()
        try await world.add("alice", "bob")
        try await world.share("alice", with: ["friends"])
        try await world.report("alice", world.office)
        _ = try await world.service.setEnabled(world.session("alice"), false)
        let alice = world.accounts["alice"]!
        let kept = try await world.fixture.store.read { try $0.queryOne("SELECT count(*) FROM presence_places WHERE account_id = ?", [.text(alice)]) { $0.int(0) } }
        #expect(kept == 0, "deleted at the hub")
        #expect(try await world.sees("bob") == [])
        await #expect(throws: PresenceFailure.off) { try await world.report("alice", world.office) }
        _ = try await world.service.setEnabled(world.session("alice"), true)
        #expect(try await world.service.status(world.session("alice")).place == nil, "on again, from nothing")
        try await world.report("alice", world.office)
        #expect(try await world.sees("bob") == ["alice"])
        try await world.fixture.directory.deactivate(account: world.accounts["alice"]!)
        let afterDeactivation = try await world.fixture.store.read { try $0.queryOne("SELECT count(*) FROM presence_places") { $0.int(0) } }
        #expect(afterDeactivation == 0)
        #expect(try await world.sees("bob") == [])
    }

    @Test("friend lookups: unknown address, your own, a malformed one, and past [presence] lookups_per_hour rate.limited")
    func lookups() async throws {
        var config = Config()
        config.presenceLookupsPerHour = 3
        let world = try await World(config)
        await #expect(throws: PresenceFailure.nobodyThere) { try await world.add("alice", "nobody") }
        await #expect(throws: PresenceFailure.friendSelf) { try await world.add("alice", "alice") }
        await #expect(throws: AccountFailure.emailInvalid) {
            try await world.service.addFriend(PersonParams(session: world.sessions["alice"]!, email: "not an address"))
        }
        try await world.add("alice", "bob")
        let refused = try await Self.onTheWireResult { try await world.add("alice", "carol") }
        #expect(refused?.reason == .rateLimited, "the fourth lookup in an hour: \(String(describing: refused))")
        #expect(try await world.service.friends(world.session("alice")).friends.map(\.email) == ["bob@example.org"])
        #expect(try await world.service.friends(world.session("bob")).addedMe.map(\.email) == ["alice@example.org"])
    }

    /// The wire error `body` throws, if any.
    static func onTheWireResult(_ body: () async throws -> Void) async throws -> RPCError? {
        do { try await body() } catch { return wireError(error) }
        return nil
    }
}
