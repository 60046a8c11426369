import Synchronization

/// Writes that must be committed before their callers hear back, gathered into one transaction
/// per batch (group commit, the way PostgreSQL's WAL writer gathers commits): what arrives while
/// a commit runs waits for the next one, which takes it all, at most `mostPerCommit` at a time.
/// A write submitted on an event loop starts no commit before the loop's round of jobs has run
/// (`EventLoop.afterRound`): the other requests of that round, each about to submit its own,
/// join the same batch rather than each waking the store for a commit of one. Nothing waits for a
/// clock. The batches run on the store's first connection (`Store.perform`), outside any task,
/// one after another in arrival order; a queue that `commitsOnLoop` runs them on the loop that
/// ends its round, when that connection is idle. Each caller is answered once its batch has committed,
/// never before; a batch whose commit fails fails each of its callers.
///
/// The audit log's records and the sync log's appends go through one of these each.
final class GroupCommit<Item: Sendable, Output: Sendable>: Sendable {
    /// Runs one batch in a transaction on the store's connection: an outcome per item, in the
    /// batch's order (an item may fail alone), or a thrown error that fails the whole batch.
    typealias Commit = @Sendable (isolated StoreConnection, [Item]) throws -> [Result<Output, any Error>]

    private typealias Waiting = (item: Item, continuation: CheckedContinuation<Output, any Error>)

    private struct State {
        var waiting: [Waiting] = []
        var committing = false
        /// A loop will start the commit at the end of its round.
        var startAfterRound = false
    }

    let mostPerCommit: Int
    /// Whether a commit begun at the end of a loop's round runs right there, on the loop's
    /// thread, when the store's connection is idle (`Store.performHere`), as a server whose event
    /// loops write their own commits does: no wake-up of the store's thread, and none of the loop
    /// when its callers are answered. Only for commits that never wait for the disk
    /// (`Durability.relaxed`). Each time, the loop runs at most `mostBatchesOnLoop` batches (what
    /// other loops submit meanwhile joins them) and hands what waits after them to the store's
    /// queue, so its own connections wait for no more than that.
    let commitsOnLoop: Bool
    static var mostBatchesOnLoop: Int { 16 }
    private let state = Mutex(State())

    init(mostPerCommit: Int = .max, commitsOnLoop: Bool = false) {
        precondition(mostPerCommit > 0)
        self.mostPerCommit = mostPerCommit
        self.commitsOnLoop = commitsOnLoop
    }

    /// How many items wait for a commit, and whether one is under way (tests).
    var waitingCount: Int { state.withLock { $0.waiting.count } }
    var isCommitting: Bool { state.withLock { $0.committing } }

    /// Queues `item` and returns its outcome once its batch has committed. Every caller of one
    /// queue passes the same `commit`: whichever caller finds no commit under way starts the
    /// run of batches with its own.
    func submit(_ item: Item, on store: Store, _ commit: @escaping Commit) async throws -> Output {
        try await withCheckedThrowingContinuation { continuation in
            let loop = EventLoop.current
            let start = state.withLock { state -> Bool in
                state.waiting.append((item, continuation))
                guard !state.committing && !state.startAfterRound else { return false }
                if loop != nil { state.startAfterRound = true } else { state.committing = true }
                return true
            }
            guard start else { return }
            let commitAll = { store.perform { [self] connection in _ = commitWaiting(on: connection, commit) } }
            guard let loop else { return commitAll() }
            loop.afterRound { [self] in
                let start = state.withLock { state -> Bool in
                    state.startAfterRound = false
                    guard !state.committing else { return false }
                    state.committing = true
                    return true
                }
                guard start else { return }
                var done = false
                let ranHere = commitsOnLoop && store.performHere { [self] connection in done = commitWaiting(on: connection, commit, batches: Self.mostBatchesOnLoop) }
                if !ranHere || !done { commitAll() }
            }
        }
    }

    /// On the store's connection: commits what waits, a batch per transaction, until nothing
    /// does (true: no commit is under way any more) or `most` batches have run and more wait
    /// (false: the commit is still under way, the caller's to go on with).
    private func commitWaiting(on connection: isolated StoreConnection, _ commit: Commit, batches most: Int = .max) -> Bool {
        for _ in 0..<most {
            guard let batch = nextBatch() else { return true }
            do {
                let outcomes = try commit(connection, batch.map(\.item))
                precondition(outcomes.count == batch.count, "a group commit answers every item of its batch")
                for (waiting, outcome) in zip(batch, outcomes) { waiting.continuation.resume(with: outcome) }
            } catch {
                for waiting in batch { waiting.continuation.resume(throwing: error) }
            }
        }
        return state.withLock { state in
            guard state.waiting.isEmpty else { return false }
            state.committing = false
            return true
        }
    }

    /// The next batch, oldest first; nil when nothing waits, and then no commit is under way.
    private func nextBatch() -> [Waiting]? {
        state.withLock { state in
            guard !state.waiting.isEmpty else {
                state.committing = false
                return nil
            }
            let batch = Array(state.waiting.prefix(mostPerCommit))
            state.waiting.removeFirst(batch.count)
            return batch
        }
    }
}
