import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// Methods that act for the account behind a session token: profile, sessions, devices,
/// account tokens.
struct SessionService: Sendable {
    let store: Store
    let config: ConfigHolder
    let tokens: TokenService
    let now: @Sendable () -> Date

    private var seconds: Int64 { Int64(now().timeIntervalSince1970) }

    /// Runs `body` in one transaction with the live session for `token`.
    func withSession<T: Sendable>(_ token: String, _ body: @escaping @Sendable (Database, SessionStore.Active) throws -> T) async throws -> T {
        let now = seconds
        let idle = Int64(config.current.sessionIdleSeconds)
        return try await store.transaction { database in
            try body(database, try SessionStore.authenticate(in: database, token: token, now: now, idle: idle))
        }
    }

    func setProfile(_ params: AccountProfileSet.Params, login: Login) async throws -> AccountInfo {
        let email = try params.email.map(Registration.normalizeEmail)
        struct Current: Sendable { let id: String; let phone, email, hash: String?; let hasPIN: Bool }
        let current = try await withSession(params.session) { database, session in
            try database.queryOne("SELECT id, phone, email, password_hash, pin_hash IS NOT NULL FROM accounts WHERE id = ?", [.text(session.accountID)]) {
                Current(id: $0.text(0), phone: $0.optionalText(1), email: $0.optionalText(2), hash: $0.optionalText(3), hasPIN: $0.int(4) != 0)
            }!
        }
        var newHash: String?
        if let password = params.password {
            if current.hash != nil {
                // Changing a password needs the current one: a stolen session must not be
                // enough, nor a way to guess it without the lockout.
                guard let old = params.currentPassword else {
                    throw RPCError.invalidParams("Changing the password needs 'current_password'.", field: "current_password")
                }
                try await login.confirmPassword(old, account: current.id)
            }
            try PasswordPolicy.check(password, hasSecondFactor: current.hasPIN, identifiers: [current.phone ?? "", email ?? current.email ?? ""])
            newHash = try await Argon2id.owasp.hashOffPool(SecretBytes(Array(password.utf8)))
        }
        let passwordHash = newHash
        return try await withSession(params.session) { database, session in
            if let email {
                if try database.queryOne("SELECT 1 FROM accounts WHERE email = ? AND id != ?", [.text(email), .text(session.accountID)], row: { $0.int(0) }) != nil {
                    throw RPCError.failure(.emailTaken, "This email address belongs to another account.")
                }
                try database.execute("UPDATE accounts SET email = ? WHERE id = ?", [.text(email), .text(session.accountID)])
            }
            if let passwordHash {
                try database.execute("UPDATE accounts SET password_hash = ?, failed_logins = 0, locked_until = NULL WHERE id = ?",
                                     [.text(passwordHash), .text(session.accountID)])
            }
            return try SessionStore.accountInfo(in: database, where: "id", is: session.accountID)!
        }
    }

    // MARK: PIN second factor

    /// Sessions older than this must sign in again before changing security settings.
    static let reauthenticationWindow: Int64 = 600

    func enablePIN(_ params: TwoFactorPINEnable.Params) async throws -> TwoFactorPINEnable.Result {
        try PINPolicy.check(params.pin)
        guard OpenSSL.constantTimeEquals(Array(params.pin.utf8), Array(params.confirm.utf8)) else {
            throw RPCError.failure(.pinMismatch, "The PIN and its confirmation differ.")
        }
        let now = seconds
        let (_, reenroll) = try await withSession(params.session) { database, session in
            guard session.createdAt >= now - Self.reauthenticationWindow else {
                throw RPCError.failure(.reauthRequired, "Sign in again (within the last 10 minutes) to set a PIN.")
            }
            let reenroll = try database.queryOne("SELECT pin_reenroll_required FROM accounts WHERE id = ?", [.text(session.accountID)]) { $0.int(0) != 0 } ?? false
            if reenroll && !session.amr.contains("otp") {
                throw RPCError.failure(.otpRequired, "After too many wrong PINs, a new PIN needs a session that proved the phone with an SMS code.")
            }
            return (session.accountID, reenroll)
        }
        _ = reenroll
        let hash = try await Argon2id.owasp.hashOffPool(SecretBytes(Array(params.pin.utf8)))
        try await withSession(params.session) { database, session in
            try database.execute(
                "UPDATE accounts SET pin_hash = ?, pin_failures = 0, pin_total_failures = 0, pin_locked_until = NULL, pin_reenroll_required = 0 WHERE id = ?",
                [.text(hash), .text(session.accountID)])
        }
        return .init(enabled: true)
    }

    func disablePIN(_ params: TwoFactorPINDisable.Params, login: Login) async throws -> TwoFactorPINEnable.Result {
        let account = try await withSession(params.session) { _, session in session.accountID }
        // Both, each with its own lock and counters, as at sign-in.
        try await login.confirmPassword(params.password, account: account)
        try await login.confirmPIN(params.pin, account: account)
        try await withSession(params.session) { database, session in
            try database.execute("UPDATE accounts SET pin_hash = NULL, pin_failures = 0, pin_locked_until = NULL WHERE id = ?", [.text(session.accountID)])
        }
        return .init(enabled: false)
    }

    /// `session.get`: what the token stands for (authenticating it refreshes its idle timer).
    func describe(_ token: String) async throws -> SessionGet.Result {
        try await withSession(token) { database, session in
            guard let account = try SessionStore.accountInfo(in: database, where: "id", is: session.accountID),
                  let device = try database.queryOne("SELECT id, name FROM devices WHERE id = ?", [.text(session.deviceID)], row: {
                      DeviceSummary(id: $0.text(0), name: $0.text(1))
                  })
            else { throw RPCError.failure(.sessionInvalid, "This session has ended; sign in again.") }
            return SessionGet.Result(
                id: session.id, account: account, device: device, amr: session.amr,
                createdAt: Timestamp.rfc3339(epochSeconds: session.createdAt), expiresAt: Timestamp.rfc3339(epochSeconds: session.expiresAt),
                idleExpiresAt: Timestamp.rfc3339(epochSeconds: session.idleExpiresAt))
        }
    }

    /// `auth.logout`: ends the session; returns its id.
    func logout(_ token: String) async throws -> String {
        let now = seconds
        return try await withSession(token) { database, session in
            try SessionStore.revoke(in: database, sessionID: session.id, now: now)
            return session.id
        }
    }

    func listSessions(_ token: String) async throws -> SessionList.Result {
        let now = seconds
        let idle = Int64(config.current.sessionIdleSeconds)
        return try await withSession(token) { database, session in
            let sessions = try database.query(
                """
                SELECT s.id, s.device_id, s.amr, s.created_at, s.last_used_at, s.expires_at FROM sessions s
                JOIN devices d ON d.id = s.device_id
                WHERE s.account_id = ? AND s.revoked_at IS NULL AND d.revoked_at IS NULL AND s.expires_at > ? AND s.last_used_at > ?
                ORDER BY s.created_at
                """, [.text(session.accountID), .integer(now), .integer(now - idle)]
            ) { row in
                SessionSummary(id: row.text(0), deviceID: row.text(1), amr: (try? WireCodec.decode([String].self, from: Data(row.text(2).utf8))) ?? [],
                               createdAt: Timestamp.rfc3339(epochSeconds: row.int64(3)), lastUsedAt: Timestamp.rfc3339(epochSeconds: row.int64(4)),
                               expiresAt: Timestamp.rfc3339(epochSeconds: row.int64(5)), current: row.text(0) == session.id)
            }
            return SessionList.Result(sessions: sessions)
        }
    }

    func revokeSession(_ params: SessionItemParams) async throws -> SessionRevoke.Result {
        let now = seconds
        return try await withSession(params.session) { database, session in
            try database.execute("UPDATE sessions SET revoked_at = ? WHERE id = ? AND account_id = ? AND revoked_at IS NULL",
                                 [.integer(now), .text(params.id), .text(session.accountID)])
            guard database.changes == 1 else { throw RPCError.failure(Reason("session.unknown"), "The account has no live session with that id.") }
            return SessionRevoke.Result(revoked: true)
        }
    }

    func listDevices(_ token: String) async throws -> DeviceList.Result {
        let limit = config.current.deviceLimit
        return try await withSession(token) { database, session in
            let devices = try database.query(
                "SELECT id, name, first_seen, last_seen FROM devices WHERE account_id = ? AND revoked_at IS NULL ORDER BY first_seen",
                [.text(session.accountID)]) { row in
                DeviceRecord(id: row.text(0), name: row.text(1), firstSeen: Timestamp.rfc3339(epochSeconds: row.int64(2)),
                             lastSeen: Timestamp.rfc3339(epochSeconds: row.int64(3)), current: row.text(0) == session.deviceID)
            }
            let own = try database.queryOne("SELECT device_limit FROM accounts WHERE id = ?", [.text(session.accountID)]) { $0.optionalInt64(0) } ?? nil
            return DeviceList.Result(devices: devices, limit: own.map(Int.init) ?? limit)
        }
    }

    /// Removes a device: its sessions end at once and it no longer counts against the limit.
    func revokeDevice(_ params: SessionItemParams) async throws -> SessionRevoke.Result {
        let now = seconds
        return try await withSession(params.session) { database, session in
            try database.execute("UPDATE devices SET revoked_at = ? WHERE id = ? AND account_id = ? AND revoked_at IS NULL",
                                 [.integer(now), .text(params.id), .text(session.accountID)])
            guard database.changes == 1 else { throw RPCError.failure(Reason("device.unknown"), "The account has no device with that id.") }
            try database.execute("UPDATE sessions SET revoked_at = ? WHERE device_id = ? AND revoked_at IS NULL", [.integer(now), .text(params.id)])
            return SessionRevoke.Result(revoked: true)
        }
    }

    func accountToken(_ params: AuthToken.Params, caller: CallerIdentity) async throws -> IssuedToken {
        let session = try await withSession(params.session) { _, session in session }
        return try tokens.issueAccount(accountID: session.accountID, amr: session.amr, caller: caller, aud: params.aud, nonce: params.nonce)
    }
}
