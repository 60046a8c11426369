import FoundationEssentials

/// Owns PC/SC for the daemon: an actor on its own `BlockingExecutor`, so every pcsc-lite call
/// (they block; `SCardGetStatusChange` for up to a second at a time) runs on its queue, never
/// on the cooperative pool. Card operations run one at a time, in arrival order
/// (`exclusively`); a request waiting its turn can be cancelled (its client left). A blocked
/// `waitForCard` is woken with `SCardCancel` from any thread, without waiting for the actor.
actor CardQueue {
    private let executor = BlockingExecutor(label: "authd.card")
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    private let pcsc: PCSC
    /// Reaches `pcsc`'s context from outside the actor, to wake a blocked wait.
    private let wake: PCSC.Wake
    /// Turns for whole card operations, which span prompts and many actor calls.
    private let turn = FIFOLock()

    init() {
        let wake = PCSC.Wake()
        self.wake = wake
        pcsc = PCSC(wake: wake)
    }

    /// Runs blocking PC/SC work on the card queue; the failure comes back as a value.
    func runCatching<T: Sendable>(_ body: @Sendable (PCSC) throws(CardFailure) -> T) -> Result<T, CardFailure> {
        do throws(CardFailure) {
            return .success(try body(pcsc))
        } catch {
            return .failure(error)
        }
    }

    /// Runs an operation when it is its turn (one card operation at a time).
    nonisolated func exclusively<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        try await turn.lock()
        defer { turn.unlock() }
        return try await body()
    }

    /// Wakes a waiting `waitForCard` (its flag says why).
    nonisolated func cancelWaiting() { wake.cancel() }

    func list() throws(CardFailure) -> [PCSC.ReaderState] {
        let names = try pcsc.readers()
        return try pcsc.states(names, known: nil, timeoutMs: 0, watchPlugAndPlay: false) ?? []
    }

    /// Waits until a card is in some reader, at most until `deadline` (the end of a window of
    /// `window` seconds). Follows readers being plugged in and out and pcscd restarting.
    /// `progress` gets the seconds left, about once a second, from the first look that finds no
    /// card on: never when a card is already in a reader. With no reader at all when the first
    /// wait begins, fails at once with `card.no_reader`. `skipping` is a reader state that turned
    /// out to hold no card (pcscd had not yet seen it pulled): it counts as empty until it changes.
    func waitForCard(until deadline: ContinuousClock.Instant, window: Int, skipping stale: PCSC.ReaderState?, cancelled: CancelFlag,
                     progress: @escaping @Sendable (Int) -> Void) async throws(CardFailure) -> PCSC.ReaderState {
        let wake = self.wake
        let outcome: Result<PCSC.ReaderState, CardFailure> = await withTaskCancellationHandler {
            do throws(CardFailure) {
                return .success(try waitBlocking(until: deadline, window: window, skipping: stale, cancelled: cancelled, progress: progress))
            } catch {
                return .failure(error)
            }
        } onCancel: {
            cancelled.set()
            wake.cancel()
        }
        return try outcome.get()
    }

    /// The wait itself, blocking the card queue until a card is present, the window closes or
    /// `cancelled` is set (`cancelWaiting` then cuts the current `SCardGetStatusChange` short).
    private func waitBlocking(until deadline: ContinuousClock.Instant, window: Int, skipping stale: PCSC.ReaderState?,
                              cancelled: CancelFlag, progress: @Sendable (Int) -> Void) throws(CardFailure) -> PCSC.ReaderState {
        // A retry after a card that vanished may find its reader unplugged too: that is a wait.
        var first = stale == nil
        var lastReported = -1
        while true {
            if cancelled.isSet { throw .cancelled }
            guard deadline > ContinuousClock.now else { throw .timeout(seconds: window) }
            let names: [String]
            do throws(CardFailure) {
                names = try pcsc.readers()
            } catch .serviceUnavailable where !first {
                // pcscd is restarting: keep waiting within the window.
                pcsc.release()
                Syscalls.sleep(milliseconds: 200)
                continue
            }
            if names.isEmpty && first { throw .noReader }
            first = false
            let current = try pcsc.states(names, known: nil, timeoutMs: 0, watchPlugAndPlay: false) ?? []
            if let ready = current.first(where: { $0.cardPresent && $0 != stale }) { return ready }
            // Only now is authd waiting for a card: a card already in a reader, or a failure
            // before the first look (no pcscd, no reader), never shows the countdown.
            let left = deadline - ContinuousClock.now
            guard left > .zero else { throw .timeout(seconds: window) }
            let secondsLeft = Int(left.components.seconds) + (left.components.attoseconds > 0 ? 1 : 0)
            if secondsLeft != lastReported {
                lastReported = secondsLeft
                progress(secondsLeft)
            }
            // Sleep until something changes (a card, a reader), a second passes, or cancel.
            let milliseconds = min(1000, max(1, Int(left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000)))
            do throws(CardFailure) {
                _ = try pcsc.states(names, known: current.map(\.eventState), timeoutMs: milliseconds, watchPlugAndPlay: true)
            } catch .serviceUnavailable {
                pcsc.release()
                Syscalls.sleep(milliseconds: 200)
            }
        }
    }
}
