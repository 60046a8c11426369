import Synchronization

/// A lock for async code that hands out turns in arrival order, to at most `permits` holders at
/// once (1: a mutex; more: a counting semaphore); a waiter whose task is cancelled leaves the line.
final class FIFOLock: Sendable {
    private struct State {
        var free: Int
        var waiters: [(id: UInt64, continuation: CheckedContinuation<Void, any Error>)] = []
        var next: UInt64 = 0
    }
    private let state: Mutex<State>

    init(permits: Int = 1) { state = Mutex(State(free: permits)) }

    func lock() async throws {
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
                    state.waiters.append((id, continuation))
                    return false
                }
                switch acquired {
                case true?: continuation.resume()
                case nil: continuation.resume(throwing: CancellationError())
                case false?: break
                }
            }
        } onCancel: {
            let removed = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index).continuation
            }
            removed?.resume(throwing: CancellationError())
        }
    }

    func unlock() {
        let next = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            guard !state.waiters.isEmpty else {
                state.free += 1
                return nil
            }
            return state.waiters.removeFirst().continuation
        }
        next?.resume()
    }
}
