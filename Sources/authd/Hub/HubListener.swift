import Dispatch
import FoundationEssentials
import OpenSSLCrypto
import Protocol
import Synchronization

/// The hub's TCP port: accepts other machines, runs each TLS handshake within
/// `[hub] handshake_timeout`, and hands each device's connection to the same `Connection` the
/// Unix socket uses, with the device id (its proven key) as the caller.
///
/// Any key can make a certificate, so a proven key is not yet anyone: a machine that holds no
/// session here is a *newcomer*, which may only sign in — at most `newcomers_per_address`
/// connections from one address and `max_newcomers` in all (the oldest gives way to a new one),
/// small lines and a small memory pool of its own (`ConnectionRegistry`), and for
/// `newcomer_timeout`, after which it is let go and, if it signed in meanwhile, comes back as
/// a member. `max_devices` counts members: machines that hold a session. Handshakes in
/// progress are bounded per address and in all.
final class HubListener: Sendable {
    /// Connections one device id may hold at once (its link, and a reconnect racing the old one).
    static let linksPerDevice = 4

    let address: HostPort
    private let context: TLSContext
    private let dispatcher: Dispatcher
    private let loop: AcceptLoop
    private let handshaking = Mutex<[String: Int]>([:])
    private struct Newcomer {
        let peer: String
        /// Weak: a newcomer that left is not kept here until the next one comes.
        weak var connection: Connection?
    }
    /// Newcomers' connections in the order they came (the oldest first).
    private let newcomers = Mutex<[Newcomer]>([])
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
            // Before its handshake a client is no one yet: the newcomers' bound applies.
            guard counts[peer, default: 0] < config.hubMaxHandshakesPerAddress, total < config.hubMaxNewcomers else { return (total, false) }
            counts[peer, default: 0] += 1
            return (total, true)
        }
        guard admitted else {
            services.logger.warning("hub: refused a connection from \(peer) (limits: \(config.hubMaxNewcomers) handshakes in all, "
                                    + "\(config.hubMaxHandshakesPerAddress) per address; \(inHandshake) in progress)")
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
        TLSHandshake(fd: client, stream: stream, loop: services.connections.loops.nextLoop(), timeoutSeconds: config.hubHandshakeTimeoutSeconds) {
            [self] outcome in
            finished(peer)
            switch outcome {
            case .success:
                guard let key = stream.peerKeySHA256 else {
                    services.logger.info("hub: a TLS handshake from \(peer) failed: no client certificate")
                    return Syscalls.close(client)
                }
                let device = DeviceID(keySHA256: key)
                Task { [self] in serve(client, stream: stream, device: device, peer: peer, member: await services.connections.holdsSession(device)) }
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

    private func serve(_ client: Int32, stream: TLSStream, device: DeviceID, peer: String, member: Bool) {
        let config = services.config.current
        let caller = Caller.device(device)
        let registry = services.connections
        func refuse(_ why: String) {
            services.logger.warning("hub: refused device \(device) from \(peer): \(why)", [("AUTHD_CALLER_DEVICE", device.description)])
            stream.shutdown()
            Syscalls.close(client)
        }
        guard registry.count(of: caller) < Self.linksPerDevice else {
            return refuse("it already has \(Self.linksPerDevice) connections")
        }
        if member, !registry.isConnectedMember(caller), registry.memberMachineCount >= config.hubMaxDevices {
            return refuse("\(config.hubMaxDevices) signed-in machines are connected ([hub] max_devices)")
        }
        let connection = Connection(id: registry.makeID(), channel: TLSChannel(fd: client, stream: stream), caller: caller,
                                    newcomer: !member, dispatcher: dispatcher,
                                    timeouts: (config.idleTimeoutSeconds, config.promptTimeoutSeconds), registry: registry)
        // In the registry before it is counted among the newcomers: the count drops those whose
        // standing is no longer a newcomer's, which one not added yet would look like.
        registry.add(connection, standing: member ? .member : .newcomer)
        if !member {
            let (admitted, evicted) = admitNewcomer(connection, peer: peer, config: config)
            guard admitted else {
                registry.remove(connection)
                return refuse("\(config.hubNewcomersPerAddress) machines that have not signed in are connected from its address ([hub] newcomers_per_address)")
            }
            evicted?.evict()
        }
        connection.start()
        if !member {
            let settings = services.config
            // A newcomer has a short time to sign in (which promotes it where it signs in); then
            // it is let go, after what it asked is answered.
            DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + .seconds(config.hubNewcomerTimeoutSeconds)) { [weak connection] in
                guard let connection, registry.standing(of: connection.id) == .newcomer else { return }
                Task {
                    if await registry.holdsSession(device) {
                        registry.promote(caller, limit: settings.current.hubMaxDevices)
                    } else {
                        connection.closeWhenAnswered()
                    }
                }
            }
        }
        services.logger.info("hub: device \(device) connected from \(peer)\(member ? "" : " (not signed in)")", [("AUTHD_CALLER_DEVICE", device.description)])
    }

    /// Counts a newcomer in, unless its address has its share already; `evicted`: the oldest
    /// newcomer to let go to make room, when the hub had none.
    private func admitNewcomer(_ connection: Connection, peer: String, config: Config) -> (admitted: Bool, evicted: Connection?) {
        let registry = services.connections
        return newcomers.withLock { list -> (admitted: Bool, evicted: Connection?) in
            // Those that left, or signed in, no longer count.
            list.removeAll { $0.connection.map { registry.standing(of: $0.id) != .newcomer } ?? true }
            guard list.count(where: { $0.peer == peer }) < config.hubNewcomersPerAddress else { return (false, nil) }
            var evicted: Connection?
            while evicted == nil, !list.isEmpty, list.count >= config.hubMaxNewcomers { evicted = list.removeFirst().connection }
            list.append(Newcomer(peer: peer, connection: connection))
            return (true, evicted)
        }
    }
}
