import Synchronization

/// Owns the fingerprint reader for the daemon. Every fprintd call blocks (sd-bus), and so does
/// the wait for fprintd's signals during a scan: all of it runs in the `FingerprintDevice`
/// actor, on its own queue, never on Swift's cooperative threads. fprintd allows one claim per
/// reader, so sessions take turns in arrival order (one whose request is cancelled while it
/// waits leaves the line). A session is released on every path.
final class FingerprintReader: Sendable {
    private let device = FingerprintDevice()
    private let turn = FIFOLock()

    /// The reader and `user`'s enrolled fingers, without claiming it.
    func probe(user: String) async -> Result<Fprintd.Reader, FingerprintFailure> {
        await device.probe(user: user)
    }

    /// Claims the reader for `user`, runs `body` with it, and releases it whatever happens.
    func claim<T: Sendable>(user: String, _ body: (ClaimedReader) async throws -> T) async throws -> T {
        try await turn.lock()
        defer { turn.unlock() }
        try await device.claim(user: user).get()
        let reader = ClaimedReader(device: device)
        do {
            let result = try await body(reader)
            await device.release()
            return result
        } catch {
            await device.release()
            throw error
        }
    }
}

/// fprintd as authd uses it: an actor on its own `BlockingExecutor`, holding the claimed device
/// of the session whose turn it is (one at a time: `FingerprintReader` hands out the turns).
/// The claim's sd-bus connection is only ever touched here, as sd-bus requires.
actor FingerprintDevice {
    private let executor = BlockingExecutor(label: "authd.fingerprint")
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    private var claimed: Fprintd.ClaimedDevice?

    func probe(user: String) -> Result<Fprintd.Reader, FingerprintFailure> {
        do throws(FingerprintFailure) { return .success(try Fprintd.probe(user: user)) } catch { return .failure(error) }
    }

    fileprivate func claim(user: String) -> Result<Void, FingerprintFailure> {
        do throws(FingerprintFailure) {
            claimed = try Fprintd.ClaimedDevice(user: user)
            return .success(())
        } catch {
            return .failure(error)
        }
    }

    /// One scan of the claimed device; blocks this actor's queue until it ends.
    fileprivate func scan(deadline: UInt64, cancelFD: Int32, progress: @escaping @Sendable (ScanStatus) -> Void) -> ScanOutcome {
        guard let claimed else { return .failed("the fingerprint reader is not claimed") }
        return claimed.scan(deadline: deadline, cancelFD: cancelFD, progress: progress)
    }

    fileprivate func release() {
        claimed?.release()
        claimed = nil
    }
}

/// The reader as claimed for one session, while that session holds the turn.
struct ClaimedReader: Sendable {
    fileprivate let device: FingerprintDevice

    /// One scan, bounded by `timeout`; `progress` hears the retry statuses. Ends early, with
    /// `.cancelled`, when `cancel` fires or the calling task is cancelled: the pipe wakes the
    /// blocked wait without needing the actor.
    func scan(timeout: Duration, cancel: CancelPipe, progress: @escaping @Sendable (ScanStatus) -> Void) async -> ScanOutcome {
        let deadline = Syscalls.monotonicMicroseconds() + Bus.microseconds(timeout)
        return await withTaskCancellationHandler {
            await device.scan(deadline: deadline, cancelFD: cancel.readFD, progress: progress)
        } onCancel: {
            cancel.fire()
        }
    }
}

/// A pipe whose read end becomes readable once `fire()` is called: wakes a thread blocked in
/// poll(2) on behalf of a request that was cancelled.
final class CancelPipe: Sendable {
    let readFD: Int32
    private let writeFD: Int32
    private let fired = Atomic(false)

    init() throws(SystemError) {
        (readFD, writeFD) = try Syscalls.makePipe()
    }

    deinit {
        Syscalls.close(readFD)
        Syscalls.close(writeFD)
    }

    var isFired: Bool { fired.load(ordering: .acquiring) }

    func fire() {
        guard fired.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        Syscalls.writeOneByte(writeFD)
    }
}
