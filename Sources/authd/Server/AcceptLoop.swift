import Dispatch

/// Accepts connections on a listening socket and hands each descriptor to `admit`, on the
/// loop's own queue: the one accept loop of the Unix socket and of the hub's TCP port. Out of
/// descriptors, it pauses for 100 ms instead of spinning on a level-triggered source.
final class AcceptLoop: @unchecked Sendable {
    // Sendable: `source` and `paused` are touched only on `queue`; the rest is immutable.
    private let fd: Int32
    private let queue: DispatchQueue
    private let logger: Logger
    private var source: (any DispatchSourceRead)?
    private var paused = false

    init(fd: Int32, label: String, logger: Logger) {
        self.fd = fd
        queue = DispatchQueue(label: label)
        self.logger = logger
    }

    /// Starts accepting; `admit` gets each new descriptor (non-blocking, close-on-exec).
    func start(admit: @escaping (Int32) -> Void) {
        queue.sync {
            let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
            source.setEventHandler { [unowned self] in acceptPending(admit) }
            source.setCancelHandler { [fd] in Syscalls.close(fd) }
            self.source = source
            source.resume()
        }
    }

    /// Stops accepting (the listening socket closes); pending connections in the backlog are
    /// refused by the kernel.
    func stop() {
        queue.sync {
            if paused { source?.resume() }
            source?.cancel()
            source = nil
        }
    }

    private func acceptPending(_ admit: (Int32) -> Void) {
        while true {
            let client: Int32
            do {
                guard let accepted = try Syscalls.accept(fd) else { return }
                client = accepted
            } catch {
                logger.warning("accept failed: \(error); pausing for 100 ms")
                pauseBriefly()
                return
            }
            admit(client)
        }
    }

    private func pauseBriefly() {
        guard !paused, let source else { return }
        paused = true
        source.suspend()
        queue.asyncAfter(deadline: .now() + .milliseconds(100)) { [self] in
            if paused, let source = self.source {
                paused = false
                source.resume()
            }
        }
    }
}
