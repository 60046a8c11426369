import CLinux
import Dispatch
import Glibc
import Synchronization

/// Owns the fingerprint reader for the daemon. fprintd calls block, so they run on one serial
/// queue (never on Swift's cooperative threads); fprintd allows one claim per reader, so
/// sessions take turns in arrival order. A session is released on every path.
final class FingerprintReader: Sendable {
    private let queue = DispatchQueue(label: "authd.fingerprint")
    private let turn = FIFOLock()

    private func onQueue<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: body()) }
        }
    }

    /// The reader and `user`'s enrolled fingers, without claiming it.
    func probe(user: String) async -> Result<Fprintd.Reader, FingerprintFailure> {
        await onQueue {
            do throws(FingerprintFailure) { return .success(try Fprintd.probe(user: user)) } catch { return .failure(error) }
        }
    }

    /// Claims the reader for `user`, runs `body` with it, and releases it whatever happens.
    func claim<T: Sendable>(user: String, _ body: (ClaimedReader) async throws -> T) async throws -> T {
        try await turn.lock()
        defer { turn.unlock() }
        let claimed = await onQueue { () -> UncheckedBox<Result<Fprintd.ClaimedDevice, FingerprintFailure>> in
            do throws(FingerprintFailure) { return UncheckedBox(.success(try Fprintd.ClaimedDevice(user: user))) } catch { return UncheckedBox(.failure(error)) }
        }.value
        let reader = ClaimedReader(try claimed.get(), queue: queue)
        do {
            let result = try await body(reader)
            await reader.release()
            return result
        } catch {
            await reader.release()
            throw error
        }
    }
}

/// A reader claimed for one session. The device object is only touched on the queue.
final class ClaimedReader: @unchecked Sendable {
    private let device: Fprintd.ClaimedDevice
    private let queue: DispatchQueue

    fileprivate init(_ device: Fprintd.ClaimedDevice, queue: DispatchQueue) {
        self.device = device
        self.queue = queue
    }

    /// One scan, bounded by `timeout`; `progress` hears the retry statuses. Ends early, with
    /// `.cancelled`, when `cancel` fires or the calling task is cancelled.
    func scan(timeout: Duration, cancel: CancelPipe, progress: @escaping @Sendable (ScanStatus) -> Void) async -> ScanOutcome {
        let deadline = SystemBus.monotonicMicroseconds() + SystemBus.microseconds(timeout)
        let device = UncheckedBox(device)
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                queue.async {
                    continuation.resume(returning: device.value.scan(deadline: deadline, cancelFD: cancel.readFD, progress: progress))
                }
            }
        } onCancel: {
            cancel.fire()
        }
    }

    fileprivate func release() async {
        let device = UncheckedBox(device)
        await withCheckedContinuation { continuation in
            queue.async {
                device.value.release()
                continuation.resume()
            }
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
        var fds: [Int32] = [-1, -1]
        guard authd_pipe_cloexec(&fds) == 0 else { throw SystemError(call: "pipe2", errno: errno) }
        readFD = fds[0]
        writeFD = fds[1]
    }

    deinit {
        close(readFD)
        close(writeFD)
    }

    var isFired: Bool { fired.load(ordering: .acquiring) }

    func fire() {
        guard fired.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        var byte: UInt8 = 1
        _ = write(writeFD, &byte, 1)
    }
}

/// Carries a value that is only ever used on one serial queue across a Sendable boundary.
struct UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}
