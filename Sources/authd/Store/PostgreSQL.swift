import CPostgreSQL
import FoundationEssentials
import Glibc
import Synchronization

// The only file that calls libpq. `PostgreSQLConnection` owns one session connection to the
// account database of a hub on PostgreSQL (`[hub] database`): it prepares each SQL text once
// per connection, binds values as libpq parameters (never spliced into the text), reads results
// in text form, and connects again by itself after the server went away. `PostgreSQLResult`
// owns a result and clears it in `deinit`. Neither is Sendable: each lives inside the `Store`
// actor (or the hub's listener) that runs it on its own serial queue.

/// A PostgreSQL failure. Bound values and the server's DETAIL field (which quotes key values)
/// are never part of it: they may be secrets.
struct PostgreSQLError: Error, CustomStringConvertible {
    /// The five-character SQLSTATE; empty when libpq failed before the server answered.
    let sqlstate: String
    let message: String
    let sql: String?

    var description: String {
        "PostgreSQL error" + (sqlstate.isEmpty ? "" : " \(sqlstate)") + ": \(message)" + (sql.map { " in `\($0)`" } ?? "")
    }

    /// The server rolled the transaction back to keep it serializable (40001), or to break a
    /// deadlock (40P01): running it again is safe and is what the server asks for.
    var isRetryable: Bool { sqlstate == "40001" || sqlstate == "40P01" }
    /// The database cannot be reached or went away: no answer about the statement is known.
    var isUnavailable: Bool { sqlstate.isEmpty || sqlstate.hasPrefix("08") || ["57P01", "57P02", "57P03"].contains(sqlstate) }
    /// The statement ran past `statement_timeout` or `lock_timeout`.
    var isTimeout: Bool { sqlstate == "57014" || sqlstate == "55P03" }
}

/// libpq, opened the first time a connection or a connection string needs it (see shim.h): a
/// daemon on SQLite never maps it.
enum LibPQ {
    private static let opened = Mutex<authd_libpq?>(nil)

    /// The functions of Debian's libpq5. A failure is not kept: once the library is installed,
    /// the next configuration read or connection opens it.
    static var functions: Result<authd_libpq, PostgreSQLError> {
        opened.withLock { opened in
            if let opened { return .success(opened) }
            let result = open(AUTHD_LIBPQ_SONAME)
            if case .success(let functions) = result { opened = functions }
            return result
        }
    }

    /// The functions of the library `soname`, or why they cannot be had.
    static func open(_ soname: String) -> Result<authd_libpq, PostgreSQLError> {
        var table = authd_libpq()
        if let failure = authd_libpq_open(soname, &table) {
            return .failure(PostgreSQLError(sqlstate: "", message: "cannot load libpq: " + String(cString: failure), sql: nil))
        }
        return .success(table)
    }
}

final class PostgreSQLConnection {
    static let dialect = SQLDialect(name: "postgresql", greatest: "greatest", least: "least", noLimit: "LIMIT ALL", forUpdate: " FOR UPDATE",
                                    jsonText: { column, key in "(\(column)::jsonb ->> '\(key)')" }, shared: true)

    /// After a failed connection attempt, statements fail at once for this long rather than
    /// each waiting for a connect timeout on the store's queue.
    static let reconnectPause = Duration.milliseconds(500)

    private let pq: authd_libpq
    private let connectionString: String
    private let statementTimeoutMilliseconds: Int
    private var handle: OpaquePointer?
    private var lastFailedAttempt: ContinuousClock.Instant?
    /// Prepared statements by SQL text and parameter types; names are per connection.
    private var statements: [String: String] = [:]
    /// `?` placeholders rewritten as `$1…`, by SQL text.
    private var translated: [String: String] = [:]
    private(set) var changes = 0
    /// Inside `transaction`: a broken connection fails the rest of it rather than being made
    /// again (a statement on a new connection would run, and commit, outside the transaction).
    private var inTransaction = false
    /// authd's SQL is a fixed set of texts; the caches stay bounded whatever a caller does.
    static let statementCacheLimit = 512

    /// Connects to `connectionString` (a `postgresql://` URI or a libpq keyword string; the
    /// password comes from `PGPASSFILE` or the file the URI's `passfile` names, never from here).
    init(connectionString: String, statementTimeoutMilliseconds: Int = 10_000) throws {
        pq = try LibPQ.functions.get()
        self.connectionString = connectionString
        self.statementTimeoutMilliseconds = statementTimeoutMilliseconds
        try connect()
    }

    deinit { pq.PQfinish(handle) }

    var isConnected: Bool { handle.map { pq.PQstatus($0) == CONNECTION_OK } ?? false }

    /// The socket of the connection, for waiting on notifications; -1 while not connected.
    var socket: Int32 { handle.map { pq.PQsocket($0) } ?? -1 }

    private func connect() throws {
        pq.PQfinish(handle)
        handle = nil
        statements.removeAll()
        // Defaults first: what the configured string says wins (`expand_dbname`).
        let keywords = ["connect_timeout", "application_name", "dbname"]
        let values = ["5", "authd", connectionString]
        let connection = withCStrings(keywords) { keywords in
            withCStrings(values) { values in pq.PQconnectdbParams(keywords, values, 1) }
        }
        guard let connection, pq.PQstatus(connection) == CONNECTION_OK else {
            let message = connection.map { Self.firstLine(pq.PQerrorMessage($0)) } ?? "out of memory"
            pq.PQfinish(connection)
            lastFailedAttempt = .now
            throw PostgreSQLError(sqlstate: "", message: "cannot connect: \(message)", sql: nil)
        }
        // libpq prints what the server says outside a statement (a shutdown's FATAL, a WARNING)
        // on stderr; a statement's own error comes back with its result. Nothing goes to stderr.
        _ = pq.PQsetNoticeProcessor(connection, { _, _ in }, nil)
        handle = connection
        lastFailedAttempt = nil
        do {
            try simple("SET statement_timeout = \(statementTimeoutMilliseconds)")
            try simple("SET client_min_messages = warning")
            try simple("SET TIME ZONE 'UTC'")
        } catch {
            pq.PQfinish(handle)
            handle = nil
            lastFailedAttempt = .now
            throw error
        }
    }

    /// A connection to use now: this one, or a new one if the server went away (not inside a
    /// transaction: a transaction whose connection broke has failed, and says so). Between
    /// transactions it reads what the server left on the socket first: a server that restarted
    /// closed it, and a connection of the pool that sat idle meanwhile is made again now, rather
    /// than failing its next caller.
    private func connected() throws -> OpaquePointer {
        if let handle, pq.PQstatus(handle) == CONNECTION_OK {
            if inTransaction || (try? Syscalls.waitUntilReadable([pq.PQsocket(handle)], timeoutMilliseconds: 0))?.first != true { return handle }
            // Between transactions the server says nothing unasked: what waits is its goodbye
            // (a restart's FATAL) before the end of the connection.
            _ = pq.PQconsumeInput(handle)
            if pq.PQstatus(handle) == CONNECTION_OK && !Syscalls.atEndOfFile(pq.PQsocket(handle)) { return handle }
        }
        if inTransaction { throw PostgreSQLError(sqlstate: "08006", message: "the connection broke during the transaction", sql: nil) }
        if let last = lastFailedAttempt, ContinuousClock.now - last < Self.reconnectPause {
            throw PostgreSQLError(sqlstate: "", message: "the database is unreachable", sql: nil)
        }
        try connect()
        return handle!
    }

    /// Runs `sql` (no parameters, no rows) with the simple protocol: session settings, BEGIN, COMMIT.
    func simple(_ sql: String) throws {
        let connection = try connected()
        let result = PostgreSQLResult(pq, pq.PQexec(connection, sql))
        try check(result, sql: sql, connection: connection)
    }

    private func check(_ result: PostgreSQLResult, sql: String, connection: OpaquePointer) throws {
        switch pq.PQresultStatus(result.raw) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK:
            return
        default:
            let state = pq.PQresultErrorField(result.raw, Int32(UInt8(ascii: "C"))).map { String(cString: $0) } ?? ""
            let primary = pq.PQresultErrorField(result.raw, Int32(UInt8(ascii: "M"))).map { String(cString: $0) }
            let message = primary ?? Self.firstLine(pq.PQerrorMessage(connection))
            throw PostgreSQLError(sqlstate: pq.PQstatus(connection) == CONNECTION_OK ? state : (state.isEmpty ? "08006" : state), message: message, sql: sql)
        }
    }

    private static func firstLine(_ text: UnsafePointer<CChar>?) -> String {
        guard let text else { return "unknown error" }
        return String(cString: text).split(separator: "\n").first.map(String.init) ?? "unknown error"
    }

    /// `?` → `$n`, outside quoted text and identifiers.
    private func postgresText(_ sql: String) -> String {
        if let done = translated[sql] { return done }
        var out = ""
        var number = 0
        var quote: Character?
        for character in sql {
            if let open = quote {
                if character == open { quote = nil }
                out.append(character)
            } else if character == "'" || character == "\"" {
                quote = character
                out.append(character)
            } else if character == "?" {
                number += 1
                out += "$\(number)"
            } else {
                out.append(character)
            }
        }
        if translated.count < Self.statementCacheLimit { translated[sql] = out }
        return out
    }

    /// The statement's result, its parameters bound. A text is sent with no type (the server
    /// takes the column's), an integer as int8, a real as float8, bytes as bytea in binary form.
    private func run(_ sql: String, _ values: [SQLValue]) throws -> PostgreSQLResult {
        let connection = try connected()
        let parameters = Parameters(values)
        let types = parameters.types
        let key = types.isEmpty ? sql : sql + "\u{0}" + types.map(String.init).joined(separator: ",")
        let name: String
        if let known = statements[key] {
            name = known
        } else {
            // Past the cache's bound, the unnamed statement, which the next one replaces.
            name = statements.count < Self.statementCacheLimit ? "authd_\(statements.count)" : ""
            let prepared = PostgreSQLResult(pq, pq.PQprepare(connection, name, postgresText(sql), Int32(types.count), types))
            try check(prepared, sql: sql, connection: connection)
            if !name.isEmpty { statements[key] = name }
        }
        let result = PostgreSQLResult(pq, pq.PQexecPrepared(connection, name, Int32(values.count), parameters.pointers, parameters.lengths, parameters.formats, 0))
        try check(result, sql: sql, connection: connection)
        changes = pq.PQcmdTuples(result.raw).flatMap { Int(String(cString: $0)) } ?? 0
        return result
    }

    func execute(_ sql: String, _ values: [SQLValue] = []) throws {
        _ = try run(sql, values)
    }

    func query<T>(_ sql: String, _ values: [SQLValue] = [], row: (Row) throws -> T) throws -> [T] {
        let result = try run(sql, values)
        let count = pq.PQntuples(result.raw)
        var rows: [T] = []
        rows.reserveCapacity(Int(count))
        for index in 0..<count { rows.append(try row(Row(postgresql: result, row: index))) }
        return rows
    }

    func queryOne<T>(_ sql: String, _ values: [SQLValue] = [], row: (Row) throws -> T) throws -> T? {
        let result = try run(sql, values)
        return pq.PQntuples(result.raw) > 0 ? try row(Row(postgresql: result, row: 0)) : nil
    }

    var cachedStatementCount: Int { statements.count }

    /// Runs `body` in a `SERIALIZABLE` transaction: committed if it returns, rolled back if it
    /// throws. The outcome is the same as if transactions ran one at a time, as on SQLite's one
    /// writer; a transaction the server aborts to keep it so fails with `isRetryable`, and
    /// `Store.transaction` runs it again.
    func transaction<T>(_ body: () throws -> T) throws -> T {
        try simple("BEGIN ISOLATION LEVEL SERIALIZABLE")
        inTransaction = true
        defer { inTransaction = false }
        do {
            let result = try body()
            // A transaction a failed statement aborted answers COMMIT with ROLLBACK, not an error.
            let connection = try connected()
            let committed = PostgreSQLResult(pq, pq.PQexec(connection, "COMMIT"))
            try check(committed, sql: "COMMIT", connection: connection)
            guard pq.PQcmdStatus(committed.raw).map({ String(cString: $0) }) == "COMMIT" else {
                throw PostgreSQLError(sqlstate: "25P02", message: "the transaction was aborted by an earlier statement and rolled back", sql: nil)
            }
            return result
        } catch {
            if isConnected { try? simple("ROLLBACK") }
            throw error
        }
    }

    /// `Database.failingAlone`. A failed statement aborts the whole transaction here, so the
    /// part is a savepoint: what it did is rolled back and the transaction goes on. A
    /// serialization failure is thrown (the whole transaction runs again).
    func failingAlone<T>(_ body: () throws -> T) throws -> Result<T, any Error> {
        try execute("SAVEPOINT part")
        do {
            let result = try body()
            try execute("RELEASE part")
            return .success(result)
        } catch let error as PostgreSQLError where error.isRetryable {
            throw error
        } catch {
            try execute("ROLLBACK TO part")
            try execute("RELEASE part")
            return .failure(error)
        }
    }

    /// Notifications that arrived on this connection (after `LISTEN`), read without waiting. A
    /// connection that broke is not made again here: its `LISTEN` would be gone with it.
    func notifications() throws -> [(channel: String, payload: String)] {
        guard let connection = handle, pq.PQstatus(connection) == CONNECTION_OK else {
            throw PostgreSQLError(sqlstate: "08006", message: "the connection is closed", sql: nil)
        }
        guard pq.PQconsumeInput(connection) == 1 else {
            throw PostgreSQLError(sqlstate: "08006", message: Self.firstLine(pq.PQerrorMessage(connection)), sql: nil)
        }
        var received: [(String, String)] = []
        while let notice = pq.PQnotifies(connection) {
            received.append((String(cString: notice.pointee.relname), String(cString: notice.pointee.extra)))
            pq.PQfreemem(notice)
        }
        return received
    }

    /// The keywords `connectionString` sets, as libpq `pq` parses it (its error, which never
    /// quotes a value, when it cannot).
    static func parameters(of connectionString: String, using pq: authd_libpq) -> Result<[String: String], PostgreSQLError> {
        var error: UnsafeMutablePointer<CChar>?
        guard let options = pq.PQconninfoParse(connectionString, &error) else {
            let message = error.map { firstLine($0) } ?? "out of memory"
            pq.PQfreemem(error)
            return .failure(PostgreSQLError(sqlstate: "", message: message, sql: nil))
        }
        defer { pq.PQconninfoFree(options) }
        var set: [String: String] = [:]
        var option = options
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val { set[String(cString: keyword)] = String(cString: value) }
            option += 1
        }
        return .success(set)
    }

    /// Drops the connection (tests, shutdown).
    func close() {
        pq.PQfinish(handle)
        handle = nil
        statements.removeAll()
    }
}

/// A libpq result, cleared when it goes. Rows are read in text form.
final class PostgreSQLResult {
    private let pq: authd_libpq
    let raw: OpaquePointer?

    init(_ pq: authd_libpq, _ raw: OpaquePointer?) {
        self.pq = pq
        self.raw = raw
    }
    deinit { pq.PQclear(raw) }

    func isNull(_ row: Int32, _ column: Int32) -> Bool { pq.PQgetisnull(raw, row, column) == 1 }

    /// An integer, or a boolean as 1 or 0 (`x IS NOT NULL` is a boolean here, an integer in SQLite).
    func int64(_ row: Int32, _ column: Int32) -> Int64 {
        guard let value = pq.PQgetvalue(raw, row, column) else { return 0 }
        switch value.pointee {
        case CChar(UInt8(ascii: "t")): return 1
        case CChar(UInt8(ascii: "f")): return 0
        default: return strtoll(value, nil, 10)
        }
    }

    func double(_ row: Int32, _ column: Int32) -> Double {
        guard let value = pq.PQgetvalue(raw, row, column) else { return 0 }
        return strtod(value, nil)
    }

    func text(_ row: Int32, _ column: Int32) -> String {
        guard let value = pq.PQgetvalue(raw, row, column) else { return "" }
        return String(cString: value)
    }

    /// bytea in its text form, `\x` and hex digits.
    func blob(_ row: Int32, _ column: Int32) -> [UInt8] {
        guard let value = pq.PQgetvalue(raw, row, column) else { return [] }
        let count = Int(pq.PQgetlength(raw, row, column))
        return UnsafeRawBufferPointer(start: value, count: count).withMemoryRebound(to: UInt8.self) { text in
            guard count >= 2, text[0] == UInt8(ascii: "\\"), text[1] == UInt8(ascii: "x") else { return Array(text) }
            func nibble(_ c: UInt8) -> UInt8 { c <= UInt8(ascii: "9") ? c &- UInt8(ascii: "0") : (c | 0x20) &- UInt8(ascii: "a") &+ 10 }
            var bytes: [UInt8] = []
            bytes.reserveCapacity((count - 2) / 2)
            var index = 2
            while index + 1 < count {
                bytes.append(nibble(text[index]) << 4 | nibble(text[index + 1]))
                index += 2
            }
            return bytes
        }
    }
}

/// Calls `body` with C strings for `strings`, NULL-terminated, alive for the call.
private func withCStrings<T>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> T) -> T {
    let copies = strings.map { strdup($0) }
    defer { copies.forEach { free($0) } }
    let pointers = copies.map { UnsafePointer($0) } + [nil]
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}

/// A statement's parameters as libpq takes them: each value copied once into memory of its own
/// (NUL-terminated text, or bytea's bytes in binary form; NULL for SQL NULL), zeroed and freed
/// when the statement is done with them (a value may be a secret's hash).
private final class Parameters {
    private(set) var types: [Oid] = []
    private(set) var formats: [Int32] = []
    private(set) var lengths: [Int32] = []
    private(set) var pointers: [UnsafePointer<CChar>?] = []
    private var allocations: [UnsafeMutableRawBufferPointer] = []

    init(_ values: [SQLValue]) {
        for value in values {
            switch value {
            case .null: add(type: 0, format: 0, bytes: nil)
            case .integer(let v): add(type: 20, format: 0, text: String(v))
            case .real(let v): add(type: 701, format: 0, text: "\(v)")
            case .text(let v): add(type: 0, format: 0, text: v)
            case .blob(let v): v.withUnsafeBytes { add(type: 17, format: 1, bytes: $0) }
            }
        }
    }

    deinit {
        for allocation in allocations {
            allocation.initializeMemory(as: UInt8.self, repeating: 0)
            allocation.deallocate()
        }
    }

    private func add(type: Oid, format: Int32, text: String) {
        var text = text
        text.withUTF8 { utf8 in
            let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: utf8.count + 1, alignment: 1)
            copy.copyMemory(from: UnsafeRawBufferPointer(utf8))
            copy[utf8.count] = 0
            keep(copy, type: type, format: format, length: utf8.count)
        }
    }

    private func add(type: Oid, format: Int32, bytes: UnsafeRawBufferPointer?) {
        guard let bytes else {
            types.append(type); formats.append(format); lengths.append(0); pointers.append(nil)
            return
        }
        let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: max(bytes.count, 1), alignment: 1)
        copy.copyMemory(from: bytes)
        keep(copy, type: type, format: format, length: bytes.count)
    }

    private func keep(_ copy: UnsafeMutableRawBufferPointer, type: Oid, format: Int32, length: Int) {
        allocations.append(copy)
        types.append(type)
        formats.append(format)
        lengths.append(Int32(length))
        pointers.append(UnsafePointer(copy.baseAddress!.assumingMemoryBound(to: CChar.self)))
    }
}
