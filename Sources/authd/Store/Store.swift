import FoundationEssentials
import Glibc
import Protocol
import Synchronization

/// A store: the daemon's own SQLite file, or a hub's account database on PostgreSQL, behind
/// one or more connections (`StoreConnection`). SQLite has one (its one writer); PostgreSQL a
/// small pool (`[hub] database_connections`), so a read is not queued behind another call's
/// commit, and commits of several calls share the server's WAL flushes. Each call takes the
/// connection with the fewest calls waiting, or the one its `serializedBy` key always takes.
/// Capabilities add their queries as extensions in their own folders.
final class Store: Sendable {
    /// The SQLite file's path, or the PostgreSQL connection string (which holds no password).
    let path: String
    let dialect: SQLDialect
    /// Folds the WAL back into the database file beside the commits, not inside one (SQLite).
    let checkpointer: Checkpointer?
    /// The connections reads take on an event loop's thread (SQLite; `readHere`).
    let readers: SQLiteReaders?
    private let connections: [StoreConnection]
    /// Calls in flight on each connection.
    private let waiting: Mutex<[Int]>

    /// Opens the SQLite store and applies pending migrations atomically. A checkpoint is asked
    /// for once a commit leaves `checkpointAfter` pages in the WAL.
    init(path: String, checkpointAfter pages: Int = Checkpointer.defaultPages) throws {
        let connection = try SQLiteConnection(path: path)
        let database = Database(.sqlite(connection))
        self.path = path
        dialect = SQLiteConnection.dialect
        try Migrations.apply(to: database)
        let checkpointer = try Checkpointer(path: path, pages: pages)
        checkpointer.watch(connection)
        self.checkpointer = checkpointer
        readers = SQLiteReaders(path: path, limit: Self.readerLimit)
        connections = [StoreConnection(database)]
        waiting = Mutex([0])
    }

    /// How many connections a hub replica keeps to PostgreSQL unless configured.
    static let defaultConnections = 4

    /// Connects to the account database on PostgreSQL with `connections` connections and applies
    /// its pending migrations (on the first).
    init(postgresql connectionString: String, connections count: Int = Store.defaultConnections, statementTimeoutMilliseconds: Int = 10_000) throws {
        var connections: [StoreConnection] = []
        for index in 0..<max(1, count) {
            let database = Database(.postgresql(try PostgreSQLConnection(connectionString: connectionString,
                                                                         statementTimeoutMilliseconds: statementTimeoutMilliseconds)))
            if index == 0 { try PostgreSQLSchema.apply(to: database) }
            connections.append(StoreConnection(database))
        }
        path = connectionString
        dialect = PostgreSQLConnection.dialect
        checkpointer = nil
        readers = nil
        self.connections = connections
        waiting = Mutex(Array(repeating: 0, count: connections.count))
    }

    /// How often a transaction the server rolled back to keep transactions serializable is run
    /// again before its caller hears of it (PostgreSQL; SQLite's one writer never needs it).
    static let serializationAttempts = 16

    /// How hard a commit pushes to disk.
    enum Durability {
        /// `synchronous = FULL` (PostgreSQL: `synchronous_commit = on`): the commit survives
        /// power loss. For credentials and keys.
        case full
        /// `synchronous = NORMAL` (WAL; PostgreSQL: `synchronous_commit = off`): survives a crash
        /// or kill -9 of the daemon, may lose the last commits on power loss (or the database
        /// server's crash), never corrupts. For the audit log's group commits.
        case relaxed
    }

    /// Runs `body` in one all-or-nothing transaction. An audit record `body` writes for the
    /// call the task serves (`AuditScope.record(in:_:)`) commits or rolls back with the rest.
    /// Transactions with the same `serializedBy` key (an account whose one row they all change)
    /// run on the same connection, one after another, rather than on several at once only for
    /// PostgreSQL to roll all but one back to keep them serializable.
    func transaction<T: Sendable>(durability: Durability = .full, serializedBy key: String? = nil,
                                  _ body: sending (Database) throws -> T) async throws -> T {
        let index = take(key)
        defer { release(index) }
        return try await connections[index].transaction(durability: durability, body)
    }

    /// How many readers a SQLite store opens at most: one per event loop.
    static let readerLimit = 4

    /// Runs `body`, which only reads, there and then on a reader (`SQLiteReaders`), in one read
    /// transaction: all it reads is of one commit. Only for a caller on an event loop's thread
    /// with a SQLite store: reading cached pages takes microseconds there, less than the two
    /// thread wake-ups of a trip to the store's queue, and it does not wait behind the commits
    /// there. nil when it did not run: on the cooperative pool (which must not block, DESIGN
    /// §5), on PostgreSQL, or with every reader lent; the caller then goes to the store's queue.
    func readHere<T>(_ body: (Database) throws -> T) throws -> T? {
        guard let readers, EventLoop.isLoopThread else { return nil }
        return try readers.read(body)
    }

    /// Runs `body`, which only reads, on the calling loop's reader when it can (`readHere`), else
    /// on the store's queue (`read`): for a lookup on a request's path, which then neither wakes
    /// the store's thread nor waits there behind a commit.
    func readOnly<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        if let value = try readHere(body) { return value }
        return try await read(body)
    }

    /// Runs `body` against the database without a transaction (single reads; a single write
    /// commits with full durability).
    func read<T: Sendable>(_ body: sending (Database) throws -> T) async throws -> T {
        let index = take()
        defer { release(index) }
        return try await connections[index].read(body)
    }

    /// Runs `body` on the first connection's queue, isolated to it, outside any task: for work
    /// that is no one task's (the audit log's group commit), so that handing it over wakes the
    /// store's thread alone, not a thread of the cooperative pool first.
    func perform(_ body: @escaping @Sendable (isolated StoreConnection) -> Void) {
        connections[0].perform(body)
    }

    /// Runs `body` there and then on the calling event loop's thread, isolated to the first
    /// connection, when that connection has nothing running or waiting (SQLite only): for a
    /// commit that does not wait for the disk (`Durability.relaxed`), a few dozen microseconds,
    /// which is less than waking the store's thread and being woken again after. false, and
    /// nothing ran, on PostgreSQL (a round trip to the server), off the loops, when the
    /// connection was busy, or when the WAL is due for a checkpoint that waits for the disk
    /// (`Checkpointer.holdsCommits`); the caller then hands the work to `perform`.
    func performHere(_ body: (isolated StoreConnection) -> Void) -> Bool {
        guard readers != nil, EventLoop.isLoopThread, checkpointer?.holdsCommits != true else { return false }
        return connections[0].performHereIfIdle(body)
    }

    /// The connection `key` always takes, or with none the one with the fewest calls waiting,
    /// counted as taken.
    private func take(_ key: String? = nil) -> Int {
        guard connections.count > 1 else { return 0 }
        return waiting.withLock { waiting in
            let index = key.map { Int(UInt(bitPattern: $0.hashValue) % UInt(waiting.count)) } ?? waiting.indices.min { waiting[$0] < waiting[$1] }!
            waiting[index] += 1
            return index
        }
    }

    private func release(_ index: Int) {
        guard connections.count > 1 else { return }
        waiting.withLock { $0[index] -= 1 }
    }

    // MARK: Health and backup

    struct Health: Sendable {
        var integrity: String
        var schemaVersion: Int
        var sizeBytes: Int64
        var journalMode: String
    }

    func health() async throws -> Health {
        try await read { database in
            if case .postgresql = database.engine {
                let size = try database.queryOne("SELECT pg_database_size(current_database())") { $0.int64(0) } ?? 0
                return Health(integrity: "ok", schemaVersion: try PostgreSQLSchema.version(of: database), sizeBytes: size, journalMode: "postgresql")
            }
            let problems = try database.query("PRAGMA integrity_check") { $0.text(0) }
            let version = try database.queryOne("PRAGMA user_version") { $0.int(0) } ?? 0
            let pages = try database.queryOne("PRAGMA page_count") { $0.int64(0) } ?? 0
            let pageSize = try database.queryOne("PRAGMA page_size") { $0.int64(0) } ?? 0
            let mode = try database.queryOne("PRAGMA journal_mode") { $0.text(0) } ?? "unknown"
            return Health(integrity: problems.first ?? "ok", schemaVersion: version, sizeBytes: pages * pageSize, journalMode: mode)
        }
    }

    func backup(to destination: String) async throws {
        try await read { database in
            guard let sqlite = database.sqlite else { throw NotSQLite() }
            try sqlite.backup(to: destination)
        }
    }

    /// What only a SQLite store does was asked of a PostgreSQL one.
    struct NotSQLite: Error, CustomStringConvertible {
        var description: String { "the account database is on PostgreSQL: back it up with PostgreSQL's own tools (pg_dump, pg_basebackup)" }
    }

    /// Folds the WAL back into the main file and empties it (at clean shutdown), once the
    /// checkpoint connection has finished.
    func checkpoint() async {
        guard let checkpointer else { return }
        checkpointer.stop()
        _ = try? await read { database in try database.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
    }
}

/// One connection of a store. Every query on it runs inside this actor, on its own serial queue
/// (`BlockingExecutor`: blocking SQLite and libpq calls never occupy the cooperative pool,
/// DESIGN §5).
actor StoreConnection {
    private let executor = BlockingExecutor(label: "authd.store")
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    let database: Database
    /// The connection's `synchronous` level now. It changes only where a transaction asks for
    /// another one, so group commits one after another set nothing: SQLite applies a `PRAGMA
    /// synchronous` when it prepares it, so each run of one prepares it again (about 7,000
    /// instructions, twice per token when it was set and reset around every commit).
    private var durability = Store.Durability.full

    init(_ database: Database) {
        self.database = database
    }

    /// `Store.transaction`, on this connection.
    func transaction<T: Sendable>(durability: Store.Durability = .full, _ body: (Database) throws -> T) throws -> T {
        try use(durability)
        let scope = AuditScope.current
        var attempt = 1
        while true {
            do {
                let result = try database.transaction { try body(database) }
                scope?.transactionEnded(committed: true)
                return result
            } catch let error as PostgreSQLError where error.isRetryable && attempt < Store.serializationAttempts {
                // Nothing of it committed: what it staged goes, and it runs again from the start.
                scope?.transactionEnded(committed: false)
                attempt += 1
                usleep(UInt32.random(in: 100...(1_000 * UInt32(min(attempt, 8)))))
            } catch {
                scope?.transactionEnded(committed: false)
                throw error
            }
        }
    }

    /// `Store.read`, on this connection.
    func read<T: Sendable>(_ body: (Database) throws -> T) throws -> T {
        try use(.full)
        return try body(database)
    }

    nonisolated func perform(_ body: @escaping @Sendable (isolated StoreConnection) -> Void) {
        executor.run { self.assumeIsolated(body) }
    }

    /// `Store.performHere`, on this connection.
    nonisolated func performHereIfIdle(_ body: (isolated StoreConnection) -> Void) -> Bool {
        executor.runHereIfIdle { self.assumeIsolated(body) }
    }

    /// A session setting on either engine. A PostgreSQL connection made again starts at its
    /// default (`on`, full), which errs on the durable side until the next change asks again.
    private func use(_ level: Store.Durability) throws {
        guard level != durability else { return }
        switch database.engine {
        case .sqlite: try database.execute(level == .full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL")
        case .postgresql: try database.execute(level == .full ? "SET synchronous_commit = on" : "SET synchronous_commit = off")
        }
        durability = level
    }
}

extension Store {
    /// The account database on PostgreSQL as `admin status` shows it: its version, one round
    /// trip, its schema, the connections and calls in flight, and the replicas seen in the last
    /// minute; nil for a SQLite store.
    func postgresqlStatus(now: Int64) async -> AdminStatus.AccountStore? {
        guard dialect.shared else { return nil }
        let pool = (connections: connections.count, busy: waiting.withLock { $0.reduce(0, +) })
        do {
            return try await read { [dialect] database in
                let started = ContinuousClock.now
                _ = try database.queryOne("SELECT 1") { $0.int(0) }
                let elapsed = ContinuousClock.now - started
                let version = try database.queryOne("SHOW server_version") { $0.text(0) }?.split(separator: " ").first.map(String.init)
                let replicas = try HubReplicas.seen(in: database, now: now)
                return AdminStatus.AccountStore(engine: dialect.name, serverVersion: version, roundTripMs: elapsed.seconds * 1000,
                                                schemaVersion: try PostgreSQLSchema.version(of: database), state: "ok", replicas: replicas,
                                                connections: pool.connections, callsInFlight: pool.busy)
            }
        } catch {
            return AdminStatus.AccountStore(engine: dialect.name, serverVersion: nil, roundTripMs: nil, schemaVersion: nil, state: "\(error)", replicas: [],
                                            connections: pool.connections, callsInFlight: pool.busy)
        }
    }
}
