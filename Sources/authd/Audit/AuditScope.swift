import FoundationEssentials
import Protocol
import Synchronization

/// The audited call a task is serving, so that the transaction making the call's change writes
/// the call's audit record too: a crash then loses both or neither, never the record alone.
///
/// The dispatcher opens a scope around an audited handler. The store write that makes the
/// call's state change (a new account, a session, a password, a revoked device, a rotated key)
/// calls `AuditScope.record(in:_:)` inside its transaction; `Store.transaction` tells the scope
/// whether that transaction committed. When the handler returns, the dispatcher writes a record
/// after the fact only if no transaction of the call did (read-only calls, refusals).
///
/// The scope also collects the sessions the call's committed transactions ended, which a hub
/// then tells the machines they were bound to (`HubState.tell`), and what the account's event
/// log records of the call (`AccountNotice`, appended by `SyncService.record`).
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

    private struct Records {
        /// Written in the transaction that is running, not yet committed.
        var staged: [AuditRecord] = []
        var committed: [AuditRecord] = []
        /// What the running transaction will announce if it commits, and what committed ones do.
        var stagedAnnouncements = Announcements()
        var announcements = Announcements()
    }
    private let records = Mutex(Records())

    init(caller: Caller, method: String, auditHome: String, now: @escaping @Sendable () -> Date) {
        call = (caller, method)
        self.auditHome = auditHome
        self.now = now
    }

    private init(now: @escaping @Sendable () -> Date) {
        call = nil
        auditHome = ""
        self.now = now
    }

    /// Runs `body`, which is not a call (maintenance), collecting what its committed
    /// transactions announce, for the caller to hand to `Services.announce`: a change made
    /// outside a call must not end sessions or note events silently.
    static func collecting<T: Sendable>(now: @escaping @Sendable () -> Date, _ body: () async throws -> T) async throws -> (T, Announcements) {
        let scope = AuditScope(now: now)
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

    /// The transaction running on the task's store ended `sessions` (nothing outside a scope).
    static func sessionsEnded(_ sessions: [EndedSession]) {
        guard let scope = current, !sessions.isEmpty else { return }
        scope.records.withLock { $0.stagedAnnouncements.endedSessions += sessions }
    }

    /// The transaction running on the task's store did something the account's machines hear of
    /// in its event log (nothing outside a scope).
    static func noticed(_ notice: AccountNotice) {
        current?.records.withLock { $0.stagedAnnouncements.notices.append(notice) }
    }

    /// The transaction that may have staged records ended (`Store.transaction` calls this).
    func transactionEnded(committed: Bool) {
        records.withLock { records in
            if committed {
                records.committed += records.staged
                records.announcements.endedSessions += records.stagedAnnouncements.endedSessions
                records.announcements.notices += records.stagedAnnouncements.notices
            }
            records.staged.removeAll()
            records.stagedAnnouncements = Announcements()
        }
    }

    /// The records the call's own transactions committed.
    var committed: [AuditRecord] { records.withLock { $0.committed } }

    /// What the call's own transactions committed that is announced: the sessions they ended,
    /// and what the accounts' event logs record.
    var announcements: Announcements { records.withLock { $0.announcements } }
}
