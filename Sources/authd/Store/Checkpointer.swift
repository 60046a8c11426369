import Dispatch
import Synchronization

/// Copies the WAL back into the database file on a connection and a thread of its own.
///
/// SQLite's own checkpoint runs inside the commit that brings the WAL to 1,000 pages. A
/// checkpoint syncs the WAL and then the database file, which takes milliseconds (over ten on
/// a virtual disk), and all that time the store's queue stands still, with every call waiting
/// for it: a token waits for its audit record. Here a commit only asks, once per `pages` more
/// pages, and the copy and its syncs run beside the next commits.
///
/// The WAL starts over only when a write begins with every frame copied, and a checkpoint
/// beside a steady flood of commits may never leave it so. At `hardLimit` pages the committing
/// connection checkpoints itself, as SQLite would have at the first limit; most frames are
/// copied by then. That checkpoint waits for the disk, so it runs on the store's queue, never
/// on an event loop that borrowed the connection for a commit (`Store.performHere`): from then
/// on the loops leave their commits to the store's queue (`holdsCommits`) until one there has
/// checkpointed.
///
/// Concurrency: `database` is used on `queue` only, `nextRequest` only where the store's
/// connection is used (`committed` runs after its commits: on the store's queue, or on a loop
/// that borrowed it, one at a time); the rest are atomics. That confinement is what makes the
/// `@unchecked Sendable` sound.
final class Checkpointer: @unchecked Sendable {
    /// SQLite's own limit (`wal_autocheckpoint`): about 4 MiB of WAL with 4 KiB pages.
    static let defaultPages = 1000

    /// A checkpoint is asked for each time a commit leaves this many more pages in the WAL.
    let pages: Int
    /// The committing connection checkpoints itself at this many (about 16 MB by default).
    var hardLimit: Int { pages * 4 }

    private let database: SQLiteConnection
    /// A serial queue of its own, like the store's: a checkpoint waits for the disk.
    private let queue = DispatchQueue(label: "authd.store.checkpoint", qos: .userInitiated)
    private let pending = Atomic<Bool>(false)
    private let stopped = Atomic<Bool>(false)
    private let runs = Atomic<Int>(0)
    /// The WAL's size at which the next checkpoint is asked for.
    private var nextRequest: Int

    /// Opens a second connection to the store at `path` (in WAL mode already).
    init(path: String, pages: Int = defaultPages) throws {
        database = try SQLiteConnection(path: path)
        self.pages = pages
        nextRequest = pages
    }

    /// Takes charge of checkpointing the WAL of `connection`, the store's own: it tells this
    /// its size after each commit.
    func watch(_ connection: SQLiteConnection) {
        connection.afterCommit { [unowned connection, self] walPages in committed(walPages: walPages, on: connection) }
    }

    /// Whether the WAL has reached `hardLimit`: the store's connection is then not lent to a
    /// loop, so the next commit runs on the store's queue and checkpoints there.
    var holdsCommits: Bool { overLimit.load(ordering: .acquiring) }
    private let overLimit = Atomic<Bool>(false)

    /// After each commit, where the store's connection is used.
    private func committed(walPages: Int, on connection: SQLiteConnection) {
        if walPages < pages { nextRequest = pages }  // the WAL started over
        overLimit.store(walPages >= hardLimit, ordering: .releasing)
        if walPages >= hardLimit {
            // Busy while a checkpoint runs here: the next commit tries again.
            if !EventLoop.isLoopThread { _ = try? connection.checkpointPassively() }
            return
        }
        guard walPages >= nextRequest else { return }
        nextRequest = walPages + pages
        guard !stopped.load(ordering: .acquiring), !pending.exchange(true, ordering: .acquiringAndReleasing) else { return }
        queue.async { [self] in
            pending.store(false, ordering: .releasing)
            guard !stopped.load(ordering: .acquiring), (try? database.checkpointPassively()) != nil else { return }
            runs.add(1, ordering: .relaxed)
        }
    }

    /// How many checkpoints ran on this connection.
    var checkpoints: Int { runs.load(ordering: .relaxed) }

    /// Takes no more requests and waits for a checkpoint under way (before the store's last,
    /// truncating checkpoint at shutdown).
    func stop() {
        stopped.store(true, ordering: .releasing)
        queue.sync {}
    }
}
