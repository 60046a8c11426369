import Dispatch
import FoundationEssentials
import Protocol
import Glibc
import Synchronization

/// Several hub replicas on one PostgreSQL database (`[hub] database`, DESIGN §10): what one
/// replica commits to an account's log reaches the machines linked to the others.
///
/// The transaction that appends an event sends `NOTIFY authd_sync 'REPLICA ACCOUNT POSITION'`,
/// which PostgreSQL delivers at commit, in commit order. Each replica listens on a session
/// connection of its own (a transaction-pooling proxy would not keep `LISTEN`) and, for every
/// event another replica committed, reads the event from the table and hands it on as its own.
/// The notification is only a wake-up: it carries no event. A notification sent while this
/// replica's listener was disconnected is lost, so when the listener connects again the replica
/// reads every account it has heard of from the last position it had (a machine drops what it
/// already took). Every 20 seconds the replica notes in `hub_replicas` that it is alive.
final class HubReplicas: Sendable {
    static let channel = "authd_sync"
    /// This process, among the replicas: random, new at every start.
    static let replica = "r" + (0..<8).map { _ in String(UInt8.random(in: 0...255), radix: 16) }.joined()

    static func wakeUp(account: String, position: Int64) -> String { "\(replica) \(account) \(position)" }

    /// What the listener tells the replica.
    enum Heard: Sendable {
        /// Events other replicas committed, in commit order.
        case committed([(account: String, position: Int64)])
        /// Events this replica committed (the listener hears its own too): how far it has been.
        case own([(account: String, position: Int64)])
        /// The listener connected again: whatever was committed meanwhile was not heard.
        case reconnected
    }

    private let connectionString: String
    private let name: String
    private let logger: Logger
    private let queue = DispatchQueue(label: "authd.hub.replicas")
    private let stopped = Atomic<Bool>(false)
    private let heard: AsyncStream<Heard>
    private let hear: AsyncStream<Heard>.Continuation
    static let heartbeatSeconds: Int64 = 20

    init(connectionString: String, name: String, logger: Logger) {
        self.connectionString = connectionString
        self.name = name
        self.logger = logger
        (heard, hear) = AsyncStream.makeStream(of: Heard.self, bufferingPolicy: .unbounded)
    }

    /// Starts listening; `deliver` gets the events other replicas commit, read from `log`.
    func start(log: SyncLog, deliver: @escaping @Sendable ([(account: String, event: SyncEvent)]) async -> Void) {
        queue.async { [self] in listen() }
        let heard = self.heard
        let logger = self.logger
        Task {
            // The newest position this replica has had of each account.
            var had: [String: Int64] = [:]
            for await news in heard {
                var missed: [(account: String, after: Int64, through: Int64?)] = []
                switch news {
                case .own(let positions):
                    for (account, position) in positions { had[account] = max(had[account] ?? 0, position) }
                case .committed(let positions):
                    for (account, position) in positions {
                        missed.append((account, min(had[account] ?? (position - 1), position - 1), position))
                        had[account] = max(had[account] ?? 0, position)
                    }
                case .reconnected:
                    missed = had.map { ($0.key, $0.value, nil) }
                }
                for (account, after, through) in missed {
                    var from = after
                    var failures = 0
                    while true {
                        let page: SyncEvents.Result
                        do {
                            page = try await log.events(account: account, after: from, limit: 500)
                        } catch {
                            // The store's own connection may come back a moment after this one.
                            failures += 1
                            guard failures < 60 else {
                                logger.warning("hub replicas: cannot read the log of \(account) after \(from): \(error); its machines read it when they link again")
                                break
                            }
                            try? await Task.sleep(for: .milliseconds(500))
                            continue
                        }
                        let events = page.events.filter { through == nil || $0.position <= through! }
                        if !events.isEmpty { await deliver(events.map { (account, $0) }) }
                        guard page.more == true, let last = page.events.last?.position, through.map({ last < $0 }) ?? true else { break }
                        from = last
                        had[account] = max(had[account] ?? 0, last)
                    }
                }
            }
        }
    }

    func stop() {
        stopped.store(true, ordering: .releasing)
        hear.finish()
    }

    /// The listener's loop, on its own thread: connect, `LISTEN`, wait on the socket, read.
    private func listen() {
        var connection: PostgreSQLConnection?
        var connectedBefore = false
        var pause = 0.2
        var lastHeartbeat: Int64 = 0
        let started = Int64(Date().timeIntervalSince1970)
        while !stopped.load(ordering: .acquiring) {
            if connection?.isConnected != true {
                do {
                    let made = try PostgreSQLConnection(connectionString: connectionString, statementTimeoutMilliseconds: 5_000)
                    try made.simple("LISTEN \(Self.channel)")
                    connection = made
                    if connectedBefore {
                        logger.notice("hub replicas: listening again; reading what other replicas committed meanwhile")
                        hear.yield(.reconnected)
                    }
                    connectedBefore = true
                    pause = 0.2
                    lastHeartbeat = 0
                } catch {
                    if connectedBefore { logger.warning("hub replicas: cannot listen for other replicas' commits: \(error)") }
                    connection = nil
                    usleep(useconds_t(pause * 1_000_000))
                    pause = min(pause * 2, 5)
                    continue
                }
            }
            guard let listening = connection else { continue }
            let now = Int64(Date().timeIntervalSince1970)
            if now - lastHeartbeat >= Self.heartbeatSeconds {
                try? listening.execute(
                    """
                    INSERT INTO hub_replicas (id, name, started_at, seen_at) VALUES (?, ?, ?, ?)
                    ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at
                    """, [.text(Self.replica), .text(name), .integer(started), .integer(now)])
                try? listening.execute("DELETE FROM hub_replicas WHERE seen_at < ?", [.integer(now - 86_400)])
                lastHeartbeat = now
            }
            var wait = pollfd(fd: listening.socket, events: Int16(POLLIN), revents: 0)
            _ = poll(&wait, 1, 1_000)
            do {
                var others: [(String, Int64)] = []
                var own: [(String, Int64)] = []
                for (channel, payload) in try listening.notifications() where channel == Self.channel {
                    let parts = payload.split(separator: " ")
                    guard parts.count == 3, let position = Int64(parts[2]) else { continue }
                    if parts[0] == Self.replica { own.append((String(parts[1]), position)) } else { others.append((String(parts[1]), position)) }
                }
                if !own.isEmpty { hear.yield(.own(own)) }
                if !others.isEmpty { hear.yield(.committed(others)) }
            } catch {
                logger.warning("hub replicas: the listening connection broke: \(error)")
                listening.close()
                connection = nil
            }
        }
        connection?.close()
    }
}
