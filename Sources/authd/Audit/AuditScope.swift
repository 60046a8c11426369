import FoundationEssentials
import Protocol
import Synchronization

/// The audited call a task is serving, so that the transaction making the call's change writes
/// the call's audit record too: a crash then loses both or neither, never the record alone. The
/// log's followers get the record as that transaction commits, where it commits (on SQLite's one
/// writer, between the group commits before and after it): in the order of the ids.
///
/// The dispatcher opens a scope around an audited handler. The store write that makes the
/// call's state change (a new account, a session, a password, a revoked device, a rotated key)
/// calls `AuditScope.record(in:_:)` inside its transaction; `Store.transaction` tells the scope
/// whether that transaction committed. When the handler returns, the dispatcher writes a record
/// after the fact only if no transaction of the call did (read-only calls, refusals).
///
/// The scope also collects the sessions the call's committed transactions ended, which a hub
/// then tells the machines they were bound to (`HubState.tell`), and what the account's event
/// log records of the call (`AccountNotice`): appended in the change's own transaction, so that
/// a session ended or a device removed is in the log whenever the change is, then handed on.
final class AuditScope: Sendable {
    /// The scope of the audited call this task serves; nil outside one (maintenance, start-up).
    @TaskLocal static var current: AuditScope?

    /// The call whose records the scope writes; nil for work outside any call, which only
    /// collects what it announces (`collecting`).
    let call: (caller: Caller, method: String)?
    /// The engine of the store the audit log is in (`SQLDialect.name`). A hub whose account data
    /// is on PostgreSQL keeps its audit log there, beside the account changes it records; a
    /// change to the machine's own SQLite store is then recorded after the fact, as a refusal is.
    private let auditHome: String
    private let now: @Sendable () -> Date
    /// Hands committed records to the log's followers (`AuditLog.publish`).
    private let publish: @Sendable ([AuditRecord]) -> Void
    /// Whom the accounts' logs record a notice as sent by (this authd); nil: notices are
    /// appended after the fact (`Services.announce`).
    private let noticeOrigin: SyncLog.Origin?

    private struct Records {
        /// Written in the transaction that is running, not yet committed.
        var staged: [AuditRecord] = []
        var committed: [AuditRecord] = []
        /// What the running transaction will announce if it commits, and what committed ones do.
        var stagedAnnouncements = Announcements()
        var announcements = Announcements()
    }
    private let records = Mutex(Records())

    /// `auditHome` is also where the accounts' event logs are (the account store).
    init(caller: Caller, method: String, auditHome: String, now: @escaping @Sendable () -> Date,
         publish: @escaping @Sendable ([AuditRecord]) -> Void, noticeOrigin: SyncLog.Origin?) {
        call = (caller, method)
        self.auditHome = auditHome
        self.now = now
        self.publish = publish
        self.noticeOrigin = noticeOrigin
    }

    /// A scope of no call: it records nothing itself, publishes what its transactions wrote
    /// (`wrote`) as they commit, and appends their notices to the logs in `home` as `origin`.
    init(now: @escaping @Sendable () -> Date, publish: @escaping @Sendable ([AuditRecord]) -> Void = { _ in },
         home: String = "", noticeOrigin: SyncLog.Origin? = nil) {
        call = nil
        auditHome = home
        self.now = now
        self.publish = publish
        self.noticeOrigin = noticeOrigin
    }

    /// Runs `body`, which is not a call (maintenance), collecting what its committed
    /// transactions announce, for the caller to hand to `Services.announce`: a change made
    /// outside a call must not end sessions or note events silently. Notices go to the logs in
    /// `home` as `origin`, in the transactions that make them.
    static func collecting<T: Sendable>(now: @escaping @Sendable () -> Date, home: String, noticeOrigin: SyncLog.Origin,
                                        _ body: () async throws -> T) async throws -> (T, Announcements) {
        let scope = AuditScope(now: now, home: home, noticeOrigin: noticeOrigin)
        let value = try await $current.withValue(scope) { try await body() }
        return (value, scope.announcements)
    }

    /// Appends the call's success record, with `detail`, to the transaction running on
    /// `database`, when the running task serves an audited call; does nothing otherwise.
    static func record(in database: Database, _ detail: [String: JSONValue]) throws {
        guard let scope = current, let call = scope.call, database.dialect.name == scope.auditHome else { return }
        let record = try AuditLog.insert(
            .init(caller: call.caller, method: call.method, outcome: .ok, reason: nil, detail: detail), at: scope.now(), into: database)
        scope.records.withLock { $0.staged.append(record) }
    }

    /// A record the transaction running on the task's store wrote itself (the purge's own):
    /// published when that transaction commits.
    static func wrote(_ record: AuditRecord) {
        current?.records.withLock { $0.staged.append(record) }
    }

    /// The transaction running on the task's store ended `sessions` (nothing outside a scope).
    static func sessionsEnded(_ sessions: [EndedSession]) {
        guard let scope = current, !sessions.isEmpty else { return }
        scope.records.withLock { $0.stagedAnnouncements.endedSessions += sessions }
    }

    /// The transaction running on `database` did something the account's machines hear of in
    /// its event log: the event is appended in that transaction, when the logs are in that
    /// database, and commits with the change or not at all (nothing outside a scope).
    static func noticed(_ notice: AccountNotice, in database: Database) throws {
        guard let scope = current else { return }
        guard let origin = scope.noticeOrigin, database.dialect.name == scope.auditHome else {
            scope.records.withLock { $0.stagedAnnouncements.notices.append(notice) }
            return
        }
        let event = try SyncLog.append(notice, from: origin, now: Int64(scope.now().timeIntervalSince1970), in: database)
        scope.records.withLock { $0.stagedAnnouncements.events.append(AccountEvent(account: notice.account, event: event)) }
    }

    /// The transaction that may have staged records ended (`Store.transaction` calls this).
    /// Runs where the transaction ran, on the store's connection, so that followers get what
    /// it committed before anything committed after it.
    func transactionEnded(committed: Bool) {
        let published = records.withLock { records -> [AuditRecord] in
            defer {
                records.staged.removeAll()
                records.stagedAnnouncements = Announcements()
            }
            guard committed else { return [] }
            records.committed += records.staged
            records.announcements.endedSessions += records.stagedAnnouncements.endedSessions
            records.announcements.events += records.stagedAnnouncements.events
            records.announcements.notices += records.stagedAnnouncements.notices
            return records.staged
        }
        if !published.isEmpty { publish(published) }
    }

    /// The records the call's own transactions committed.
    var committed: [AuditRecord] { records.withLock { $0.committed } }

    /// What the call's own transactions committed that is announced: the sessions they ended,
    /// and what the accounts' event logs record.
    var announcements: Announcements { records.withLock { $0.announcements } }
}
