@testable import authd
import OpenSSLCrypto
import Protocol
import Testing

@Suite("Sign-in second steps (SignInFlow)")
struct SignInFlowTests {
    private static let device = DeviceIdentity(key: "k", name: "n")

    private static func flow(_ step: SignInFlow.Step) -> SignInFlow {
        .open(id: "login_1", account: "acc", device: device, step: step, now: 1000)
    }

    @Test("the step after a right password", arguments: [
        (true, true, SignInFlow.Step.fingerprint), (true, false, .fingerprint), (false, true, .pin), (false, false, nil),
    ] as [(Bool, Bool, SignInFlow.Step?)])
    func stepAfterPassword(fingerprintHere: Bool, hasPIN: Bool, step: SignInFlow.Step?) {
        #expect(SignInFlow.stepAfterPassword(fingerprintHere: fingerprintHere, hasPIN: hasPIN) == step)
    }

    @Test("events in, decisions out", arguments: [
        (SignInFlow.Step.pin, SignInFlow.Event.pin(correct: true), 1100, SignInFlow.Decision.signIn(amr: ["pwd", "pin"]), SignInFlow.Step.pin),
        (.pin, .pin(correct: false), 1100, .retry, .pin),
        (.pin, .fingerprint(matched: true, accountHasPIN: true), 1100, .refuse, .pin),
        (.fingerprint, .fingerprint(matched: true, accountHasPIN: false), 1100, .signIn(amr: ["pwd", "fpt"]), .fingerprint),
        (.fingerprint, .fingerprint(matched: false, accountHasPIN: true), 1100, .continueWithPIN, .pin),
        (.fingerprint, .fingerprint(matched: false, accountHasPIN: false), 1100, .end, .fingerprint),
        (.fingerprint, .pin(correct: true), 1100, .refuse, .fingerprint),
        // Expired: whatever happens is refused and changes nothing.
        (.pin, .pin(correct: true), 1300, .refuse, .pin),
        (.fingerprint, .fingerprint(matched: false, accountHasPIN: true), 1300, .refuse, .fingerprint),
    ] as [(SignInFlow.Step, SignInFlow.Event, Int64, SignInFlow.Decision, SignInFlow.Step)])
    func transitions(step: SignInFlow.Step, event: SignInFlow.Event, now: Int64, decision: SignInFlow.Decision, after: SignInFlow.Step) {
        var flow = Self.flow(step)
        #expect(flow.handle(event, now: now) == decision)
        #expect(flow.step == after)
    }

    @Test("a flow lives for five minutes")
    func lifetime() {
        #expect(Self.flow(.pin).expiresAt == 1000 + 300)
        var flow = Self.flow(.pin)
        #expect(flow.handle(.pin(correct: true), now: 1299) == .signIn(amr: ["pwd", "pin"]))
        var late = Self.flow(.pin)
        #expect(late.handle(.pin(correct: true), now: 1300) == .refuse)
    }
}

/// Password sign-in and its second step against the directory on a real store.
@Suite("Password sign-in in the directory")
struct PasswordSignInTests {
    private static let password = SecretBytes(Array("correct horse battery".utf8))

    /// An account with `password` and, when asked, a PIN; returns its id and a session token.
    private static func account(_ fixture: TestDirectory, pin: Bool) async throws -> (String, String) {
        let signedIn = try await fixture.register()
        _ = try await fixture.directory.updateProfile(.local(signedIn.session.token), email: nil, passwordHash: try await Argon2id.owasp.hashOffPool(password))
        if pin { try await fixture.directory.setPIN(.local(signedIn.session.token), hash: try await Argon2id.owasp.hashOffPool(SecretBytes(Array("480913".utf8)))) }
        return (signedIn.account.id, signedIn.session.token)
    }

    @Test("a right password the device limit refuses changes nothing: the run of wrong ones still locks the account")
    func deviceLimitKeepsTheLockoutCount() async throws {
        var config = Config()
        config.deviceLimit = 1
        let fixture = try TestDirectory(config)
        let (account, _) = try await Self.account(fixture, pin: false)
        let wrong = SecretBytes(Array("not the password".utf8))
        for _ in 0..<3 {
            await #expect(throws: RPCError.failure(.authFailed, "")) {
                try await onTheWire { try await fixture.directory.signIn(password: wrong, login: .id(account), device: .init(key: "laptop", name: "l"), fingerprintAccounts: []) }
            }
        }
        await #expect(throws: RPCError.failure(.deviceLimitReached, "")) {
            try await onTheWire { try await fixture.directory.signIn(password: Self.password, login: .id(account), device: .init(key: "tablet", name: "t"), fingerprintAccounts: []) }
        }
        await #expect(throws: RPCError.failure(.authFailed, "")) {
            try await onTheWire { try await fixture.directory.signIn(password: wrong, login: .id(account), device: .init(key: "laptop", name: "l"), fingerprintAccounts: []) }
        }
        await #expect(throws: RPCError.failure(.accountLocked, ""), "the fifth wrong password in a row locks") {
            try await onTheWire { try await fixture.directory.signIn(password: wrong, login: .id(account), device: .init(key: "laptop", name: "l"), fingerprintAccounts: []) }
        }
    }

    @Test("the fingerprint step is decided as of when it was found waiting: a scan that outlasts the flow still signs in")
    func scanOutlastsTheFlow() async throws {
        let fixture = try TestDirectory()
        let (account, _) = try await Self.account(fixture, pin: true)
        guard case .secondStep(let flow, .fingerprint) = try await fixture.directory.signIn(
            password: Self.password, login: .id(account), device: .init(key: "laptop", name: "l"), fingerprintAccounts: [account]) else {
            Issue.record("no fingerprint step"); return
        }
        let owner = FlowOwner(machine: nil, user: nil)
        #expect(try await fixture.directory.pendingSignIn(flow, owner: FlowOwner(machine: nil, user: 1000)) == nil, "another local user's look")
        let pending = try #require(try await fixture.directory.pendingSignIn(flow, owner: owner))
        fixture.clock.advance(Double(SignInFlow.lifetime) + 10)
        #expect(try await fixture.directory.pendingSignIn(flow, owner: owner) == nil, "expired for a new look")
        guard case .signedIn(let signedIn) = try await fixture.directory.completeSignIn(pending, fingerMatched: true) else {
            Issue.record("the match did not sign in"); return
        }
        #expect(signedIn.account.id == account)
        await #expect(throws: RPCError.failure(.authFailed, ""), "the flow is used up") {
            try await onTheWire { try await fixture.directory.completeSignIn(pending, fingerMatched: true) }
        }
    }

    static let machineA = DeviceID(description: "AAAA-1111")
    static let machineB = DeviceID(description: "BBBB-2222")

    @Test("a flow belongs to the machine and local user that opened it", arguments: [
        (DeviceIdentity(key: "device:AAAA-1111", name: "a", machineUser: 1000), FlowOwner(machine: machineA, user: 1000), true),
        (DeviceIdentity(key: "device:AAAA-1111", name: "a", machineUser: 1000), FlowOwner(machine: machineA, user: 1001), false),
        (DeviceIdentity(key: "device:AAAA-1111", name: "a", machineUser: 1000), FlowOwner(machine: machineB, user: 1000), false),
        (DeviceIdentity(key: "device:AAAA-1111", name: "a", machineUser: 1000), FlowOwner(machine: nil, user: 1000), false),
        (DeviceIdentity(key: "machine:xyz", name: "here", machineUser: 1000), FlowOwner(machine: nil, user: 1000), true),
        (DeviceIdentity(key: "app-chosen", name: "here", machineUser: 1000), FlowOwner(machine: nil, user: 1000), true),
        (DeviceIdentity(key: "app-chosen", name: "here", machineUser: 1000), FlowOwner(machine: machineA, user: 1000), false),
        (DeviceIdentity(key: "app-chosen", name: "here", machineUser: 1000), FlowOwner(machine: nil, user: 0), false),
    ])
    func flowOwner(device: DeviceIdentity, asker: FlowOwner, belongs: Bool) {
        let flow = SignInFlow.open(id: "f", account: "acc", device: device, step: .pin, now: 0)
        #expect(flow.belongs(to: asker) == belongs)
        #expect((FlowOwner(device: device).stored == asker.stored) == belongs, "the stored form compares as the value does")
    }

    @Test("a session is used only from its machine: a linked machine's through its link, the hub's on the hub's socket", arguments: [
        ("device:AAAA-1111", machineA as DeviceID?, true),
        ("device:AAAA-1111", machineB as DeviceID?, false),
        ("device:AAAA-1111", nil as DeviceID?, false),
        ("machine:xyz", nil as DeviceID?, true),
        ("app-chosen", nil as DeviceID?, true),
        ("machine:xyz", machineA as DeviceID?, false),
    ])
    func sessionBinding(key: String, machine: DeviceID?, permitted: Bool) {
        #expect(SessionBinding.permits(sessionDeviceKey: key, machine: machine) == permitted)
    }

    @Test("only the link names a linked machine: device: keys from any other caller are refused")
    func deviceKeysAreTheLinks() throws {
        let process = CallerIdentity(uid: 1000, gid: 1000, pid: 1, exe: nil, username: nil, groups: [])
        #expect(throws: InvalidParameter.self) {
            try DeviceIdentity.resolve(DeviceDescription(key: "device:AAAA-1111", name: nil), caller: .local(process))
        }
        let forwarded = try DeviceIdentity.resolve(DeviceDescription(key: "device:BBBB", name: nil),
                                                   caller: .forwarded(Self.machineA, ForwardedCaller(uid: 7, username: nil, exe: nil, machine: "m")))
        #expect(forwarded.key == "device:AAAA-1111", "through the link, the machine is the link's, whatever the request says")
        #expect(try DeviceIdentity.resolve(DeviceDescription(key: "phone-1", name: nil), caller: .local(process)).key == "phone-1")
    }
}

@Suite("Maintenance announces what it changes")
struct MaintenanceAnnouncementTests {
    @Test("the hourly finish of an interrupted provider logout announces the sessions it ends, as a call would")
    func interruptedLogoutIsAnnounced() async throws {
        let fixture = try TestDirectory()
        let account = try await fixture.register().account.id
        let federated = try await fixture.directory.createSession(account: account, device: DeviceIdentity(key: "device:AAAA-1111", name: "a", machineUser: 1000),
                                                                  amr: ["fed"], federation: "example")
        let kept = try await fixture.directory.createSession(account: account, device: DeviceIdentity(key: "laptop", name: "l"), amr: ["pwd"], federation: nil)
        fixture.clock.advance(1)
        // The vault noted the logout, and the daemon stopped before the directory ended its sessions.
        let loggedOutAt = fixture.now
        try await fixture.store.transaction { database in
            try database.execute("INSERT INTO pending_logouts (uid, provider, account_id, issuer, subject, logged_out_at) VALUES (1000, 'example', ?, 'https://idp', NULL, ?)",
                                 [.text(account), .integer(loggedOutAt)])
        }
        let sealer = try Sealer(masterKey: MasterKey(secret: try OpenSSL.randomSecret(32), source: .keyFile(path: fixture.folder.path + "/master.key")))
        let vault = TokenVault(store: fixture.store, sealer: sealer, directory: fixture.directory)
        let origin = SyncLog.Origin(deviceKey: "authd", sender: SyncSender(machine: "authd", deviceID: "hub", exe: nil))
        let (finished, announced) = try await Maintenance.finishInterruptedLogouts(vault: vault, now: fixture.clock.closure, home: "sqlite", noticeOrigin: origin)
        #expect(finished == 1)
        #expect(announced.endedSessions.map(\.id) == [federated.session.id], "the ended session is announced, for the hub to tell its machine")
        #expect(announced.endedSessions.first?.cause == .providerLogout)
        #expect(announced.endedSessions.first?.machineUser == 1000)
        #expect(announced.events.contains { $0.event.kind == "session.ended" && $0.account == account }, "the account's log hears of it: \(announced.events)")
        let logged = try await SyncLog(store: fixture.store, now: fixture.clock.closure).events(account: account, after: 0, limit: 10).page.events
        #expect(logged.map(\.kind).contains("session.ended"), "in the log already, committed with the end of the session")
        #expect(try await fixture.directory.authenticate(.local(kept.session.token)).id == kept.session.id, "the password session is untouched")
        let (again, nothing) = try await Maintenance.finishInterruptedLogouts(vault: vault, now: fixture.clock.closure, home: "sqlite", noticeOrigin: origin)
        #expect(again == 0 && nothing.isEmpty, "finished once")
    }
}

@Suite("A change and the events it notes in the account's log commit together")
struct NoticesCommitWithTheChangeTests {
    static let origin = SyncLog.Origin(deviceKey: "authd", sender: SyncSender(machine: "authd", deviceID: "hub", exe: nil))

    static func scope(_ fixture: TestDirectory) -> AuditScope {
        AuditScope(caller: .local(CallerIdentity(uid: 1000, gid: 1000, pid: 1, exe: "/x", username: nil, groups: [])), method: "devices.revoke",
                   auditHome: "sqlite", now: fixture.clock.closure, publish: { _ in }, noticeOrigin: origin)
    }

    private static func phone(_ fixture: TestDirectory, _ owner: SignedIn) async throws -> SignedIn {
        try await fixture.directory.createSession(account: owner.account.id, device: DeviceIdentity(key: "phone", name: "phone"), amr: ["pwd"], federation: nil)
    }

    @Test("a device removed: device.revoked and session.ended are in the log as the removal commits, before anything is announced")
    func inTheSameCommit() async throws {
        let fixture = try TestDirectory()
        let owner = try await fixture.register()
        let phone = try await Self.phone(fixture, owner)
        let scope = Self.scope(fixture)
        try await AuditScope.$current.withValue(scope) {
            try await fixture.directory.revokeDevice(.local(owner.session.token), id: phone.session.deviceID)
        }
        let logged = try await SyncLog(store: fixture.store, now: fixture.clock.closure).events(account: owner.account.id, after: 0, limit: 10).page.events
        #expect(Set(logged.map(\.kind)).isSuperset(of: ["device.revoked", "session.ended"]), "\(logged.map(\.kind))")
        #expect(scope.announcements.events.map(\.event) == logged.filter { ["device.revoked", "session.ended"].contains($0.kind) },
                "what is handed on is what committed")
        #expect(scope.announcements.notices.isEmpty, "nothing is left to append after the fact")
    }

    @Test("an event that cannot be appended fails the change: the device and its session stay")
    func allOrNothing() async throws {
        let fixture = try TestDirectory()
        let owner = try await fixture.register()
        let phone = try await Self.phone(fixture, owner)
        try await fixture.store.transaction { database in
            try database.execute("CREATE TRIGGER refuse BEFORE INSERT ON sync_events WHEN NEW.kind = 'session.ended' BEGIN SELECT RAISE(ABORT, 'refused'); END")
        }
        await #expect(throws: (any Error).self) {
            try await AuditScope.$current.withValue(Self.scope(fixture)) {
                try await fixture.directory.revokeDevice(.local(owner.session.token), id: phone.session.deviceID)
            }
        }
        #expect(try await fixture.directory.authenticate(.local(phone.session.token)).id == phone.session.id, "the phone's session lives on")
        let logged = try await SyncLog(store: fixture.store, now: fixture.clock.closure).events(account: owner.account.id, after: 0, limit: 10).page.events
        #expect(!logged.contains { $0.kind == "device.revoked" })
    }
}

@Suite("A remembered sign-in resumes only while its credentials hold")
struct ResumeSignInTests {
    @Test("resumeSignIn checks the remembered stamp itself: a wrong stamp, a changed password, a locked account or a removed device get no session; the right stamp does")
    func checksWhatItResumes() async throws {
        let fixture = try TestDirectory()
        let owner = try await fixture.register(device: "laptop")
        let directory = fixture.directory
        let stamp = try await fixture.setPassword("a long enough passphrase", of: owner)
        let (account, device) = (owner.account.id, owner.session.deviceID)
        func resume(_ stamp: [UInt8]) async throws -> SignedIn? { try await directory.resumeSignIn(account: account, deviceID: device, amr: ["fpt"], stamp: stamp) }

        let resumed = try #require(try await resume(stamp), "the stamp remembered with the sign-in")
        #expect(try await directory.authenticate(.local(resumed.session.token)).amr == ["fpt"])
        #expect(try await resume(Array(repeating: 0, count: stamp.count)) == nil, "a stamp the machine made up")
        #expect(try await resume([]) == nil)

        let until = fixture.now + 60
        try await fixture.store.transaction { try $0.execute("UPDATE accounts SET locked_until = ? WHERE id = ?", [.integer(until), .text(account)]) }
        #expect(try await resume(stamp) == nil, "while the account is locked")
        try await fixture.store.transaction { try $0.execute("UPDATE accounts SET locked_until = NULL WHERE id = ?", [.text(account)]) }

        let changed = try await fixture.setPassword("another long passphrase", of: resumed)
        #expect(try await resume(stamp) == nil, "after the password changed, the stamp remembered before")
        #expect(try await resume(changed) != nil)

        try await directory.revokeDevice(.local(resumed.session.token), id: device)
        #expect(try await resume(changed) == nil, "on a removed device")
    }
}

@Suite("A hub replica reads back the sessions another ended")
struct EndedElsewhereTests {
    @Test("what a replica reads back of the sessions another ended is what that change announced there, as things stand now; a live session, one bound to no machine, or an unknown id is left out")
    func readBackAsAnnounced() async throws {
        let fixture = try TestDirectory()
        let owner = try await fixture.register()
        let directory = fixture.directory
        var machine = DeviceIdentity(key: "device:AAAA-1111", name: "a", machineUser: 1000)
        let first = try await directory.createSession(account: owner.account.id, device: machine, amr: ["pwd"], federation: nil)
        machine.machineUser = 1001
        let second = try await directory.createSession(account: owner.account.id, device: machine, amr: ["pwd"], federation: nil)
        #expect(try await directory.endedSessions([(first.session.id, .sessionRevoke)]).isEmpty, "a live session is not told as ended, whatever an event says")

        let revocation = NoticesCommitWithTheChangeTests.scope(fixture)
        try await AuditScope.$current.withValue(revocation) { try await directory.revokeSession(.local(owner.session.token), id: first.session.id) }
        let revoked = revocation.announcements.endedSessions
        #expect(revoked.map(\.id) == [first.session.id] && revoked.first?.machineUser == 1000 && revoked.first?.machineUnlinked == false, "\(revoked)")
        #expect(try await directory.endedSessions([(first.session.id, .sessionRevoke), ("ses_unknown", .logout)]) == revoked)

        let removal = NoticesCommitWithTheChangeTests.scope(fixture)
        try await AuditScope.$current.withValue(removal) { try await directory.revokeDevice(.local(owner.session.token), id: second.session.deviceID) }
        let removed = removal.announcements.endedSessions
        #expect(removed.map(\.id) == [second.session.id] && removed.first?.machineUser == 1001 && removed.first?.machineUnlinked == true, "\(removed)")
        #expect(try await directory.endedSessions([(second.session.id, .deviceRevoke)]) == removed)
        #expect(try await directory.endedSessions([(first.session.id, .sessionRevoke)]).first?.machineUnlinked == true,
                "read as things stand now: the machine holds no session any more")

        _ = try await directory.endSession(.local(owner.session.token))
        #expect(try await directory.endedSessions([(owner.session.id, .logout)]).isEmpty, "a session bound to no machine linked to the hub")
    }
}

@Suite("The device limit")
struct DeviceLimitTests {
    @Test("replace_oldest ends the least recently used device of those that count, never one already idle: the limit holds")
    func replacesALiveDevice() async throws {
        var config = Config()
        config.deviceLimit = 2
        config.devicePolicy = .replaceOldest
        config.sessionIdleSeconds = 5
        let fixture = try TestDirectory(config)
        let owner = try await fixture.register(device: "a")
        fixture.clock.advance(6)  // a is idle: it no longer counts
        func signIn(_ key: String) async throws -> SignedIn {
            let signedIn = try await fixture.directory.createSession(account: owner.account.id, device: DeviceIdentity(key: key, name: key), amr: ["pwd"], federation: nil)
            fixture.clock.advance(1)
            return signedIn
        }
        let b = try await signIn("b")
        let c = try await signIn("c")
        let d = try await signIn("d")  // b and c count: b, used longest ago, goes
        await #expect(throws: (any Error).self, "b was replaced") { try await fixture.directory.authenticate(.local(b.session.token)) }
        for kept in [c, d] { #expect(try await fixture.directory.authenticate(.local(kept.session.token)).id == kept.session.id) }
    }
}

extension DeviceLimitTests {
    @Test("a removed device that signs in again is a new device with a new id: what was bound to the old id stays ended")
    func removedDeviceComesBackNew() async throws {
        var config = Config()
        config.deviceLimit = 10
        let fixture = try TestDirectory(config)
        let owner = try await fixture.register(device: "laptop")
        let stamp = try await fixture.setPassword("a long enough passphrase", of: owner)
        let phone = DeviceIdentity(key: "phone", name: "phone")
        let before = try await fixture.directory.createSession(account: owner.account.id, device: phone, amr: ["pwd"], federation: nil)
        try await fixture.directory.revokeDevice(.local(owner.session.token), id: before.session.deviceID)
        let again = try await fixture.directory.createSession(account: owner.account.id, device: phone, amr: ["pwd"], federation: nil)
        #expect(again.session.deviceID != before.session.deviceID)
        #expect(try await fixture.directory.resumeSignIn(account: owner.account.id, deviceID: before.session.deviceID, amr: ["pwd"], stamp: stamp) == nil,
                "a sign-in remembered on the old id does not come back")
        await #expect(throws: (any Error).self) { try await fixture.directory.authenticate(.local(before.session.token)) }
        #expect(try await fixture.directory.authenticate(.local(again.session.token)).id == again.session.id)
        // The key is the new device's: signing in once more finds it, with no third id.
        let third = try await fixture.directory.createSession(account: owner.account.id, device: phone, amr: ["pwd"], federation: nil)
        #expect(third.session.deviceID == again.session.deviceID)

        // A machine linked to a hub: a session of its removed device, presented by that machine,
        // is still its own, and says the device was removed.
        let machine = DeviceID(description: "M")
        let linked = DeviceIdentity(key: DeviceIdentity.key(ofMachine: machine), name: "m")
        let first = try await fixture.directory.createSession(account: owner.account.id, device: linked, amr: ["pwd"], federation: nil)
        let other = try await fixture.directory.createSession(account: owner.account.id, device: linked, amr: ["pwd"], federation: nil)
        try await fixture.directory.revokeDevice(.local(owner.session.token), id: first.session.deviceID)
        _ = try await fixture.directory.createSession(account: owner.account.id, device: linked, amr: ["pwd"], federation: nil)
        await #expect(throws: SessionFailure.deviceRevoked) { try await fixture.directory.authenticate(PresentedSession(other.session.token, machine: machine)) }
    }
}
