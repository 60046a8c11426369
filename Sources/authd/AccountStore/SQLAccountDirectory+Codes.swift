import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// Codes by SMS: the challenges of registration and of sign-in by code (`otp_flows`), and the
/// send records behind each number's hourly limit (`sms_sends`). Codes are stored only as HMACs.
/// A flow belongs to the machine and local user that opened it (`FlowOwner`): every later step
/// finds it only for them, so another caller cannot finish it even with the code.
extension SQLAccountDirectory {
    func openCodeChallenge(_ challenge: OTPChallenge, owner: FlowOwner, policy: OTPChallenge.Policy) async throws {
        let now = seconds
        try await store.transaction { database in
            try Self.checkSendLimit(in: database, phone: challenge.phone, now: now, policy: policy)
            try Self.insert(challenge, owner: owner, into: database)
            try database.execute("INSERT INTO sms_sends (phone, at) VALUES (?, ?)", [.text(challenge.phone), .integer(now)])
        }
    }

    func replaceCode(flow: String, purpose: OTPChallenge.Purpose, mac: [UInt8], owner: FlowOwner, policy: OTPChallenge.Policy) async throws -> OTPChallenge {
        let now = seconds
        return try await store.transaction { database -> OTPChallenge in
            guard var challenge = try Self.load(flow, purpose: purpose, owner: owner, from: database) else { throw AccountFailure.unknownRegistration }
            switch challenge.checkResend(now: now, policy: policy) {
            case .allowed: break
            case .closed: throw AccountFailure.registrationFinished
            case .tooManyResends: throw AccountFailure.tooManyResends(max: policy.maxResends)
            case .tooEarly(let retryAfter): throw AccountFailure.resendTooEarly(retryAfter: retryAfter)
            }
            try Self.checkSendLimit(in: database, phone: challenge.phone, now: now, policy: policy)
            challenge.replaceCode(mac: mac, now: now, policy: policy)
            try Self.update(challenge, in: database)
            try database.execute("INSERT INTO sms_sends (phone, at) VALUES (?, ?)", [.text(challenge.phone), .integer(now)])
            return challenge
        }
    }

    func voidCode(flow: String, mac: [UInt8]) async throws {
        let now = seconds
        try await store.transaction { database in
            try database.execute("UPDATE otp_flows SET code_deliverable = 0, resend_after = ? WHERE id = ? AND code_mac = ?",
                                 [.integer(now), .text(flow), .blob(mac)])
        }
    }

    func registrationPhone(flow: String, owner: FlowOwner) async throws -> String? {
        try await store.read { try Self.load(flow, purpose: .registration, owner: owner, from: $0)?.phone }
    }

    func register(flow: String, codeMAC: [UInt8], email: String?, passwordHash: String?, device: DeviceIdentity, owner: FlowOwner) async throws -> SignedIn {
        let now = seconds
        let config = config.current
        // One transaction: the attempt is counted (and persisted) even when it fails, so a
        // refusal is an answer of the transaction, not an error that would roll it back; and a
        // code can complete exactly one flow.
        return try await store.transaction { database -> Result<SignedIn, AccountFailure> in
            guard var challenge = try Self.load(flow, purpose: .registration, owner: owner, from: database) else { throw AccountFailure.unknownRegistration }
            let result = challenge.verify(codeMatches: OpenSSL.constantTimeEquals(challenge.codeMAC, codeMAC), now: now)
            try Self.update(challenge, in: database)
            switch result {
            case .accepted: break
            case .wrong(let left): return .failure(.wrongRegistrationCode(attemptsLeft: left))
            case .attemptsExhausted, .dead: return .failure(.registrationAttemptsExhausted)
            case .expired: return .failure(.registrationCodeExpired(at: challenge.expiresAt))
            case .alreadyUsed: return .failure(.codeUsed)
            }
            // The number is proven now; only now may we say it is taken.
            if try database.queryOne("SELECT 1 FROM accounts WHERE phone = ?", [.text(challenge.phone)], row: { $0.int(0) }) != nil {
                return .failure(.phoneTaken)
            }
            if let email, try database.queryOne("SELECT 1 FROM accounts WHERE email = ?", [.text(email)], row: { $0.int(0) }) != nil {
                // Not the code's fault: the flow stays open so the user can retry with another
                // address. The answer tells whether an address is taken, though, so it uses one
                // of the flow's attempts: one code must not test addresses without end.
                challenge.reopenUsingAnAttempt()
                try Self.update(challenge, in: database)
                return .failure(.emailTakenAtRegistration)
            }
            let account = "acc_" + Base64URL.encode(try OpenSSL.randomBytes(12))
            try database.execute(
                "INSERT INTO accounts (id, phone, phone_verified_at, email, password_hash, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                [.text(account), .text(challenge.phone), .integer(now), email.map(SQLValue.text) ?? .null, passwordHash.map(SQLValue.text) ?? .null,
                 .integer(now)])
            // The password was only set here, not used to sign in: the method is the code.
            return .success(try Self.signedIn(in: database, account: account, device: device, amr: ["otp"], config: config, now: now))
        }.get()
    }

    func hasActiveAccount(phone: String) async throws -> Bool {
        try await store.read { database in
            try database.queryOne("SELECT 1 FROM accounts WHERE phone = ? AND deactivated_at IS NULL", [.text(phone)]) { $0.int(0) } != nil
        }
    }

    func signInWithCode(flow: String, codeMAC: [UInt8], replacementMAC: [UInt8], device: DeviceIdentity, owner: FlowOwner,
                        policy: OTPChallenge.Policy) async throws -> CodeSignIn {
        let now = seconds
        let config = config.current
        // As for registration: a refusal is the transaction's answer, so the attempt counts.
        return try await store.transaction { database -> Result<CodeSignIn, AccountFailure> in
            switch try Self.attempt(flow: flow, purpose: .login, owner: owner, codeMAC: codeMAC, replacementMAC: replacementMAC, policy: policy,
                                    in: database, now: now) {
            case .accepted(let phone):
                guard let account = try database.queryOne("SELECT id FROM accounts WHERE phone = ? AND deactivated_at IS NULL",
                                                          [.text(phone)], row: { $0.text(0) })
                else { return .failure(.codeForNoAccount) }
                // The phone proved the person: a password lock lifts.
                try database.execute("UPDATE accounts SET failed_logins = 0, locked_until = NULL WHERE id = ?", [.text(account)])
                return .success(.signedIn(try Self.signedIn(in: database, account: account, device: device, amr: ["otp"], config: config, now: now)))
            case .replaced(let challenge, let deliver, let failure):
                return .success(.replaced(challenge, deliver: deliver, failure: failure))
            case .refused(let failure):
                return .failure(failure)
            }
        }.get()
    }

    func confirmCode(flow: String, account: String, codeMAC: [UInt8], replacementMAC: [UInt8], owner: FlowOwner,
                     policy: OTPChallenge.Policy) async throws -> CodeConfirmation {
        let now = seconds
        return try await store.transaction { database -> Result<CodeConfirmation, AccountFailure> in
            switch try Self.attempt(flow: flow, purpose: .unlock, owner: owner, codeMAC: codeMAC, replacementMAC: replacementMAC, policy: policy,
                                    in: database, now: now) {
            case .accepted(let phone):
                // The code proves the number, which must still be this account's.
                guard try database.queryOne("SELECT 1 FROM accounts WHERE id = ? AND phone = ? AND deactivated_at IS NULL",
                                            [.text(account), .text(phone)], row: { $0.int(0) }) != nil
                else { return .failure(.codeForNoAccount) }
                return .success(.confirmed)
            case .replaced(let challenge, _, let failure):
                return .success(.replaced(challenge, failure: failure))
            case .refused(let failure):
                return .failure(failure)
            }
        }.get()
    }

    /// What one attempt at a sign-in-style code led to, already written to `database`.
    private enum Attempt {
        /// The code was right; it proved `phone`.
        case accepted(phone: String)
        /// Wrong, and a new code replaced it (to be delivered when `deliver`).
        case replaced(OTPChallenge, deliver: Bool, failure: AccountFailure)
        case refused(AccountFailure)
    }

    /// One attempt at the code of a sign-in or unlock flow, inside the caller's transaction. A
    /// wrong code brings a fresh one at once (`replacementMAC`, or an unknowable one when the
    /// number has no account), at most `policy.maxResends` times; then the flow ends. When no
    /// new code may be sent (the number's hourly limit), the flow ends too: the attempt must
    /// always be counted, never undone by an error.
    private static func attempt(flow: String, purpose: OTPChallenge.Purpose, owner: FlowOwner, codeMAC: [UInt8], replacementMAC: [UInt8],
                                policy: OTPChallenge.Policy, in database: Database, now: Int64) throws -> Attempt {
        guard var challenge = try load(flow, purpose: purpose, owner: owner, from: database) else { throw AccountFailure.unknownRegistration }
        switch challenge.verify(codeMatches: OpenSSL.constantTimeEquals(challenge.codeMAC, codeMAC), now: now) {
        case .accepted:
            try update(challenge, in: database)
            return .accepted(phone: challenge.phone)
        case .wrong:
            let sendsThisHour = try sendsInLastHour(in: database, phone: challenge.phone, now: now)
            guard challenge.resends < policy.maxResends, sendsThisHour < policy.maxSendsPerHour else {
                challenge.state = .dead
                try update(challenge, in: database)
                return .refused(.signInAttemptsExhausted(afterNewCode: true))
            }
            let exists = try database.queryOne("SELECT 1 FROM accounts WHERE phone = ? AND deactivated_at IS NULL",
                                               [.text(challenge.phone)]) { $0.int(0) } != nil
            challenge.replaceCode(mac: exists ? replacementMAC : try OpenSSL.randomBytes(32), now: now, policy: policy)
            try update(challenge, in: database)
            try database.execute("INSERT INTO sms_sends (phone, at) VALUES (?, ?)", [.text(challenge.phone), .integer(now)])
            return .replaced(challenge, deliver: exists,
                             failure: .wrongSignInCode(newCodeSent: true, resendsLeft: policy.maxResends - challenge.resends))
        case .attemptsExhausted, .dead:
            try update(challenge, in: database)
            return .refused(.signInAttemptsExhausted(afterNewCode: false))
        case .expired:
            return .refused(.signInCodeExpired)
        case .alreadyUsed:
            return .refused(.codeUsed)
        }
    }

    // MARK: Rows

    static func sendsInLastHour(in database: Database, phone: String, now: Int64) throws -> Int {
        try database.queryOne("SELECT count(*) FROM sms_sends WHERE phone = ? AND at > ?", [.text(phone), .integer(now - 3600)]) { $0.int(0) } ?? 0
    }

    static func checkSendLimit(in database: Database, phone: String, now: Int64, policy: OTPChallenge.Policy) throws {
        let sends = try database.query("SELECT at FROM sms_sends WHERE phone = ? AND at > ? ORDER BY at", [.text(phone), .integer(now - 3600)]) { $0.int64(0) }
        if sends.count >= policy.maxSendsPerHour {
            throw AccountFailure.tooManyCodesSent(retryAfter: (sends.first ?? now) + 3600 - now)
        }
    }

    static func insert(_ challenge: OTPChallenge, owner: FlowOwner, into database: Database) throws {
        try database.execute(
            """
            INSERT INTO otp_flows (id, purpose, phone, code_mac, code_deliverable, created_at, expires_at, resend_after, resends, attempts_left, state,
                                   opened_by)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [.text(challenge.id), .text(challenge.purpose.rawValue), .text(challenge.phone), .blob(challenge.codeMAC),
             .integer(challenge.codeDeliverable ? 1 : 0), .integer(challenge.createdAt), .integer(challenge.expiresAt),
             .integer(challenge.resendAfter), .integer(Int64(challenge.resends)), .integer(Int64(challenge.attemptsLeft)), .text(challenge.state.rawValue),
             .text(owner.stored)])
    }

    static func update(_ challenge: OTPChallenge, in database: Database) throws {
        try database.execute(
            "UPDATE otp_flows SET code_mac = ?, code_deliverable = ?, expires_at = ?, resend_after = ?, resends = ?, attempts_left = ?, state = ? WHERE id = ?",
            [.blob(challenge.codeMAC), .integer(challenge.codeDeliverable ? 1 : 0), .integer(challenge.expiresAt), .integer(challenge.resendAfter),
             .integer(Int64(challenge.resends)), .integer(Int64(challenge.attemptsLeft)), .text(challenge.state.rawValue), .text(challenge.id)])
    }

    /// The flow `id` if `owner` opened it; another caller's is unknown to it.
    static func load(_ id: String, purpose: OTPChallenge.Purpose, owner: FlowOwner, from database: Database) throws -> OTPChallenge? {
        guard id.utf8.count <= 64 else { return nil }
        return try database.queryOne(
            """
            SELECT id, purpose, phone, code_mac, code_deliverable, created_at, expires_at, resend_after, resends, attempts_left, state
            FROM otp_flows WHERE id = ? AND purpose = ? AND opened_by = ?
            """,
            [.text(id), .text(purpose.rawValue), .text(owner.stored)]
        ) { row in
            OTPChallenge(id: row.text(0), purpose: OTPChallenge.Purpose(rawValue: row.text(1)) ?? purpose, phone: row.text(2), codeMAC: row.blob(3),
                         codeDeliverable: row.int(4) != 0, createdAt: row.int64(5), expiresAt: row.int64(6), resendAfter: row.int64(7),
                         resends: row.int(8), attemptsLeft: row.int(9), state: OTPChallenge.State(rawValue: row.text(10)) ?? .dead)
        }
    }
}
