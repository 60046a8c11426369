import Dispatch
import Synchronization

// The one way authd runs blocking C work (SQLite, pcsc-lite, sd-bus, libargon2, and the poll
// loops over sockets and pipes): inside an actor whose executor is a serial dispatch queue of
// its own, never on a thread of Swift's cooperative pool. That pool has one thread per core;
// a call that blocks there stalls every other request (GRDB keeps SQLite off it the same way).
//
// - A long-lived owner of a C handle is one actor on one `BlockingExecutor`: `Store` (SQLite),
//   `CardQueue` (pcsc-lite), `FingerprintDevice` (sd-bus, fprintd), `LoopbackRedirect` (one
//   listening socket for the length of a sign-in).
// - Work that belongs to no owner (one Argon2id hash) borrows a worker of
//   a `BlockingPool`, which bounds how many run at once and queues the rest in arrival order.
//
// An actor on such an executor may block for as long as its work takes: its queue is its own.
// Whatever must reach blocked work from outside (SCardCancel, a cancel pipe, a flag the loop
// checks) is `nonisolated`, so it never waits for the actor it is meant to interrupt.

/// Runs an actor's jobs on a dedicated serial dispatch queue, so its blocking calls never
/// occupy a thread of Swift's cooperative pool. An actor adopts it with
/// `nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }`.
final class BlockingExecutor: SerialExecutor {
    /// What the actor's jobs do while they hold a thread.
    enum Work {
        /// They wait (on a device, a socket, a child, the disk): the queue gets a thread
        /// whenever it has jobs, however many other queues are holding theirs.
        case waiting
        /// They compute: the queue takes turns on the threads libdispatch keeps for CPU-bound
        /// work, about one per core. Fewer threads also means fewer malloc arenas: glibc keeps a
        /// freed large block (Argon2id's 19 MiB) in the arena of the thread that freed it, so
        /// computing on whichever thread is free would leave one such block behind per thread.
        case computing
    }

    private let queue: DispatchQueue

    /// Whether the executor's work is running or waiting to run, and where (`runHereIfIdle`).
    private struct Occupancy {
        /// Jobs and blocks handed to the queue that have not finished.
        var onQueue = 0
        /// The thread outside the queue that runs the executor's work now, if any.
        var borrower: UInt?
        /// What was handed over meanwhile, in order: it goes to the queue when that work ends.
        var parked: [@Sendable () -> Void] = []
    }

    private let occupancy = Mutex(Occupancy())

    init(label: String, work: Work = .waiting) {
        switch work {
        case .waiting:
            // A serial queue of its own targets libdispatch's overcommitting pool.
            queue = DispatchQueue(label: label, qos: .userInitiated)
        case .computing:
            queue = DispatchQueue(label: label, qos: .userInitiated, target: .global(qos: .userInitiated))
        }
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        run { job.runSynchronously(on: self.asUnownedSerialExecutor()) }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// Runs `block` on the queue, outside any task; its actor's `assumeIsolated` holds there
    /// (`checkIsolated`), since the actor's jobs run on the same serial queue.
    func run(_ block: @escaping @Sendable () -> Void) {
        occupancy.withLock { occupancy in
            guard occupancy.borrower == nil else { return occupancy.parked.append(block) }
            hand(block, &occupancy)
        }
    }

    /// Queues `block`, counted until it has run; under the occupancy's lock, so blocks reach
    /// the queue in the order they were handed over.
    private func hand(_ block: @escaping @Sendable () -> Void, _ counted: inout Occupancy) {
        counted.onQueue += 1
        queue.async { [self] in
            block()
            occupancy.withLock { $0.onQueue -= 1 }
        }
    }

    /// Runs `block` on the calling thread, as the executor's work (its actor's `assumeIsolated`
    /// holds there), when the executor has nothing running or waiting: the work is short and the
    /// caller would otherwise wake the queue's thread for it and be woken again after. What is
    /// handed to the executor meanwhile runs after it, in order. false, and nothing ran, when the
    /// executor was busy.
    func runHereIfIdle(_ block: () -> Void) -> Bool {
        let lent = occupancy.withLock { occupancy -> Bool in
            guard occupancy.onQueue == 0, occupancy.borrower == nil else { return false }
            occupancy.borrower = Syscalls.currentThread()
            return true
        }
        guard lent else { return false }
        defer {
            occupancy.withLock { occupancy in
                occupancy.borrower = nil
                for parked in occupancy.parked { hand(parked, &occupancy) }
                occupancy.parked = []
            }
        }
        block()
        return true
    }

    func checkIsolated() {
        if occupancy.withLock({ $0.borrower }) == Syscalls.currentThread() { return }
        dispatchPrecondition(condition: .onQueue(queue))
    }
}

/// A fixed number of workers, each an actor on its own `BlockingExecutor`, for blocking work
/// that has no long-lived owner. At most `count` pieces of work run at once; the others wait
/// for a worker, each requester (`WorkRequester.key`: a local uid, a machine) in a line of its
/// own, and the lines take turns (`FairQueue`): one requester with many pieces of work waiting
/// delays another's by at most one piece per requester waiting, however long its own line is.
/// One whose task is cancelled while it waits leaves the line with `CancellationError` (work
/// already running runs to its end: what it blocks in is its own business to interrupt).
final class BlockingPool: Sendable {
    private let idle: Mutex<[BlockingWorker]>
    private let turns: FIFOLock
    let count: Int

    init(label: String, count: Int, work: BlockingExecutor.Work) {
        precondition(count > 0, "a pool needs a worker")
        self.count = count
        idle = Mutex((0..<count).map { BlockingWorker(label: "\(label).\($0)", work: work) })
        turns = FIFOLock(permits: count)
    }

    /// How many pieces of work wait for a worker now.
    var waiting: Int { turns.waiting }

    /// Runs `body` on a free worker once it is this caller's turn among the requests of its
    /// requester (`WorkRequester.key`), and its requester's turn among the others.
    func run<T: Sendable>(_ body: @Sendable () throws -> T) async throws -> T {
        try await turns.lock(for: WorkRequester.key)
        // A permit guarantees an idle worker; the most recently used one is taken first, its
        // thread and memory being the likeliest to be warm.
        let worker = idle.withLock { $0.removeLast() }
        defer {
            idle.withLock { $0.append(worker) }
            turns.unlock()
        }
        return try await worker.run(body)
    }
}

/// Whom the blocking work of the current task is for: the dispatcher sets it to the caller
/// (`uid:1000`, `device:…`) for the length of a request, so `BlockingPool` can share its
/// workers fairly between callers. Work outside any request shares the empty key.
enum WorkRequester {
    @TaskLocal static var key = ""
}

/// One worker of a `BlockingPool`.
private actor BlockingWorker {
    private let executor: BlockingExecutor
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    init(label: String, work: BlockingExecutor.Work) { executor = BlockingExecutor(label: label, work: work) }

    func run<T: Sendable>(_ body: @Sendable () throws -> T) throws -> T { try body() }
}

/// Set once, read from any thread: tells blocking work that its request was cancelled (the
/// work looks at it between its blocking calls).
final class CancelFlag: Sendable {
    private let flag = Atomic(false)
    func set() { flag.store(true, ordering: .releasing) }
    var isSet: Bool { flag.load(ordering: .acquiring) }
}
