import FoundationEssentials

// One connection to a store, on either engine: SQLite (every machine's own store, and the
// embedded default for account data) or PostgreSQL (account data shared by several hubs,
// `[hub] database`). Callers write one SQL text for both, in the subset the two share (`?`
// placeholders, `ON CONFLICT`, `RETURNING`); what the engines spell differently is asked of
// `dialect`, so that each engine's differences sit in its own file and nowhere else.

/// A value bound to or read from a statement.
enum SQLValue: Equatable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])
}

/// What the two engines spell differently. The SQLite and PostgreSQL files each define theirs.
struct SQLDialect: Sendable {
    /// The engine's name, as `admin status` shows it.
    let name: String
    /// The scalar larger and smaller of two values (`max(a, b)` / `greatest(a, b)`).
    let greatest: String
    let least: String
    /// `LIMIT` with no limit, before an `OFFSET` (SQLite needs one; PostgreSQL says `ALL`).
    let noLimit: String
    /// Appended to a `SELECT` that reads a row the transaction goes on to change on the strength
    /// of what it read: PostgreSQL's row lock. SQLite needs none (one writer at a time).
    let forUpdate: String
    /// The text of member `key` of the JSON object in text column `column`.
    let jsonText: @Sendable (_ column: String, _ key: String) -> String
    /// Whether other processes write the same tables (several hub replicas on PostgreSQL), so
    /// that a commit wakes them up (`HubReplicas`).
    let shared: Bool
}

/// A store connection. Not Sendable: it lives inside its `Store` actor.
final class Database {
    enum Engine {
        case sqlite(SQLiteConnection)
        case postgresql(PostgreSQLConnection)
    }

    let engine: Engine
    var dialect: SQLDialect {
        switch engine {
        case .sqlite: SQLiteConnection.dialect
        case .postgresql: PostgreSQLConnection.dialect
        }
    }

    init(_ engine: Engine) {
        self.engine = engine
    }

    /// Opens (creating if needed) the SQLite database at `path`.
    convenience init(path: String) throws {
        self.init(.sqlite(try SQLiteConnection(path: path)))
    }

    /// The SQLite connection, for what only SQLite has (checkpoints, the backup API); nil on PostgreSQL.
    var sqlite: SQLiteConnection? {
        if case .sqlite(let connection) = engine { connection } else { nil }
    }

    /// Runs a statement that returns no rows of interest.
    func execute(_ sql: String, _ values: [SQLValue] = []) throws {
        switch engine {
        case .sqlite(let connection): try connection.execute(sql, values)
        case .postgresql(let connection): try connection.execute(sql, values)
        }
    }

    /// Runs a query and maps every row.
    func query<T>(_ sql: String, _ values: [SQLValue] = [], row: (Row) throws -> T) throws -> [T] {
        switch engine {
        case .sqlite(let connection): try connection.query(sql, values, row: row)
        case .postgresql(let connection): try connection.query(sql, values, row: row)
        }
    }

    /// The first row of a query, if any.
    func queryOne<T>(_ sql: String, _ values: [SQLValue] = [], row: (Row) throws -> T) throws -> T? {
        switch engine {
        case .sqlite(let connection): try connection.queryOne(sql, values, row: row)
        case .postgresql(let connection): try connection.queryOne(sql, values, row: row)
        }
    }

    /// Tells the other processes that write the same tables (hub replicas on PostgreSQL), when
    /// the transaction commits and only then, `payload` on `channel`. SQLite has no other
    /// writer: nothing to tell.
    func notifyAtCommit(channel: String, payload: String) throws {
        guard case .postgresql(let connection) = engine else { return }
        try connection.execute("SELECT pg_notify(?, ?)", [.text(channel), .text(payload)])
    }

    /// Rows the last statement inserted, changed or deleted.
    var changes: Int {
        switch engine {
        case .sqlite(let connection): connection.changes
        case .postgresql(let connection): connection.changes
        }
    }

    /// Runs `body` in one transaction: committed if it returns, rolled back if it throws.
    func transaction<T>(_ body: () throws -> T) throws -> T {
        switch engine {
        case .sqlite(let connection): try connection.transaction(body)
        case .postgresql(let connection): try connection.transaction(body)
        }
    }

    /// Runs `body` in the open transaction as a part that may fail alone: its error is returned,
    /// and the transaction goes on without what it wrote. An error the part cannot be undone from
    /// alone is thrown, and fails the transaction. Each engine's way is in its own file.
    func failingAlone<T>(_ body: () throws -> T) throws -> Result<T, any Error> {
        switch engine {
        case .sqlite(let connection): try connection.failingAlone(body)
        case .postgresql(let connection): try connection.failingAlone(body)
        }
    }

    /// How many prepared statements are kept (tests).
    var cachedStatementCount: Int {
        switch engine {
        case .sqlite(let connection): connection.cachedStatementCount
        case .postgresql(let connection): connection.cachedStatementCount
        }
    }
}

/// The current row of a query. Valid only inside the row closure.
struct Row {
    private enum Source {
        case sqlite(Statement)
        case postgresql(PostgreSQLResult, row: Int32)
    }
    private let source: Source

    init(sqlite statement: Statement) { source = .sqlite(statement) }
    init(postgresql result: PostgreSQLResult, row: Int32) { source = .postgresql(result, row: row) }

    func isNull(_ column: Int32) -> Bool {
        switch source {
        case .sqlite(let statement): statement.isNull(column)
        case .postgresql(let result, let row): result.isNull(row, column)
        }
    }
    func int64(_ column: Int32) -> Int64 {
        switch source {
        case .sqlite(let statement): statement.int64(column)
        case .postgresql(let result, let row): result.int64(row, column)
        }
    }
    func int(_ column: Int32) -> Int { Int(int64(column)) }
    func text(_ column: Int32) -> String {
        switch source {
        case .sqlite(let statement): statement.text(column)
        case .postgresql(let result, let row): result.text(row, column)
        }
    }
    func double(_ column: Int32) -> Double {
        switch source {
        case .sqlite(let statement): statement.double(column)
        case .postgresql(let result, let row): result.double(row, column)
        }
    }
    func blob(_ column: Int32) -> [UInt8] {
        switch source {
        case .sqlite(let statement): statement.blob(column)
        case .postgresql(let result, let row): result.blob(row, column)
        }
    }
    func optionalText(_ column: Int32) -> String? { isNull(column) ? nil : text(column) }
    func optionalInt64(_ column: Int32) -> Int64? { isNull(column) ? nil : int64(column) }
    func optionalDouble(_ column: Int32) -> Double? { isNull(column) ? nil : double(column) }
    func optionalBlob(_ column: Int32) -> [UInt8]? { isNull(column) ? nil : blob(column) }
}
