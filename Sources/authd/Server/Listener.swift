import Dispatch
import FoundationEssentials
import Protocol

/// Accepts connections on the listening socket, reads each peer's credentials once, enforces
/// who may connect and how many, and hands the connection its own queue.
final class Listener: @unchecked Sendable {
    // Sendable: `source` and `paused` are touched only on `queue`; the rest is immutable.
    /// Connections beyond `[server] max_connections` kept for admins.
    static let adminReserve = 16

    private let fd: Int32
    private let socketPath: String?
    private let dispatcher: Dispatcher
    private let queue = DispatchQueue(label: "authd.accept")
    private var source: (any DispatchSourceRead)?
    private var paused = false
    private var services: Services { dispatcher.services }

    /// `socketPath` is set when authd bound the socket itself (and so removes it at exit).
    init(fd: Int32, socketPath: String?, dispatcher: Dispatcher) {
        self.fd = fd
        self.socketPath = socketPath
        self.dispatcher = dispatcher
    }

    func start() {
        queue.sync {
            let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
            source.setEventHandler { [unowned self] in acceptPending() }
            source.setCancelHandler { [fd] in Syscalls.close(fd) }
            self.source = source
            source.resume()
        }
    }

    /// Stops accepting; pending connections in the backlog are refused by the kernel.
    func stop() {
        queue.sync {
            if paused { source?.resume() }
            source?.cancel()
            source = nil
            if let socketPath { Syscalls.remove(socketPath) }
        }
    }

    private func acceptPending() {
        while true {
            let client: Int32
            do {
                guard let accepted = try Syscalls.accept(fd) else { return }
                client = accepted
            } catch {
                // Out of descriptors: back off instead of spinning on a level-triggered source.
                services.logger.warning("accept failed: \(error); pausing for 100 ms")
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

    /// One error line (best effort, never blocking), then close.
    private func refuse(_ client: Int32, _ error: RPCError) {
        let line = WireCodec.errorLine(id: .null, error: error)
        _ = line.withUnsafeBytes { try? Syscalls.send(client, $0) }
        Syscalls.close(client)
    }

    private func admit(_ client: Int32) {
        guard let credentials = try? Syscalls.peerCredentials(client) else {
            Syscalls.close(client)
            return
        }
        // User mode: only our own user (and root) may talk to us, like ssh-agent.
        if services.options.mode == .user && credentials.uid != Syscalls.effectiveUserID() && credentials.uid != 0 {
            services.logger.warning("refused a connection from another user",
                                    [("AUTHD_CALLER_UID", String(credentials.uid)), ("AUTHD_CALLER_PID", String(credentials.pid))])
            refuse(client, .failureForbiddenUser)
            return
        }
        let config = services.config.current
        let caller = Caller.local(CallerIdentity(
            uid: credentials.uid, gid: credentials.gid, pid: credentials.pid,
            exe: Syscalls.executablePath(pid: credentials.pid),
            username: Syscalls.userName(uid: credentials.uid), groups: credentials.groups))
        // Admins (root, the admin group) may go `adminReserve` beyond the cap, so that the daemon
        // can still be inspected and reloaded while clients hold every ordinary slot.
        // (The admin check reads the group database: only at the cap, not on every connection.)
        let open = services.connections.localCount
        if open >= config.maxConnections && (open >= config.maxConnections + Self.adminReserve || !services.isAdmin(caller)) {
            services.logger.warning("connection limit reached; refused a client", [("AUTHD_CALLER_PID", String(credentials.pid))])
            refuse(client, .busy)
            return
        }
        if credentials.uid != 0 && services.connections.count(of: caller) >= config.maxConnectionsPerUser {
            services.logger.warning("per-user connection limit reached; refused a client",
                                    [("AUTHD_CALLER_UID", String(credentials.uid)), ("AUTHD_CALLER_PID", String(credentials.pid))])
            refuse(client, .failure(.serverBusy, "Your user has too many connections open (at most \(config.maxConnectionsPerUser)); close some and retry.",
                                    details: ["limit": .integer(Int64(config.maxConnectionsPerUser))]))
            return
        }
        let registry = services.connections
        let connection = Connection(id: registry.makeID(), channel: UnixSocketChannel(fd: client), caller: caller, dispatcher: dispatcher,
                                    timeouts: (config.idleTimeoutSeconds, config.promptTimeoutSeconds), registry: registry)
        registry.add(connection)
        connection.start()
    }
}

private extension RPCError {
    static let failureForbiddenUser = RPCError(
        code: .forbidden, reason: .forbidden, message: "This authd serves only its own user; for the system daemon, use authctl --system.")
}
