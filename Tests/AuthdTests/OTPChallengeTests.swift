import Foundation
import Glibc
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
            let code = try Registration.newCode()
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
struct SessionStoreTests {
    @Test("a third device is refused with device.limit_reached and nothing is created")
    func deviceLimit() async throws {
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.path + "/s.db")
        try await store.transaction { database in
            try database.execute("INSERT INTO accounts (id, phone, phone_verified_at, created_at) VALUES ('a1', '+37251234567', 1, 1)")
        }
        for key in ["laptop", "phone"] {
            _ = try await store.transaction {
                try SessionStore.create(in: $0, account: "a1", device: .init(key: key, name: key), amr: ["otp"], limit: 2, now: 10, lifetime: 100)
            }
        }
        // Same device again: allowed (it is not a new device).
        _ = try await store.transaction {
            try SessionStore.create(in: $0, account: "a1", device: .init(key: "laptop", name: "laptop"), amr: ["pwd"], limit: 2, now: 11, lifetime: 100)
        }
        await #expect(throws: RPCError.failure(.deviceLimitReached, "")) {
            try await onTheWire {
                try await store.transaction {
                    try SessionStore.create(in: $0, account: "a1", device: .init(key: "tablet", name: "tablet"), amr: ["otp"], limit: 2, now: 12, lifetime: 100)
                }
            }
        }
        let (devices, sessions) = try await store.read { database in
            (try database.queryOne("SELECT count(*) FROM devices") { $0.int(0) } ?? -1, try database.queryOne("SELECT count(*) FROM sessions") { $0.int(0) } ?? -1)
        }
        #expect(devices == 2)
        #expect(sessions == 3)
    }

    @Test("idle timeout and maximum lifetime end a session")
    func expiry() async throws {
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.path + "/s.db")
        let token = try await store.transaction { database -> String in
            try database.execute("INSERT INTO accounts (id, phone, phone_verified_at, created_at) VALUES ('a1', '+37251234567', 1, 1)")
            return try SessionStore.create(in: database, account: "a1", device: .init(key: "k", name: "n"), amr: ["otp"], limit: 2, now: 100, lifetime: 1000).token
        }
        // Used every 50 s it stays alive until the maximum lifetime…
        for now in stride(from: Int64(150), to: 1100, by: 50) {
            _ = try await store.transaction { try SessionStore.authenticate(in: $0, token: token, now: now, idle: 60) }
        }
        await #expect(throws: RPCError.failure(.sessionExpired, "")) {
            try await onTheWire { try await store.transaction { try SessionStore.authenticate(in: $0, token: token, now: 1100, idle: 60) } }
        }
        await #expect(throws: RPCError.failure(.sessionInvalid, "")) {
            try await onTheWire { try await store.transaction { try SessionStore.authenticate(in: $0, token: "as1.forged", now: 200, idle: 60) } }
        }
        // …and the store has only its hash.
        let stored = try await store.read { try $0.query("SELECT token_hash FROM sessions") { $0.blob(0) } }
        #expect(stored == [SessionStore.hash(token)])
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
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.path + "/p.db")
        let clock = TestClock()
        let login = Login(store: store, config: ConfigHolder(Config()), logger: Logger(sink: MemorySink()), now: clock.closure)
        try await store.transaction { database in
            try database.execute("INSERT INTO accounts (id, phone, phone_verified_at, created_at, pin_hash) VALUES ('a', '+37251234567', 1, 1, 'x')")
        }
        for _ in 0..<99 {
            try? await login.recordPINFailure("a")
            clock.advance(4000)  // past any lock, so only the total counts
        }
        let before = try await store.read { try $0.queryOne("SELECT pin_hash IS NOT NULL, pin_reenroll_required FROM accounts") { ($0.int(0), $0.int(1)) } }
        #expect(before?.0 == 1 && before?.1 == 0)
        try? await login.recordPINFailure("a")
        let after = try await store.read { try $0.queryOne("SELECT pin_hash IS NOT NULL, pin_reenroll_required FROM accounts") { ($0.int(0), $0.int(1)) } }
        #expect(after?.0 == 0 && after?.1 == 1)
    }

    @Test("setting a PIN needs a recent sign-in")
    func reauthentication() async throws {
        let fixture = try await TestKeys()
        let config = ConfigHolder(Config())
        let service = SessionService(store: fixture.store, config: config, tokens: TokenService(keys: fixture.keys, config: config, now: fixture.clock.closure),
                                     now: fixture.clock.closure)
        let now = Int64(fixture.clock.now.timeIntervalSince1970)
        let token = try await fixture.store.transaction { database -> String in
            try database.execute("INSERT INTO accounts (id, phone, phone_verified_at, created_at) VALUES ('a', '+37251234567', 1, 1)")
            return try SessionStore.create(in: database, account: "a", device: .init(key: "k", name: "n"), amr: ["pwd"], limit: 2, now: now, lifetime: 86400).token
        }
        fixture.clock.advance(601)
        await #expect(throws: RPCError.failure(.reauthRequired, "")) {
            try await onTheWire { try await service.enablePIN(.init(session: token, pin: "480913", confirm: "480913")) }
        }
    }
}

@Suite("Rate limits")
struct RateLimiterTests {
    @Test("a burst up to the capacity, then rate.limited with the wait; tokens come back over time; per uid and action")
    func bucket() throws {
        let clock = TestClock()
        let limiter = RateLimiter(config: ConfigHolder(Config()), now: clock.closure)
        for _ in 0..<10 { try limiter.take(.registerStart, uid: 1000) }
        do {
            try limiter.take(.registerStart, uid: 1000)
            Issue.record("the 11th start in a burst was allowed")
        } catch {
            let error = wireError(error)
            #expect(error.reason == .rateLimited)
            #expect(error.details["retry_after"] == 6)
        }
        try limiter.take(.registerStart, uid: 1001)
        try limiter.take(.login, uid: 1000)
        clock.advance(6)
        try limiter.take(.registerStart, uid: 1000)
        #expect(throws: RPCError.failure(.rateLimited, "")) { try onTheWire { try limiter.take(.registerStart, uid: 1000) } }
    }
}

@Suite("Maintenance")
struct MaintenanceTests {
    @Test("expired flows, old send records, abandoned steps, long-ended sessions and old spool files go; live ones stay")
    func purge() async throws {
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.path + "/m.db")
        let now: Int64 = 2_000_000
        try await store.transaction { database in
            try database.execute("INSERT INTO accounts (id, phone, phone_verified_at, created_at) VALUES ('a', '+37251234567', 1, 1)")
            try database.execute("INSERT INTO devices (id, account_id, device_key, name, first_seen, last_seen) VALUES ('d', 'a', 'k', 'n', 1, 1)")
            for (id, expires) in [("old", now - 90_000), ("fresh", now + 60)] {
                try database.execute(
                    "INSERT INTO otp_flows (id, purpose, phone, code_mac, code_deliverable, created_at, expires_at, resend_after, resends, attempts_left, state) VALUES (?, 'login', '+37251234567', x'00', 1, 0, ?, 0, 0, 5, 'open')",
                    [.text(id), .integer(expires)])
            }
            try database.execute("INSERT INTO sms_sends (phone, at) VALUES ('+37251234567', ?), ('+37251234567', ?)", [.integer(now - 4000), .integer(now - 10)])
            try database.execute("INSERT INTO login_flows (id, account_id, device_key, device_name, next, expires_at) VALUES ('l1', 'a', 'k', 'n', 'pin', ?), ('l2', 'a', 'k', 'n', 'pin', ?)",
                                 [.integer(now - 1), .integer(now + 100)])
            for (id, hash, revoked, expires) in [("s-old", "01", now - 8 * 86400, now + 100), ("s-live", "02", nil, now + 100), ("s-recent", "03", now - 10, now + 100)] as [(String, String, Int64?, Int64)] {
                try database.execute(
                    "INSERT INTO sessions (id, account_id, device_id, token_hash, amr, created_at, last_used_at, expires_at, revoked_at) VALUES (?, 'a', 'd', ?, '[]', 0, 0, ?, ?)",
                    [.text(id), .blob(Array(hash.utf8)), .integer(expires), revoked.map { .integer($0) } ?? .null])
            }
        }
        let spool = directory.path + "/sms-spool"
        try FileManager.default.createDirectory(atPath: spool, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: spool + "/old.sms", contents: Data("code".utf8))
        _ = FileManager.default.createFile(atPath: spool + "/new.sms", contents: Data("code".utf8))
        var times = [timespec(tv_sec: Int(now - 2 * 86400), tv_nsec: 0), timespec(tv_sec: Int(now - 2 * 86400), tv_nsec: 0)]
        utimensat(AT_FDCWD, spool + "/old.sms", &times, 0)
        var recent = [timespec(tv_sec: Int(now - 60), tv_nsec: 0), timespec(tv_sec: Int(now - 60), tv_nsec: 0)]
        utimensat(AT_FDCWD, spool + "/new.sms", &recent, 0)

        let purged = try await Maintenance.purge(store: store, spoolDirectory: spool, now: now)
        #expect(purged == Maintenance.Purged(flows: 1, sends: 1, loginFlows: 1, sessions: 1, spoolFiles: 1))
        let left = try await store.read { database in
            (try database.query("SELECT id FROM otp_flows") { $0.text(0) }, try database.query("SELECT id FROM sessions ORDER BY id") { $0.text(0) })
        }
        #expect(left.0 == ["fresh"])
        #expect(left.1 == ["s-live", "s-recent"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: spool) == ["new.sms"])
    }
}
