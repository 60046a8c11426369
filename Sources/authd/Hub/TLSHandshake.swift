import Dispatch
import FoundationEssentials
import OpenSSLCrypto

/// One TLS handshake at the hub's port, driven by its socket's readiness on one of the daemon's
/// event loops (the loops every connection and the device's link run on), and ended after
/// `timeoutSeconds` (`[hub] handshake_timeout`) whatever the client does or does not send. The descriptor is out of the loop
/// before `done` runs, so the connection that takes it over registers it afresh.
///
/// Concurrency: every mutable property is touched only on `loop`'s thread (the handlers and the
/// timer hop onto it). That confinement is what makes the `@unchecked Sendable` sound.
final class TLSHandshake: @unchecked Sendable {
    struct Failure: Error, CustomStringConvertible { let description: String }

    private let fd: Int32
    private let stream: TLSStream
    private let loop: EventLoop
    private let timeoutSeconds: Int
    private let done: @Sendable (Result<Void, Failure>) -> Void
    private var registered = false
    private var finished = false
    private var timer: (any DispatchSourceTimer)?

    init(fd: Int32, stream: TLSStream, loop: EventLoop, timeoutSeconds: Int, done: @escaping @Sendable (Result<Void, Failure>) -> Void) {
        self.fd = fd
        self.stream = stream
        self.loop = loop
        self.timeoutSeconds = timeoutSeconds
        self.done = done
    }

    func start() {
        loop.execute { [self] in
            // The loop holds the handshake (its handlers) until `end` deregisters it.
            do {
                try loop.register(fd, handler: .init(readable: { [self] in step() }, writable: { [self] in step() }))
                registered = true
            } catch {
                return end(.failure(Failure(description: "cannot watch the socket: \(error)")))
            }
            let timer = DispatchSource.makeTimerSource(queue: .global(qos: .utility))
            timer.schedule(deadline: .now() + .seconds(timeoutSeconds))
            timer.setEventHandler { [weak self] in
                guard let self else { return }
                loop.execute { [self] in end(.failure(Failure(description: "no handshake within \(timeoutSeconds) s"))) }
            }
            self.timer = timer
            timer.resume()
            step()
        }
    }

    private func step() {
        guard !finished else { return }
        do {
            switch try stream.handshake() {
            case .done: end(.success(()))
            case .wantRead: loop.watch(fd, read: true, write: false)
            case .wantWrite: loop.watch(fd, read: false, write: true)
            case .closed: end(.failure(Failure(description: "the client left")))
            }
        } catch {
            end(.failure(Failure(description: "\(error)")))
        }
    }

    private func end(_ outcome: Result<Void, Failure>) {
        guard !finished else { return }
        finished = true
        timer?.cancel()
        timer = nil
        if registered {
            registered = false
            loop.deregister(fd)
        }
        done(outcome)
    }
}
