import Dispatch
import Synchronization
import Testing
@testable import authd

/// The group commit the audit and sync logs share: what waits while the store is busy goes into
/// the next batches, at most `mostPerCommit` each, and every caller gets its own item's outcome.
@Suite("Group commit")
struct GroupCommitTests {
    struct Refused: Error, Equatable {
        let item: Int
    }

    /// Holds the store's queue until the returned semaphore is signalled, so that every item
    /// submitted meanwhile waits for the same run of batches.
    static func hold(_ store: Store) -> DispatchSemaphore {
        let release = DispatchSemaphore(value: 0), holding = DispatchSemaphore(value: 0)
        store.perform { _ in
            holding.signal()
            release.wait()
        }
        holding.wait()
        return release
    }

    static func submitAll(_ items: Range<Int>, to queue: GroupCommit<Int, Int>, on store: Store, release: DispatchSemaphore,
                          _ commit: @escaping GroupCommit<Int, Int>.Commit) async throws -> [Int: Result<Int, Refused>] {
        try await withThrowingTaskGroup(of: (Int, Result<Int, Refused>).self) { group in
            // One at a time, so that they arrive in the order of `items`.
            for (index, item) in items.enumerated() {
                group.addTask {
                    do {
                        return (item, .success(try await queue.submit(item, on: store, commit)))
                    } catch let refused as Refused {
                        return (item, .failure(refused))
                    }
                }
                _ = await eventually(seconds: 30) { queue.waitingCount == index + 1 }
            }
            #expect(queue.waitingCount == items.count, "every item waits while the store is held")
            release.signal()
            var outcomes: [Int: Result<Int, Refused>] = [:]
            for try await (item, outcome) in group { outcomes[item] = outcome }
            return outcomes
        }
    }

    @Test("items that wait are committed in batches of at most mostPerCommit, in arrival order, each caller answered with its own outcome")
    func batches() async throws {
        let fixture = try TestDirectory()
        let queue = GroupCommit<Int, Int>(mostPerCommit: 4)
        let batches = Mutex<[[Int]]>([])
        let outcomes = try await Self.submitAll(0..<10, to: queue, on: fixture.store, release: Self.hold(fixture.store)) { _, batch in
            batches.withLock { $0.append(batch) }
            return batch.map { $0 == 7 ? .failure(Refused(item: 7)) : .success($0 * 2) }
        }
        #expect(batches.withLock { $0 } == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]])
        for item in 0..<10 {
            #expect(outcomes[item] == (item == 7 ? .failure(Refused(item: 7)) : .success(item * 2)), "item \(item)")
        }
        #expect(await Self.settles(queue))
    }

    /// Whether the queue goes idle: the store's thread answers a batch's callers before it looks
    /// for more, so a caller may hear back a moment before that.
    static func settles(_ queue: GroupCommit<Int, Int>) async -> Bool {
        await eventually(seconds: 30) { !queue.isCommitting && queue.waitingCount == 0 }
    }

    @Test("on an event loop, what the jobs of one round submit is committed in one batch, begun once the round has run")
    func oneBatchPerRound() async throws {
        let fixture = try TestDirectory()
        let store = fixture.store
        let queue = GroupCommit<Int, Int>()
        let batches = Mutex<[[Int]]>([])
        let answered = Mutex<[Int]>([])
        let commit: GroupCommit<Int, Int>.Commit = { _, batch in
            batches.withLock { $0.append(batch) }
            return batch.map { .success($0 * 2) }
        }
        // Five requests' tasks, started by one job: they all run in the loop's next round, each
        // computing for 2 ms (as a token is signed) before it submits. Begun at the first
        // submission, the commit would take that item alone: the store's queue is idle.
        let request: @Sendable (Int) async throws -> Void = { item in
            let computed = ContinuousClock.now + .milliseconds(2)
            while ContinuousClock.now < computed {}
            let output = try await queue.submit(item, on: store, commit)
            answered.withLock { $0.append(output) }
        }
        let loop = EventLoops.shared.nextLoop()
        loop.execute {
            for item in 0..<5 { Task(executorPreference: loop) { try await request(item) } }
        }
        #expect(await eventually(seconds: 30) { answered.withLock { $0.count } == 5 })
        #expect(batches.withLock { $0 } == [[0, 1, 2, 3, 4]])
        #expect(answered.withLock { $0.sorted() } == [0, 2, 4, 6, 8])
        #expect(await Self.settles(queue))
    }

    @Test("a queue that commits on the loop does so on the loop's thread while the store is idle, and on the store's queue while it is busy")
    func commitsOnLoop() async throws {
        let fixture = try TestDirectory()
        let store = fixture.store
        let queue = GroupCommit<Int, Int>(commitsOnLoop: true)
        let batches = Mutex<[(items: [Int], onLoop: Bool)]>([])
        let commit: GroupCommit<Int, Int>.Commit = { _, batch in
            batches.withLock { $0.append((batch, EventLoop.isLoopThread)) }
            return batch.map { .success($0 + 100) }
        }
        let loop = EventLoops.shared.nextLoop()
        let answered = Mutex<[Int]>([])
        let request: @Sendable (Int) async throws -> Void = { item in
            let output = try await queue.submit(item, on: store, commit)
            answered.withLock { $0.append(output) }
        }
        let submit: @Sendable (Range<Int>) -> Void = { items in
            loop.execute {
                for item in items { Task(executorPreference: loop) { try await request(item) } }
            }
        }
        submit(0..<3)
        #expect(await eventually(seconds: 30) { answered.withLock { $0.count } == 3 })
        // The store's queue busy: the loop does not wait for it, the queue commits afterwards.
        let release = Self.hold(store)
        submit(3..<5)
        #expect(await eventually(seconds: 30) { queue.waitingCount == 2 })
        #expect(answered.withLock { $0.count } == 3, "nothing is answered before its commit")
        release.signal()
        #expect(await eventually(seconds: 30) { answered.withLock { $0.count } == 5 })
        #expect(answered.withLock { $0.sorted() } == Array(100..<105))
        let seen = batches.withLock { $0 }
        #expect(seen.map(\.items) == [[0, 1, 2], [3, 4]])
        #expect(seen.map(\.onLoop) == [true, false])
        #expect(await Self.settles(queue))
    }

    @Test("a batch whose commit fails fails every caller in it, and the next submission commits")
    func failedBatch() async throws {
        let fixture = try TestDirectory()
        let queue = GroupCommit<Int, Int>()
        // One commit for every submission, as the queue's callers pass: the first batch fails,
        // the next ones commit.
        let batches = Mutex<[[Int]]>([])
        let commit: GroupCommit<Int, Int>.Commit = { _, batch in
            let first = batches.withLock { batches in
                batches.append(batch)
                return batches.count == 1
            }
            if first { throw Refused(item: -1) }
            return batch.map { .success($0 + 1) }
        }
        let outcomes = try await Self.submitAll(0..<3, to: queue, on: fixture.store, release: Self.hold(fixture.store), commit)
        #expect(outcomes.values.allSatisfy { $0 == .failure(Refused(item: -1)) } && outcomes.count == 3)
        #expect(try await queue.submit(5, on: fixture.store, commit) == 6)
        #expect(batches.withLock { $0 } == [[0, 1, 2], [5]])
        #expect(await Self.settles(queue))
    }
}
