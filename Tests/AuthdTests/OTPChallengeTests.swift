import Foundation
import Glibc
import OpenSSLCrypto
import Protocol
import Testing
@testable import authd

@Suite("OTP challenge state machine")
struct OTPChallengeTests {
    let policy = OTPChallenge.Policy(codeLifetime: 600, resendDelay: 60, maxResends: 2, maxAttempts: 5, maxSendsPerHour: 5)

    func fresh() -> OTPChallenge {
        .start(id: "f", purpose: .registration, phone: "+37251234567", codeMAC: [1], now: 1000, policy: policy)
    }

    @Test("right code completes once; afterwards it is used")
    func accept() {
        var challenge = fresh()
        #expect(challenge.verify(codeMatches: true, now: 1001) == .accepted)
        #expect(challenge.state == .completed)
        #expect(challenge.verify(codeMatches: true, now: 1002) == .alreadyUsed)
    }

    @Test("five wrong codes kill the flow; the right code then does not help")
    func attempts() {
        var challenge = fresh()
        let outcomes = (0..<5).map { _ in challenge.verify(codeMatches: false, now: 1001) }
        #expect(outcomes == [.wrong(attemptsLeft: 4), .wrong(attemptsLeft: 3), .wrong(attemptsLeft: 2), .wrong(attemptsLeft: 1), .attemptsExhausted])
        #expect(challenge.verify(codeMatches: true, now: 1001) == .dead)
    }

    @Test("a right code whose registration cannot finish opens the flow again, for an attempt; the last one kills it")
    func reopen() {
        var challenge = fresh()
        for left in (1...4).reversed() {
            #expect(challenge.verify(codeMatches: true, now: 1001) == .accepted)
            challenge.reopenUsingAnAttempt()
            #expect(challenge.state == .open && challenge.attemptsLeft == left)
        }
        #expect(challenge.verify(codeMatches: true, now: 1001) == .accepted)
        challenge.reopenUsingAnAttempt()
        #expect(challenge.state == .dead)
        #expect(challenge.verify(codeMatches: true, now: 1001) == .dead)
    }

    @Test("expiry is checked before the code, and costs no attempt", arguments: [(1599, true), (1600, false)])
    func expiry(now: Int64, valid: Bool) {
        var challenge = fresh()
        let outcome = challenge.verify(codeMatches: true, now: now)
        #expect(outcome == (valid ? .accepted : .expired))
        #expect(challenge.attemptsLeft == 5)
    }

    @Test("an undeliverable code never verifies")
    func undeliverable() {
        var challenge = fresh()
        challenge.codeDeliverable = false
        #expect(challenge.verify(codeMatches: true, now: 1001) == .wrong(attemptsLeft: 4))
    }

    @Test("resends: not before the delay, at most two, each with a fresh expiry")
    func resends() {
        var challenge = fresh()
        #expect(challenge.checkResend(now: 1059, policy: policy) == .tooEarly(retryAfter: 1))
        #expect(challenge.checkResend(now: 1060, policy: policy) == .allowed)
        challenge.replaceCode(mac: [2], now: 1060, policy: policy)
        #expect(challenge.expiresAt == 1660)
        #expect(challenge.checkResend(now: 1120, policy: policy) == .allowed)
        challenge.replaceCode(mac: [3], now: 1120, policy: policy)
        #expect(challenge.checkResend(now: 5000, policy: policy) == .tooManyResends)
        _ = challenge.verify(codeMatches: true, now: 1200)
        #expect(challenge.checkResend(now: 5000, policy: policy) == .closed)
    }

    @Test("codes are six digits, uniformly drawn")
    func codes() throws {
        var counts = [Int](repeating: 0, count: 10)
        for _ in 0..<2000 {
            let code = try SMSCodes.newCode()
            #expect(code.count == 6 && code.allSatisfy(\.isNumber))
            counts[Int(String(code.first!))!] += 1
        }
        // Every leading digit appears (a biased or constant generator would not pass).
        #expect(counts.allSatisfy { $0 > 100 }, "\(counts)")
    }

    @Test("email addresses", arguments: [("a@example.com", "a@example.com"), ("Ann.B+x@Example.COM", "ann.b+x@example.com")])
    func emails(input: String, normalized: String) throws {
        #expect(try Registration.normalizeEmail(input) == normalized)
    }

    @Test("bad email addresses", arguments: ["", "a", "a@b", "@example.com", "a@.com", "a b@example.com", "a@exa..mple.com", "a<b>@example.com", "a@b@example.com"])
    func badEmails(input: String) {
        #expect(throws: RPCError.failure(.emailInvalid, "")) { try onTheWire { try Registration.normalizeEmail(input) } }
    }
}

@Suite("Sessions and devices")
struct SessionTests {
    @Test("email.taken at registration keeps the flow open for another address but uses an attempt: one code tests five addresses at most")
    func takenAddressesUseAttempts() async throws {
        let fixture = try TestDirectory()
        _ = try await fixture.register("+37251234567", email: "taken@example.com")
        let flow = "flow_second"
        let mac = Array("code of second".utf8)
        let owner = FlowOwner(machine: nil, user: nil)
        try await fixture.directory.openCodeChallenge(
            OTPChallenge.start(id: flow, purpose: .registration, phone: "+37251234568", codeMAC: mac, now: fixture.now, policy: .init()), owner: owner, policy: .init())
        func verify(_ email: String) async throws {
            _ = try await fixture.directory.register(flow: flow, codeMAC: mac, email: email, passwordHash: nil,
                                                     device: DeviceIdentity(key: "laptop", name: "laptop"), owner: owner)
        }
        for _ in 0..<OTPChallenge.Policy().maxAttempts {
            await #expect(throws: AccountFailure.emailTakenAtRegistration) { try await verify("taken@example.com") }
        }
        await #expect(throws: AccountFailure.registrationAttemptsExhausted, "the code tests no more addresses") {
            try await verify("free@example.com")
        }
    }

    @Test("a third device is refused with device.limit_reached and nothing is created")
    func deviceLimit() async throws {
        let fixture = try TestDirectory()
        let directory = fixture.directory
        let first = try await fixture.register(device: "laptop")
        _ = try await directory.createSession(account: first.account.id, device: .init(key: "phone", name: "phone"), amr: ["otp"], federation: nil)
        // Same device again: allowed (it is not a new device).
        _ = try await directory.createSession(account: first.account.id, device: .init(key: "laptop", name: "laptop"), amr: ["pwd"], federation: nil)
        await #expect(throws: RPCError.failure(.deviceLimitReached, "")) {
            try await onTheWire {
                try await directory.createSession(account: first.account.id, device: .init(key: "tablet", name: "tablet"), amr: ["otp"], federation: nil)
            }
        }
        let devices = try await directory.devices(.local(first.session.token)).devices.count
        let sessions = try await directory.sessions(.local(first.session.token)).count
        #expect(devices == 2)
        #expect(sessions == 3)
    }

    @Test("on an event loop's thread a session is read on a reader: it sees the last commit, and the idle timer's touch commits before the answer")
    func readOnLoop() async throws {
        var config = Config()
        config.sessionIdleSeconds = 60
        let fixture = try TestDirectory(config)
        let directory = fixture.directory
        let signedIn = try await fixture.register()
        let token = signedIn.session.token
        let loop = EventLoops.shared.nextLoop()
        @Sendable func onLoop<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
            try await Task(executorPreference: loop) { try await body() }.value
        }
        let store = fixture.store
        func lastUsed() async throws -> Int64? {
            try await store.read { try $0.queryOne("SELECT last_used_at FROM sessions") { $0.int64(0) } }
        }
        // Off the loops (the cooperative pool must not block) it goes to the store's queue.
        _ = try await directory.authenticate(.local(token))
        #expect(fixture.store.readers?.openCount == 0)

        fixture.clock.advance(30)
        let described = try await onLoop { try await directory.describeSession(.local(token)) }
        #expect(described.account.id == signedIn.account.id)
        #expect(fixture.store.readers?.openCount == 1)
        #expect(try await lastUsed() == fixture.now)
        let listed = try await onLoop { try await directory.sessions(.local(token)) }
        #expect(listed.map(\.current) == [true])
        #expect(listed.first?.lastUsedAt == Timestamp.rfc3339(epochSeconds: fixture.now))
        // Used every 50 s it outlives its 60 s idle timeout: each touch was committed.
        for _ in 0..<3 {
            fixture.clock.advance(50)
            _ = try await onLoop { try await directory.authenticate(.local(token)) }
            #expect(try await lastUsed() == fixture.now)
        }
        // A sign-out committed on the store's queue is what the next read sees.
        _ = try await directory.endSession(.local(token))
        await #expect(throws: RPCError.failure(.sessionInvalid, "")) {
            try await onTheWire { try await onLoop { try await directory.authenticate(.local(token)) } }
        }
        #expect(fixture.store.readers?.openCount == 1)
    }

    @Test("idle timeout and maximum lifetime end a session")
    func expiry() async throws {
        var config = Config()
        config.sessionIdleSeconds = 60
        config.sessionLifetimeSeconds = 1000
        let fixture = try TestDirectory(config)
        let token = try await fixture.register().session.token
        // Used every 50 s it stays alive until the maximum lifetime…
        for _ in 0..<19 {
            fixture.clock.advance(50)
            _ = try await fixture.directory.authenticate(.local(token))
        }
        fixture.clock.advance(50)
        await #expect(throws: RPCError.failure(.sessionExpired, "")) {
            try await onTheWire { try await fixture.directory.authenticate(.local(token)) }
        }
        await #expect(throws: RPCError.failure(.sessionInvalid, "")) {
            try await onTheWire { try await fixture.directory.authenticate(.local("as1.forged")) }
        }
        // …and the store has only its hash.
        let stored = try await fixture.store.read { try $0.query("SELECT token_hash FROM sessions") { $0.blob(0) } }
        #expect(stored == [SQLAccountDirectory.hash(token)])
    }
}

@Suite("Lockout rule")
struct LockoutTests {
    @Test("no lock before five failures, then 1 min doubling up to 1 h", arguments: [
        (4, nil), (5, 60), (6, 120), (7, 240), (10, 1920), (11, 3600), (100, 3600),
    ] as [(Int, Int64?)])
    func rule(failures: Int, seconds: Int64?) {
        #expect(Lockout().lockSeconds(afterFailures: failures) == seconds)
    }
}

@Suite("PIN factor rules")
struct PINFactorTests {
    @Test("trivial PINs are refused", arguments: ["000000", "111111", "123456", "654321", "987654", "121212", "123123", "112233", "159753", "12345", "12345a"])
    func trivial(pin: String) {
        #expect(throws: RPCError.failure(.pinWeak, "")) { try onTheWire { try PINPolicy.check(pin) } }
    }

    @Test("ordinary PINs pass", arguments: ["480913", "271828", "905173"])
    func fine(pin: String) throws {
        try PINPolicy.check(pin)
    }

    @Test("100 wrong PINs in total switch the factor off; sign-in then needs an SMS code")
    func switchOff() async throws {
        let fixture = try TestDirectory()
        let directory = fixture.directory
        let signedIn = try await fixture.register()
        let account = signedIn.account.id
        // A cheap hash: the test is about counting, not hashing.
        let cheap = Argon2id(memoryKiB: 8, iterations: 1, parallelism: 1)
        try await directory.setPIN(.local(signedIn.session.token), hash: try cheap.hash(SecretBytes(Array("480913".utf8))))
        let wrong = SecretBytes(Array("111112".utf8))
        for _ in 0..<99 {
            try? await directory.confirmPIN(wrong, account: account)
            fixture.clock.advance(4000)  // past any lock, so only the total counts
        }
        let token = try await directory.createSession(account: account, device: .init(key: "laptop", name: "laptop"), amr: ["pwd"], federation: nil).session.token
        #expect(try await directory.pinFactor(account: account) == .enrolled)
        try await directory.checkPINEnrolment(.local(token), reauthenticationWindow: 600)
        try? await directory.confirmPIN(wrong, account: account)
        #expect(try await directory.pinFactor(account: account) == .switchedOff, "the 100th wrong PIN switches it off; the password alone does not stand for it")
        #expect(try await directory.account(id: account).pinSwitchedOff == true, "and the account's record says so")
        await #expect(throws: RPCError.failure(.otpRequired, "")) {
            try await onTheWire { try await directory.checkPINEnrolment(.local(token), reauthenticationWindow: 600) }
        }
    }

    @Test("setting a PIN needs a recent sign-in")
    func reauthentication() async throws {
        let fixture = try TestDirectory()
        let settings = AccountSettings(directory: fixture.directory, logger: Logger(sink: MemorySink()),
                                       limiter: RateLimiter(config: ConfigHolder(Config()), now: fixture.clock.closure))
        let token = try await fixture.register().session.token
        fixture.clock.advance(601)
        await #expect(throws: RPCError.failure(.reauthRequired, "")) {
            try await onTheWire { try await settings.enablePIN(.init(session: token, pin: "480913", confirm: "480913"), session: .local(token)) }
        }
    }
}

@Suite("Rate limits")
struct RateLimiterTests {
    @Test("a burst up to the capacity, then rate.limited with the wait; tokens come back over time; per uid and action")
    func bucket() throws {
        let clock = TestClock()
        let limiter = RateLimiter(config: ConfigHolder(Config()), now: clock.closure)
        for _ in 0..<10 { try limiter.take(.registerStart, caller: .local(CallerIdentity(uid: 1000, gid: 1000, pid: 1, exe: nil, username: nil, groups: []))) }
        do {
            try limiter.take(.registerStart, caller: .local(CallerIdentity(uid: 1000, gid: 1000, pid: 1, exe: nil, username: nil, groups: [])))
            Issue.record("the 11th start in a burst was allowed")
        } catch {
            let error = wireError(error)
            #expect(error.reason == .rateLimited)
            #expect(error.details["retry_after"] == 6)
        }
        try limiter.take(.registerStart, caller: .local(CallerIdentity(uid: 1001, gid: 1001, pid: 1, exe: nil, username: nil, groups: [])))
        try limiter.take(.login, caller: .local(CallerIdentity(uid: 1000, gid: 1000, pid: 1, exe: nil, username: nil, groups: [])))
        clock.advance(6)
        try limiter.take(.registerStart, caller: .local(CallerIdentity(uid: 1000, gid: 1000, pid: 1, exe: nil, username: nil, groups: [])))
        #expect(throws: RPCError.failure(.rateLimited, "")) { try onTheWire { try limiter.take(.registerStart, caller: .local(CallerIdentity(uid: 1000, gid: 1000, pid: 1, exe: nil, username: nil, groups: []))) } }
    }
}

@Suite("Maintenance")
struct MaintenanceTests {
    @Test("expired flows, old send records, abandoned steps, long-ended sessions and old spool files go; live ones stay")
    func purge() async throws {
        var config = Config()
        config.deviceLimit = 10
        let fixture = try TestDirectory(config)
        let directory = fixture.directory
        let now = fixture.now + 10 * 86400
        func at(_ time: Int64) { fixture.clock.advance(TimeInterval(time - fixture.now)) }
        // A session that ended eight days ago, one that lives, one that ended ten seconds ago.
        at(now - 8 * 86400 - 60)
        // An account without a registration flow of its own (a provider's sign-in makes one).
        let old = try await directory.signIn(federated: FederatedIdentity(provider: "work", issuer: "https://id.example", subject: "alice", email: nil, name: nil),
                                             proof: .unused("id-token"), device: .init(key: "a", name: "a")).signedIn
        let account = old.account.id
        at(now - 8 * 86400)
        _ = try await directory.endSession(.local(old.session.token))
        // Code flows (each counts an SMS when it opens) and second steps, expired and not.
        at(now - 4000)
        try await directory.openCodeChallenge(Self.challenge("old", expiresAt: now - 90_000), owner: FlowOwner(machine: nil, user: nil), policy: .init())
        at(now - 400)
        let live = try await directory.createSession(account: account, device: .init(key: "b", name: "b"), amr: ["otp"], federation: nil)
        let recent = try await directory.createSession(account: account, device: .init(key: "c", name: "c"), amr: ["otp"], federation: nil)
        // Two sign-ins waiting for their PIN (a flow lives five minutes): one expired, one not.
        try await directory.setPIN(.local(live.session.token), hash: "x")
        _ = try await directory.updateProfile(.local(live.session.token), email: nil,
                                              passwordHash: try await Argon2id.owasp.hashOffPool(SecretBytes(Array("correct horse".utf8))))
        for openedAt in [now - 301, now - 200] {
            at(openedAt)
            guard case .secondStep = try await directory.signIn(password: SecretBytes(Array("correct horse".utf8)), login: .id(account),
                                                                 device: .init(key: "b", name: "b"), fingerprintAccounts: []) else {
                Issue.record("the password alone signed in"); return
            }
        }
        at(now - 10)
        try await directory.openCodeChallenge(Self.challenge("fresh", expiresAt: now + 60), owner: FlowOwner(machine: nil, user: nil), policy: .init())
        // ID tokens: one that runs a minute more, one that ran out 90 s ago (kept a skew past the
        // validator's: another replica's clock may be behind); the first sign-in's is long gone.
        let bob = FederatedIdentity(provider: "work", issuer: "https://id.example", subject: "bob", email: nil, name: nil)
        var bobSessions: [String] = []
        for (token, expiresAt) in [("live-token", now + 60), ("just-expired-token", now - 90)] {
            bobSessions.append(try await directory.signIn(federated: bob, proof: FederatedProof(idToken: token, nonce: nil, expiresAt: expiresAt),
                                                          device: .init(key: "d", name: "d")).signedIn.session.id)
        }
        _ = try await directory.endSession(.local(recent.session.token))
        let spool = fixture.folder.path + "/sms-spool"
        try FileManager.default.createDirectory(atPath: spool, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: spool + "/old.sms", contents: Data("code".utf8))
        _ = FileManager.default.createFile(atPath: spool + "/new.sms", contents: Data("code".utf8))
        var times = [timespec(tv_sec: Int(now - 2 * 86400), tv_nsec: 0), timespec(tv_sec: Int(now - 2 * 86400), tv_nsec: 0)]
        utimensat(AT_FDCWD, spool + "/old.sms", &times, 0)
        var recentTimes = [timespec(tv_sec: Int(now - 60), tv_nsec: 0), timespec(tv_sec: Int(now - 60), tv_nsec: 0)]
        utimensat(AT_FDCWD, spool + "/new.sms", &recentTimes, 0)

        at(now)
        let purged = try await Maintenance.purge(directory: directory, spoolDirectory: spool, now: now)
        #expect(purged == Maintenance.Purged(flows: 1, sends: 1, loginFlows: 1, sessions: 1, idTokens: 1, spoolFiles: 1))
        // What is left, as the store holds it (the purge is about rows, so the test reads them).
        let left = try await fixture.store.read { database in
            (try database.query("SELECT id FROM otp_flows") { $0.text(0) }, try database.query("SELECT id FROM sessions") { $0.text(0) },
             try database.query("SELECT digest FROM used_id_tokens ORDER BY expires_at") { $0.blob(0) })
        }
        #expect(left.2 == [OpenSSL.sha256(Array("just-expired-token".utf8)), OpenSSL.sha256(Array("live-token".utf8))])
        #expect(left.0 == ["fresh"])
        #expect(Set(left.1) == Set([live.session.id, recent.session.id] + bobSessions))
        #expect(try FileManager.default.contentsOfDirectory(atPath: spool) == ["new.sms"])
    }

    private static func challenge(_ id: String, expiresAt: Int64) -> OTPChallenge {
        OTPChallenge(id: id, purpose: .login, phone: "+37251234567", codeMAC: [0], codeDeliverable: true, createdAt: 0, expiresAt: expiresAt,
                     resendAfter: 0, resends: 0, attemptsLeft: 5, state: .open)
    }
}
