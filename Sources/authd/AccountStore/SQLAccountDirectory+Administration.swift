import FoundationEssentials
import Protocol

/// The admin view of accounts, and the hourly purge of what has expired for good.
extension SQLAccountDirectory {
    private static func recordColumns(_ dialect: SQLDialect) -> String {
        """
        SELECT a.id, a.phone, a.email, a.created_at, a.deactivated_at, \(dialect.greatest)(coalesce(a.locked_until, 0), coalesce(a.pin_locked_until, 0)),
               a.password_hash IS NOT NULL, a.pin_hash IS NOT NULL,
               (SELECT count(*) FROM devices d WHERE d.account_id = a.id AND d.revoked_at IS NULL),
               a.device_limit, a.device_policy, a.e2ee, a.pin_reenroll_required
        FROM accounts a
        """
    }

    private static func record(in database: Database, id: String, now: Int64) throws -> AccountRecord? {
        try database.queryOne(recordColumns(database.dialect) + " WHERE a.id = ?", [.text(id)]) { record($0, now: now) }
    }

    private static func record(_ row: Row, now: Int64) -> AccountRecord {
        let locked = row.int64(5)
        return AccountRecord(
            id: row.text(0), phone: row.optionalText(1), email: row.optionalText(2), createdAt: Timestamp.rfc3339(epochSeconds: row.int64(3)),
            deactivatedAt: row.optionalInt64(4).map { Timestamp.rfc3339(epochSeconds: $0) },
            lockedUntil: locked > now ? Timestamp.rfc3339(epochSeconds: locked) : nil,
            hasPassword: row.int(6) != 0, hasPIN: row.int(7) != 0, pinSwitchedOff: row.int(12) != 0 ? true : nil, activeDevices: row.int(8),
            deviceLimit: row.optionalInt64(9).map(Int.init), devicePolicy: row.optionalText(10), e2ee: E2EEMode(rawValue: row.text(11)))
    }

    /// The first account any of `keys` names.
    private static func resolve(_ keys: [AccountKey], selector: String, in database: Database) throws -> String {
        for key in keys {
            let (column, value) = column(key)
            if let id = try database.queryOne("SELECT id FROM accounts WHERE \(column) = ?", [.text(value)], row: { $0.text(0) }) { return id }
        }
        throw AccountFailure.unknownAccount(selector: selector)
    }

    /// Changes the account `keys` name with `change` and answers its record, in one transaction.
    private func administer(_ keys: [AccountKey], selector: String,
                            _ change: @escaping @Sendable (Database, String, Int64) throws -> Void = { _, _, _ in }) async throws -> AccountRecord {
        let now = seconds
        return try await store.transaction { database in
            let id = try Self.resolve(keys, selector: selector, in: database)
            try change(database, id, now)
            guard let record = try Self.record(in: database, id: id, now: now) else { throw AccountFailure.unknownAccount(selector: selector) }
            return record
        }
    }

    func accounts(limit: Int) async throws -> [AccountRecord] {
        let now = seconds
        return try await store.read { database in
            try database.query(Self.recordColumns(database.dialect) + " ORDER BY a.created_at DESC, a.id LIMIT ?", [.integer(Int64(limit))]) { Self.record($0, now: now) }
        }
    }

    func account(id: String) async throws -> AccountRecord {
        try await account([.id(id)], selector: id)
    }

    func account(_ keys: [AccountKey], selector: String) async throws -> AccountRecord {
        try await administer(keys, selector: selector)
    }

    func unlock(_ keys: [AccountKey], selector: String) async throws -> AccountRecord {
        try await administer(keys, selector: selector) { database, id, _ in
            try database.execute("UPDATE accounts SET failed_logins = 0, locked_until = NULL, pin_failures = 0, pin_locked_until = NULL WHERE id = ?", [.text(id)])
            try AuditScope.record(in: database, ["account": .string(id)])
        }
    }

    func setDevicePolicy(_ keys: [AccountKey], selector: String, limit: Int?, policy: Config.DevicePolicy?) async throws -> AccountRecord {
        try await administer(keys, selector: selector) { database, id, _ in
            try database.execute("UPDATE accounts SET device_limit = ?, device_policy = ? WHERE id = ?",
                                 [limit.map { .integer(Int64($0)) } ?? .null, policy.map { .text($0.rawValue) } ?? .null, .text(id)])
            try AuditScope.record(in: database, [
                "account": .string(id), "device_limit": limit.map { .integer(Int64($0)) } ?? .null, "device_policy": policy.map { .string($0.rawValue) } ?? .null,
            ])
        }
    }

    func setE2EE(_ keys: [AccountKey], selector: String, mode: E2EEMode) async throws -> AccountRecord {
        try await administer(keys, selector: selector) { database, id, _ in
            try DeviceKeyBook.setMode(mode, account: id, in: database)
            try AuditScope.record(in: database, ["account": .string(id), "e2ee": .string(mode.rawValue)])
        }
    }

    func deactivate(_ keys: [AccountKey], selector: String) async throws -> AccountRecord {
        try await administer(keys, selector: selector) { database, id, now in
            try Self.deactivate(in: database, account: id, now: now)
            try AuditScope.record(in: database, ["account": .string(id)])
        }
    }

    /// How long ended session rows and finished code flows are kept (only hashes and MACs).
    static let endedSessionRetention: Int64 = 7 * 86400
    static let flowRetention: Int64 = 86400

    func purgeExpired() async throws -> DirectoryPurge {
        let now = seconds
        return try await store.transaction(durability: .relaxed) { database in
            var purged = DirectoryPurge()
            try database.execute("DELETE FROM otp_flows WHERE expires_at < ?", [.integer(now - Self.flowRetention)])
            purged.flows = database.changes
            try database.execute("DELETE FROM sms_sends WHERE at < ?", [.integer(now - 3600)])
            purged.sends = database.changes
            try database.execute("DELETE FROM login_flows WHERE expires_at < ?", [.integer(now)])
            purged.signIns = database.changes
            try database.execute(
                "DELETE FROM sessions WHERE coalesce(revoked_at, expires_at) < ? AND (revoked_at IS NOT NULL OR expires_at < ?)",
                [.integer(now - Self.endedSessionRetention), .integer(now)])
            purged.sessions = database.changes
            // Kept a skew longer than the validator takes them: another replica's clock may be
            // behind this one's. Here, not at each sign-in: on PostgreSQL that delete's read of
            // the table would make concurrent sign-ins conflict and retry.
            try database.execute("DELETE FROM used_id_tokens WHERE expires_at < ?", [.integer(now - IDTokenValidator.skewSeconds)])
            purged.idTokens = database.changes
            return purged
        }
    }
}
