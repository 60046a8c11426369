import FoundationEssentials
import Protocol

/// Sessions and devices: opaque 256-bit bearer tokens stored as SHA-256 hashes, each bound to a
/// device record, with an idle timeout and a maximum lifetime.
enum SessionStore {
    /// The device a new session will be bound to: the caller's description, or this machine.
    struct DeviceIdentity: Sendable {
        let key: String
        let name: String
        /// False when `name` is the default (the host name): it then never renames a device.
        var nameGiven = true

        static func resolve(_ description: DeviceDescription?) throws(RPCError) -> DeviceIdentity {
            for (field, value) in [("device.key", description?.key), ("device.name", description?.name)] {
                if let value {
                    guard (1...128).contains(value.count), !value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
                        throw .invalidParams("Parameter '\(field)' must be 1–128 printable characters.", field: field)
                    }
                }
            }
            return DeviceIdentity(key: description?.key ?? "machine:\(machineKey)", name: description?.name ?? hostName,
                                  nameGiven: description?.name != nil)
        }

        /// A hash of /etc/machine-id (never the id itself: it is meant to stay on the machine).
        private static let machineKey: String = {
            let id = (try? Syscalls.readFile("/etc/machine-id", limit: 4096)) ?? nil
            return Base64URL.encode(OpenSSL.sha256((id ?? Array(hostName.utf8)) + Array("authd device".utf8)).prefix(12))
        }()

        private static let hostName: String = Syscalls.hostName() ?? "this computer"
    }

    /// Creates a session for `account` on `device` inside the caller's transaction. Refuses with
    /// `device.limit_reached` (creating nothing) when the device is new and the account already
    /// has `limit` active devices.
    static func create(in database: Database, account: String, device: DeviceIdentity, amr: [String], limit defaultLimit: Int,
                       policy defaultPolicy: Config.DevicePolicy = .deny, idle: Int64 = Int64.max / 4,
                       now: Int64, lifetime: Int64) throws -> SessionToken {
        // The account's own limit and policy, when an admin set them, win over the settings.
        let (accountLimit, accountPolicy) = try database.queryOne("SELECT device_limit, device_policy FROM accounts WHERE id = ?", [.text(account)]) {
            ($0.optionalInt64(0), $0.optionalText(1))
        } ?? (nil, nil)
        let limit = accountLimit.map(Int.init) ?? defaultLimit
        let policy = accountPolicy.flatMap(Config.DevicePolicy.init(rawValue:)) ?? defaultPolicy
        let existing = try database.queryOne(
            "SELECT id FROM devices WHERE account_id = ? AND device_key = ? AND revoked_at IS NULL",
            [.text(account), .text(device.key)]) { $0.text(0) }
        // A device counts while it has a live session (not revoked, not past its lifetime or
        // idle timeout): signing out everywhere on a device, or device.revoke, frees its place.
        let liveDevices = try database.query(
            """
            SELECT DISTINCT d.id FROM devices d JOIN sessions s ON s.device_id = d.id
            WHERE d.account_id = ? AND d.revoked_at IS NULL AND s.revoked_at IS NULL AND s.expires_at > ? AND s.last_used_at > ?
            """, [.text(account), .integer(now), .integer(now &- idle)]) { $0.text(0) }
        let deviceID: String
        if let existing, liveDevices.contains(existing) {
            deviceID = existing
            try database.execute("UPDATE devices SET last_seen = ? WHERE id = ?", [.integer(now), .text(existing)])
        } else {
            let active = liveDevices.count
            if active >= limit && policy == .replaceOldest {
                // End the sessions of the least recently used devices until there is room.
                let oldest = try database.query(
                    """
                    SELECT d.id FROM devices d JOIN sessions s ON s.device_id = d.id
                    WHERE d.account_id = ? AND d.revoked_at IS NULL AND s.revoked_at IS NULL AND s.expires_at > ?
                    GROUP BY d.id ORDER BY max(s.last_used_at), max(s.created_at), d.rowid LIMIT ?
                    """, [.text(account), .integer(now), .integer(Int64(active - limit + 1))]) { $0.text(0) }
                for id in oldest {
                    try database.execute("UPDATE sessions SET revoked_at = ? WHERE device_id = ? AND revoked_at IS NULL", [.integer(now), .text(id)])
                }
            } else if active >= limit {
                throw RPCError.failure(.deviceLimitReached,
                    "This account is already signed in on \(active) device\(active == 1 ? "" : "s"), its limit; sign out on one of them or remove it (device.revoke) first.",
                    details: ["limit": .integer(Int64(limit))])
            }
            if let existing {
                // A known device coming back after all its sessions ended counts again.
                deviceID = existing
                try database.execute("UPDATE devices SET last_seen = ? WHERE id = ?", [.integer(now), .text(existing)])
            } else {
                deviceID = "dev_" + Base64URL.encode(try OpenSSL.randomBytes(12))
                try database.execute(
                    "INSERT INTO devices (id, account_id, device_key, name, first_seen, last_seen) VALUES (?, ?, ?, ?, ?, ?)",
                    [.text(deviceID), .text(account), .text(device.key), .text(device.name), .integer(now), .integer(now)])
            }
        }
        if device.nameGiven {
            try database.execute("UPDATE devices SET name = ? WHERE id = ?", [.text(device.name), .text(deviceID)])
        }
        var raw = try OpenSSL.randomBytes(32)
        defer { OpenSSL.wipe(&raw) }
        let token = "as1." + Base64URL.encode(raw)
        let id = "ses_" + Base64URL.encode(try OpenSSL.randomBytes(12))
        let amrJSON = String(decoding: try WireCodec.encodeJSON(amr), as: UTF8.self)
        try database.execute(
            "INSERT INTO sessions (id, account_id, device_id, token_hash, amr, created_at, last_used_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [.text(id), .text(account), .text(deviceID), .blob(hash(token)), .text(amrJSON), .integer(now), .integer(now), .integer(now + lifetime)])
        return SessionToken(token: token, id: id, deviceID: deviceID, expiresAt: Timestamp.rfc3339(epochSeconds: now + lifetime))
    }

    /// The account as clients see it, found by `column` (`id` or `phone`); deactivated
    /// accounts only when `includeDeactivated`.
    static func accountInfo(in database: Database, where column: String, is value: String, includeDeactivated: Bool = true) throws -> AccountInfo? {
        try database.queryOne(
            "SELECT id, phone, email, password_hash IS NOT NULL FROM accounts WHERE \(column) = ?" + (includeDeactivated ? "" : " AND deactivated_at IS NULL"),
            [.text(value)]) { AccountInfo(id: $0.text(0), phone: $0.optionalText(1), email: $0.optionalText(2), hasPassword: $0.int(3) != 0) }
    }

    static func hash(_ token: String) -> [UInt8] {
        OpenSSL.sha256(Array(token.utf8))
    }

    struct Active: Sendable {
        let id: String
        let accountID: String
        let deviceID: String
        let amr: [String]
        let createdAt: Int64
        let expiresAt: Int64
        let idleExpiresAt: Int64
    }

    /// The live session for `token`, touching its idle timer; `session.invalid` or
    /// `session.expired` otherwise. Lookup is by hash, so no token comparison leaks timing.
    static func authenticate(in database: Database, token: String, now: Int64, idle: Int64) throws -> Active {
        guard token.hasPrefix("as1."), token.utf8.count < 100 else {
            throw RPCError.failure(.sessionInvalid, "That is not a session token.")
        }
        struct Row: Sendable { let id, account, device, amr: String; let created, lastUsed, expires: Int64; let revoked: Bool; let deactivated: Bool }
        let row = try database.queryOne(
            """
            SELECT s.id, s.account_id, s.device_id, s.amr, s.created_at, s.last_used_at, s.expires_at,
                   s.revoked_at IS NOT NULL OR d.revoked_at IS NOT NULL, a.deactivated_at IS NOT NULL
            FROM sessions s JOIN devices d ON d.id = s.device_id JOIN accounts a ON a.id = s.account_id
            WHERE s.token_hash = ?
            """, [.blob(hash(token))]
        ) { Row(id: $0.text(0), account: $0.text(1), device: $0.text(2), amr: $0.text(3), created: $0.int64(4), lastUsed: $0.int64(5),
                expires: $0.int64(6), revoked: $0.int(7) != 0, deactivated: $0.int(8) != 0) }
        guard let row, !row.revoked, !row.deactivated else {
            throw RPCError.failure(.sessionInvalid, "This session has ended; sign in again.")
        }
        guard now < row.expires, now < row.lastUsed + idle else {
            throw RPCError.failure(.sessionExpired, "This session has expired; sign in again.")
        }
        try database.execute("UPDATE sessions SET last_used_at = ? WHERE id = ?", [.integer(now), .text(row.id)])
        let amr = (try? WireCodec.decode([String].self, from: Data(row.amr.utf8))) ?? []
        return Active(id: row.id, accountID: row.account, deviceID: row.device, amr: amr, createdAt: row.created,
                      expiresAt: row.expires, idleExpiresAt: now + idle)
    }

    static func revoke(in database: Database, sessionID: String, now: Int64) throws {
        try database.execute("UPDATE sessions SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", [.integer(now), .text(sessionID)])
    }
}
