import FoundationEssentials
import Synchronization
import Testing
@testable import authd

@Suite("Blocking work off the cooperative pool")
struct BlockingExecutorTests {
    /// How many bodies run at once, and the most there ever were.
    final class Occupancy: Sendable {
        private let counts = Mutex((now: 0, most: 0))
        func enter() { counts.withLock { $0.now += 1; $0.most = max($0.most, $0.now) } }
        func leave() { counts.withLock { $0.now -= 1 } }
        var most: Int { counts.withLock { $0.most } }
    }

    /// Blocks the calling thread until `flag` is set or `seconds` pass; true when it was set.
    /// Generous: the integration tests sharing this process can keep every thread of the
    /// cooperative pool busy for minutes, and the flag is set from that pool.
    static func block(until flag: CancelFlag, seconds: Int = 600) -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while !flag.isSet {
            if ContinuousClock.now >= deadline { return false }
            Syscalls.sleep(milliseconds: 1)
        }
        return true
    }

    /// Where these tests' own tasks run: a thread of their own, not the cooperative pool, which
    /// the integration tests sharing this process can keep busy for minutes (a bounded wait
    /// that needs a pool thread to look at its condition would then fail for no fault of the
    /// code under test). The property tested holds the same: work handed to a pool must leave
    /// the caller's executor free, whichever executor that is.
    static let executor: EventLoop = {
        do { return try EventLoop(label: "authd.test.blocking") } catch { fatalError("no event loop for the tests: \(error)") }
    }()

    /// Waits (without holding a thread) until `condition` holds or `seconds` pass; whether it
    /// held. Generous for the reason `block` is, but never for ever.
    static func wait(seconds: Int = 120, until condition: () -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while !condition() {
            if ContinuousClock.now >= deadline { return false }
            try await Task.sleep(for: .milliseconds(1))
        }
        return true
    }

    @Test("a pool runs everything it is given, never more than its workers at once")
    func bounded() async throws {
        let pool = BlockingPool(label: "authd.test.bounded", count: 2, work: .computing)
        let occupancy = Occupancy()
        let done = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<8 {
                group.addTask {
                    try await pool.run {
                        occupancy.enter()
                        defer { occupancy.leave() }
                        Syscalls.sleep(milliseconds: 10)
                        return index
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(done.sorted() == Array(0..<8))
        #expect(occupancy.most <= 2)
    }

    @Test("blocked workers leave the cooperative pool free")
    func offThePool() async throws {
        // More blocked workers than the cooperative pool has threads: if they ran there, nothing
        // could set the flag that ends them, and each would give up in the end.
        let count = ProcessInfo.processInfo.activeProcessorCount + 1
        let pool = BlockingPool(label: "authd.test.free", count: count, work: .waiting)
        let release = CancelFlag()
        let started = Occupancy()
        let ended = try await withTaskExecutorPreference(Self.executor) { try await withThrowingTaskGroup(of: Bool.self) { group -> (Bool, [Bool]) in
            for _ in 0..<count {
                group.addTask {
                    try await pool.run {
                        started.enter()
                        return Self.block(until: release)
                    }
                }
            }
            let allStarted = try await Self.wait { started.most >= count }
            release.set()
            return (allStarted, try await group.reduce(into: []) { $0.append($1) })
        } }
        #expect(ended.0, "all \(count) workers ran at once within 120 s")
        #expect(ended.1 == Array(repeating: true, count: count))
    }

    @Test("a caller cancelled while it waits for a worker leaves the line without running")
    func cancelledWhileWaiting() async throws {
        let pool = BlockingPool(label: "authd.test.cancel", count: 1, work: .waiting)
        let started = CancelFlag()
        let release = CancelFlag()
        let holder = Task(executorPreference: Self.executor) { try await pool.run { started.set(); return Self.block(until: release) } }
        guard try await withTaskExecutorPreference(Self.executor, operation: { try await Self.wait(until: { started.isSet }) }) else {
            release.set()
            Issue.record("the holder did not start within 120 s")
            return
        }
        let ran = CancelFlag()
        let waiter = Task(executorPreference: Self.executor) { try await pool.run { ran.set() } }
        waiter.cancel()
        let outcome = await waiter.result
        release.set()
        #expect(try await holder.value, "the holder was released, not timed out")
        #expect(throws: CancellationError.self) { try outcome.get() }
        #expect(!ran.isSet)
        // The line moves on: the worker is free again.
        #expect(try await pool.run { 42 } == 42)
    }

    @Test("Argon2id workers: one per core up to four, within a sixteenth of memory, at least one", arguments: [
        (2, 24 << 30, 2),     // the build machine: the cores bound it
        (4, 512 << 20, 1),    // a small device: memory bounds it
        (8, 2 << 30, 4),      // 2 GiB / 16 / 19 MiB = 6, but at most four
        (3, 2 << 30, 3),
        (1, 0, 1),            // unknown memory still hashes
        (64, 256 << 30, 4),   // a large server: memory does not grow with the cores
    ] as [(Int, UInt64, Int)])
    func argon2Workers(cores: Int, memory: UInt64, workers: Int) {
        #expect(Argon2id.workerCount(cores: cores, memoryBytes: memory) == workers)
    }
}

@Suite("Fair turns between requesters")
struct FairQueueTests {
    @Test("lines take turns: a long line delays a short one by one item per turn, each line keeps its order")
    func roundRobin() {
        var queue = FairQueue<String>()
        for index in 0..<5 { queue.append("a\(index)", for: "uid:1") }
        queue.append("b0", for: "uid:2")
        queue.append("b1", for: "uid:2")
        queue.append("c0", for: "uid:3")
        var order: [String] = []
        while let next = queue.next() { order.append(next) }
        #expect(order == ["a0", "b0", "c0", "a1", "b1", "a2", "a3", "a4"])
        #expect(queue.isEmpty)
    }

    @Test("a waiter that leaves is removed from its line, and an emptied line loses its turn")
    func removal() {
        var queue = FairQueue<Int>()
        queue.append(1, for: "a")
        queue.append(2, for: "b")
        queue.append(3, for: "a")
        #expect(queue.remove { $0 == 2 } == 2)
        #expect(queue.remove { $0 == 7 } == nil)
        #expect(queue.count == 2)
        #expect(queue.next() == 1)
        #expect(queue.next() == 3)
        #expect(queue.next() == nil)
    }

    @Test("a pool busy with one requester's 30 pieces of work runs another's next")
    func poolTakesTurns() async throws {
        let pool = BlockingPool(label: "authd.test.fair", count: 1, work: .computing)
        final class Finished: Sendable {
            private let names = Mutex<[String]>([])
            func append(_ name: String) { names.withLock { $0.append(name) } }
            var all: [String] { names.withLock { $0 } }
        }
        let finished = Finished()
        let gate = CancelFlag()
        try await withTaskExecutorPreference(BlockingExecutorTests.executor) { try await withThrowingTaskGroup(of: Void.self) { group in
            // The flood: the first holds the only worker until the others wait behind it.
            for index in 0..<30 {
                group.addTask {
                    try await WorkRequester.$key.withValue("uid:1") {
                        try await pool.run {
                            if index == 0 { _ = BlockingExecutorTests.block(until: gate, seconds: 60) }
                            finished.append("flood")
                        }
                    }
                }
            }
            // Bounded: every flood piece is queued or running before the other requester comes.
            #expect(try await BlockingExecutorTests.wait { pool.waiting >= 29 }, "the flood waits behind its first piece")
            group.addTask {
                try await WorkRequester.$key.withValue("uid:2") { try await pool.run { finished.append("other") } }
            }
            #expect(try await BlockingExecutorTests.wait { pool.waiting >= 30 }, "the other requester waits too")
            gate.set()
            try await group.waitForAll()
        } }
        let order = finished.all
        #expect(order.count == 31)
        #expect(order.firstIndex(of: "other") ?? 99 <= 2, "the other requester ran at its first turn: \(order)")
    }
}

@Suite("Callbacks kept under a lock")
struct CallbackTests {
    @Test("a callback read out of its lock 200,000 times is called as deep as the first time (a bare closure was wrapped deeper each time, until the stack overflowed)")
    func readManyTimes() {
        let kept = Mutex<Callback<Int>?>(nil)
        let sum = Atomic<Int>(0)
        kept.withLock { $0 = Callback { sum.add($0, ordering: .relaxed) } }
        for index in 0..<200_000 { kept.withLock { $0 }?.call(index % 3) }
        #expect(sum.load(ordering: .relaxed) == (0..<200_000).reduce(0) { $0 + $1 % 3 })
    }
}

/// `runHereIfIdle`: an executor with nothing to do lends its isolation to the calling thread.
@Suite("Running an idle executor's work on the caller's thread")
struct ExecutorLendingTests {
    actor Owner {
        let executor = BlockingExecutor(label: "authd.test.lending")
        nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
        var log: [String] = []
        func append(_ entry: String) { log.append(entry) }
    }

    @Test("an idle executor runs the work on the caller's thread, isolated; work handed to it meanwhile runs after, in order")
    func lendsWhenIdle() async throws {
        let owner = Owner()
        let caller = Syscalls.currentThread()
        let ranOn = Mutex<UInt>(0)
        let lent = owner.executor.runHereIfIdle {
            ranOn.withLock { $0 = Syscalls.currentThread() }
            owner.assumeIsolated { $0.log.append("here") }
            // Handed over while lent: it waits for the work here to end.
            owner.executor.run { owner.assumeIsolated { $0.log.append("after, 1") } }
            owner.executor.run { owner.assumeIsolated { $0.log.append("after, 2") } }
            Syscalls.sleep(milliseconds: 20)
            owner.assumeIsolated { $0.log.append("here, still") }
        }
        #expect(lent)
        #expect(ranOn.withLock { $0 } == caller)
        #expect(await eventually(seconds: 30) { owner.executor.runHereIfIdle {} })
        #expect(await owner.log == ["here", "here, still", "after, 1", "after, 2"])
    }

    @Test("a busy executor lends nothing: the work does not run")
    func refusesWhenBusy() async throws {
        let owner = Owner()
        let release = CancelFlag(), holding = CancelFlag()
        owner.executor.run {
            holding.set()
            _ = BlockingExecutorTests.block(until: release)
        }
        #expect(BlockingExecutorTests.block(until: holding, seconds: 30))
        let ran = Mutex(false)
        #expect(!owner.executor.runHereIfIdle { ran.withLock { $0 = true } })
        // Nor while it is lent to another thread.
        release.set()
        #expect(await eventually(seconds: 30) { owner.executor.runHereIfIdle {} })
        let inner = owner.executor.runHereIfIdle {
            #expect(!owner.executor.runHereIfIdle { ran.withLock { $0 = true } })
        }
        #expect(inner)
        #expect(!ran.withLock { $0 })
    }
}
