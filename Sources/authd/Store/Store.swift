import FoundationEssentials
import Glibc
import Protocol

/// A store: the daemon's own SQLite file, or a hub's account database on PostgreSQL. Every
/// query runs inside this actor, on its own serial queue (`BlockingExecutor`: blocking SQLite
/// and libpq calls never occupy the cooperative pool, DESIGN §5). Capabilities add their
/// queries as extensions in their own folders.
actor Store {
    private let executor = BlockingExecutor(label: "authd.store")
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    let database: Database
    /// The SQLite file's path, or the PostgreSQL connection string (which holds no password).
    nonisolated let path: String
    nonisolated let dialect: SQLDialect
    /// The connection's `synchronous` level now. It changes only where a transaction asks for
    /// another one, so group commits one after another set nothing: SQLite applies a `PRAGMA
    /// synchronous` when it prepares it, so each run of one prepares it again (about 7,000
    /// instructions, twice per token when it was set and reset around every commit).
    private var durability = Durability.full

    /// Folds the WAL back into the database file beside the commits, not inside one (SQLite).
    nonisolated let checkpointer: Checkpointer?

    /// Opens the SQLite store and applies pending migrations atomically. A checkpoint is asked
    /// for once a commit leaves `checkpointAfter` pages in the WAL.
    init(path: String, checkpointAfter pages: Int = Checkpointer.defaultPages) throws {
        let connection = try SQLiteConnection(path: path)
        database = Database(.sqlite(connection))
        self.path = path
        dialect = SQLiteConnection.dialect
        try Migrations.apply(to: database)
        let checkpointer = try Checkpointer(path: path, pages: pages)
        checkpointer.watch(connection)
        self.checkpointer = checkpointer
    }

    /// Connects to the account database on PostgreSQL and applies its pending migrations.
    init(postgresql connectionString: String, statementTimeoutMilliseconds: Int = 10_000) throws {
        database = Database(.postgresql(try PostgreSQLConnection(connectionString: connectionString,
                                                                 statementTimeoutMilliseconds: statementTimeoutMilliseconds)))
        path = connectionString
        dialect = PostgreSQLConnection.dialect
        try PostgreSQLSchema.apply(to: database)
        checkpointer = nil
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
    func transaction<T: Sendable>(durability: Durability = .full, _ body: (Database) throws -> T) throws -> T {
        try use(durability)
        let scope = AuditScope.current
        var attempt = 1
        while true {
            do {
                let result = try database.transaction { try body(database) }
                scope?.transactionEnded(committed: true)
                return result
            } catch let error as PostgreSQLError where error.isRetryable && attempt < Self.serializationAttempts {
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

    /// Runs `body` on the store's queue, isolated to the store, outside any task: for work that
    /// is no one task's (the audit log's group commit), so that handing it over wakes the
    /// store's thread alone, not a thread of the cooperative pool first.
    nonisolated func perform(_ body: @escaping @Sendable (isolated Store) -> Void) {
        executor.run { self.assumeIsolated(body) }
    }

    /// Runs `body` against the database without a transaction (single reads; a single write
    /// commits with full durability).
    func read<T: Sendable>(_ body: (Database) throws -> T) throws -> T {
        try use(.full)
        return try body(database)
    }

    /// A session setting on either engine. A PostgreSQL connection made again starts at its
    /// default (`on`, full), which errs on the durable side until the next change asks again.
    private func use(_ level: Durability) throws {
        guard level != durability else { return }
        switch database.engine {
        case .sqlite: try database.execute(level == .full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL")
        case .postgresql: try database.execute(level == .full ? "SET synchronous_commit = on" : "SET synchronous_commit = off")
        }
        durability = level
    }

    // MARK: Health and backup

    struct Health: Sendable {
        var integrity: String
        var schemaVersion: Int
        var sizeBytes: Int64
        var journalMode: String
    }

    func health() throws -> Health {
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

    func backup(to destination: String) throws {
        guard let sqlite = database.sqlite else { throw NotSQLite() }
        try sqlite.backup(to: destination)
    }

    /// What only a SQLite store does was asked of a PostgreSQL one.
    struct NotSQLite: Error, CustomStringConvertible {
        var description: String { "the account database is on PostgreSQL: back it up with PostgreSQL's own tools (pg_dump, pg_basebackup)" }
    }

    /// Folds the WAL back into the main file and empties it (at clean shutdown), once the
    /// checkpoint connection has finished.
    func checkpoint() {
        guard let checkpointer else { return }
        checkpointer.stop()
        try? database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    }
}

extension Store {
    /// The account database on PostgreSQL as `admin status` shows it: its version, one round
    /// trip, its schema and the replicas seen in the last minute; nil for a SQLite store.
    func postgresqlStatus(now: Int64) -> AdminStatus.AccountStore? {
        guard case .postgresql = database.engine else { return nil }
        do {
            let started = ContinuousClock.now
            _ = try database.queryOne("SELECT 1") { $0.int(0) }
            let elapsed = ContinuousClock.now - started
            let version = try database.queryOne("SHOW server_version") { $0.text(0) }?.split(separator: " ").first.map(String.init)
            let replicas = try HubReplicas.seen(in: database, now: now)
            return AdminStatus.AccountStore(engine: dialect.name, serverVersion: version, roundTripMs: elapsed.seconds * 1000,
                                            schemaVersion: try PostgreSQLSchema.version(of: database), state: "ok", replicas: replicas)
        } catch {
            return AdminStatus.AccountStore(engine: dialect.name, serverVersion: nil, roundTripMs: nil, schemaVersion: nil, state: "\(error)", replicas: [])
        }
    }
}
