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
///
/// The replicas also share the public halves of their token-signing keys (`hub_signing_keys`):
/// each publishes its own, refreshed at every heartbeat (a key stays trusted for as long as a
/// token it signed can live after its replica last said so), and verifies and lists the
/// others' as its own, so a relying party trusts one JWKS whichever replica it asks. A replica
/// that makes a new key says so on `authd_keys`, and the others read the keys again at once.
final class HubReplicas: Sendable {
    static let channel = "authd_sync"
    static let keysChannel = "authd_keys"
    /// This process, among the replicas: random, new at every start.
    static let replica = "r" + (0..<8).map { _ in UInt8.random(in: 0...255) }.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()

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
    private let keys: KeyRing
    /// Set when this replica's keys changed (a rotation): published at the next turn of the loop.
    private let keysChanged = Atomic<Bool>(false)
    private let logger: Logger
    private let queue = DispatchQueue(label: "authd.hub.replicas")
    private let stopped = Atomic<Bool>(false)
    private let heard: AsyncStream<Heard>
    private let hear: AsyncStream<Heard>.Continuation
    static let heartbeatSeconds: Int64 = 20

    init(connectionString: String, name: String, keys: KeyRing, logger: Logger) {
        self.connectionString = connectionString
        self.name = name
        self.keys = keys
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
                        let page: SyncLog.Page
                        do {
                            page = try await log.events(account: account, after: from, limit: 500).page
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
                        guard page.more, let last = page.events.last?.position, through.map({ last < $0 }) ?? true else { break }
                        from = last
                        had[account] = max(had[account] ?? 0, last)
                    }
                }
            }
        }
    }

    /// This replica's keys changed (a rotation): publish them, and tell the others.
    func keysRotated() {
        keysChanged.store(true, ordering: .releasing)
    }

    /// Writes this replica's published keys (a current key as published for a token's lifetime
    /// from now), drops what no longer is, and reads the others'.
    private func publishKeys(on connection: PostgreSQLConnection, now: Int64, announce: Bool) {
        do {
            try connection.transaction {
                for key in keys.keys(now: Date(timeIntervalSince1970: TimeInterval(now))) {
                    try connection.execute(
                        """
                        INSERT INTO hub_signing_keys (kid, replica, public_spki, created_at, published_until) VALUES (?, ?, ?, ?, ?)
                        ON CONFLICT (kid) DO UPDATE SET replica = excluded.replica, published_until = excluded.published_until
                        """, [.text(key.kid), .text(Self.replica), .blob(key.publicKey.spki), .integer(key.createdAt),
                               .integer(key.publishedUntil ?? now + KeyRing.retiredKeyOverlapSeconds)])
                }
                try connection.execute("DELETE FROM hub_signing_keys WHERE published_until <= ?", [.integer(now)])
                if announce { try connection.execute("SELECT pg_notify(?, ?)", [.text(Self.keysChannel), .text(Self.replica)]) }
            }
        } catch {
            logger.warning("hub replicas: cannot publish this replica's signing keys: \(error)")
        }
        readPeerKeys(on: connection, now: now)
    }

    private func readPeerKeys(on connection: PostgreSQLConnection, now: Int64) {
        do {
            let own = Set(keys.keys(now: Date(timeIntervalSince1970: TimeInterval(now))).map(\.kid))
            let peers = try connection.query(
                "SELECT kid, public_spki, created_at, published_until FROM hub_signing_keys WHERE published_until > ? ORDER BY created_at", [.integer(now)]
            ) { row in (kid: row.text(0), spki: row.blob(1), created: row.int64(2), until: row.optionalInt64(3)) }
            keys.setPeers(try peers.filter { !own.contains($0.kid) }.map {
                try KeyRing.published(kid: $0.kid, spki: $0.spki, createdAt: $0.created, publishedUntil: $0.until)
            })
        } catch {
            logger.warning("hub replicas: cannot read the other replicas' signing keys: \(error)")
        }
    }

    /// The replicas that said they were alive in the last minute, this one marked.
    static func seen(in database: Database, now: Int64) throws -> [AdminStatus.AccountStore.Replica] {
        try database.query("SELECT id, name, seen_at FROM hub_replicas WHERE seen_at >= ? ORDER BY name, id", [.integer(now - 60)]) {
            AdminStatus.AccountStore.Replica(id: $0.text(0), name: $0.text(1), seenAt: Timestamp.rfc3339(epochSeconds: $0.int64(2)), this: $0.text(0) == replica)
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
                    try made.simple("LISTEN \(Self.keysChannel)")
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
            let rotated = keysChanged.exchange(false, ordering: .acquiringAndReleasing)
            if now - lastHeartbeat >= Self.heartbeatSeconds || rotated {
                try? listening.execute(
                    """
                    INSERT INTO hub_replicas (id, name, started_at, seen_at) VALUES (?, ?, ?, ?)
                    ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at
                    """, [.text(Self.replica), .text(name), .integer(started), .integer(now)])
                try? listening.execute("DELETE FROM hub_replicas WHERE seen_at < ?", [.integer(now - 86_400)])
                publishKeys(on: listening, now: now, announce: rotated || lastHeartbeat == 0)
                lastHeartbeat = now
            }
            var wait = pollfd(fd: listening.socket, events: Int16(POLLIN), revents: 0)
            _ = poll(&wait, 1, 1_000)
            do {
                var others: [(String, Int64)] = []
                var own: [(String, Int64)] = []
                let heard = try listening.notifications()
                if heard.contains(where: { $0.channel == Self.keysChannel && $0.payload != Self.replica }) { readPeerKeys(on: listening, now: now) }
                for (channel, payload) in heard where channel == Self.channel {
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
