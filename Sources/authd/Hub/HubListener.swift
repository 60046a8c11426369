import Dispatch
import FoundationEssentials
import OpenSSLCrypto
import Protocol
import Synchronization

/// The hub's TCP port: accepts other machines, runs each TLS handshake within
/// `[hub] handshake_timeout`, and hands each device's connection to the same `Connection` the
/// Unix socket uses, with the device id (its proven key) as the caller. Limits: at most
/// `[hub] max_devices` device connections, at most `max_handshakes_per_address` handshakes in
/// progress from one address, and at most `linksPerDevice` connections per device id.
final class HubListener: Sendable {
    /// Connections one device id may hold at once (its link, and a reconnect racing the old one).
    static let linksPerDevice = 4

    let address: HostPort
    private let context: TLSContext
    private let dispatcher: Dispatcher
    private let loop: AcceptLoop
    private let handshaking = Mutex<[String: Int]>([:])
    private var services: Services { dispatcher.services }

    /// Binds `listen` (port 0: the kernel picks one; `address` says which).
    init(listen: HostPort, context: TLSContext, dispatcher: Dispatcher) throws {
        let (fd, port) = try Syscalls.listenTCP(host: listen.host, port: listen.port)
        address = HostPort(host: listen.host, port: port)
        self.context = context
        self.dispatcher = dispatcher
        loop = AcceptLoop(fd: fd, label: "authd.hub-accept", logger: dispatcher.services.logger)
    }

    func start() { loop.start { [unowned self] in admit($0) } }

    func stop() { loop.stop() }

    private func admit(_ client: Int32) {
        Syscalls.sendPromptly(client)
        let config = services.config.current
        let peer = Syscalls.peerAddress(client)
        let (inHandshake, admitted) = handshaking.withLock { counts -> (Int, Bool) in
            let total = counts.values.reduce(0, +)
            guard counts[peer, default: 0] < config.hubMaxHandshakesPerAddress,
                  services.connections.deviceCount + total < config.hubMaxDevices else { return (total, false) }
            counts[peer, default: 0] += 1
            return (total, true)
        }
        guard admitted else {
            services.logger.warning("hub: refused a connection from \(peer) (limits: \(config.hubMaxDevices) devices, "
                                    + "\(config.hubMaxHandshakesPerAddress) handshakes per address; \(inHandshake) in progress)")
            Syscalls.close(client)
            return
        }
        let stream: TLSStream
        do {
            stream = try TLSStream(context: context, fd: client, host: nil)
        } catch {
            finished(peer)
            Syscalls.close(client)
            return
        }
        Handshake(fd: client, stream: stream, peer: peer, timeout: .seconds(config.hubHandshakeTimeoutSeconds)) { [self] outcome in
            finished(peer)
            switch outcome {
            case .success(let device): serve(client, stream: stream, device: device, peer: peer)
            case .failure(let reason):
                services.logger.info("hub: a TLS handshake from \(peer) failed: \(reason)")
                Syscalls.close(client)
            }
        }.start()
    }

    private func finished(_ peer: String) {
        handshaking.withLock { counts in
            counts[peer, default: 1] -= 1
            if counts[peer] == 0 { counts[peer] = nil }
        }
    }

    private func serve(_ client: Int32, stream: TLSStream, device: DeviceID, peer: String) {
        let config = services.config.current
        let caller = Caller.device(device)
        let registry = services.connections
        guard registry.count(of: caller) < Self.linksPerDevice else {
            services.logger.warning("hub: device \(device) already has \(Self.linksPerDevice) connections; refused another from \(peer)")
            stream.shutdown()
            Syscalls.close(client)
            return
        }
        let connection = Connection(id: registry.makeID(), channel: TLSChannel(fd: client, stream: stream), caller: caller, dispatcher: dispatcher,
                                    timeouts: (config.idleTimeoutSeconds, config.promptTimeoutSeconds), registry: registry)
        registry.add(connection)
        connection.start()
        services.logger.info("hub: device \(device) connected from \(peer)", [("AUTHD_CALLER_DEVICE", device.description)])
    }
}

/// One TLS handshake on the hub's port, driven by the socket's readiness on a queue of its own,
/// ended by `timeout` whatever the client does (or does not) send.
private final class Handshake: @unchecked Sendable {
    // Sendable: every property is touched only on `queue`.
    private let fd: Int32
    private let stream: TLSStream
    private let queue: DispatchQueue
    private let timeout: Duration
    private let done: @Sendable (Result<DeviceID, Failure>) -> Void
    private var read: (any DispatchSourceRead)?
    private var write: (any DispatchSourceWrite)?
    private var writeArmed = false
    private var timer: (any DispatchSourceTimer)?
    private var finished = false
    /// The outcome, once decided, waiting for both sources' cancellation to complete.
    private var outcome: Result<DeviceID, Failure>?
    private var sourcesOpen = 0

    struct Failure: Error, CustomStringConvertible { let description: String }

    init(fd: Int32, stream: TLSStream, peer: String, timeout: Duration, done: @escaping @Sendable (Result<DeviceID, Failure>) -> Void) {
        self.fd = fd
        self.stream = stream
        self.timeout = timeout
        self.done = done
        queue = DispatchQueue(label: "authd.hub-handshake.\(peer)")
    }

    func start() {
        queue.async { [self] in
            let read = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
            // The sources hold the handshake until `end` lets them go (nothing else does).
            read.setEventHandler { [self] in step() }
            read.setCancelHandler { [self] in sourceCancelled() }
            self.read = read
            let write = DispatchSource.makeWriteSource(fileDescriptor: fd, queue: queue)
            write.setEventHandler { [self] in step() }
            write.setCancelHandler { [self] in sourceCancelled() }
            sourcesOpen = 2
            self.write = write
            let timer = DispatchSource.makeTimerSource(queue: queue)
            timer.schedule(deadline: .now() + .milliseconds(Int(timeout.components.seconds * 1000)))
            timer.setEventHandler { [self] in end(.failure(Failure(description: "no handshake within \(timeout)"))) }
            self.timer = timer
            read.resume()
            timer.resume()
            step()
        }
    }

    private func step() {
        guard !finished else { return }
        do {
            switch try stream.handshake() {
            case .done:
                guard let key = stream.peerKeySHA256 else { return end(.failure(Failure(description: "no client certificate"))) }
                end(.success(DeviceID(keySHA256: key)))
            case .wantRead:
                disarmWrite()
            case .wantWrite:
                if !writeArmed { writeArmed = true; write?.resume() }
            case .closed:
                end(.failure(Failure(description: "the client left")))
            }
        } catch {
            end(.failure(Failure(description: "\(error)")))
        }
    }

    private func disarmWrite() {
        if writeArmed { writeArmed = false; write?.suspend() }
    }

    /// Cancels the sources (a suspended source must be resumed to be cancelled), and reports once
    /// both are gone. The descriptor stays open: the connection, or the refusal, owns it from
    /// there, and may close it — which libdispatch allows only after the cancel handlers ran
    /// (a late cancellation would otherwise unregister the next connection that gets the number).
    private func end(_ outcome: Result<DeviceID, Failure>) {
        guard !finished else { return }
        finished = true
        self.outcome = outcome
        timer?.cancel()
        timer = nil
        read?.cancel()
        if !writeArmed { write?.resume() }
        write?.cancel()
    }

    private func sourceCancelled() {
        sourcesOpen -= 1
        guard sourcesOpen == 0, let outcome else { return }
        read = nil
        write = nil
        self.outcome = nil
        done(outcome)
    }
}
