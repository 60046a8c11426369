import Synchronization

/// A lock for async code that hands out turns in arrival order, to at most `permits` holders at
/// once (1: a mutex; more: a counting semaphore); a waiter whose task is cancelled leaves the line.
/// Waiters that name a requester wait in one line per requester, and the lines take turns
/// (`FairQueue`); without one, all share one line.
final class FIFOLock: Sendable {
    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Void, any Error>
    }
    private struct State {
        var free: Int
        var waiters = FairQueue<Waiter>()
        var next: UInt64 = 0
    }
    private let state: Mutex<State>

    init(permits: Int = 1) { state = Mutex(State(free: permits)) }

    /// How many wait for a turn now.
    var waiting: Int { state.withLock { $0.waiters.count } }

    func lock(for requester: String = "") async throws {
        let id = state.withLock { state -> UInt64 in
            state.next += 1
            return state.next
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let acquired = state.withLock { state -> Bool? in
                    if state.free > 0 {
                        state.free -= 1
                        return true
                    }
                    // Checked under the lock `onCancel` takes too: a cancellation that came
                    // before this point found no waiter to remove, so it must stop this one here.
                    if Task.isCancelled { return nil }
                    state.waiters.append(Waiter(id: id, continuation: continuation), for: requester)
                    return false
                }
                switch acquired {
                case true?: continuation.resume()
                case nil: continuation.resume(throwing: CancellationError())
                case false?: break
                }
            }
        } onCancel: {
            let removed = state.withLock { state in state.waiters.remove { $0.id == id } }
            removed?.continuation.resume(throwing: CancellationError())
        }
    }

    func unlock() {
        let next = state.withLock { state -> Waiter? in
            guard let next = state.waiters.next() else {
                state.free += 1
                return nil
            }
            return next
        }
        next?.continuation.resume()
    }
}

/// Waiting items in one first-in-first-out line per key, the lines taking turns (round robin):
/// `next` takes the head of the line whose turn it is, and that line, if not empty, goes to the
/// back of the turns. An item waits behind at most the items ahead of it in its own line, plus
/// one item of each other line per item of its own: a long line does not delay a short one.
struct FairQueue<Item> {
    private var lines: [String: [Item]] = [:]
    /// The keys with waiting items, in the order their lines get their next turn.
    private var turns: [String] = []

    var isEmpty: Bool { turns.isEmpty }
    var count: Int { lines.values.reduce(0) { $0 + $1.count } }

    /// Puts `item` at the back of the line of `key`; a new line gets its turn after the others.
    mutating func append(_ item: Item, for key: String) {
        if lines[key, default: []].isEmpty { turns.append(key) }
        lines[key, default: []].append(item)
    }

    /// The next item, in turns between the lines; nil when nothing waits.
    mutating func next() -> Item? {
        guard !turns.isEmpty else { return nil }
        let key = turns.removeFirst()
        var line = lines.removeValue(forKey: key) ?? []
        guard !line.isEmpty else { return next() }
        let item = line.removeFirst()
        if !line.isEmpty {
            lines[key] = line
            turns.append(key)
        }
        return item
    }

    /// Removes and returns the first waiting item that satisfies `matches` (a waiter that left).
    mutating func remove(where matches: (Item) -> Bool) -> Item? {
        for key in turns {
            guard var line = lines[key], let index = line.firstIndex(where: matches) else { continue }
            let item = line.remove(at: index)
            if line.isEmpty {
                lines[key] = nil
                turns.removeAll { $0 == key }
            } else {
                lines[key] = line
            }
            return item
        }
        return nil
    }
}
