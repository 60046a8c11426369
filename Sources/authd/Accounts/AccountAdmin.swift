import FoundationEssentials
import Protocol

/// Deactivation and the admin view of accounts (issue 3, item 10).
struct AccountAdmin: Sendable {
    let store: Store
    let logger: Logger
    let now: @Sendable () -> Date

    private var seconds: Int64 { Int64(now().timeIntervalSince1970) }

    /// Marks the account deactivated and ends every device and session, in one transaction.
    static func deactivate(in database: Database, account: String, now: Int64) throws {
        try database.execute("UPDATE accounts SET deactivated_at = ? WHERE id = ? AND deactivated_at IS NULL", [.integer(now), .text(account)])
        try database.execute("UPDATE devices SET revoked_at = ? WHERE account_id = ? AND revoked_at IS NULL", [.integer(now), .text(account)])
        try database.execute("UPDATE sessions SET revoked_at = ? WHERE account_id = ? AND revoked_at IS NULL", [.integer(now), .text(account)])
        try database.execute("DELETE FROM login_flows WHERE account_id = ?", [.text(account)])
    }

    func deactivate(_ params: AccountDeactivate.Params, sessions: SessionService, login: Login) async throws -> AccountDeactivate.Result {
        let account = try await sessions.withSession(params.session) { _, session in session.accountID }
        // Re-authentication with the password or the PIN, under the same locks as sign-in.
        if let password = params.password {
            try await login.confirmPassword(password, account: account)
        } else if let pin = params.pin {
            try await login.confirmPIN(pin, account: account)
        } else {
            throw InvalidParameter("Give 'password' or 'pin' to confirm the deactivation.", field: "password")
        }
        let now = seconds
        try await store.transaction { try Self.deactivate(in: $0, account: account, now: now) }
        logger.notice("account deactivated by its owner", [("AUTHD_ACCOUNT", account)])
        return .init(deactivated: true)
    }

    // MARK: Admin

    private static let recordColumns = """
        SELECT a.id, a.phone, a.email, a.created_at, a.deactivated_at, max(coalesce(a.locked_until, 0), coalesce(a.pin_locked_until, 0)),
               a.password_hash IS NOT NULL, a.pin_hash IS NOT NULL,
               (SELECT count(*) FROM devices d WHERE d.account_id = a.id AND d.revoked_at IS NULL),
               a.device_limit, a.device_policy
        FROM accounts a
        """

    private static func record(_ row: Row, now: Int64) -> AccountRecord {
        let locked = row.int64(5)
        return AccountRecord(
            id: row.text(0), phone: row.optionalText(1), email: row.optionalText(2), createdAt: Timestamp.rfc3339(epochSeconds: row.int64(3)),
            deactivatedAt: row.optionalInt64(4).map { Timestamp.rfc3339(epochSeconds: $0) },
            lockedUntil: locked > now ? Timestamp.rfc3339(epochSeconds: locked) : nil,
            hasPassword: row.int(6) != 0, hasPIN: row.int(7) != 0, activeDevices: row.int(8),
            deviceLimit: row.optionalInt64(9).map(Int.init), devicePolicy: row.optionalText(10))
    }

    func list(limit: Int?) async throws -> AdminAccountsList.Result {
        let limit = limit ?? 100
        guard (1...1000).contains(limit) else { throw InvalidParameter("Parameter 'limit' must be from 1 to 1000.", field: "limit") }
        let now = seconds
        return try await store.read { database in
            AdminAccountsList.Result(accounts: try database.query(Self.recordColumns + " ORDER BY a.created_at DESC, a.id LIMIT ?", [.integer(Int64(limit))]) {
                Self.record($0, now: now)
            })
        }
    }

    /// Finds an account by id, phone (any format libphonenumber reads) or email.
    private static func resolve(_ selector: String, in database: Database) throws -> String {
        var candidates = [("id", selector)]
        if selector.contains("@"), let email = try? Registration.normalizeEmail(selector) { candidates.append(("email", email)) }
        if let phone = try? PhoneNumber.parse(selector, region: nil) { candidates.append(("phone", phone.e164)) }
        for (column, value) in candidates {
            if let id = try database.queryOne("SELECT id FROM accounts WHERE \(column) = ?", [.text(value)], row: { $0.text(0) }) { return id }
        }
        throw AccountFailure.unknownAccount(selector: selector)
    }

    func show(_ selector: String) async throws -> AccountRecord {
        let now = seconds
        return try await store.read { database in
            let id = try Self.resolve(selector, in: database)
            return try database.queryOne(Self.recordColumns + " WHERE a.id = ?", [.text(id)]) { Self.record($0, now: now) }!
        }
    }

    func unlock(_ selector: String) async throws -> AccountRecord {
        let now = seconds
        return try await store.transaction { database in
            let id = try Self.resolve(selector, in: database)
            try database.execute("UPDATE accounts SET failed_logins = 0, locked_until = NULL, pin_failures = 0, pin_locked_until = NULL WHERE id = ?", [.text(id)])
            return try database.queryOne(Self.recordColumns + " WHERE a.id = ?", [.text(id)]) { Self.record($0, now: now) }!
        }
    }

    func set(_ params: AdminAccountsSet.Params) async throws -> AccountRecord {
        if let limit = params.deviceLimit, !(1...1000).contains(limit) {
            throw InvalidParameter("Parameter 'device_limit' must be from 1 to 1000.", field: "device_limit")
        }
        if let policy = params.devicePolicy, Config.DevicePolicy(rawValue: policy) == nil {
            throw InvalidParameter("Parameter 'device_policy' must be deny or replace_oldest.", field: "device_policy")
        }
        let now = seconds
        return try await store.transaction { database in
            let id = try Self.resolve(params.account, in: database)
            try database.execute("UPDATE accounts SET device_limit = ?, device_policy = ? WHERE id = ?",
                                 [params.deviceLimit.map { .integer(Int64($0)) } ?? .null, params.devicePolicy.map { .text($0) } ?? .null, .text(id)])
            return try database.queryOne(Self.recordColumns + " WHERE a.id = ?", [.text(id)]) { Self.record($0, now: now) }!
        }
    }

    func deactivate(_ selector: String) async throws -> AccountRecord {
        let now = seconds
        return try await store.transaction { database in
            let id = try Self.resolve(selector, in: database)
            try Self.deactivate(in: database, account: id, now: now)
            return try database.queryOne(Self.recordColumns + " WHERE a.id = ?", [.text(id)]) { Self.record($0, now: now) }!
        }
    }
}
