import FoundationEssentials

/// The daemon's SQLite store. Every query runs inside this actor, on its own serial queue
/// (`BlockingExecutor`: blocking SQLite calls never occupy the cooperative pool, DESIGN §5).
/// Capabilities add their queries as extensions in their own folders.
actor Store {
    private let executor = BlockingExecutor(label: "authd.store")
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    let database: Database
    nonisolated let path: String
    /// The connection's `synchronous` level now. It changes only where a transaction asks for
    /// another one, so group commits one after another set nothing: SQLite applies a `PRAGMA
    /// synchronous` when it prepares it, so each run of one prepares it again (about 7,000
    /// instructions, twice per token when it was set and reset around every commit).
    private var durability = Durability.full

    /// Folds the WAL back into the database file beside the commits, not inside one.
    nonisolated let checkpointer: Checkpointer

    /// Opens the store and applies pending migrations atomically. A checkpoint is asked for
    /// once a commit leaves `checkpointAfter` pages in the WAL.
    init(path: String, checkpointAfter pages: Int = Checkpointer.defaultPages) throws {
        database = try Database(path: path)
        self.path = path
        try Migrations.apply(to: database)
        checkpointer = try Checkpointer(path: path, pages: pages)
        checkpointer.watch(database)
    }

    /// How hard a commit pushes to disk.
    enum Durability {
        /// `synchronous = FULL`: the commit survives power loss. For credentials and keys.
        case full
        /// `synchronous = NORMAL` (WAL): survives a crash or kill -9 of the daemon, may lose the
        /// last commits on power loss, never corrupts. For the audit log's group commits.
        case relaxed
    }

    /// Runs `body` in one all-or-nothing transaction. An audit record `body` writes for the
    /// call the task serves (`AuditScope.record(in:_:)`) commits or rolls back with the rest.
    func transaction<T: Sendable>(durability: Durability = .full, _ body: (Database) throws -> T) throws -> T {
        try use(durability)
        let scope = AuditScope.current
        do {
            let result = try database.transaction { try body(database) }
            scope?.transactionEnded(committed: true)
            return result
        } catch {
            scope?.transactionEnded(committed: false)
            throw error
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

    private func use(_ level: Durability) throws {
        guard level != durability else { return }
        try database.execute(level == .full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL")
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
        let problems = try database.query("PRAGMA integrity_check") { $0.text(0) }
        let version = try database.queryOne("PRAGMA user_version") { $0.int(0) } ?? 0
        let pages = try database.queryOne("PRAGMA page_count") { $0.int64(0) } ?? 0
        let pageSize = try database.queryOne("PRAGMA page_size") { $0.int64(0) } ?? 0
        let mode = try database.queryOne("PRAGMA journal_mode") { $0.text(0) } ?? "unknown"
        return Health(integrity: problems.first ?? "ok", schemaVersion: version, sizeBytes: pages * pageSize, journalMode: mode)
    }

    func backup(to destination: String) throws {
        try database.backup(to: destination)
    }

    /// Folds the WAL back into the main file and empties it (at clean shutdown), once the
    /// checkpoint connection has finished.
    func checkpoint() {
        checkpointer.stop()
        try? database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    }
}
