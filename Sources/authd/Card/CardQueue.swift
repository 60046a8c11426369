import Dispatch
import Glibc
import FoundationEssentials
import Synchronization

/// Owns PC/SC for the daemon: every pcsc-lite call runs on one serial queue (they block), and
/// card operations run one at a time, in arrival order; a request waiting its turn can be
/// cancelled (its client left).
final class CardQueue: Sendable {
    private let pcsc = PCSC()
    private let queue = DispatchQueue(label: "authd.card")
    private let turn = FIFOLock()

    /// Runs blocking PC/SC work on the card queue.
    func run<T: Sendable>(_ body: @escaping @Sendable (PCSC) throws(CardFailure) -> T) async throws(CardFailure) -> T {
        let result: Result<T, CardFailure> = await withCheckedContinuation { continuation in
            queue.async { [pcsc] in
                do throws(CardFailure) {
                    continuation.resume(returning: .success(try body(pcsc)))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
    }

    /// Runs an operation when it is its turn (one card operation at a time).
    func exclusively<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        try await turn.lock()
        defer { turn.unlock() }
        return try await body()
    }

    /// Wakes a waiting `waitForCard` (its flag says why).
    func cancelWaiting() { pcsc.cancel() }

    func list() async throws(CardFailure) -> [PCSC.ReaderState] {
        try await run { pcsc throws(CardFailure) in
            let names = try pcsc.readers()
            return try pcsc.states(names, known: nil, timeoutMs: 0, watchPlugAndPlay: false) ?? []
        }
    }

    /// Waits until a card is in some reader. Follows readers being plugged in and out and
    /// pcscd restarting. `progress` gets the seconds left, about once a second. With no
    /// reader at all when the wait begins, fails at once with `card.no_reader`.
    func waitForCard(window: Int, cancelled: CancelFlag, progress: @escaping @Sendable (Int) -> Void) async throws(CardFailure) -> PCSC.ReaderState {
        let deadline = ContinuousClock.now + .seconds(window)
        let cancelHandler: @Sendable () -> Void = { [pcsc] in
            cancelled.set()
            pcsc.cancel()
        }
        let outcome: Result<PCSC.ReaderState, CardFailure> = await withTaskCancellationHandler {
            await runCatching { pcsc throws(CardFailure) in
                var first = true
                var lastReported = -1
                while true {
                    if cancelled.isSet { throw .cancelled }
                    let left = deadline - ContinuousClock.now
                    guard left > .zero else { throw .timeout(seconds: window) }
                    let secondsLeft = Int(left.components.seconds) + (left.components.attoseconds > 0 ? 1 : 0)
                    if secondsLeft != lastReported {
                        lastReported = secondsLeft
                        progress(secondsLeft)
                    }
                    let names: [String]
                    do throws(CardFailure) {
                        names = try pcsc.readers()
                    } catch .serviceUnavailable where !first {
                        // pcscd is restarting: keep waiting within the window.
                        pcsc.release()
                        usleep(200_000)
                        continue
                    }
                    if names.isEmpty && first { throw .noReader }
                    first = false
                    let current = try pcsc.states(names, known: nil, timeoutMs: 0, watchPlugAndPlay: false) ?? []
                    if let ready = current.first(where: \.cardPresent) { return ready }
                    // Sleep until something changes (a card, a reader), a second passes, or cancel.
                    let milliseconds = min(1000, max(1, Int(left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000)))
                    do throws(CardFailure) {
                        _ = try pcsc.states(names, known: current.map(\.eventState), timeoutMs: milliseconds, watchPlugAndPlay: true)
                    } catch .serviceUnavailable {
                        pcsc.release()
                        usleep(200_000)
                    }
                }
            }
        } onCancel: {
            cancelHandler()
        }
        return try outcome.get()
    }

    func runCatching<T: Sendable>(_ body: @escaping @Sendable (PCSC) throws(CardFailure) -> T) async -> Result<T, CardFailure> {
        do throws(CardFailure) {
            return .success(try await run(body))
        } catch {
            return .failure(error)
        }
    }
}

/// Set once, read from any thread: tells blocking card work that its request was cancelled.
final class CancelFlag: Sendable {
    private let flag = Atomic(false)
    func set() { flag.store(true, ordering: .releasing) }
    var isSet: Bool { flag.load(ordering: .acquiring) }
}
