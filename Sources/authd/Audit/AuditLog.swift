// Audit/ — the append-only audit log of this machine (the `audit` table): every token issued and
// every change, with the caller and the outcome, never a secret; written by the dispatcher.

import FoundationEssentials
import Glibc
import Protocol
import Synchronization

/// The append-only audit log: every token issued and every admin action, with the caller and
/// the outcome, never a secret.
///
/// Writers wait until their record is committed (fail closed: a token whose issuance cannot be
/// recorded is not handed out). Records that arrive while a commit is running are written
/// together in the next one (group commit), so the log costs one transaction per batch, not per
/// token.
actor AuditLog {
    enum Outcome: String, Sendable {
        case ok, denied, error
    }

    struct Entry: Sendable {
        var caller: Caller
        var method: String
        var outcome: Outcome
        var reason: Reason?
        var detail: [String: JSONValue]
    }

    private let store: Store
    /// The engine of the store the log is in (`AuditScope`).
    nonisolated let home: String
    private let now: @Sendable () -> Date
    /// Records waiting for the next group commit: the entry and when it was made. Not actor
    /// state: a writer hands its record over without hopping onto this actor, and the commit
    /// runs on the store's connection, on the loop that ends its round when that connection is
    /// idle (`GroupCommit.commitsOnLoop`), else on the store's own queue.
    private nonisolated let queued = GroupCommit<(Entry, Date), AuditRecord>(commitsOnLoop: true)

    /// The followers, and how much was written since the bounds were last enforced. Under a
    /// lock too: a commit hands its records to the followers where it ran, holding the store's
    /// connection, and so in commit order, rather than from a task on this actor started for
    /// each batch.
    private nonisolated let publication = Mutex(Publication())

    private struct Publication {
        var followers: [Int: AsyncStream<AuditRecord>.Continuation] = [:]
        var nextFollower = 0
        /// Roughly how many bytes were written since the bounds were last enforced.
        var bytesSinceBoundsCheck = 0
        var enforcingBounds = false
    }

    /// How old and how big the log may grow; read at every check, so a reload applies.
    private let bounds: @Sendable () -> Bounds

    /// Identical refusals are counted, not written one by one, for this long after the first.
    let summaryWindow: Duration
    /// A flood's summary is written early once it counts this many refusals.
    let summaryMaxCount: Int
    private var floods: [RefusalKey: Flood] = [:]
    private var summaryTimer: Task<Void, Never>?

    init(store: Store, now: @escaping @Sendable () -> Date, bounds: @escaping @Sendable () -> Bounds = { Bounds() },
         summaryWindow: Duration = .seconds(60), summaryMaxCount: Int = 10_000) {
        self.store = store
        home = store.dialect.name
        self.now = now
        self.bounds = bounds
        self.summaryWindow = summaryWindow
        self.summaryMaxCount = summaryMaxCount
    }

    /// Appends `entry` and returns it as committed.
    @discardableResult
    nonisolated func record(_ entry: Entry) async throws -> AuditRecord {
        try await queued.submit((entry, now()), on: store) { [self] connection, batch in
            let records = try connection.transaction(durability: .relaxed) { database in
                let first = try Self.nextID(in: database)
                return try batch.enumerated().map { offset, item in try Self.insert(item.0, id: first + Int64(offset), at: item.1, into: database) }
            }
            // Followers see a record in commit order, no later than its writer's answer.
            publish(records)
            return records.map { .success($0) }
        }
    }

    /// Inserts one record in the transaction running on `database`, as committed at `time`,
    /// with the next id (`nextID`).
    static func insert(_ entry: Entry, at time: Date, into database: Database, after floor: Int64 = 0) throws -> AuditRecord {
        try insert(entry, id: try nextID(in: database, after: floor), at: time, into: database)
    }

    /// The id the next record takes in the transaction running on `database`: the one after the
    /// newest record's, or after `floor` (what a purge deleted up to). Ids run without a gap on
    /// both engines, which a PostgreSQL sequence would not promise (a rolled-back transaction
    /// consumes its values), and concurrent writers on several hub replicas are serialized by
    /// the transaction, as on SQLite's one writer. A batch reads it once and numbers its
    /// records on from it.
    static func nextID(in database: Database, after floor: Int64 = 0) throws -> Int64 {
        try database.queryOne("SELECT \(database.dialect.greatest)(coalesce(max(id), 0), ?) + 1 FROM audit", [.integer(floor)]) { $0.int64(0) }
            ?? floor + 1
    }

    /// Inserts one record as `id` (whole milliseconds of `time`, so a followed record and the
    /// same record read back are identical).
    private static func insert(_ entry: Entry, id: Int64, at time: Date, into database: Database) throws -> AuditRecord {
        let milliseconds = Int64((time.timeIntervalSince1970 * 1000).rounded())
        let detail = (try? WireCodec.encodeJSONText(entry.detail)) ?? "{}"
        let caller = entry.caller.audited
        try database.execute(
            "INSERT INTO audit (id, at_ms, uid, pid, exe, method, outcome, reason, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", [
                .integer(id), .integer(milliseconds), .integer(Int64(caller.uid)), .integer(Int64(caller.pid)),
                caller.exe.map { .text($0) } ?? .null, .text(entry.method), .text(entry.outcome.rawValue),
                entry.reason.map { .text($0.rawValue) } ?? .null, .text(detail),
            ])
        return AuditRecord(
            id: id, time: Timestamp.rfc3339(epochMilliseconds: milliseconds),
            caller: caller, method: entry.method, outcome: entry.outcome.rawValue, reason: entry.reason?.rawValue,
            detail: entry.detail)
    }

    /// Hands `records` to every follower, counting nothing (the purge's own record).
    private nonisolated func tellFollowers(_ records: [AuditRecord]) {
        publication.withLock { publication in
            for record in records { for follower in publication.followers.values { follower.yield(record) } }
        }
    }

    /// Hands committed records to the followers: the log's own commits, and records committed
    /// elsewhere (in the transaction of the change they record). Enforces the bounds in the
    /// background once about a sixteenth of the maximum size (at least 1 MiB) was written since
    /// the last time: the hourly maintenance alone would let a busy daemon write far past the
    /// maximum in between.
    nonisolated func publish(_ records: [AuditRecord]) {
        let every = max(1 << 20, Int(bounds().maxBytes / 16))
        let due = publication.withLock { publication -> Bool in
            for record in records {
                publication.bytesSinceBoundsCheck += Self.estimatedBytes(record)
                for follower in publication.followers.values { follower.yield(record) }
            }
            guard publication.bytesSinceBoundsCheck >= every, !publication.enforcingBounds else { return false }
            publication.bytesSinceBoundsCheck = 0
            publication.enforcingBounds = true
            return true
        }
        guard due else { return }
        Task {
            _ = try? await self.enforceBounds()
            self.publication.withLock { $0.enforcingBounds = false }
        }
    }

    /// The newest `limit` records, oldest first.
    func tail(limit: Int) async throws -> [AuditRecord] {
        try await store.read { database in
            try database.query(
                "SELECT id, at_ms, uid, pid, exe, method, outcome, reason, detail FROM (SELECT * FROM audit ORDER BY id DESC LIMIT ?) AS newest ORDER BY id",
                [.integer(Int64(limit))]
            ) { row in
                let detail = (try? WireCodec.decode([String: JSONValue].self, from: Data(row.text(8).utf8))) ?? [:]
                return AuditRecord(
                    id: row.int64(0), time: Timestamp.rfc3339(epochMilliseconds: row.int64(1)),
                    caller: AuditCaller(uid: UInt32(truncatingIfNeeded: row.int64(2)), pid: Int32(truncatingIfNeeded: row.int64(3)), exe: row.optionalText(4)),
                    method: row.text(5), outcome: row.text(6), reason: row.optionalText(7), detail: detail)
            }
        }
    }

    /// A stream of records committed from now on. A follower that falls 1000 records behind
    /// loses the oldest ones rather than growing the daemon's memory.
    var followerCount: Int { publication.withLock { $0.followers.count } }

    func follow() -> (id: Int, records: AsyncStream<AuditRecord>) {
        let (stream, continuation) = AsyncStream.makeStream(of: AuditRecord.self, bufferingPolicy: .bufferingNewest(1000))
        let id = publication.withLock { publication in
            defer { publication.nextFollower += 1 }
            publication.followers[publication.nextFollower] = continuation
            return publication.nextFollower
        }
        return (id, stream)
    }

    func unfollow(_ id: Int) {
        publication.withLock { $0.followers.removeValue(forKey: id) }?.finish()
    }

    /// Ends every follower's stream (at shutdown).
    func finishFollowers() {
        let followers = publication.withLock { publication in
            defer { publication.followers.removeAll() }
            return publication.followers
        }
        for follower in followers.values { follower.finish() }
    }

    // MARK: Floods of identical refusals

    /// Refusals that are alike enough to count instead of writing each: the same method,
    /// outcome and reason for the same user (or machine).
    struct RefusalKey: Hashable, Sendable {
        let method: String
        let outcome: Outcome
        let reason: String?
        let caller: String
    }

    private struct Flood {
        let caller: Caller
        let opened: Date
        var last: Date
        /// Refusals since the first, which was written in full.
        var repeated = 0
    }

    /// At most this many floods are counted at once; a refusal beyond them is written in full,
    /// so memory stays bounded and nothing is dropped.
    static let maxOpenFloods = 4096

    /// Reasons that say a secret was tried and found wrong: each counts toward a lockout (or
    /// blocks a card PIN), so each is written, never summarised. `account.locked` is among them
    /// because the failure that starts a lock answers with it (the sign-in methods' own rate
    /// limit bounds how many of them one user can cause).
    static let countedFailures: Set<Reason> = [
        .authFailed, .accountLocked, .otpWrong, .otpAttemptsExhausted, .pinWrong, .pinBlocked, .cardCANMismatch, .biometricNoMatch,
        .biometricCutOff, .passkeyUVFailed,
    ]

    /// Records a refused call. When `summarizable`, the first of a flood of identical refusals
    /// is written at once and the rest are counted: one record with their number follows when
    /// `summaryWindow` has passed since the first, or when `summaryMaxCount` is reached.
    func refused(_ entry: Entry, summarizable: Bool) async throws {
        guard summarizable else {
            try await record(entry)
            return
        }
        let key = RefusalKey(method: entry.method, outcome: entry.outcome, reason: entry.reason?.rawValue, caller: entry.caller.limitKey)
        let time = now()
        if var flood = floods[key], time < flood.opened.addingTimeInterval(summaryWindow.seconds) {
            flood.repeated += 1
            flood.last = time
            floods[key] = flood
            if flood.repeated >= summaryMaxCount {
                floods[key] = nil
                try await writeSummary(of: flood, key: key)
            }
            return
        }
        if let ended = floods.removeValue(forKey: key) { try await writeSummary(of: ended, key: key) }
        if floods.count < Self.maxOpenFloods {
            floods[key] = Flood(caller: entry.caller, opened: time, last: time)
            startSummaryTimer()
        }
        try await record(entry)
    }

    /// Writes the summaries of floods whose window has ended (of every flood when `all`, at
    /// shutdown).
    func closeFloods(all: Bool = false) async {
        let time = now()
        let ended = floods.filter { all || time >= $0.value.opened.addingTimeInterval(summaryWindow.seconds) }
        for (key, flood) in ended {
            floods[key] = nil
            _ = try? await writeSummary(of: flood, key: key)
        }
    }

    /// How many floods are being counted now.
    var openFloods: Int { floods.count }

    private func writeSummary(of flood: Flood, key: RefusalKey) async throws {
        guard flood.repeated > 0 else { return }
        try await record(Entry(
            caller: flood.caller, method: key.method, outcome: key.outcome, reason: key.reason.map { Reason($0) }, detail: [
                "repeated": .integer(Int64(flood.repeated)),
                "first_at": .string(Timestamp.rfc3339(flood.opened, milliseconds: true)),
                "last_at": .string(Timestamp.rfc3339(flood.last, milliseconds: true)),
            ]))
    }

    private func startSummaryTimer() {
        guard summaryTimer == nil else { return }
        let window = summaryWindow
        summaryTimer = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: window / 4)
                guard let self, await self.closeEndedFloodsAndContinue() else { return }
            }
        }
    }

    /// One tick of the summary timer: whether it should keep running.
    private func closeEndedFloodsAndContinue() async -> Bool {
        await closeFloods()
        if floods.isEmpty { summaryTimer = nil }
        return summaryTimer != nil
    }

    // MARK: Size and bounds

    /// How long records are kept and how much room the log may take (`[audit]`).
    struct Bounds: Sendable, Equatable {
        var retentionSeconds: Int
        var maxBytes: Int64

        init(retentionSeconds: Int = Config.defaultAuditRetentionSeconds, maxBytes: Int64 = Config.defaultAuditMaxBytes) {
            self.retentionSeconds = retentionSeconds
            self.maxBytes = maxBytes
        }

        /// The bounds `[audit]` sets.
        init(_ config: Config) {
            self.init(retentionSeconds: config.auditRetentionSeconds, maxBytes: Int64(config.auditMaxBytes))
        }
    }

    /// What the log holds now, for `admin.status`.
    struct Size: Sendable, Equatable {
        var rows: Int
        /// The records' size as stored, estimated from their contents.
        var bytes: Int64
        var oldest: Date?
        /// The newest record of the purged prefix (0: nothing was ever purged).
        var purgedThrough: Int64
        /// Records missing after `purgedThrough` (ids are dense: none is ever reused or skipped,
        /// so anything but 0 means records were removed behind the daemon's back).
        var missing: Int64

        /// `ok`, or what is missing, as `admin.status` says it.
        var integrity: String {
            missing == 0 ? "ok" : "\(missing) record(s) missing after id \(purgedThrough)"
        }
    }

    /// A record's size as stored: its text plus about 48 bytes of integers and row header.
    static let storedBytesSQL = "(48 + length(method) + length(outcome) + coalesce(length(reason), 0) + coalesce(length(exe), 0) + length(detail))"

    private static func estimatedBytes(_ record: AuditRecord) -> Int {
        48 + record.method.utf8.count + record.outcome.utf8.count + (record.reason?.utf8.count ?? 0) + (record.caller.exe?.utf8.count ?? 0)
            + 16 * record.detail.count
    }

    /// The method of the record a purge leaves in place of what it deleted.
    static let purgeMethod = "audit.purge"

    func size() async throws -> Size {
        try await store.read { database in
            let (rows, bytes, oldest, first, last) = try database.queryOne(
                "SELECT count(*), coalesce(sum(\(Self.storedBytesSQL)), 0), min(at_ms), coalesce(min(id), 0), coalesce(max(id), 0) FROM audit"
            ) { ($0.int(0), $0.int64(1), $0.optionalInt64(2), $0.int64(3), $0.int64(4)) } ?? (0, 0, nil, 0, 0)
            let through = try Self.purgedThrough(in: database)
            // Records before the purged prefix cannot remain; ids after it run without a gap.
            let missing = rows == 0 ? 0 : first <= through ? -1 : last - through - Int64(rows)
            return Size(rows: rows, bytes: bytes, oldest: oldest.map { Date(timeIntervalSince1970: Double($0) / 1000) },
                        purgedThrough: through, missing: missing)
        }
    }

    /// The last id the newest purge deleted, as its record says.
    private static func purgedThrough(in database: Database) throws -> Int64 {
        try database.queryOne(
            "SELECT \(database.dialect.jsonText("detail", "through_id")) FROM audit WHERE method = ? ORDER BY id DESC LIMIT 1", [.text(purgeMethod)]
        ) { $0.optionalInt64(0) }.flatMap { $0 } ?? 0
    }

    /// What one purge deleted.
    struct Purge: Sendable, Equatable {
        var rows = 0
        var bytes: Int64 = 0
        var throughID: Int64 = 0
        /// `retention`, `max_size` or both: why records went.
        var why: [String] = []
    }

    /// Deletes the oldest records: those older than the retention, then more until the log is
    /// back under nine tenths of its maximum size (so it is not purged again at once). The
    /// purge is a prefix of the log and leaves a record saying what it deleted (how many, up to
    /// which id, from when to when), in the same transaction, so the log stays verifiable: every
    /// id after the purged prefix is present. Returns nil when nothing was due.
    @discardableResult
    func enforceBounds() async throws -> Purge? {
        let bounds = bounds()
        let time = now()
        let cutoff = Int64(((time.timeIntervalSince1970 - Double(bounds.retentionSeconds)) * 1000).rounded())
        let daemon = Caller.local(CallerIdentity(uid: Syscalls.effectiveUserID(), gid: 0, pid: Syscalls.processID(), exe: nil, username: nil, groups: []))
        // The purge's own record reaches followers as its transaction commits, in the order of
        // the ids, like a change's record (`AuditScope`).
        let scope = AuditScope(now: now, publish: { [self] records in tellFollowers(records) })
        let purge = try await AuditScope.$current.withValue(scope) { try await store.transaction(durability: .relaxed) { database -> Purge? in
            var purge = Purge()
            // The records before the first one that is not older than the cutoff: times follow
            // the wall clock, and a record stamped in the past after younger ones (the clock was
            // set back) must not take the younger ones with it.
            let byAge = try database.queryOne(
                """
                SELECT max(id) FROM audit
                WHERE id < coalesce((SELECT id FROM audit WHERE at_ms >= ? ORDER BY id LIMIT 1), 9223372036854775807)
                """, [.integer(cutoff)]) { $0.optionalInt64(0) } ?? nil
            if let byAge {
                purge.throughID = byAge
                purge.why.append("retention")
            }
            let kept = try database.queryOne(
                "SELECT coalesce(sum(\(Self.storedBytesSQL)), 0) FROM audit WHERE id > ?", [.integer(purge.throughID)]) { $0.int64(0) } ?? 0
            if kept > bounds.maxBytes {
                // The shortest prefix whose removal brings the rest under nine tenths.
                let excess = kept - bounds.maxBytes / 10 * 9
                purge.throughID = try database.queryOne(
                    """
                    SELECT id FROM (SELECT id, sum(\(Self.storedBytesSQL)) OVER (ORDER BY id) AS running FROM audit WHERE id > ?) AS prefix
                    WHERE running >= ? ORDER BY id LIMIT 1
                    """, [.integer(purge.throughID), .integer(excess)]) { $0.int64(0) } ?? purge.throughID
                purge.why.append("max_size")
            }
            guard !purge.why.isEmpty else { return nil }
            let (rows, bytes, from, to) = try database.queryOne(
                "SELECT count(*), coalesce(sum(\(Self.storedBytesSQL)), 0), min(at_ms), max(at_ms) FROM audit WHERE id <= ?",
                [.integer(purge.throughID)]) { ($0.int(0), $0.int64(1), $0.optionalInt64(2), $0.optionalInt64(3)) } ?? (0, 0, nil, nil)
            guard rows > 0 else { return nil }
            purge.rows = rows
            purge.bytes = bytes
            try database.execute("DELETE FROM audit WHERE id <= ?", [.integer(purge.throughID)])
            func stamp(_ milliseconds: Int64?) -> JSONValue {
                milliseconds.map { .string(Timestamp.rfc3339(epochMilliseconds: $0)) } ?? .null
            }
            let record = try Self.insert(Entry(caller: daemon, method: Self.purgeMethod, outcome: .ok, reason: nil, detail: [
                "through_id": .integer(purge.throughID), "rows": .integer(Int64(rows)), "bytes": .integer(bytes),
                "first_at": stamp(from), "last_at": stamp(to), "why": .array(purge.why.map { .string($0) }),
                "retention_s": .integer(Int64(bounds.retentionSeconds)), "max_size": .integer(bounds.maxBytes),
            ]), at: time, into: database, after: purge.throughID)
            AuditScope.wrote(record)
            return purge
        } }
        return purge
    }
}

extension Duration {
    /// The duration in seconds, as a floating-point number.
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}

/// RFC 3339 timestamps in UTC, as every date on the wire is written. The calendar is glibc's
/// (`gmtime_r`): a token's expiry and an audit record's time are written for every token, and
/// Foundation's ISO 8601 format style cost several microseconds each.
enum Timestamp {
    /// `2026-11-26T16:44:37Z`, or with milliseconds `2026-11-26T16:44:37.123Z` (truncated).
    static func rfc3339(_ date: Date, milliseconds: Bool = false) -> String {
        let seconds = date.timeIntervalSince1970
        return milliseconds ? rfc3339(epochMilliseconds: Int64((seconds * 1000).rounded(.down)))
                            : rfc3339(epochSeconds: Int64(seconds.rounded(.down)))
    }

    static func rfc3339(epochSeconds: Int64) -> String {
        text(epochSeconds: epochSeconds, milliseconds: nil)
    }

    /// Exact from an integer count (a `Date` made from one can be a hair below it).
    static func rfc3339(epochMilliseconds: Int64) -> String {
        let (seconds, milliseconds) = epochMilliseconds.quotientAndRemainder(dividingBy: 1000)
        return milliseconds < 0 ? text(epochSeconds: seconds - 1, milliseconds: milliseconds + 1000)
                                : text(epochSeconds: seconds, milliseconds: milliseconds)
    }

    private static func text(epochSeconds: Int64, milliseconds: Int64?) -> String {
        var time = time_t(clamping: epochSeconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        func append(_ value: Int, digits: Int) {
            var divisor = 1
            for _ in 1..<digits { divisor *= 10 }
            if value >= divisor * 10 { bytes.append(contentsOf: String(value).utf8); return }  // a year past 9999
            var rest = max(value, 0)
            while divisor > 0 {
                bytes.append(UInt8(ascii: "0") + UInt8(rest / divisor))
                rest %= divisor
                divisor /= 10
            }
        }
        append(Int(parts.tm_year) + 1900, digits: 4)
        bytes.append(UInt8(ascii: "-"))
        append(Int(parts.tm_mon) + 1, digits: 2)
        bytes.append(UInt8(ascii: "-"))
        append(Int(parts.tm_mday), digits: 2)
        bytes.append(UInt8(ascii: "T"))
        append(Int(parts.tm_hour), digits: 2)
        bytes.append(UInt8(ascii: ":"))
        append(Int(parts.tm_min), digits: 2)
        bytes.append(UInt8(ascii: ":"))
        append(Int(parts.tm_sec), digits: 2)
        if let milliseconds {
            bytes.append(UInt8(ascii: "."))
            append(Int(milliseconds), digits: 3)
        }
        bytes.append(UInt8(ascii: "Z"))
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension Caller {
    /// The caller as the audit log records it: a local process by uid, pid and executable; a
    /// machine by its device id in place of the executable, with uid (uid_t) −1, which is no
    /// user's, and pid 0; a process on a machine by its uid there and `device:ID:EXECUTABLE`.
    var audited: AuditCaller {
        switch self {
        case .local(let peer): AuditCaller(uid: peer.uid, pid: peer.pid, exe: peer.exe)
        case .device(let id): AuditCaller(uid: .max, pid: 0, exe: "device:\(id)")
        case .forwarded(let id, let process): AuditCaller(uid: process.uid, pid: 0, exe: "device:\(id):\(process.exe ?? "unknown")")
        }
    }
}
