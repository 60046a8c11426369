import Dispatch
import FoundationEssentials
import Protocol

/// Accepts connections on the listening socket, reads each peer's credentials once, enforces
/// who may connect and how many, and hands the connection its own queue.
final class Listener: Sendable {
    /// Connections beyond `[server] max_connections` kept for admins.
    static let adminReserve = 16

    private let socketPath: String?
    private let dispatcher: Dispatcher
    private let loop: AcceptLoop
    private var services: Services { dispatcher.services }

    /// `socketPath` is set when authd bound the socket itself (and so removes it at exit).
    init(fd: Int32, socketPath: String?, dispatcher: Dispatcher) {
        self.socketPath = socketPath
        self.dispatcher = dispatcher
        loop = AcceptLoop(fd: fd, label: "authd.accept", logger: dispatcher.services.logger)
    }

    func start() { loop.start { [unowned self] in admit($0) } }

    /// Stops accepting; pending connections in the backlog are refused by the kernel.
    func stop() {
        loop.stop()
        if let socketPath { Syscalls.remove(socketPath) }
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
