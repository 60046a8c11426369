// Audit/ — the append-only audit log of this machine (the `audit` table): every token issued and
// every change, with the caller and the outcome, never a secret; written by the dispatcher.

import FoundationEssentials
import Protocol

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
    private let now: @Sendable () -> Date
    private var pending: [(Entry, Date, CheckedContinuation<AuditRecord, any Error>)] = []
    private var flushing = false
    private var followers: [Int: AsyncStream<AuditRecord>.Continuation] = [:]
    private var nextFollower = 0

    init(store: Store, now: @escaping @Sendable () -> Date) {
        self.store = store
        self.now = now
    }

    /// Appends `entry` and returns it as committed.
    @discardableResult
    func record(_ entry: Entry) async throws -> AuditRecord {
        let time = now()
        let record = try await withCheckedThrowingContinuation { continuation in
            pending.append((entry, time, continuation))
            if !flushing {
                flushing = true
                Task { await self.flush() }
            }
        }
        return record
    }

    private func flush() async {
        while !pending.isEmpty {
            let batch = pending
            pending.removeAll()
            do {
                let rows = batch.map { entry, time, _ in
                    (entry, Int64((time.timeIntervalSince1970 * 1000).rounded()),
                     String(decoding: (try? WireCodec.encodeJSON(entry.detail)) ?? Data("{}".utf8), as: UTF8.self))
                }
                let ids = try await store.transaction(durability: .relaxed) { database -> [Int64] in
                    let statement = try database.prepare(
                        "INSERT INTO audit (at_ms, uid, pid, exe, method, outcome, reason, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
                    var ids: [Int64] = []
                    for (entry, milliseconds, detail) in rows {
                        try statement.bind([
                            .integer(milliseconds), .integer(Int64(entry.caller.audited.uid)), .integer(Int64(entry.caller.audited.pid)),
                            entry.caller.audited.exe.map { .text($0) } ?? .null, .text(entry.method), .text(entry.outcome.rawValue),
                            entry.reason.map { .text($0.rawValue) } ?? .null, .text(detail),
                        ])
                        while try statement.step() {}
                        ids.append(database.lastInsertRowID)
                    }
                    return ids
                }
                for ((entry, time, continuation), id) in zip(batch, ids) {
                    // The time as stored (whole milliseconds), so a followed record and the
                    // same record read back by tail are identical.
                    let stored = Date(timeIntervalSince1970: (time.timeIntervalSince1970 * 1000).rounded() / 1000)
                    let record = AuditRecord(
                        id: id, time: Timestamp.rfc3339(stored, milliseconds: true),
                        caller: entry.caller.audited,
                        method: entry.method, outcome: entry.outcome.rawValue, reason: entry.reason?.rawValue, detail: entry.detail)
                    continuation.resume(returning: record)
                    for follower in followers.values { follower.yield(record) }
                }
            } catch {
                for (_, _, continuation) in batch { continuation.resume(throwing: error) }
            }
        }
        flushing = false
    }

    /// The newest `limit` records, oldest first.
    func tail(limit: Int) async throws -> [AuditRecord] {
        try await store.read { database in
            try database.query(
                "SELECT id, at_ms, uid, pid, exe, method, outcome, reason, detail FROM (SELECT * FROM audit ORDER BY id DESC LIMIT ?) ORDER BY id",
                [.integer(Int64(limit))]
            ) { row in
                let detail = (try? WireCodec.decode([String: JSONValue].self, from: Data(row.text(8).utf8))) ?? [:]
                return AuditRecord(
                    id: row.int64(0), time: Timestamp.rfc3339(Date(timeIntervalSince1970: Double(row.int64(1)) / 1000), milliseconds: true),
                    caller: AuditCaller(uid: UInt32(truncatingIfNeeded: row.int64(2)), pid: Int32(truncatingIfNeeded: row.int64(3)), exe: row.optionalText(4)),
                    method: row.text(5), outcome: row.text(6), reason: row.optionalText(7), detail: detail)
            }
        }
    }

    /// A stream of records committed from now on. A follower that falls 1000 records behind
    /// loses the oldest ones rather than growing the daemon's memory.
    var followerCount: Int { followers.count }

    func follow() -> (id: Int, records: AsyncStream<AuditRecord>) {
        let (stream, continuation) = AsyncStream.makeStream(of: AuditRecord.self, bufferingPolicy: .bufferingNewest(1000))
        let id = nextFollower
        nextFollower += 1
        followers[id] = continuation
        return (id, stream)
    }

    func unfollow(_ id: Int) {
        followers.removeValue(forKey: id)?.finish()
    }

    /// Ends every follower's stream (at shutdown).
    func finishFollowers() {
        for follower in followers.values { follower.finish() }
        followers.removeAll()
    }
}

/// RFC 3339 timestamps in UTC, as every date on the wire is written.
enum Timestamp {
    static func rfc3339(_ date: Date, milliseconds: Bool = false) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: milliseconds, timeZone: .gmt))
    }

    static func rfc3339(epochSeconds: Int64) -> String {
        rfc3339(Date(timeIntervalSince1970: TimeInterval(epochSeconds)))
    }
}

extension Caller {
    /// The caller as the audit log records it: a local process by uid, pid and executable; a
    /// machine by its device id in place of the executable, with uid (uid_t) −1, which is no
    /// user's, and pid 0.
    var audited: AuditCaller {
        switch self {
        case .local(let peer): AuditCaller(uid: peer.uid, pid: peer.pid, exe: peer.exe)
        case .device(let id): AuditCaller(uid: .max, pid: 0, exe: "device:\(id)")
        }
    }
}
