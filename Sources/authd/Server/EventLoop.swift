import CLinux
import Dispatch
import FoundationEssentials
import Synchronization

/// One thread that waits in epoll for its connections' sockets and runs all their work: the
/// read, the answer that needs no task (`hello`), the write, and the jobs other threads hand
/// it (an answer a task computed, a notification). A request then costs one wake-up, as in
/// ssh-agent's poll loop; libdispatch's sources cost two (its event thread, then a worker).
///
/// Concurrency: `handlers` is touched only on the loop's thread (registration happens in jobs);
/// `jobs` is under its lock. That confinement is what makes the `@unchecked Sendable` sound.
final class EventLoop: @unchecked Sendable {
    /// What the loop calls when a registered descriptor is ready. An error or hang-up is
    /// reported as readable (the read then sees it).
    struct Handler {
        let readable: () -> Void
        let writable: () -> Void
    }

    private struct Jobs {
        var pending: [@Sendable () -> Void] = []
        /// Connections' next turns (`executeLater`).
        var turns: [@Sendable () -> Void] = []
        /// The loop is in (or about to enter) `epoll_wait`: a new job must wake it.
        var sleeping = false
    }

    private let epoll: Int32
    private let wake: Int32
    private let jobs = Mutex(Jobs())
    private let thread = Atomic<UInt>(0)
    /// What each registered descriptor calls, and the events epoll watches on it (nil: it is
    /// out of epoll; none: only a hang-up or an error, which epoll always reports).
    private var handlers: [Int32: (handler: Handler, events: UInt32?)] = [:]
    /// What a connection reads its socket into, on this loop's thread: a read is taken in by
    /// the connection's machine before anything else runs, so one buffer serves them all (and
    /// a thousand idle connections hold none). Not zeroed: only the bytes a read wrote are read.
    let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 1)

    init(label: String) throws {
        epoll = try Syscalls.epollCreate()
        wake = try Syscalls.makeEventFD()
        try Syscalls.epollControl(epoll, wake, events: UInt32(EPOLLIN.rawValue), add: true)
        // A thread of its own for as long as the daemon runs: a serial queue that is not
        // targeted at a shared one gets one from libdispatch and keeps it while it blocks.
        DispatchQueue(label: label, qos: .userInitiated).async { [self] in run() }
    }

    /// Whether the caller is on this loop's thread.
    var isCurrent: Bool { thread.load(ordering: .acquiring) == Syscalls.currentThread() }

    /// Whether the caller is on the thread of any event loop: a thread of authd's own that may
    /// run a short blocking call (a read of the store's cached pages), unlike the cooperative
    /// pool's (DESIGN §5).
    static var isLoopThread: Bool { loopThreads.value != nil }

    /// The loop whose thread the caller is on, if any.
    static var current: EventLoop? {
        loopThreads.value.map { Unmanaged<EventLoop>.fromOpaque($0).takeUnretainedValue() }
    }

    /// Each loop thread is marked with its loop (unretained: a loop runs for the process's life).
    private static let loopThreads = Syscalls.ThreadMark()

    /// What runs once the jobs of this round have run (`afterRound`), on the loop's thread.
    private var roundEnd: [() -> Void] = []

    /// Runs `body` on the loop's thread once every job of the current round has run, before the
    /// loop looks at its descriptors again: the round's requests have then all got as far as they
    /// can go without waiting, and what they wait for can be started once for all of them (the
    /// group commit of their audit records). Called on the loop's thread.
    func afterRound(_ body: @escaping () -> Void) {
        precondition(isCurrent, "afterRound on the loop's thread")
        roundEnd.append(body)
    }

    /// Runs `job` on the loop's thread, after the jobs handed to it before.
    func execute(_ job: @escaping @Sendable () -> Void) {
        add { $0.pending.append(job) }
    }

    /// Runs `turn` on the loop's thread in the next round of turns: a busy connection's next
    /// helping of work, after every other connection's. Before each turn the loop runs the jobs
    /// handed to it meanwhile (a task resuming, an answer computed elsewhere), so a request that
    /// waits for the store twice is held up by two turns of a flood, not by two whole rounds.
    func executeLater(_ turn: @escaping @Sendable () -> Void) {
        add { $0.turns.append(turn) }
    }

    /// Queues work and wakes the loop if it sleeps in epoll.
    private func add(_ queue: (inout Jobs) -> Void) {
        let wakeUp = jobs.withLock { jobs -> Bool in
            queue(&jobs)
            defer { jobs.sleeping = false }
            return jobs.sleeping
        }
        if wakeUp { Syscalls.signalEventFD(wake) }
    }

    /// Runs `body` on the loop's thread and waits for its result (at once when already there).
    func sync<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
        if isCurrent { return body() }
        let result = Mutex<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        execute {
            result.withLock { $0 = body() }
            done.signal()
        }
        done.wait()
        return result.withLock { $0! }
    }

    // MARK: Descriptors (on the loop's thread only)

    /// Watches `fd` for reading.
    func register(_ fd: Int32, handler: Handler) throws(SystemError) {
        precondition(isCurrent, "register on the loop's thread")
        let events = Self.events(read: true, write: false)
        try Syscalls.epollControl(epoll, fd, events: events, add: true)
        handlers[fd] = (handler, events)
    }

    /// Changes what is watched on a registered `fd` (nothing when it is what is watched now).
    /// Watching for nothing takes it out of epoll altogether, unless `hangUp`: a hang-up is
    /// reported whatever one asks for, and an owner that does not read now would be told of it
    /// again and again; one that asks for `hangUp` acts on it (it closes).
    func watch(_ fd: Int32, read: Bool, write: Bool, hangUp: Bool = false) {
        precondition(isCurrent, "watch on the loop's thread")
        let events = Self.events(read: read, write: write)
        let wanted: UInt32? = events == 0 && !hangUp ? nil : events
        guard let (handler, watched) = handlers[fd], wanted != watched else { return }
        try? Syscalls.epollControl(epoll, fd, events: wanted, add: watched == nil)
        handlers[fd] = (handler, wanted)
    }

    /// Stops watching `fd` (before it is closed); its handler is dropped.
    func deregister(_ fd: Int32) {
        precondition(isCurrent, "deregister on the loop's thread")
        guard let (_, watched) = handlers.removeValue(forKey: fd) else { return }
        if watched != nil { try? Syscalls.epollControl(epoll, fd, events: nil) }
    }

    private static func events(read: Bool, write: Bool) -> UInt32 {
        (read ? UInt32(EPOLLIN.rawValue) : 0) | (write ? UInt32(EPOLLOUT.rawValue) : 0)
    }

    // MARK: The loop

    private func run() {
        thread.store(Syscalls.currentThread(), ordering: .releasing)
        Self.loopThreads.set(Unmanaged.passUnretained(self).toOpaque())
        // One buffer for the loop's life (an array passed inout would be copied, and leak,
        // on each call of the loop's hottest line).
        let events = UnsafeMutableBufferPointer<epoll_event>.allocate(capacity: 128)
        events.initialize(repeating: epoll_event())
        let hangUp = UInt32(EPOLLHUP.rawValue) | UInt32(EPOLLERR.rawValue)
        while true {
            runJobs()
            let idle = jobs.withLock { jobs -> Bool in
                jobs.sleeping = jobs.pending.isEmpty && jobs.turns.isEmpty
                return jobs.sleeping
            }
            // With jobs still waiting (one queued another), only look at what is ready.
            let count = Syscalls.epollWait(epoll, events, timeoutMilliseconds: idle ? -1 : 0)
            jobs.withLock { $0.sleeping = false }
            for event in events[0..<count] {
                let fd = event.data.fd
                if fd == wake {
                    Syscalls.drainEventFD(wake)
                    continue
                }
                // A handler may close its descriptor (and another connection's, never): look
                // it up again before each call.
                if event.events & (UInt32(EPOLLIN.rawValue) | hangUp) != 0, let handler = handlers[fd]?.handler { handler.readable() }
                if event.events & (UInt32(EPOLLOUT.rawValue) | hangUp) != 0, let handler = handlers[fd]?.handler { handler.writable() }
            }
        }
    }

    /// One round: the turns queued before it, each after the jobs queued by then. Bounded (what
    /// a job or turn queues waits for the next round), so descriptors are served between rounds.
    private func runJobs() {
        let turns = jobs.withLock { jobs -> [@Sendable () -> Void] in
            defer { jobs.turns = [] }
            return jobs.turns
        }
        runHandedOver()
        for turn in turns {
            turn()
            runHandedOver()
        }
        endRound()
        // What the round's end handed over (the callers a commit there answered) runs now, so
        // their answers leave before the loop looks at its descriptors again.
        runHandedOver()
        endRound()
    }

    private func endRound() {
        while !roundEnd.isEmpty {
            let ending = roundEnd
            roundEnd = []
            for body in ending { body() }
        }
    }

    private func runHandedOver() {
        let batch = jobs.withLock { jobs -> [@Sendable () -> Void] in
            defer { jobs.pending = [] }
            return jobs.pending
        }
        for job in batch { job() }
    }
}

/// A request's task runs on its connection's loop (`Task(executorPreference:)`): it starts
/// without waking another thread, and its answer is written where it was computed. What it
/// waits for runs elsewhere (the store's queue, the Argon2id workers, the card's thread), and
/// it comes back here when that is done: a token costs two wake-ups, there and back.
extension EventLoop: TaskExecutor {
    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        execute { [self] in job.runSynchronously(on: asUnownedTaskExecutor()) }
    }
}

/// The process's event loops, one per core (at most four), handed out in turn to new
/// connections; each connection stays on its loop.
final class EventLoops: Sendable {
    static let shared = EventLoops(count: min(4, ProcessInfo.processInfo.activeProcessorCount))

    private let loops: [EventLoop]
    private let next = Atomic<Int>(0)

    init(count: Int) {
        // swiftlint:disable:next force_try — epoll and eventfd fail only without descriptors at start.
        loops = (0..<max(1, count)).map { try! EventLoop(label: "authd.loop.\($0)") }
    }

    func nextLoop() -> EventLoop {
        loops[next.wrappingAdd(1, ordering: .relaxed).oldValue % loops.count]
    }
}
