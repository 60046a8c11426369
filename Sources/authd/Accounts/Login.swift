import FoundationEssentials
import OpenSSLCrypto
import Protocol
import Synchronization

/// Password sign-in (issue 3, item 4). Every way of failing looks the same from outside —
/// `auth.failed`, after the same Argon2id work — except a lock, which is safe to tell.
struct Login: Sendable {
    let store: Store
    let config: ConfigHolder
    let logger: Logger
    let now: @Sendable () -> Date
    let lockout = Lockout()

    /// A hash to verify against when the account does not exist, so unknown accounts cost
    /// the same time as wrong passwords. Made on first use, not at start-up (it costs ~50 ms
    /// and 19 MiB, which start-up should not pay).
    private let decoy = DecoyHash()

    private final class DecoyHash: Sendable {
        let value = Mutex<String?>(nil)
    }

    init(store: Store, config: ConfigHolder, logger: Logger, now: @escaping @Sendable () -> Date) {
        self.store = store
        self.config = config
        self.logger = logger
        self.now = now
    }

    private func decoyHash() async throws -> String {
        if let made = decoy.value.withLock({ $0 }) { return made }
        let made = try await Argon2id.owasp.hashOffPool(OpenSSL.randomSecret(16))
        return decoy.value.withLock { current in
            if current == nil { current = made }
            return current!
        }
    }

    static let failed = RPCError.failure(.authFailed, "The login or the password is not right.")

    /// Failed sign-ins are answered no sooner than this after the request arrived (as
    /// systemd-homed pads bad-password replies): what little work differs between an unknown
    /// account and a wrong password cannot be timed, and guessing is slower.
    static let failurePadding: Duration = .milliseconds(300)

    func login(_ params: AuthLogin.Params) async throws -> LoginStep {
        try await padded { try await attempt(params) }
    }

    func loginPIN(_ params: AuthLoginPIN.Params) async throws -> SignedIn {
        try await padded { try await attemptPIN(params) }
    }

    /// Failures answer no sooner than `failurePadding` after the request arrived.
    private func padded<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        let started = ContinuousClock.now
        do {
            return try await body()
        } catch let error as RPCError where error.reason == .authFailed || error.reason == .accountLocked {
            try? await Task.sleep(until: started + Self.failurePadding, clock: .continuous)
            throw error
        }
    }

    private func attempt(_ params: AuthLogin.Params) async throws -> LoginStep {
        guard params.password.count <= PasswordPolicy.maximum else {
            throw RPCError.invalidParams("Parameter 'password' has at most \(PasswordPolicy.maximum) characters.", field: "password")
        }
        let device = try SessionStore.DeviceIdentity.resolve(params.device)
        let login = try Self.normalizeLogin(params.login, region: params.region)
        struct Candidate: Sendable {
            let id: String; let phone, email, hash: String?; let failures: Int; let lockedUntil: Int64?; let deactivated: Bool
            let hasPIN: Bool; let pinReenrollRequired: Bool; let fingerprint: Bool
        }
        let candidate = try await store.read { database in
            try database.queryOne(
                """
                SELECT id, phone, email, password_hash, failed_logins, locked_until, deactivated_at IS NOT NULL, pin_hash IS NOT NULL, pin_reenroll_required,
                       fingerprint_user IS NOT NULL
                FROM accounts WHERE \(login.column) = ?
                """,
                [.text(login.value)]) {
                Candidate(id: $0.text(0), phone: $0.optionalText(1), email: $0.optionalText(2), hash: $0.optionalText(3), failures: $0.int(4),
                          lockedUntil: $0.optionalInt64(5), deactivated: $0.int(6) != 0, hasPIN: $0.int(7) != 0, pinReenrollRequired: $0.int(8) != 0,
                          fingerprint: $0.int(9) != 0)
            }
        }
        let started = Int64(now().timeIntervalSince1970)
        if let candidate, let until = candidate.lockedUntil, started < until {
            throw Self.locked(until: until)
        }
        let secret = SecretBytes(Array(params.password.utf8))
        let against: String
        if let hash = candidate?.hash { against = hash } else { against = try await decoyHash() }
        let matches = try await Argon2id.verifyOffPool(secret, against: against)
        guard let candidate, matches, candidate.hash != nil, !candidate.deactivated else {
            if let candidate { try await recordFailure(candidate.id) }
            throw Self.failed
        }
        let config = config.current
        let nowSeconds = Int64(now().timeIntervalSince1970)
        if candidate.pinReenrollRequired {
            // The PIN factor was switched off after too many wrong PINs: the password alone must
            // not be enough now. Sign in with an SMS code, then enrol a new PIN.
            throw RPCError.failure(.otpRequired, "This account's PIN was switched off after too many wrong PINs; sign in with an SMS code and set a new PIN.")
        }
        let rehash = Argon2id.owasp.isStronger(than: candidate.hash!) ? try await Argon2id.owasp.hashOffPool(secret) : nil
        let step = try await store.transaction { database -> LoginStep in
            try database.execute("UPDATE accounts SET failed_logins = 0, locked_until = NULL WHERE id = ?", [.text(candidate.id)])
            if let rehash { try database.execute("UPDATE accounts SET password_hash = ? WHERE id = ?", [.text(rehash), .text(candidate.id)]) }
            // The account's second step: its fingerprint when it chose one, else its PIN.
            if let next = candidate.fingerprint ? "fingerprint" : candidate.hasPIN ? "pin" : nil {
                let flow = "login_" + Base64URL.encode(try OpenSSL.randomBytes(16))
                try database.execute(
                    "INSERT INTO login_flows (id, account_id, device_key, device_name, next, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
                    [.text(flow), .text(candidate.id), .text(device.key), .text(device.name), .text(next), .integer(nowSeconds + Self.secondStepSeconds)])
                return LoginStep(flow: flow, next: next)
            }
            let session = try SessionStore.create(in: database, account: candidate.id, device: device, amr: ["pwd"], limit: config.deviceLimit, policy: config.devicePolicy, idle: Int64(config.sessionIdleSeconds),
                                                  now: nowSeconds, lifetime: Int64(config.sessionLifetimeSeconds))
            return LoginStep(account: AccountInfo(id: candidate.id, phone: candidate.phone, email: candidate.email, hasPassword: true), session: session)
        }
        return step
    }

    // MARK: Confirming secrets for sensitive changes

    /// Checks the password of a signed-in account before a sensitive change (profile, PIN,
    /// deactivation) exactly as sign-in does: refused while locked, failures counted toward
    /// the lock and padded. A session must not be a way around the lockout.
    func confirmPassword(_ password: String, account: String) async throws {
        try await padded {
            let (hash, lockedUntil) = try await store.read { database in
                try database.queryOne("SELECT password_hash, locked_until FROM accounts WHERE id = ?", [.text(account)]) {
                    ($0.optionalText(0), $0.optionalInt64(1))
                } ?? (nil, nil)
            }
            if let lockedUntil, Int64(now().timeIntervalSince1970) < lockedUntil { throw Self.locked(until: lockedUntil) }
            guard let hash else { throw Self.failed }
            guard try await Argon2id.verifyOffPool(SecretBytes(Array(password.utf8)), against: hash) else {
                try await recordFailure(account)
                throw Self.failed
            }
        }
    }

    /// The same for the PIN, with the PIN's own lock and counters.
    func confirmPIN(_ pin: String, account: String) async throws {
        try await padded {
            let (hash, lockedUntil) = try await store.read { database in
                try database.queryOne("SELECT pin_hash, pin_locked_until FROM accounts WHERE id = ?", [.text(account)]) {
                    ($0.optionalText(0), $0.optionalInt64(1))
                } ?? (nil, nil)
            }
            if let lockedUntil, Int64(now().timeIntervalSince1970) < lockedUntil { throw Self.locked(until: lockedUntil) }
            guard let hash else { throw RPCError.failure(Reason("twofactor.not_enabled"), "This account has no PIN second factor.") }
            guard try await Argon2id.verifyOffPool(SecretBytes(Array(pin.utf8)), against: hash) else {
                try await recordPINFailure(account)
                throw Self.failed
            }
            try await store.transaction { try Self.pinProved(in: $0, account: account) }
        }
    }

    /// How long a sign-in waits for its second factor.
    static let secondStepSeconds: Int64 = 300

    private func attemptPIN(_ params: AuthLoginPIN.Params) async throws -> SignedIn {
        let nowSeconds = Int64(now().timeIntervalSince1970)
        struct Pending: Sendable { let account: String; let phone: String?; let deviceKey, deviceName: String; let email, pinHash: String?; let pinLockedUntil: Int64? }
        let pending = try await store.read { database in
            try database.queryOne(
                """
                SELECT a.id, a.phone, f.device_key, f.device_name, a.email, a.pin_hash, a.pin_locked_until
                FROM login_flows f JOIN accounts a ON a.id = f.account_id
                WHERE f.id = ? AND f.next = 'pin' AND f.expires_at > ? AND a.deactivated_at IS NULL
                """, [.text(params.flow), .integer(nowSeconds)]) {
                Pending(account: $0.text(0), phone: $0.optionalText(1), deviceKey: $0.text(2), deviceName: $0.text(3), email: $0.optionalText(4),
                        pinHash: $0.optionalText(5), pinLockedUntil: $0.optionalInt64(6))
            }
        }
        guard let pending, let pinHash = pending.pinHash else { throw Self.failed }
        if let until = pending.pinLockedUntil, nowSeconds < until { throw Self.locked(until: until) }
        guard let pin = params.pin, pin.count == PINPolicy.length, pin.allSatisfy({ $0.isASCII && $0.isNumber }) else { throw Self.failed }
        guard try await Argon2id.verifyOffPool(SecretBytes(Array(pin.utf8)), against: pinHash) else {
            try await recordPINFailure(pending.account)
            throw Self.failed
        }
        let config = config.current
        let device = SessionStore.DeviceIdentity(key: pending.deviceKey, name: pending.deviceName, nameGiven: false)
        let session = try await store.transaction { database -> SessionToken in
            // The flow is consumed: a PIN completes one sign-in.
            try database.execute("DELETE FROM login_flows WHERE id = ?", [.text(params.flow)])
            guard database.changes == 1 else { throw Self.failed }
            try Self.pinProved(in: database, account: pending.account)
            return try SessionStore.create(in: database, account: pending.account, device: device, amr: ["pwd", "pin"], limit: config.deviceLimit, policy: config.devicePolicy, idle: Int64(config.sessionIdleSeconds),
                                           now: nowSeconds, lifetime: Int64(config.sessionLifetimeSeconds))
        }
        return SignedIn(account: AccountInfo(id: pending.account, phone: pending.phone, email: pending.email, hasPassword: true), session: session)
    }

    /// A right PIN ends the run of wrong ones (the lockout rule counts consecutive failures).
    private static func pinProved(in database: Database, account: String) throws {
        try database.execute("UPDATE accounts SET pin_failures = 0, pin_locked_until = NULL WHERE id = ?", [.text(account)])
    }

    /// Counts a wrong PIN: the lockout rule on consecutive failures, and after
    /// `PINPolicy.totalFailureLimit` in total the factor is switched off until re-enrolment.
    func recordPINFailure(_ account: String) async throws {
        let nowSeconds = Int64(now().timeIntervalSince1970)
        let lockout = lockout
        let (lockedUntil, switchedOff) = try await store.transaction { database -> (Int64?, Bool) in
            try database.execute("UPDATE accounts SET pin_failures = pin_failures + 1, pin_total_failures = pin_total_failures + 1 WHERE id = ?",
                                 [.text(account)])
            let (consecutive, total) = try database.queryOne("SELECT pin_failures, pin_total_failures FROM accounts WHERE id = ?", [.text(account)]) {
                ($0.int(0), $0.int(1))
            } ?? (0, 0)
            if total >= PINPolicy.totalFailureLimit {
                try database.execute(
                    "UPDATE accounts SET pin_hash = NULL, pin_reenroll_required = 1, pin_failures = 0, pin_locked_until = NULL WHERE id = ?", [.text(account)])
                try database.execute("DELETE FROM login_flows WHERE account_id = ?", [.text(account)])
                return (nil, true)
            }
            guard let seconds = lockout.lockSeconds(afterFailures: consecutive) else { return (nil, false) }
            try database.execute("UPDATE accounts SET pin_locked_until = ? WHERE id = ?", [.integer(nowSeconds + seconds), .text(account)])
            return (nowSeconds + seconds, false)
        }
        if switchedOff {
            logger.warning("PIN factor switched off after \(PINPolicy.totalFailureLimit) wrong PINs", [("AUTHD_ACCOUNT", account)])
        }
        if let lockedUntil { throw Self.locked(until: lockedUntil) }
    }

    /// Counts a failure and locks the account when the rule says so (atomically: two racing
    /// failures both count).
    private func recordFailure(_ account: String) async throws {
        let nowSeconds = Int64(now().timeIntervalSince1970)
        let lockout = lockout
        let lockedUntil = try await store.transaction { database -> Int64? in
            try database.execute("UPDATE accounts SET failed_logins = failed_logins + 1 WHERE id = ?", [.text(account)])
            let failures = try database.queryOne("SELECT failed_logins FROM accounts WHERE id = ?", [.text(account)]) { $0.int(0) } ?? 0
            guard let seconds = lockout.lockSeconds(afterFailures: failures) else { return nil }
            try database.execute("UPDATE accounts SET locked_until = ? WHERE id = ?", [.integer(nowSeconds + seconds), .text(account)])
            return nowSeconds + seconds
        }
        if let lockedUntil {
            logger.warning("account locked after repeated failed logins", [("AUTHD_ACCOUNT", account), ("AUTHD_LOCKED_UNTIL", String(lockedUntil))])
            throw Self.locked(until: lockedUntil)
        }
    }

    static func locked(until: Int64) -> RPCError {
        .failure(.accountLocked, "Too many failed sign-ins; try again after \(Timestamp.rfc3339(epochSeconds: until)).",
                 details: ["locked_until": .string(Timestamp.rfc3339(epochSeconds: until))])
    }

    /// `login` as the column and value to look up: an email address (has `@`) or a phone number.
    static func normalizeLogin(_ login: String, region: String?) throws -> (column: String, value: String) {
        if login.contains("@") {
            guard let email = try? Registration.normalizeEmail(login) else { throw failed }
            return ("email", email)
        }
        guard let phone = try? PhoneNumber.parse(login, region: region) else { throw failed }
        return ("phone", phone.e164)
    }
}
