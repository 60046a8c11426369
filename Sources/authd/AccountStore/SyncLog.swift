import FoundationEssentials
import Protocol

/// The account event logs on the daemon's store: the only code with statements on `sync_heads`,
/// `sync_events`, `sync_read_markers` and `sync_cursors`. Each change is one transaction.
struct SyncLog: Sendable {
    let store: Store
    let now: @Sendable () -> Date
    /// Appends that arrive while one commits go into the next commit together (group commit),
    /// each answered once its own is durable; false: each append is a commit of its own.
    var groupCommit = true
    /// The appends waiting for the next commit, shared by every copy of this log; at most 256
    /// share one commit, the rest go into the next.
    let queue = GroupCommit<Append, (event: SyncEvent, duplicate: Bool)>(mostPerCommit: 256)

    /// An append waiting for its commit.
    struct Append: Sendable {
        let account: String
        let draft: Draft
        let origin: Origin
    }

    /// Who appends: the machine (its device key, which scopes idempotency keys) and the sender
    /// every machine is shown.
    struct Origin: Sendable {
        let deviceKey: String
        let sender: SyncSender
    }

    /// An event before it has a position, its body encoded once, as it is stored.
    struct Draft: Sendable {
        let kind: String
        let conversation: String?
        let body: JSONValue
        let encoded: String
        let idempotencyKey: String?
        /// An end-to-end encrypted body, as the sending device signed it (`body` null).
        let sealed: String?

        init(kind: String, conversation: String?, body: JSONValue, idempotencyKey: String?, sealed: String? = nil) throws {
            self.kind = kind
            self.conversation = conversation
            self.body = body
            encoded = try WireCodec.encodeJSONText(body)
            self.idempotencyKey = idempotencyKey
            self.sealed = sealed
        }
    }

    /// Events in position order, and whether more follow past the last of them.
    struct Page: Sendable, Equatable {
        var events: [SyncEvent]
        var more: Bool
    }

    /// The events after a position, with the account's head and the oldest position it keeps.
    struct Window: Sendable, Equatable {
        var page: Page
        var head: Int64
        var oldest: Int64
    }

    /// One account's share of a machine's catch-up: what follows its cursor there.
    struct CatchUp: Sendable, Equatable {
        let account: String
        let cursor: Int64
        /// The local users on that machine who signed in to the account.
        let users: [UInt32]
        var page: Page
    }

    /// A conversation with messages: how many follow its read marker, and where that is.
    struct Unread: Sendable, Equatable {
        let conversation: String
        let count: Int
        let readUpTo: Int64
    }

    private static let columns = "position, kind, conversation, body, machine, device_id, exe, created_at, idempotency_key, sealed"

    private static func event(_ row: Row) -> SyncEvent { served(row).event }

    /// A stored event as answers carry it, and its size in them, encoded. A body that no answer
    /// could carry — stored before bodies' depth was limited, or not JSON any more — is
    /// withheld (null, with the reason): that event's place is kept and served, so the answer
    /// holding it, and every later one, still goes out and readers pass it.
    private static func served(_ row: Row) -> (event: SyncEvent, bytes: Int) {
        var event = SyncEvent(position: row.int64(0), kind: row.text(1), conversation: row.optionalText(2), body: .null,
                              sender: SyncSender(machine: row.text(4), deviceID: row.optionalText(5), exe: row.optionalText(6)),
                              at: Timestamp.rfc3339(epochSeconds: row.int64(7)), idempotencyKey: row.optionalText(8))
        let bare = (try? WireCodec.encodeJSON(event).count) ?? 1024
        if let sealed = row.optionalText(9) {
            // Relayed as the sender signed it: the hub cannot read it, and does not try.
            guard bare + sealed.utf8.count + 16 <= SyncLimits.pageBytes else {
                event.withheld = .syncTooLarge
                return (event, bare + 32)
            }
            event.sealed = sealed
            return (event, bare + sealed.utf8.count + 16)
        }
        let stored = row.text(3)
        // Measured without the body, whose text is the stored one (the same encoder wrote it,
        // and writes it again): a page of 64 KiB bodies is not encoded twice to be sized.
        guard let body = try? WireCodec.decode(JSONValue.self, from: Data(stored.utf8)) else {
            event.withheld = .syncUnreadable
            return (event, bare + 32)
        }
        guard body.nestingDepth <= SyncLimits.bodyDepth else {
            event.withheld = .syncTooDeep
            return (event, bare + 32)
        }
        let bytes = bare - 4 + stored.utf8.count
        guard bytes <= SyncLimits.pageBytes else {
            // No page could carry it (stored under some older, larger limit, say).
            event.withheld = .syncTooLarge
            return (event, bare + 32)
        }
        event.body = body
        return (event, bytes)
    }

    /// Fills `page` with events of the account in position order from `from` (exclusive):
    /// upwards, or downwards (`before`), of one conversation or all; true when more follow.
    /// Read a few rows at a time, never the whole count: 1,000 rows of 64 KiB are 64 MiB.
    private static func fill(_ page: inout SyncPage, into events: inout [SyncEvent], account: String, from: Int64, before: Bool = false,
                             conversation: String? = nil, in database: Database) throws -> Bool {
        var sql = "SELECT \(columns) FROM sync_events WHERE account_id = ? AND position \(before ? "<" : ">") ?"
        if conversation != nil { sql += " AND conversation = ?" }
        sql += " ORDER BY position \(before ? "DESC" : "ASC") LIMIT ?"
        var from = from
        while true {
            // One row past what the page may count, to know whether more follow.
            let wanted = min(32, page.count - page.taken + 1)
            var values: [SQLValue] = [.text(account), .integer(from)]
            if let conversation { values.append(.text(conversation)) }
            let rows = try database.query(sql, values + [.integer(Int64(wanted))], row: Self.served)
            for (event, bytes) in rows {
                guard page.admit(bytes) else { return true }
                events.append(event)
                from = event.position
            }
            if rows.count < wanted { return false }
        }
    }

    /// Appends `draft` at the account's next position, or finds the event the same machine sent
    /// with the same idempotency key (`duplicate`). Answers once the event is durable: with group
    /// commit, in the commit that took it with the others waiting then.
    func append(account: String, _ draft: Draft, from origin: Origin) async throws -> (event: SyncEvent, duplicate: Bool) {
        guard groupCommit else {
            let now = Int64(now().timeIntervalSince1970)
            return try await store.transaction(serializedBy: account) { database in
                var earlier: [String: SyncEvent] = [:]
                return try Self.append(account: account, draft, from: origin, now: now, earlier: &earlier, in: database)
            }
        }
        return try await queue.submit(Append(account: account, draft: draft, origin: origin), on: store) { [now] connection, batch in
            try Self.commit(batch, now: Int64(now().timeIntervalSince1970), on: connection)
        }
    }

    /// One batch of appends in one transaction, on the store's queue. Each append is a part that
    /// fails alone (`Database.failingAlone`): one whose account is gone fails at its first write,
    /// the head's upsert. On SQLite an append that fails after a write fails the whole batch.
    private static func commit(_ batch: [Append], now: Int64, on connection: isolated StoreConnection) throws
        -> [Result<(event: SyncEvent, duplicate: Bool), any Error>] {
        try connection.transaction { database in
            // What this batch appended, by idempotency key: the same send twice in one batch
            // finds the first, as it would in the table.
            var earlier: [String: SyncEvent] = [:]
            return try batch.map { append in
                try database.failingAlone {
                    try Self.append(account: append.account, append.draft, from: append.origin, now: now, earlier: &earlier, in: database)
                }
            }
        }
    }

    /// One append in the transaction running on `database`: the event the same machine sent
    /// with the same idempotency key (in the table, or in `earlier`), or a new one.
    private static func append(account: String, _ draft: Draft, from origin: Origin, now: Int64, earlier: inout [String: SyncEvent],
                               in database: Database) throws -> (event: SyncEvent, duplicate: Bool) {
        guard let key = draft.idempotencyKey else { return (try insert(draft, account: account, origin: origin, now: now, in: database), false) }
        let scoped = [account, origin.deviceKey, key].joined(separator: "\u{0}")
        if let sent = earlier[scoped] { return (sent, true) }
        if let sent = try database.queryOne(
            "SELECT \(columns) FROM sync_events WHERE account_id = ? AND device_key = ? AND idempotency_key = ?",
            [.text(account), .text(origin.deviceKey), .text(key)], row: event) {
            return (sent, true)
        }
        let event = try insert(draft, account: account, origin: origin, now: now, in: database)
        earlier[scoped] = event
        return (event, false)
    }

    /// Appends each draft to its account's log, all in one transaction (one commit for many
    /// accounts: a friend's ping to a hundred others).
    func append(_ drafts: [(account: String, draft: Draft)], from origin: Origin) async throws -> [(account: String, event: SyncEvent)] {
        let now = Int64(now().timeIntervalSince1970)
        return try await store.transaction { database in
            try drafts.map { ($0.account, try Self.insert($0.draft, account: $0.account, origin: origin, now: now, in: database)) }
        }
    }

    /// Appends a change's notice to its account's log in the transaction making the change
    /// (`AuditScope.noticed`), as sent by `origin`.
    static func append(_ notice: AccountNotice, from origin: Origin, now: Int64, in database: Database) throws -> SyncEvent {
        try insert(Draft(kind: notice.kind, conversation: nil, body: .object(notice.body), idempotencyKey: nil), account: notice.account,
                   origin: origin, now: now, in: database)
    }

    /// Allocates the next position in the inserting transaction, under the lock of the account's
    /// head row that the upsert takes (SQLite's one writer; on PostgreSQL the row lock, so a
    /// reader never passes a position that commits later).
    private static func insert(_ draft: Draft, account: String, origin: Origin, now: Int64, in database: Database) throws -> SyncEvent {
        guard let position = try database.queryOne(
            "INSERT INTO sync_heads (account_id, position) VALUES (?, 1) ON CONFLICT (account_id) DO UPDATE SET position = sync_heads.position + 1 RETURNING position",
            [.text(account)], row: { $0.int64(0) })
        else { throw SyncFailure.unknownAccount }
        try database.execute(
            """
            INSERT INTO sync_events (account_id, position, kind, conversation, body, device_key, machine, device_id, exe, idempotency_key, created_at, sealed)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [.text(account), .integer(position), .text(draft.kind), draft.conversation.map(SQLValue.text) ?? .null, .text(draft.encoded),
             .text(origin.deviceKey), .text(origin.sender.machine), origin.sender.deviceID.map(SQLValue.text) ?? .null,
             origin.sender.exe.map(SQLValue.text) ?? .null, draft.idempotencyKey.map(SQLValue.text) ?? .null, .integer(now),
             draft.sealed.map(SQLValue.text) ?? .null])
        // To the other replicas: a wake-up only; they read the event here.
        try database.notifyAtCommit(channel: HubReplicas.channel, payload: HubReplicas.wakeUp(account: account, position: position))
        return SyncEvent(position: position, kind: draft.kind, conversation: draft.conversation, body: draft.body, sender: origin.sender,
                         at: Timestamp.rfc3339(epochSeconds: now), idempotencyKey: draft.idempotencyKey, sealed: draft.sealed)
    }

    /// The events after `after`, oldest first, a page of at most `limit` and `bytes`
    /// (``SyncPage``), with the head and the oldest position kept.
    func events(account: String, after: Int64, limit: Int, bytes: Int = SyncLimits.pageBytes) async throws -> Window {
        try await store.read { database in
            let head = try database.queryOne("SELECT position FROM sync_heads WHERE account_id = ?", [.text(account)], row: { $0.int64(0) }) ?? 0
            let oldest = try database.queryOne("SELECT min(position) FROM sync_events WHERE account_id = ?", [.text(account)], row: {
                $0.optionalInt64(0)
            }) ?? nil
            var page = SyncPage(count: limit, bytes: bytes)
            var events: [SyncEvent] = []
            let more = try Self.fill(&page, into: &events, account: account, from: after, in: database)
            return Window(page: Page(events: events, more: more), head: head, oldest: oldest ?? head + 1)
        }
    }

    /// The newest events before `before` (all when nil), newest first, a page of at most
    /// `limit` and `bytes`.
    func history(account: String, conversation: String?, before: Int64?, limit: Int, bytes: Int = SyncLimits.pageBytes) async throws -> Page {
        try await store.read { database in
            var page = SyncPage(count: limit, bytes: bytes)
            var events: [SyncEvent] = []
            let more = try Self.fill(&page, into: &events, account: account, from: before ?? .max, before: true, conversation: conversation, in: database)
            return Page(events: events, more: more)
        }
    }

    /// For each account, the events after its cursor, at most `limit` each and `bytes` all
    /// together: what one `link.sync.resume` answer carries, so each account's entry is sized as
    /// that answer encodes it. An account the budget did not reach gets none and `more`; the
    /// machine asks again once it has taken these.
    func catchUp(_ accounts: [(account: String, cursor: Int64, users: [UInt32])], limit: Int,
                 bytes: Int = SyncLimits.pageBytes) async throws -> [CatchUp] {
        try await store.read { database in
            var left = bytes
            var moved = false
            return try accounts.map { account in
                // Its own members (account, cursor, users) take room in the answer too.
                let bare = LinkSyncResume.Account(account: account.account, cursor: account.cursor, events: [], users: account.users, more: true)
                left -= (try? WireCodec.encodeJSON(bare).count) ?? 1024
                var page = SyncPage(count: limit, bytes: left, takesOne: !moved)
                var events: [SyncEvent] = []
                let more = try Self.fill(&page, into: &events, account: account.account, from: account.cursor, in: database)
                left -= page.used
                moved = moved || !events.isEmpty
                return CatchUp(account: account.account, cursor: account.cursor, users: account.users, page: Page(events: events, more: more))
            }
        }
    }

    /// Moves the conversation's read marker forward to `upTo` (never past the head) and records
    /// the move as a `read` event; nil when it would not move.
    func markRead(account: String, conversation: String, upTo: Int64, from origin: Origin) async throws -> (marker: Int64, event: SyncEvent?) {
        let now = Int64(now().timeIntervalSince1970)
        return try await store.transaction(serializedBy: account) { database in
            let head = try database.queryOne("SELECT position FROM sync_heads WHERE account_id = ?", [.text(account)], row: { $0.int64(0) }) ?? 0
            let current = try database.queryOne(
                "SELECT up_to FROM sync_read_markers WHERE account_id = ? AND conversation = ?", [.text(account), .text(conversation)],
                row: { $0.int64(0) }) ?? 0
            let target = min(upTo, head)
            guard target > current else { return (current, nil) }
            try database.execute(
                "INSERT INTO sync_read_markers (account_id, conversation, up_to) VALUES (?, ?, ?) ON CONFLICT (account_id, conversation) DO UPDATE SET up_to = excluded.up_to",
                [.text(account), .text(conversation), .integer(target)])
            let event = try Self.insert(Draft(kind: "read", conversation: conversation, body: ["up_to": .integer(target)], idempotencyKey: nil),
                                        account: account, origin: origin, now: now, in: database)
            return (target, event)
        }
    }

    /// Per conversation with messages: the `message` events after its read marker.
    func unread(account: String) async throws -> [Unread] {
        try await store.read { database in
            try database.query(
                """
                SELECT e.conversation, coalesce(m.up_to, 0),
                       sum(CASE WHEN e.position > coalesce(m.up_to, 0) THEN 1 ELSE 0 END)
                FROM sync_events e LEFT JOIN sync_read_markers m ON m.account_id = e.account_id AND m.conversation = e.conversation
                WHERE e.account_id = ? AND e.kind = 'message' AND e.conversation IS NOT NULL
                GROUP BY e.conversation, m.up_to ORDER BY e.conversation
                """, [.text(account)]) { Unread(conversation: $0.text(0), count: Int($0.int64(2)), readUpTo: $0.int64(1)) }
        }
    }

    /// Records that the notification at `position` was dismissed: a `dismiss` event, once.
    func dismiss(account: String, position: Int64, from origin: Origin) async throws -> SyncEvent? {
        let now = Int64(now().timeIntervalSince1970)
        return try await store.transaction(serializedBy: account) { database in
            guard let conversation = try database.queryOne(
                "SELECT conversation FROM sync_events WHERE account_id = ? AND position = ? AND kind = 'notification'",
                [.text(account), .integer(position)], row: { $0.optionalText(0) })
            else { throw SyncFailure.unknownEvent(position) }
            // Once: a second dismissal of the same notification finds the first.
            let key = "dismiss:\(position)"
            let dismissed = try database.queryOne(
                "SELECT 1 FROM sync_events WHERE account_id = ? AND kind = 'dismiss' AND idempotency_key = ?", [.text(account), .text(key)],
                row: { _ in true }) ?? false
            guard !dismissed else { return nil }
            return try Self.insert(Draft(kind: "dismiss", conversation: conversation, body: ["position": .integer(position)], idempotencyKey: key),
                                   account: account, origin: origin, now: now, in: database)
        }
    }

    /// Moves a machine's cursor of the account forward to `position` (never back, never past the head).
    func acknowledge(account: String, machine deviceKey: String, position: Int64) async throws {
        try await store.transaction(durability: .relaxed, serializedBy: account) { database in
            // A lost acknowledgement only means an event offered again, which every reader drops.
            try database.execute(
                """
                INSERT INTO sync_cursors (account_id, device_key, position)
                VALUES (?, ?, \(database.dialect.least)(?, coalesce((SELECT position FROM sync_heads WHERE account_id = ?), 0)))
                ON CONFLICT (account_id, device_key) DO UPDATE SET position = \(database.dialect.greatest)(sync_cursors.position, excluded.position)
                """, [.text(account), .text(deviceKey), .integer(position), .text(account)])
        }
    }

    /// A machine's cursor of the account, when it has one.
    func keptCursor(account: String, machine deviceKey: String) async throws -> Int64? {
        try await store.read { database in
            try database.queryOne("SELECT position FROM sync_cursors WHERE account_id = ? AND device_key = ?", [.text(account), .text(deviceKey)],
                                  row: { $0.int64(0) })
        }
    }

    /// A machine's cursor of the account; a machine without one starts at the head (from now).
    func cursor(account: String, machine deviceKey: String) async throws -> Int64 {
        if let kept = try await keptCursor(account: account, machine: deviceKey) { return kept }
        let head = try await events(account: account, after: .max, limit: 1).head
        try await acknowledge(account: account, machine: deviceKey, position: head)
        return head
    }

    /// Deletes events older than `retention` seconds; the positions stay allocated, so a reader
    /// behind them is told (`sync.gap`). Returns how many went.
    func purge(retention: Int64) async throws -> Int {
        let cutoff = Int64(now().timeIntervalSince1970) - retention
        return try await store.transaction(durability: .relaxed) { database in
            try database.execute("DELETE FROM sync_events WHERE created_at < ?", [.integer(cutoff)])
            return database.changes
        }
    }
}
