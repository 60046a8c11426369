import CSQLite
import FoundationEssentials

// The only file that calls libsqlite3 (`Row` reads a column through `Statement.column…`).
// `SQLiteConnection` owns a connection and keeps each statement it prepares for the next use of
// the same SQL; `Statement` owns a prepared statement and finalizes it in `deinit`. Neither is
// Sendable: both live inside the `Store` actor, which runs on its own serial queue.

/// A SQLite failure. Bound values are never part of the message (they may be secrets).
struct SQLiteError: Error, CustomStringConvertible {
    let code: Int32
    let message: String
    let sql: String?

    var description: String {
        "SQLite error \(code) (\(String(cString: sqlite3_errstr(code)))): \(message)" + (sql.map { " in `\($0)`" } ?? "")
    }

    /// SQLITE_CONSTRAINT and its extended codes.
    var isConstraintViolation: Bool { code & 0xff == SQLITE_CONSTRAINT }
}

final class SQLiteConnection {
    static let dialect = SQLDialect(name: "sqlite", greatest: "max", least: "min", noLimit: "LIMIT -1", forUpdate: "",
                                    jsonText: { column, key in "json_extract(\(column), '$.\(key)')" }, shared: false)

    fileprivate let handle: OpaquePointer
    let path: String
    /// Prepared statements by their SQL. SQLite parses and plans a statement in `prepare`, which
    /// cost more than running an INSERT of one row; the daemon's SQL is a fixed set of texts, so
    /// each is prepared once. A statement stays here while in use (finding it is the one hash of
    /// the SQL text a use costs); a nested use of the same SQL prepares its own, used once.
    private var statements: [String: Statement] = [:]
    /// More distinct texts than this are prepared for each use (none of authd's is built from
    /// data, but the cache stays bounded whatever a caller does).
    static let statementCacheLimit = 256
    /// The body `afterCommit` registered (kept here: SQLite holds only a pointer to `self`).
    private var afterCommitBody: ((Int) -> Void)?

    /// Opens (creating if needed) the database at `path` with the pragmas authd relies on.
    convenience init(path: String) throws {
        try self.init(opening: path, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
        try execute("PRAGMA journal_mode = WAL")
        // Credentials live here: a commit must survive power loss, not just a crash.
        try execute("PRAGMA synchronous = FULL")
        try execute("PRAGMA foreign_keys = ON")
        // Deleted secrets are overwritten on disk rather than left in free pages.
        try execute("PRAGMA secure_delete = ON")
        sqlite3_busy_timeout(handle, 5000)
    }

    /// Opens the existing database at `path` (in WAL mode already) for reading only: SQLite
    /// refuses any write on it (`query_only`). A reader sees the last commit made before its
    /// read transaction began, and neither waits for the writer nor makes it wait. Its page
    /// cache is kept small: the writer's holds the pages that change, and a reader's only
    /// saves re-reading from the OS's page cache.
    convenience init(readingOnly path: String) throws {
        try self.init(opening: path, flags: SQLITE_OPEN_READWRITE)
        try execute("PRAGMA query_only = ON")
        try execute("PRAGMA cache_size = -\(Self.readerCacheKiB)")
        // A reader waits only while another connection rebuilds the WAL's index after a crash.
        sqlite3_busy_timeout(handle, 1000)
    }

    /// A reader's page cache, KiB.
    static let readerCacheKiB = 512

    /// SQLite's process-wide settings, made once before the first connection opens (after
    /// that, `sqlite3_config` is refused). Memory statistics are off: authd reads none, and
    /// counting takes a process-wide mutex for each of SQLite's allocations and frees (48 of
    /// the 53 mutex acquisitions of a `session.get`).
    private static let configured: Void = {
        _ = authd_sqlite3_disable_memory_statistics()
    }()

    private init(opening path: String, flags: Int32) throws {
        _ = Self.configured
        var handle: OpaquePointer?
        let status = sqlite3_open_v2(path, &handle, flags | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE, nil)
        guard status == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            sqlite3_close_v2(handle)
            throw SQLiteError(code: status, message: message, sql: nil)
        }
        self.handle = handle
        self.path = path
        sqlite3_extended_result_codes(handle, 1)
    }

    deinit {
        statements.removeAll()  // finalized before the connection closes
        sqlite3_close_v2(handle)
    }

    private func error(_ code: Int32, sql: String?) -> SQLiteError {
        SQLiteError(code: code, message: String(cString: sqlite3_errmsg(handle)), sql: sql)
    }

    /// Runs `body` with the statement of `sql`, its parameters bound to `values`: the cached one
    /// if there is one. Afterwards the statement is reset (a half-read query would otherwise keep
    /// its read transaction open) and its bindings cleared (they may be secrets).
    private func withStatement<T>(_ sql: String, _ values: [SQLValue], _ body: (Statement) throws -> T) throws -> T {
        let statement: Statement
        switch statements[sql] {
        case let cached? where !cached.inUse:
            statement = cached
        case let cached:
            statement = try prepare(sql)
            if cached == nil && statements.count < Self.statementCacheLimit { statements[sql] = statement }
        }
        statement.inUse = true
        defer {
            statement.reset()
            statement.inUse = false
        }
        try statement.bind(values)
        return try body(statement)
    }

    private func prepare(_ sql: String) throws -> Statement {
        var statement: OpaquePointer?
        let status = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard status == SQLITE_OK, let statement else { throw error(status, sql: sql) }
        return Statement(statement: statement, sql: sql)
    }

    /// How many prepared statements are kept (tests).
    var cachedStatementCount: Int { statements.count }

    /// Runs a statement that returns no rows of interest.
    func execute(_ sql: String, _ values: [SQLValue] = []) throws {
        try withStatement(sql, values) { statement in
            while try statement.step() {}
        }
    }

    /// Runs a query and maps every row.
    func query<T>(_ sql: String, _ values: [SQLValue] = [], row: (Row) throws -> T) throws -> [T] {
        try withStatement(sql, values) { statement in
            var results: [T] = []
            while try statement.step() { results.append(try row(Row(sqlite: statement))) }
            return results
        }
    }

    /// The first row of a query, if any.
    func queryOne<T>(_ sql: String, _ values: [SQLValue] = [], row: (Row) throws -> T) throws -> T? {
        try withStatement(sql, values) { statement in
            try statement.step() ? try row(Row(sqlite: statement)) : nil
        }
    }

    /// Calls `body` after each commit with the number of pages in the WAL. This replaces
    /// SQLite's own checkpoint at 1,000 pages, which runs inside the commit that reaches them
    /// (`sqlite3_wal_hook` disables it): whoever registers here decides when to checkpoint.
    func afterCommit(_ body: @escaping (Int) -> Void) {
        afterCommitBody = body
        sqlite3_wal_hook(handle, { context, _, _, pages in
            Unmanaged<SQLiteConnection>.fromOpaque(context!).takeUnretainedValue().afterCommitBody?(Int(pages))
            return SQLITE_OK
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// Copies the WAL's frames into the database file without waiting for a reader or writer
    /// (`SQLITE_CHECKPOINT_PASSIVE`): as many as no reader still needs.
    func checkpointPassively() throws {
        let status = sqlite3_wal_checkpoint_v2(handle, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
        guard status == SQLITE_OK else { throw error(status, sql: nil) }
    }

    var changes: Int { Int(sqlite3_changes(handle)) }

    /// `Database.failingAlone`. A failed statement undoes only its own writes (and adds nothing
    /// to the count of rows written) and the transaction goes on: a part that fails before it
    /// wrote anything needs no savepoint. One that fails after a write, or whose error rolled
    /// the whole transaction back (SQLite does on some, such as a full disk), is thrown.
    func failingAlone<T>(_ body: () throws -> T) throws -> Result<T, any Error> {
        let written = sqlite3_total_changes64(handle)
        do {
            return .success(try body())
        } catch where sqlite3_get_autocommit(handle) == 0 && sqlite3_total_changes64(handle) == written {
            return .failure(error)
        }
    }

    /// Runs `body` in a `BEGIN IMMEDIATE` transaction: committed if it returns, rolled back if it
    /// throws. All-or-nothing is how every state change in authd is made.
    func transaction<T>(_ body: () throws -> T) throws -> T {
        try transaction(beginning: "BEGIN IMMEDIATE", body)
    }

    /// Runs `body` in one read transaction (`BEGIN DEFERRED`): every query in it sees the same
    /// commit. For a transaction that wrote nothing, `COMMIT` only lets go of the snapshot.
    func readTransaction<T>(_ body: () throws -> T) throws -> T {
        try transaction(beginning: "BEGIN", body)
    }

    private func transaction<T>(beginning begin: String, _ body: () throws -> T) throws -> T {
        try execute(begin)
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// Copies the whole database to a new file at `destination` with the online backup API.
    func backup(to destination: String) throws {
        var target: OpaquePointer?
        let status = sqlite3_open_v2(destination, &target, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil)
        defer { sqlite3_close_v2(target) }
        guard status == SQLITE_OK, let target else { throw SQLiteError(code: status, message: "cannot open backup file", sql: nil) }
        guard let backup = sqlite3_backup_init(target, "main", handle, "main") else {
            throw SQLiteError(code: sqlite3_errcode(target), message: String(cString: sqlite3_errmsg(target)), sql: nil)
        }
        let stepped = sqlite3_backup_step(backup, -1)
        let finished = sqlite3_backup_finish(backup)
        guard stepped == SQLITE_DONE, finished == SQLITE_OK else {
            throw SQLiteError(code: stepped == SQLITE_DONE ? finished : stepped, message: "backup did not complete", sql: nil)
        }
        // A backup is a standalone file: no WAL beside it.
        var mode: OpaquePointer?
        sqlite3_prepare_v2(target, "PRAGMA journal_mode = DELETE", -1, &mode, nil)
        sqlite3_step(mode)
        sqlite3_finalize(mode)
    }
}

/// A prepared statement of a `Database`, which owns it (and finalizes it before it closes).
final class Statement {
    private let statement: OpaquePointer
    let sql: String
    /// Between `bind` and `reset`, in `SQLiteConnection.withStatement`.
    fileprivate var inUse = false

    fileprivate init(statement: OpaquePointer, sql: String) {
        self.statement = statement
        self.sql = sql
    }

    deinit { sqlite3_finalize(statement) }

    /// Ready for its next use: not stepping, nothing bound. (sqlite3_reset's return value
    /// repeats the last step's error, which was thrown then.)
    func reset() {
        sqlite3_reset(statement)
        sqlite3_clear_bindings(statement)
    }

    func bind(_ values: [SQLValue]) throws {
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let status: Int32
            switch value {
            case .null: status = sqlite3_bind_null(statement, index)
            case .integer(let v): status = sqlite3_bind_int64(statement, index, v)
            case .real(let v): status = sqlite3_bind_double(statement, index, v)
            // The text up to its first NUL (length -1), which SQLite copies (transient). A native
            // string lends its own bytes, which end in a NUL, through `withCString`.
            case .text(let v): status = v.withCString { authd_sqlite3_bind_text_transient(statement, index, $0, -1) }
            case .blob(let v):
                status = v.withUnsafeBytes { authd_sqlite3_bind_blob_transient(statement, index, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(v.count)) }
            }
            guard status == SQLITE_OK else { throw SQLiteError(code: status, message: "cannot bind parameter \(index)", sql: sql) }
        }
    }

    /// Advances; `true` when a row is available.
    func step() throws -> Bool {
        switch sqlite3_step(statement) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        case let status:
            throw SQLiteError(code: status, message: String(cString: sqlite3_errmsg(sqlite3_db_handle(statement))), sql: sql)
        }
    }

    // The current row's columns, for `Row`.
    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(statement, column) == SQLITE_NULL }
    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(statement, column) }
    func double(_ column: Int32) -> Double { sqlite3_column_double(statement, column) }
    func text(_ column: Int32) -> String {
        guard let pointer = sqlite3_column_text(statement, column) else { return "" }
        return String(cString: pointer)
    }
    func blob(_ column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(statement, column))
        guard count > 0, let pointer = sqlite3_column_blob(statement, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }
}

