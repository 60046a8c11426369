import FoundationEssentials
import OpenSSLCrypto
import Protocol
import Synchronization

/// Passwords and PINs (Argon2id hashes in `accounts`), their lockout, second sign-in steps in
/// progress (`login_flows`), and the account's own settings. Every way a credential check fails
/// looks the same from outside (`authFailed`, after the same Argon2id work), except a lock,
/// which is safe to tell; failures are padded (`CredentialPadding`).
extension SQLAccountDirectory {
    /// What `credentialStamp` answers for a password hash: SHA-256 of it.
    static func credentialStamp(passwordHash: String) -> [UInt8] {
        OpenSSL.sha256(Array(passwordHash.utf8))
    }

    func credentialStamp(account: String) async throws -> [UInt8]? {
        try await store.read { database in
            try database.queryOne("SELECT password_hash FROM accounts WHERE id = ?", [.text(account)]) { $0.optionalText(0) } ?? nil
        }.map(Self.credentialStamp(passwordHash:))
    }

    func lockCredentials(account: String) async throws -> LockCredentials {
        try await store.read { database in
            try database.queryOne(
                """
                SELECT password_hash IS NOT NULL, CASE WHEN deactivated_at IS NULL AND phone_verified_at IS NOT NULL THEN phone END
                FROM accounts WHERE id = ?
                """, [.text(account)]) { LockCredentials(hasPassword: $0.int(0) != 0, verifiedPhone: $0.optionalText(1)) }
        } ?? LockCredentials(hasPassword: false, verifiedPhone: nil)
    }

    // MARK: Passwords

    func signIn(password: SecretBytes, login: AccountKey, device: DeviceIdentity, fingerprintAccounts: Set<String>) async throws -> PasswordSignIn {
        try await CredentialPadding.padded {
            struct Candidate: Sendable {
                let id: String
                let hash: String?
                let deactivated, hasPIN, pinReenrollRequired: Bool
            }
            let (column, value) = Self.column(login)
            let now = seconds
            let lockout = lockout
            let locksInFlight = locksInFlight
            let check = locksInFlight.begin()
            defer { locksInFlight.end(check) }
            // The account is read and the attempt reserved in one change (see `Lockout`).
            let found = try await store.transaction { database -> (Candidate, ReservedAttempt)? in
                guard let candidate = try database.queryOne(
                    """
                    SELECT id, password_hash, deactivated_at IS NOT NULL, pin_hash IS NOT NULL, pin_reenroll_required
                    FROM accounts WHERE \(column) = ?
                    """, [.text(value)], row: {
                        Candidate(id: $0.text(0), hash: $0.optionalText(1), deactivated: $0.int(2) != 0, hasPIN: $0.int(3) != 0,
                                  pinReenrollRequired: $0.int(4) != 0)
                    })
                else { return nil }
                return (candidate, try Self.reserveAttempt(in: database, account: candidate.id, factor: .password, lockout: lockout,
                                                           check: check, locksInFlight: locksInFlight, now: now))
            }
            let against: String
            if let hash = found?.0.hash { against = hash } else { against = try await decoy.hash() }
            let matches = try await Argon2id.verifyOffPool(password, against: against)
            guard let (candidate, reserved) = found else { throw AccountFailure.authFailed }
            guard let hash = candidate.hash, matches, !candidate.deactivated else { try await settleFailure(reserved) }
            return try await afterRightSecret(reserved) {
                // The PIN factor was switched off after too many wrong PINs: the password alone must
                // not be enough now. Sign in with an SMS code, then enrol a new PIN.
                if candidate.pinReenrollRequired { throw AccountFailure.pinSwitchedOff }
                let rehash = Argon2id.owasp.isStronger(than: hash) ? try await Argon2id.owasp.hashOffPool(password) : nil
                let step = SignInFlow.stepAfterPassword(fingerprintHere: fingerprintAccounts.contains(candidate.id), hasPIN: candidate.hasPIN)
                let flowID = "login_" + Base64URL.encode(try OpenSSL.randomBytes(16))
                let config = config.current
                // One change: a sign-in the device limit refuses leaves the lockout count as it was.
                return try await store.transaction { database in
                    try Self.withdraw(reserved, in: database)
                    if let rehash { try database.execute("UPDATE accounts SET password_hash = ? WHERE id = ?", [.text(rehash), .text(candidate.id)]) }
                    guard let step else {
                        return .signedIn(try Self.signedIn(in: database, account: candidate.id, device: device, amr: ["pwd"], config: config, now: now))
                    }
                    let flow = SignInFlow.open(id: flowID, account: candidate.id, device: device, step: step, now: now)
                    try database.execute(
                        "INSERT INTO login_flows (id, account_id, device_key, device_name, next, expires_at, machine_uid) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [.text(flow.id), .text(flow.account), .text(flow.device.key), .text(flow.device.name), .text(flow.step.rawValue), .integer(flow.expiresAt),
                         flow.device.machineUser.map { .integer(Int64($0)) } ?? .null])
                    return .secondStep(flow: flow.id, step: step)
                }
            }
        }
    }

    func confirmPassword(_ password: SecretBytes, account: String) async throws {
        try await confirm(password, of: account, factor: .password)
    }

    func confirmPIN(_ pin: SecretBytes, account: String) async throws {
        try await confirm(pin, of: account, factor: .pin)
    }

    /// The two secrets an account is checked with, each with its own lock and counters.
    enum Factor: Sendable {
        case password, pin
        /// The hash of the factor, its consecutive failures and its lock, as columns of `accounts`.
        var columns: String { self == .password ? "password_hash, failed_logins, locked_until" : "pin_hash, pin_failures, pin_locked_until" }
    }

    /// A check of a secret the lock let through, already counted as a failure.
    struct ReservedAttempt: Sendable {
        let account: String
        let factor: Factor
        /// The lock the reservation set (it holds unless the secret turns out right).
        let locksUntil: Int64?
        /// The (lapsed) lock stored before, which `release` puts back.
        let previousLock: Int64?
    }

    /// Checks `secret` under its lock as sign-in does: refused while locked, counted before it
    /// is checked, a failure padded.
    private func confirm(_ secret: SecretBytes, of account: String, factor: Factor) async throws {
        try await CredentialPadding.padded {
            let now = seconds
            let lockout = lockout
            let locksInFlight = locksInFlight
            let check = locksInFlight.begin()
            defer { locksInFlight.end(check) }
            let (hash, reserved) = try await store.transaction { database -> (String, ReservedAttempt) in
                let (hash, lockedUntil) = try database.queryOne("SELECT \(factor.columns) FROM accounts WHERE id = ?", [.text(account)]) {
                    ($0.optionalText(0), $0.optionalInt64(2))
                } ?? (nil, nil)
                guard let hash else {
                    // The lock speaks first, as at sign-in, even for a factor that is gone.
                    if let lockedUntil, now < lockedUntil {
                        throw Self.lockRefusal(account: account, factor: factor, until: lockedUntil, locksInFlight: locksInFlight)
                    }
                    throw factor == .password ? AccountFailure.authFailed : AccountFailure.noPINFactor
                }
                return (hash, try Self.reserveAttempt(in: database, account: account, factor: factor, lockout: lockout,
                                                      check: check, locksInFlight: locksInFlight, now: now))
            }
            guard try await Argon2id.verifyOffPool(secret, against: hash) else { try await settleFailure(reserved) }
            try await store.transaction { try Self.withdraw(reserved, in: $0) }
        }
    }

    /// In the caller's change: refuses with `locked` (counting nothing) while the factor's lock
    /// holds, or `busy` while that lock is one a check still in progress set; else counts the
    /// check as a failure, and locks the factor at once when the count reaches the rule's
    /// threshold, so no check started after this one runs before the lock (recorded under
    /// `check` in `locksInFlight` until the caller ends it).
    /// A PIN whose total of failures, counting reserved checks, has reached
    /// `PINPolicy.totalFailureLimit` is refused as a wrong one while the last check is decided.
    static func reserveAttempt(in database: Database, account: String, factor: Factor, lockout: Lockout,
                               check: LocksInFlight<Factor>.Ticket, locksInFlight: LocksInFlight<Factor>, now: Int64) throws -> ReservedAttempt {
        let (failures, lockedUntil, total) = try database.queryOne(
            "SELECT \(factor.columns), pin_total_failures FROM accounts WHERE id = ?", [.text(account)]) {
            ($0.int(1), $0.optionalInt64(2), $0.int(3))
        } ?? (0, nil, 0)
        let setInFlight = lockedUntil.map { locksInFlight.isSetInFlight(account: account, factor: factor, until: $0) } ?? false
        switch lockout.reserve(failures: failures, lockedUntil: lockedUntil, lockSetInFlight: setInFlight, now: now) {
        case .refused(let until):
            throw AccountFailure.locked(until: until)
        case .busy:
            throw AccountFailure.busy
        case .granted(let counted, let locksUntil):
            switch factor {
            case .password:
                try database.execute("UPDATE accounts SET failed_logins = ?, locked_until = coalesce(?, locked_until) WHERE id = ?",
                                     [.integer(Int64(counted)), locksUntil.map(SQLValue.integer) ?? .null, .text(account)])
            case .pin:
                guard total < PINPolicy.totalFailureLimit else { throw AccountFailure.authFailed }
                try database.execute(
                    "UPDATE accounts SET pin_failures = ?, pin_total_failures = pin_total_failures + 1, pin_locked_until = coalesce(?, pin_locked_until) WHERE id = ?",
                    [.integer(Int64(counted)), locksUntil.map(SQLValue.integer) ?? .null, .text(account)])
            }
            if let locksUntil { locksInFlight.record(check, account: account, factor: factor, until: locksUntil) }
            return ReservedAttempt(account: account, factor: factor, locksUntil: locksUntil, previousLock: lockedUntil)
        }
    }

    /// A check refused under the stored lock `until` before it was reserved: `busy` while a
    /// check in progress set the lock, else `locked`.
    static func lockRefusal(account: String, factor: Factor, until: Int64, locksInFlight: LocksInFlight<Factor>) -> AccountFailure {
        locksInFlight.isSetInFlight(account: account, factor: factor, until: until) ? .busy : .locked(until: until)
    }

    /// In the caller's change: the secret was right, so its reservation is withdrawn and the run
    /// of failures ends (the count resets and the lock lifts, as a success always did).
    static func withdraw(_ reserved: ReservedAttempt, in database: Database) throws {
        switch reserved.factor {
        case .password:
            try database.execute("UPDATE accounts SET failed_logins = 0, locked_until = NULL WHERE id = ?", [.text(reserved.account)])
        case .pin:
            try database.execute(
                "UPDATE accounts SET pin_failures = 0, pin_locked_until = NULL, pin_total_failures = \(database.dialect.greatest)(0, pin_total_failures - 1) WHERE id = ?",
                [.text(reserved.account)])
        }
    }

    /// In the caller's change: the secret was right but the change it was for failed (the device
    /// limit, a flow used meanwhile): the attempt is taken back as if it had not been made, so
    /// the run of failures and the lock are as they were.
    static func release(_ reserved: ReservedAttempt, in database: Database) throws {
        let (failures, total, lock) = reserved.factor == .password
            ? ("failed_logins", "failed_logins", "locked_until") : ("pin_failures", "pin_total_failures", "pin_locked_until")
        try database.execute("UPDATE accounts SET \(failures) = \(database.dialect.greatest)(0, \(failures) - 1) WHERE id = ?", [.text(reserved.account)])
        if total != failures {
            try database.execute("UPDATE accounts SET \(total) = \(database.dialect.greatest)(0, \(total) - 1) WHERE id = ?", [.text(reserved.account)])
        }
        if let locksUntil = reserved.locksUntil {
            try database.execute("UPDATE accounts SET \(lock) = ? WHERE id = ? AND \(lock) = ?",
                                 [reserved.previousLock.map(SQLValue.integer) ?? .null, .text(reserved.account), .integer(locksUntil)])
        }
    }

    /// Runs the change a right secret was for; when it fails, the reservation is released.
    private func afterRightSecret<T: Sendable>(_ reserved: ReservedAttempt, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch {
            try? await store.transaction { try Self.release(reserved, in: $0) }
            throw error
        }
    }

    /// The secret was wrong: the reserved failure stays counted. A PIN whose total of failures
    /// reached `PINPolicy.totalFailureLimit` is switched off until re-enrolment (and every
    /// sign-in waiting for it ends). Answers `locked` when the reservation locked, else `authFailed`.
    private func settleFailure(_ reserved: ReservedAttempt) async throws -> Never {
        if reserved.factor == .pin {
            let switchedOff = try await store.transaction { database -> Bool in
                let total = try database.queryOne("SELECT pin_total_failures FROM accounts WHERE id = ? AND pin_hash IS NOT NULL",
                                                  [.text(reserved.account)]) { $0.int(0) } ?? 0
                guard total >= PINPolicy.totalFailureLimit else { return false }
                try database.execute(
                    "UPDATE accounts SET pin_hash = NULL, pin_reenroll_required = 1, pin_failures = 0, pin_locked_until = NULL WHERE id = ?",
                    [.text(reserved.account)])
                try database.execute("DELETE FROM login_flows WHERE account_id = ?", [.text(reserved.account)])
                return true
            }
            if switchedOff {
                logger.warning("PIN factor switched off after \(PINPolicy.totalFailureLimit) wrong PINs", [("AUTHD_ACCOUNT", reserved.account)])
                throw AccountFailure.authFailed
            }
        }
        if let until = reserved.locksUntil {
            let what = reserved.factor == .password ? "failed logins" : "wrong PINs"
            logger.warning("account locked after repeated \(what)", [("AUTHD_ACCOUNT", reserved.account), ("AUTHD_LOCKED_UNTIL", String(until))])
            throw AccountFailure.locked(until: until)
        }
        throw AccountFailure.authFailed
    }

    // MARK: PINs

    func pinFactor(account: String) async throws -> PINFactor {
        try await store.read { database in
            try database.queryOne("SELECT pin_hash IS NOT NULL, pin_reenroll_required FROM accounts WHERE id = ? AND deactivated_at IS NULL",
                                  [.text(account)]) { row -> PINFactor in row.int(0) != 0 ? .enrolled : row.int(1) != 0 ? .switchedOff : .none }
        } ?? PINFactor.none
    }

    // MARK: Second sign-in steps

    /// The flow and what its account has now; nil when unknown, expired, deactivated, or not
    /// `owner`'s.
    private static func pending(in database: Database, id: String, owner: FlowOwner, now: Int64) throws
        -> (PendingSignIn, pinHash: String?, pinLockedUntil: Int64?)? {
        let found = try database.queryOne(
            """
            SELECT f.id, f.account_id, f.device_key, f.device_name, f.next, f.expires_at, a.pin_hash, a.pin_locked_until, f.machine_uid
            FROM login_flows f JOIN accounts a ON a.id = f.account_id
            WHERE f.id = ? AND f.expires_at > ? AND a.deactivated_at IS NULL
            """, [.text(id), .integer(now)]) { row -> (PendingSignIn, String?, Int64?)? in
            guard let step = SignInFlow.Step(rawValue: row.text(4)) else { return nil }
            let device = DeviceIdentity(key: row.text(2), name: row.text(3), nameGiven: false, machineUser: row.optionalInt64(8).map { UInt32($0) })
            let flow = SignInFlow(id: row.text(0), account: row.text(1), device: device, step: step, expiresAt: row.int64(5))
            return (PendingSignIn(flow: flow, accountHasPIN: !row.isNull(6), readAt: now), row.optionalText(6), row.optionalInt64(7))
        } ?? nil
        guard let found, found.0.flow.belongs(to: owner) else { return nil }
        return found
    }

    func pendingSignIn(_ id: String, owner: FlowOwner) async throws -> PendingSignIn? {
        let now = seconds
        return try await store.read { try Self.pending(in: $0, id: id, owner: owner, now: now)?.0 }
    }

    func completeSignIn(_ id: String, pin: SecretBytes, owner: FlowOwner) async throws -> SignedIn {
        try await CredentialPadding.padded {
            let now = seconds
            let lockout = lockout
            let locksInFlight = locksInFlight
            let check = locksInFlight.begin()
            defer { locksInFlight.end(check) }
            // The flow is read and the attempt reserved in one change (see `Lockout`).
            let (pending, pinHash, reserved) = try await store.transaction { database -> (PendingSignIn, String, ReservedAttempt) in
                guard let (pending, pinHash, pinLockedUntil) = try Self.pending(in: database, id: id, owner: owner, now: now),
                      pending.flow.step == .pin, let pinHash
                else { throw AccountFailure.authFailed }
                if let until = pinLockedUntil, now < until {
                    throw Self.lockRefusal(account: pending.flow.account, factor: .pin, until: until, locksInFlight: locksInFlight)
                }
                guard PINPolicy.isWellFormed(pin) else { throw AccountFailure.authFailed }
                return (pending, pinHash, try Self.reserveAttempt(in: database, account: pending.flow.account, factor: .pin, lockout: lockout,
                                                                  check: check, locksInFlight: locksInFlight, now: now))
            }
            var flow = pending.flow
            // Decided as of when the flow was found waiting: the Argon2id work in between must
            // not let it expire under a right PIN, nor spare a wrong one from being counted.
            let correct = try await Argon2id.verifyOffPool(pin, against: pinHash)
            guard correct else { try await settleFailure(reserved) }
            return try await afterRightSecret(reserved) {
                switch flow.handle(.pin(correct: correct), now: now) {
                case .signIn(let amr):
                    return try await signIn(flow, amr: amr, withdrawing: reserved)
                case .retry, .continueWithPIN, .end, .refuse:
                    throw AccountFailure.authFailed
                }
            }
        }
    }

    func completeSignIn(_ pending: PendingSignIn, fingerMatched: Bool) async throws -> SecondStepOutcome {
        var flow = pending.flow
        let decision = flow.handle(.fingerprint(matched: fingerMatched, accountHasPIN: pending.accountHasPIN), now: pending.readAt)
        switch decision {
        case .signIn(let amr):
            return .signedIn(try await signIn(flow, amr: amr, withdrawing: nil))
        case .continueWithPIN:
            try await store.transaction { try $0.execute("UPDATE login_flows SET next = ? WHERE id = ?", [.text(flow.step.rawValue), .text(flow.id)]) }
            return .continuesWithPIN
        case .end:
            try await store.transaction { try $0.execute("DELETE FROM login_flows WHERE id = ?", [.text(flow.id)]) }
            return .ended
        case .retry, .refuse:
            throw AccountFailure.authFailed
        }
    }

    /// Acts on a decision that signs in, in one change: the flow is used up exactly once (a flow
    /// another request used meanwhile refuses), and the session is made.
    /// The right PIN's reservation, when there is one, is withdrawn in the same change.
    private func signIn(_ flow: SignInFlow, amr: [String], withdrawing reserved: ReservedAttempt?) async throws -> SignedIn {
        let config = config.current
        let now = seconds
        return try await store.transaction { database in
            try database.execute("DELETE FROM login_flows WHERE id = ?", [.text(flow.id)])
            guard database.changes == 1 else { throw AccountFailure.authFailed }
            if let reserved { try Self.withdraw(reserved, in: database) }
            return try Self.signedIn(in: database, account: flow.account, device: flow.device, amr: amr, config: config, now: now)
        }
    }

    // MARK: The account's own settings

    func profile(_ session: PresentedSession) async throws -> AccountProfile {
        try await readingSession(session) { database, session in
            guard let profile = try database.queryOne(
                "SELECT id, phone, email, password_hash IS NOT NULL, pin_hash IS NOT NULL FROM accounts WHERE id = ?", [.text(session.accountID)],
                row: { AccountProfile(id: $0.text(0), phone: $0.optionalText(1), email: $0.optionalText(2), hasPassword: $0.int(3) != 0, hasPIN: $0.int(4) != 0) })
            else { throw SessionFailure.ended }
            return profile
        }
    }

    func updateProfile(_ session: PresentedSession, email: String?, passwordHash: String?) async throws -> AccountInfo {
        try await withSession(session) { database, session in
            var detail: [String: JSONValue] = ["email": .bool(email != nil), "password": .bool(passwordHash != nil)]
            if let email {
                if try database.queryOne("SELECT 1 FROM accounts WHERE email = ? AND id != ?", [.text(email), .text(session.accountID)], row: { $0.int(0) }) != nil {
                    throw AccountFailure.emailTaken
                }
                // The record says which address replaced which, redacted as the journal shows them.
                let previous = try database.queryOne("SELECT email FROM accounts WHERE id = ?", [.text(session.accountID)]) { $0.optionalText(0) } ?? nil
                detail["email_from"] = previous.map { .string(AccountSettings.redacted(email: $0)) } ?? .null
                detail["email_to"] = .string(AccountSettings.redacted(email: email))
                try database.execute("UPDATE accounts SET email = ? WHERE id = ?", [.text(email), .text(session.accountID)])
            }
            if let passwordHash {
                try database.execute("UPDATE accounts SET password_hash = ?, failed_logins = 0, locked_until = NULL WHERE id = ?",
                                     [.text(passwordHash), .text(session.accountID)])
            }
            guard let info = try Self.accountInfo(in: database, id: session.accountID) else { throw SessionFailure.ended }
            detail["account"] = .string(info.id)
            try AuditScope.record(in: database, detail)
            return info
        }
    }

    func checkPINEnrolment(_ session: PresentedSession, reauthenticationWindow: Int64) async throws {
        let now = seconds
        try await withSession(session) { database, session in
            guard session.createdAt >= now - reauthenticationWindow else { throw AccountFailure.reauthRequired(for: "set a PIN") }
            let reenroll = try database.queryOne("SELECT pin_reenroll_required FROM accounts WHERE id = ?", [.text(session.accountID)]) { $0.int(0) != 0 } ?? false
            if reenroll && !session.amr.contains("otp") { throw AccountFailure.pinReenrolmentNeedsCode }
        }
    }

    func setPIN(_ session: PresentedSession, hash: String) async throws {
        try await withSession(session) { database, session in
            try database.execute(
                "UPDATE accounts SET pin_hash = ?, pin_failures = 0, pin_total_failures = 0, pin_locked_until = NULL, pin_reenroll_required = 0 WHERE id = ?",
                [.text(hash), .text(session.accountID)])
            try AuditScope.record(in: database, ["account": .string(session.accountID)])
        }
    }

    func removePIN(_ session: PresentedSession) async throws {
        try await withSession(session) { database, session in
            try database.execute("UPDATE accounts SET pin_hash = NULL, pin_failures = 0, pin_locked_until = NULL WHERE id = ?", [.text(session.accountID)])
            try AuditScope.record(in: database, ["account": .string(session.accountID)])
        }
    }

    // MARK: Helpers

    /// The column and value an `AccountKey` names.
    static func column(_ key: AccountKey) -> (String, String) {
        switch key {
        case .id(let id): ("id", id)
        case .email(let email): ("email", email)
        case .phone(let phone): ("phone", phone)
        }
    }
}

/// A hash to verify against when the account does not exist, so unknown accounts cost the same
/// time as wrong passwords. Made on first use, not at start-up (it costs ~50 ms and 19 MiB,
/// which start-up should not pay).
final class DecoyHash: Sendable {
    private let value = Mutex<String?>(nil)

    func hash() async throws -> String {
        if let made = value.withLock({ $0 }) { return made }
        let made = try await Argon2id.owasp.hashOffPool(OpenSSL.randomSecret(16))
        return value.withLock { current in
            if current == nil { current = made }
            return current!
        }
    }
}
