import FoundationEssentials
import OpenSSLCrypto
import Protocol
import Synchronization

/// The account directory on the store that holds the accounts: the daemon's SQLite file, or a
/// hub's database on PostgreSQL (one SQL text for both; what the engines spell differently is
/// the store's `SQLDialect`). The only code with statements on the account tables: `accounts`, `devices`, `sessions`, `otp_flows`, `sms_sends`, `login_flows`,
/// `federated_identities`, `used_id_tokens`, `account_passkeys`, `passkey_flows`. Split by area over this file
/// and its `+Codes`, `+Credentials`, `+Links` and `+Administration` extensions.
///
/// Session tokens are opaque 256-bit bearer tokens stored only as SHA-256 hashes, each bound to
/// a device record, with an idle timeout and a maximum lifetime (`[accounts]`).
struct SQLAccountDirectory: AccountDirectory {
    let store: Store
    let config: ConfigHolder
    let logger: Logger
    let now: @Sendable () -> Date
    /// The soft lock against guessing passwords and PINs.
    let lockout = Lockout()
    /// The locks set by checks still in progress: a refusal under one is `busy`, not `locked`.
    let locksInFlight = LocksInFlight<Factor>()
    /// A hash to verify against when an account does not exist (see `signIn(password:…)`).
    let decoy = DecoyHash()

    init(store: Store, config: ConfigHolder, logger: Logger, now: @escaping @Sendable () -> Date) {
        self.store = store
        self.config = config
        self.logger = logger
        self.now = now
    }

    var seconds: Int64 { Int64(now().timeIntervalSince1970) }

    // MARK: Sessions (inside a caller's transaction)

    /// Creates a session for `account` on `device`. Refuses with `deviceLimitReached` (creating
    /// nothing) when the device is new and the account already has its limit of active
    /// devices, unless the account's policy makes room by ending the least recently used ones.
    static func createSession(in database: Database, account: String, device: DeviceIdentity, amr: [String], federation: String? = nil,
                              config: Config, now: Int64) throws -> SessionToken {
        let idle = Int64(config.sessionIdleSeconds)
        // The account's own limit and policy, when an admin set them, win over the settings.
        let (accountLimit, accountPolicy) = try database.queryOne("SELECT device_limit, device_policy FROM accounts WHERE id = ?", [.text(account)]) {
            ($0.optionalInt64(0), $0.optionalText(1))
        } ?? (nil, nil)
        let limit = accountLimit.map(Int.init) ?? config.deviceLimit
        let policy = accountPolicy.flatMap(Config.DevicePolicy.init(rawValue:)) ?? config.devicePolicy
        let known = try database.queryOne(
            "SELECT id, revoked_at IS NOT NULL FROM devices WHERE account_id = ? AND device_key = ?",
            [.text(account), .text(device.key)]) { (id: $0.text(0), revoked: $0.int(1) != 0) }
        let existing = known.flatMap { $0.revoked ? nil : $0.id }
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
                // End the sessions of the least recently used devices until there is room: of
                // the devices that count (live sessions, as above), not of those already idle,
                // whose ending would free no place.
                let oldest = try database.query(
                    """
                    SELECT d.id FROM devices d JOIN sessions s ON s.device_id = d.id
                    WHERE d.account_id = ? AND d.revoked_at IS NULL AND s.revoked_at IS NULL AND s.expires_at > ? AND s.last_used_at > ?
                    GROUP BY d.id ORDER BY max(s.last_used_at), max(s.created_at), d.rowid LIMIT ?
                    """, [.text(account), .integer(now), .integer(now &- idle), .integer(Int64(active - limit + 1))]) { $0.text(0) }
                for id in oldest {
                    try endSessions(in: database, where: "device_id = ?", [.text(id)], cause: .replaceOldest, now: now)
                }
            } else if active >= limit {
                // The refusal says which devices hold the places, so a person can choose one to free.
                let holders = try database.query(
                    "SELECT id, name, device_key, last_seen FROM devices WHERE id IN (\(liveDevices.map { _ in "?" }.joined(separator: ","))) ORDER BY last_seen DESC",
                    liveDevices.map(SQLValue.text)) {
                    SessionFailure.PlaceHolder(id: $0.text(0), name: $0.text(1), key: $0.text(2), lastSeen: $0.int64(3))
                }
                throw SessionFailure.deviceLimitReached(limit: limit, devices: holders)
            }
            if let existing {
                // A known device coming back after all its sessions ended counts again.
                deviceID = existing
                try database.execute("UPDATE devices SET last_seen = ? WHERE id = ?", [.integer(now), .text(existing)])
            } else {
                if let removed = known, removed.revoked {
                    // A removed device signing in again is a new device, with a new id: what was
                    // bound to the old one (a machine's remembered sign-in) stays ended with it.
                    // The old row keeps its ended sessions under a key no sign-in can present
                    // (a control character follows it), so that the new row takes the key.
                    try database.execute("UPDATE devices SET device_key = device_key || ? WHERE id = ?",
                                         [.text("\u{1}" + removed.id), .text(removed.id)])
                }
                deviceID = "dev_" + Base64URL.encode(try OpenSSL.randomBytes(12))
                try database.execute(
                    "INSERT INTO devices (id, account_id, device_key, name, first_seen, last_seen) VALUES (?, ?, ?, ?, ?, ?)",
                    [.text(deviceID), .text(account), .text(device.key), .text(device.name), .integer(now), .integer(now)])
                try AuditScope.noticed(AccountNotice(account: account, kind: "device.linked",
                                                     body: AccountNotice.device(deviceID, key: device.key).merging(["name": .string(device.name)]) { $1 }),
                                       in: database)
            }
        }
        if device.nameGiven {
            try database.execute("UPDATE devices SET name = ? WHERE id = ?", [.text(device.name), .text(deviceID)])
        }
        var raw = try OpenSSL.randomBytes(32)
        defer { OpenSSL.wipe(&raw) }
        let token = "as1." + Base64URL.encode(raw)
        let id = "ses_" + Base64URL.encode(try OpenSSL.randomBytes(12))
        let lifetime = Int64(config.sessionLifetimeSeconds)
        let amrJSON = try WireCodec.encodeJSONText(amr)
        try database.execute(
            """
            INSERT INTO sessions (id, account_id, device_id, token_hash, amr, created_at, last_used_at, expires_at, federation, machine_uid)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [.text(id), .text(account), .text(deviceID), .blob(hash(token)), .text(amrJSON), .integer(now), .integer(now), .integer(now + lifetime),
             federation.map(SQLValue.text) ?? .null, device.machineUser.map { .integer(Int64($0)) } ?? .null])
        return SessionToken(token: token, id: id, deviceID: deviceID, expiresAt: Timestamp.rfc3339(epochSeconds: now + lifetime))
    }

    /// The session and its account, as a sign-in answers them.
    static func signedIn(in database: Database, account: String, device: DeviceIdentity, amr: [String], federation: String? = nil,
                         config: Config, now: Int64) throws -> SignedIn {
        let session = try createSession(in: database, account: account, device: device, amr: amr, federation: federation, config: config, now: now)
        guard let info = try accountInfo(in: database, id: account) else { throw SessionFailure.ended }
        // Every sign-in (and the registration that signs the new account in) comes through here.
        try AuditScope.record(in: database, ["account": .string(account), "session": .string(session.id), "device": .string(session.deviceID)])
        return SignedIn(account: info, session: session)
    }

    /// The account as clients see it.
    static func accountInfo(in database: Database, id: String) throws -> AccountInfo? {
        try database.queryOne("SELECT id, phone, email, password_hash IS NOT NULL FROM accounts WHERE id = ?", [.text(id)]) {
            AccountInfo(id: $0.text(0), phone: $0.optionalText(1), email: $0.optionalText(2), hasPassword: $0.int(3) != 0)
        }
    }

    static func hash(_ token: String) -> [UInt8] {
        OpenSSL.sha256(Array(token.utf8))
    }

    /// The live session for `token`, touching its idle timer (in a transaction that writes).
    static func authenticate(in database: Database, _ presented: PresentedSession, now: Int64, idle: Int64) throws -> ActiveSession {
        let (session, idleSince) = try liveSession(in: database, presented, now: now, idle: idle)
        if idleSince < now { try touch(in: database, session: session.id, now: now) }
        return session
    }

    /// The idle timer counts seconds: within the same second there is nothing to write (and no
    /// commit to wait for on the disk). A touch never moves it back.
    static func touch(in database: Database, session id: String, now: Int64) throws {
        try database.execute("UPDATE sessions SET last_used_at = ? WHERE id = ? AND last_used_at < ?", [.integer(now), .text(id), .integer(now)])
    }

    /// The live session for `token` and when it was last used; reads only. Lookup is by hash, so
    /// no token comparison leaks timing.
    static func liveSession(in database: Database, _ presented: PresentedSession, now: Int64, idle: Int64) throws -> (ActiveSession, lastUsed: Int64) {
        let token = presented.token
        guard token.hasPrefix("as1."), token.utf8.count < 100 else { throw SessionFailure.notASessionToken }
        struct Row: Sendable {
            let id, account, device, amr, deviceKey: String
            let created, lastUsed, expires: Int64
            let revoked, deviceRevoked, deactivated: Bool
        }
        let row = try database.queryOne(
            """
            SELECT s.id, s.account_id, s.device_id, s.amr, s.created_at, s.last_used_at, s.expires_at,
                   s.revoked_at IS NOT NULL, d.revoked_at IS NOT NULL, a.deactivated_at IS NOT NULL, d.device_key
            FROM sessions s JOIN devices d ON d.id = s.device_id JOIN accounts a ON a.id = s.account_id
            WHERE s.token_hash = ?
            """, [.blob(hash(token))]
        ) { Row(id: $0.text(0), account: $0.text(1), device: $0.text(2), amr: $0.text(3), deviceKey: Self.presentedKey($0.text(10)), created: $0.int64(4),
                lastUsed: $0.int64(5), expires: $0.int64(6), revoked: $0.int(7) != 0, deviceRevoked: $0.int(8) != 0, deactivated: $0.int(9) != 0) }
        guard let row else { throw SessionFailure.ended }
        // A call another machine forwards uses only that machine's own sessions, and a process
        // on this authd's socket only this machine's: a token taken from one machine is worth
        // nothing on another, and a machine that never signed in can do nothing but sign in.
        guard SessionBinding.permits(sessionDeviceKey: row.deviceKey, machine: presented.machine) else {
            throw SessionFailure.otherMachine
        }
        guard !row.deviceRevoked || row.deactivated else { throw SessionFailure.deviceRevoked }
        guard !row.revoked, !row.deactivated else { throw SessionFailure.ended }
        guard now < row.expires, now < row.lastUsed + idle else { throw SessionFailure.expired }
        let session = ActiveSession(id: row.id, accountID: row.account, deviceID: row.device, amr: decodeAMR(row.amr), createdAt: row.created,
                                    expiresAt: row.expires, idleExpiresAt: now + idle)
        return (session, row.lastUsed)
    }

    /// The key a device signed in with: a removed device whose key a new device has taken
    /// keeps it before a `\u{1}` (see `createSession`), and its sessions stay bound to it.
    static func presentedKey(_ stored: String) -> String {
        stored.firstIndex(of: "\u{1}").map { String(stored[..<$0]) } ?? stored
    }

    static func decodeAMR(_ json: String) -> [String] {
        // On every authenticated call: read by the strict reader, which costs a fraction of
        // JSONDecoder's generic decoding (that was 7% of a forwarded session.get at the hub).
        guard case .array(let values)? = try? StrictJSON.value(of: Array(json.utf8)) else { return [] }
        let methods = values.compactMap(\.stringValue)
        return methods.count == values.count ? methods : []
    }

    /// Whether `machine` holds a live session of an active account here, on a device it has not
    /// been removed from: a machine that signed in, as the hub's budgets count it.
    func machineHoldsSession(_ machine: DeviceID) async throws -> Bool {
        let now = seconds
        return try await store.read { database in try Self.holdsSession(deviceKey: DeviceIdentity.key(ofMachine: machine), in: database, now: now) }
    }

    /// Whether the device `deviceKey` names holds a live session (not revoked or expired) of any
    /// active account.
    private static func holdsSession(deviceKey: String, in database: Database, now: Int64) throws -> Bool {
        try database.queryOne(
            """
            SELECT 1 FROM devices d JOIN sessions s ON s.device_id = d.id JOIN accounts a ON a.id = d.account_id
            WHERE d.device_key = ? AND d.revoked_at IS NULL AND s.revoked_at IS NULL AND s.expires_at > ? AND a.deactivated_at IS NULL
            LIMIT 1
            """, [.text(deviceKey), .integer(now)]) { _ in true } ?? false
    }

    /// Runs `body` in one transaction with the live session `session` presents.
    func withSession<T: Sendable>(_ session: PresentedSession, _ body: @escaping @Sendable (Database, ActiveSession) throws -> T) async throws -> T {
        let now = seconds
        let idle = Int64(config.current.sessionIdleSeconds)
        return try await store.transaction { database in
            try body(database, try Self.authenticate(in: database, session, now: now, idle: idle))
        }
    }

    /// `withSession` for a `body` that only reads. On an event loop's thread it reads on a
    /// reader beside the store's queue (`Store.readHere`), and the idle timer's touch, at most
    /// once a second per session, is then a write of its own, committed before the answer.
    /// That commit does not wait for the disk (`relaxed`, as a local user's activity time): a
    /// power loss may take back the last touches, which can only end a session sooner, and a
    /// hub with many devices in use does not sync the disk once a second for each. Elsewhere
    /// it is `withSession`.
    func readingSession<T: Sendable>(_ session: PresentedSession, _ body: @escaping @Sendable (Database, ActiveSession) throws -> T) async throws -> T {
        let now = seconds
        let idle = Int64(config.current.sessionIdleSeconds)
        let read = try store.readHere { database in
            let (active, lastUsed) = try Self.liveSession(in: database, session, now: now, idle: idle)
            return (active, lastUsed, try body(database, active))
        }
        guard let (active, lastUsed, result) = read else { return try await withSession(session, body) }
        if lastUsed < now {
            try await store.transaction(durability: .relaxed) { database in try Self.touch(in: database, session: active.id, now: now) }
        }
        return result
    }

    /// Ends the live sessions `condition` selects (`revoked_at` set), and tells the call's scope
    /// which ended and whether each one's machine is left without any (a hub pushes that to the
    /// machines; see `AuditScope.sessionsEnded`). Returns how many ended.
    @discardableResult
    static func endSessions(in database: Database, where condition: String, _ arguments: [SQLValue], cause: EndedSession.Cause, now: Int64) throws -> Int {
        let ended = try database.query(
            "UPDATE sessions SET revoked_at = ? WHERE revoked_at IS NULL AND (\(condition)) RETURNING id, account_id, device_id, machine_uid",
            [.integer(now)] + arguments) { (id: $0.text(0), account: $0.text(1), device: $0.text(2), user: $0.optionalInt64(3).map { UInt32($0) }) }
        var machines: [String: (key: String, unlinked: Bool)] = [:]
        for device in Set(ended.map(\.device)) {
            guard let key = try database.queryOne("SELECT device_key FROM devices WHERE id = ?", [.text(device)], row: { $0.text(0) }) else { continue }
            // Only a machine linked to a hub is told; whether it keeps any session decides whether its link stays.
            let unlinked = try DeviceIdentity.machine(ofKey: key) != nil && !holdsSession(deviceKey: key, in: database, now: now)
            machines[device] = (key, unlinked)
        }
        AuditScope.sessionsEnded(ended.compactMap { session in
            machines[session.device].map {
                EndedSession(id: session.id, account: session.account, deviceKey: $0.key, machineUser: session.user, cause: cause, machineUnlinked: $0.unlinked)
            }
        })
        for session in ended {
            guard let machine = machines[session.device] else { continue }
            try AuditScope.noticed(AccountNotice(account: session.account, kind: "session.ended", body: AccountNotice.device(session.device, key: machine.key)
                .merging(["session": .string(session.id), "cause": .string(cause.rawValue)]) { $1 }), in: database)
        }
        return ended.count
    }

    /// Marks the account deactivated and ends every device, session and pending sign-in of it.
    static func deactivate(in database: Database, account: String, now: Int64) throws {
        try database.execute("UPDATE accounts SET deactivated_at = ? WHERE id = ? AND deactivated_at IS NULL", [.integer(now), .text(account)])
        try database.execute("UPDATE devices SET revoked_at = ? WHERE account_id = ? AND revoked_at IS NULL", [.integer(now), .text(account)])
        try endSessions(in: database, where: "account_id = ?", [.text(account)], cause: .accountDeactivated, now: now)
        try database.execute("DELETE FROM login_flows WHERE account_id = ?", [.text(account)])
        try PresenceBook.forget(account, in: database)
    }

    // MARK: Sessions and devices

    func createSession(account: String, device: DeviceIdentity, amr: [String], federation: String?) async throws -> SignedIn {
        let config = config.current
        let now = seconds
        return try await store.transaction { database in
            try Self.signedIn(in: database, account: account, device: device, amr: amr, federation: federation, config: config, now: now)
        }
    }

    func resumeSignIn(account: String, deviceID: String, amr: [String], stamp: [UInt8]) async throws -> SignedIn? {
        let config = config.current
        let now = seconds
        return try await store.transaction { database -> SignedIn? in
            guard try Self.rememberedSignInHolds(in: database, account: account, deviceID: deviceID, stamp: stamp, now: now),
                  let device = try database.queryOne("SELECT device_key, name FROM devices WHERE id = ?", [.text(deviceID)],
                                                     row: { DeviceIdentity(key: $0.text(0), name: $0.text(1), nameGiven: false) })
            else { return nil }
            return try Self.signedIn(in: database, account: account, device: device, amr: amr, config: config, now: now)
        }
    }

    func rememberedSignInHolds(account: String, deviceID: String, stamp: [UInt8]) async throws -> Bool {
        let now = seconds
        return try await store.read { database in try Self.rememberedSignInHolds(in: database, account: account, deviceID: deviceID, stamp: stamp, now: now) }
    }

    private static func rememberedSignInHolds(in database: Database, account: String, deviceID: String, stamp: [UInt8], now: Int64) throws -> Bool {
        try database.queryOne(
            """
            SELECT a.password_hash FROM accounts a JOIN devices d ON d.account_id = a.id
            WHERE a.id = ? AND d.id = ? AND a.deactivated_at IS NULL AND (a.locked_until IS NULL OR a.locked_until <= ?) AND d.revoked_at IS NULL
            """, [.text(account), .text(deviceID), .integer(now)]) { row in
            row.optionalText(0).map { OpenSSL.constantTimeEquals(Self.credentialStamp(passwordHash: $0), stamp) } ?? false
        } ?? false
    }

    func machineDevice(account: String, machine: DeviceID) async throws -> (id: String, live: Bool)? {
        try await store.read { database in
            try database.queryOne(
                """
                SELECT d.id, d.revoked_at IS NULL AND a.deactivated_at IS NULL FROM devices d JOIN accounts a ON a.id = d.account_id
                WHERE d.account_id = ? AND d.device_key = ?
                """, [.text(account), .text(DeviceIdentity.key(ofMachine: machine))]) { (id: $0.text(0), live: $0.int(1) != 0) }
        }
    }

    func authenticate(_ session: PresentedSession) async throws -> ActiveSession {
        try await readingSession(session) { _, session in session }
    }

    func describeSession(_ session: PresentedSession) async throws -> SessionDescription {
        try await readingSession(session) { database, session in
            guard let account = try Self.accountInfo(in: database, id: session.accountID),
                  let device = try database.queryOne("SELECT id, name FROM devices WHERE id = ?", [.text(session.deviceID)], row: {
                      DeviceSummary(id: $0.text(0), name: $0.text(1))
                  })
            else { throw SessionFailure.ended }
            return SessionDescription(session: session, account: account, device: device)
        }
    }

    func endSession(_ session: PresentedSession) async throws -> String {
        let now = seconds
        return try await withSession(session) { database, session in
            try Self.endSessions(in: database, where: "id = ?", [.text(session.id)], cause: .logout, now: now)
            try AuditScope.record(in: database, ["session": .string(session.id)])
            return session.id
        }
    }

    func sessions(_ session: PresentedSession) async throws -> [SessionSummary] {
        let now = seconds
        let idle = Int64(config.current.sessionIdleSeconds)
        return try await readingSession(session) { database, session in
            try database.query(
                """
                SELECT s.id, s.device_id, s.amr, s.created_at, s.last_used_at, s.expires_at FROM sessions s
                JOIN devices d ON d.id = s.device_id
                WHERE s.account_id = ? AND s.revoked_at IS NULL AND d.revoked_at IS NULL AND s.expires_at > ? AND s.last_used_at > ?
                ORDER BY s.created_at
                """, [.text(session.accountID), .integer(now), .integer(now - idle)]
            ) { row in
                // This call uses the current session now (its touch commits after the read).
                let current = row.text(0) == session.id
                return SessionSummary(id: row.text(0), deviceID: row.text(1), amr: Self.decodeAMR(row.text(2)),
                                      createdAt: Timestamp.rfc3339(epochSeconds: row.int64(3)),
                                      lastUsedAt: Timestamp.rfc3339(epochSeconds: current ? max(now, row.int64(4)) : row.int64(4)),
                                      expiresAt: Timestamp.rfc3339(epochSeconds: row.int64(5)), current: current)
            }
        }
    }

    func revokeSession(_ session: PresentedSession, id: String) async throws {
        let now = seconds
        try await withSession(session) { database, session in
            let ended = try Self.endSessions(in: database, where: "id = ? AND account_id = ?", [.text(id), .text(session.accountID)],
                                             cause: .sessionRevoke, now: now)
            guard ended == 1 else { throw SessionFailure.unknownSession }
            try AuditScope.record(in: database, ["session": .string(id)])
        }
    }

    func devices(_ session: PresentedSession) async throws -> AccountDevices {
        let limit = config.current.deviceLimit
        return try await readingSession(session) { database, session in
            let devices = try database.query(
                "SELECT id, name, first_seen, last_seen, device_key FROM devices WHERE account_id = ? AND revoked_at IS NULL ORDER BY first_seen",
                [.text(session.accountID)]) { row in
                DeviceRecord(id: row.text(0), name: row.text(1), firstSeen: Timestamp.rfc3339(epochSeconds: row.int64(2)),
                             lastSeen: Timestamp.rfc3339(epochSeconds: row.int64(3)), current: row.text(0) == session.deviceID,
                             deviceID: DeviceIdentity.machine(ofKey: row.text(4)))
            }
            let own = try database.queryOne("SELECT device_limit FROM accounts WHERE id = ?", [.text(session.accountID)]) { $0.optionalInt64(0) } ?? nil
            return AccountDevices(devices: devices, limit: own.map(Int.init) ?? limit)
        }
    }

    func revokeDevice(_ session: PresentedSession, id: String) async throws {
        let now = seconds
        try await withSession(session) { database, session in
            try database.execute("UPDATE devices SET revoked_at = ? WHERE id = ? AND account_id = ? AND revoked_at IS NULL",
                                 [.integer(now), .text(id), .text(session.accountID)])
            guard database.changes == 1 else { throw SessionFailure.unknownDevice }
            try Self.endSessions(in: database, where: "device_id = ?", [.text(id)], cause: .deviceRevoke, now: now)
            if let key = try database.queryOne("SELECT device_key FROM devices WHERE id = ?", [.text(id)], row: { $0.text(0) }) {
                try AuditScope.noticed(AccountNotice(account: session.accountID, kind: "device.revoked", body: AccountNotice.device(id, key: key)), in: database)
            }
            try AuditScope.record(in: database, ["device": .string(id)])
        }
    }

    func sessionHolders(of accounts: Set<String>) async throws -> [String: [SessionHolder]] {
        guard !accounts.isEmpty else { return [:] }
        let (now, idleSince) = liveSince
        let rows = try await store.readOnly { database in
            // One read for all of them; each account by the devices' account index.
            try accounts.flatMap { account in
                try Self.liveSessions(select: "d.account_id, d.device_key", where: "d.account_id = ?", [.text(account)], now: now, idleSince: idleSince,
                                      in: database) { ($0.text(0), $0.text(1), $0.optionalInt64(2).map { UInt32(truncatingIfNeeded: $0) }) }
            }
        }
        return Dictionary(grouping: rows, by: \.0).mapValues { rows in
            rows.map { SessionHolder(machine: DeviceIdentity.machine(ofKey: $0.1).map(DeviceID.init(description:)), user: $0.2) }
        }
    }

    func endedSessions(_ ended: [(id: String, cause: EndedSession.Cause)]) async throws -> [EndedSession] {
        guard !ended.isEmpty else { return [] }
        let now = seconds
        return try await store.read { database in
            var holds: [String: Bool] = [:]
            return try ended.compactMap { id, cause in
                guard let row = try database.queryOne(
                    "SELECT s.account_id, d.device_key, s.machine_uid FROM sessions s JOIN devices d ON d.id = s.device_id WHERE s.id = ? AND s.revoked_at IS NOT NULL",
                    [.text(id)], row: { (account: $0.text(0), key: $0.text(1), user: $0.optionalInt64(2).map { UInt32(truncatingIfNeeded: $0) }) }),
                      DeviceIdentity.machine(ofKey: row.key) != nil
                else { return nil }
                let held = try holds[row.key] ?? Self.holdsSession(deviceKey: row.key, in: database, now: now)
                holds[row.key] = held
                return EndedSession(id: id, account: row.account, deviceKey: row.key, machineUser: row.user, cause: cause, machineUnlinked: !held)
            }
        }
    }

    func accounts(heldBy machine: DeviceID?) async throws -> [(account: String, users: [UInt32])] {
        let (condition, values): (String, [SQLValue]) = if let machine {
            ("d.device_key = ?", [.text(DeviceIdentity.key(ofMachine: machine))])
        } else {
            ("d.device_key NOT LIKE 'device:%' AND s.machine_uid IS NOT NULL", [])
        }
        let (now, idleSince) = liveSince
        let held = try await store.read { database in
            try Self.liveSessions(select: "d.account_id", where: condition, values, now: now, idleSince: idleSince, in: database) {
                (account: $0.text(0), user: $0.optionalInt64(1).map { UInt32(truncatingIfNeeded: $0) })
            }
        }
        return Dictionary(grouping: held, by: \.account).map { account, rows in (account, rows.compactMap(\.user).sorted()) }
    }

    /// Now, and the last use a session needs to be within to be live (`[accounts] session_idle`).
    private var liveSince: (now: Int64, idleSince: Int64) {
        let now = seconds
        return (now, now - Int64(config.current.sessionIdleSeconds))
    }

    /// `columns`, then the local user who signed in (`s.machine_uid`), distinct, of the devices
    /// with a live session (not revoked, expired or idle) that `condition` selects.
    private static func liveSessions<T>(select columns: String, where condition: String, _ values: [SQLValue], now: Int64, idleSince: Int64,
                                          in database: Database, row: (Row) throws -> T) throws -> [T] {
        try database.query(
            """
            SELECT DISTINCT \(columns), s.machine_uid FROM devices d JOIN sessions s ON s.device_id = d.id
            WHERE \(condition) AND d.revoked_at IS NULL AND s.revoked_at IS NULL AND s.expires_at > ? AND s.last_used_at > ?
            """, values + [.integer(now), .integer(idleSince)], row: row)
    }

    func deactivate(account: String) async throws {
        let now = seconds
        try await store.transaction { database in
            try Self.deactivate(in: database, account: account, now: now)
            try AuditScope.record(in: database, ["account": .string(account)])
        }
    }
}
