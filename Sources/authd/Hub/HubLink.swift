import Dispatch
import FoundationEssentials
import Glibc
import OpenSSLCrypto
import Protocol
import Synchronization

extension ForwardedCaller {
    /// A process of this machine, as its hub is told of it.
    init(_ peer: CallerIdentity, machine: String) {
        self.init(uid: peer.uid, username: peer.username, exe: peer.exe, machine: machine)
    }
}

/// Why a forwarded call got no answer from the hub.
enum HubLinkFailure: Error, Equatable, WireErrorConvertible {
    /// Not connected (or the link dropped while waiting); try again in `retryAfter` seconds.
    case unavailable(retryAfter: Int, detail: String)
    /// The hub presented a certificate that is not the configured one.
    case untrusted(String)

    var rpcError: RPCError {
        switch self {
        case .unavailable(let retryAfter, let detail):
            .failure(.hubUnavailable, "The hub cannot be reached (\(detail)); account methods work again when it is back.",
                     details: ["retry_after": .integer(Int64(retryAfter))])
        case .untrusted(let detail):
            .failure(.hubUntrusted, "The hub's certificate is not the configured one (\(detail)); the link stays down.",
                     details: ["detail": .string(detail)])
        }
    }
}

/// A device's one link to its hub (DESIGN §8): a persistent TLS connection carrying forwarded
/// account calls, multiplexed by id, with heartbeats; it reconnects by itself with jittered
/// backoff. While it is down, `call` fails at once: account methods answer `hub.unavailable`
/// (or `hub.untrusted`) and never wait for a hub that is not there.
///
/// Its own thread does all I/O (connect, handshake, `poll`); callers hand it lines through a
/// locked outbox and wake it with a pipe, and wait for their answer as a continuation.
final class HubLink: Sendable {
    enum State: String, Sendable { case connecting, connected, unreachable, untrusted }

    struct Status: Sendable {
        var state = State.connecting
        var since = Date()
        var roundTripMs: Double?
        var lastError: String?
        /// When the next attempt is due while down.
        var retryAt = ContinuousClock.now
    }

    /// Heartbeats while idle (more often when the hub's idle timeout is short: a third of it, at
    /// least every 200 ms); a heartbeat unanswered for `heartbeatTimeout` drops the link.
    static let heartbeatInterval = Duration.seconds(5)
    static let heartbeatTimeout = Duration.seconds(10)
    /// The longest a forwarded call waits for its answer.
    static let callTimeout = Duration.seconds(60)
    static let connectTimeoutMilliseconds: Int32 = 3000

    let url: HostPort
    private let context: TLSContext
    private let handshakeTimeout: Duration
    private let logger: Logger
    private let status = Mutex(Status())
    private let exchange = Mutex(Exchange())
    private let noticed = Mutex<(@Sendable (Notice) -> Void)?>(nil)

    /// What the hub tells a device besides answers, and the link coming up.
    enum Notice: Sendable {
        case sessionsEnded(LinkSessionsEnded.Params)
        case syncEvent(LinkSyncEvent.Params)
        /// The link is up (again): what was pushed while it was down must be read from the hub.
        case linked
    }
    private let wake: (read: Int32, write: Int32)

    private struct Exchange {
        var nextID: Int64 = 1
        var outbox: [UInt8] = []
        var waiting: [Int64: CheckedContinuation<Result<JSONValue, RPCError>, Never>] = [:]
        /// The request line of each call waiting, to send again on a rejoined link.
        var lines: [Int64: [UInt8]] = [:]
        var deadlines: [Int64: ContinuousClock.Instant] = [:]
        var stopped = false
        var connected = false
        /// The hub unlinked this machine and closes the link on purpose: a new one is made at
        /// once, and calls wait for it (they get the hub's answer, `device.revoked` say, not
        /// `hub.unavailable`). Cleared when it is up, or when that one attempt fails.
        var rejoining = false
    }

    init(url: HostPort, context: TLSContext, handshakeTimeoutSeconds: Int, logger: Logger) throws {
        self.url = url
        self.context = context
        handshakeTimeout = .seconds(handshakeTimeoutSeconds)
        self.logger = logger
        wake = try Syscalls.makeWakePipe()
    }

    /// Starts the link's thread (a queue of its own on libdispatch's overcommitting pool, which
    /// gives it a thread it may block in `poll` for as long as the daemon runs).
    func start() {
        DispatchQueue(label: "authd.hub-link", qos: .userInitiated).async { [self] in run() }
    }

    func stop() {
        exchange.withLock { $0.stopped = true }
        Syscalls.writeOneByte(wake.write)
    }

    var currentStatus: Status { status.withLock { $0 } }

    /// What runs for each notice (on the link's thread: hand anything slow on).
    func onNotice(_ handler: @escaping @Sendable (Notice) -> Void) {
        noticed.withLock { $0 = handler }
    }

    // MARK: Calls

    /// Sends `method` with `params` and waits for the hub's answer: its result, or its error as
    /// the hub gave it. Fails at once while the link is down.
    func call(_ method: String, _ params: some Encodable & Sendable) async throws(HubLinkFailure) -> Result<JSONValue, RPCError> {
        let rejoining = exchange.withLock { $0.rejoining }
        let down = rejoining ? nil : status.withLock { status -> HubLinkFailure? in
            switch status.state {
            case .connected: return nil
            case .untrusted: return .untrusted(status.lastError ?? "certificate mismatch")
            case .connecting, .unreachable:
                let left = status.retryAt - ContinuousClock.now
                return .unavailable(retryAfter: max(1, Int(left.components.seconds) + 1), detail: status.lastError ?? "not connected yet")
            }
        }
        if let down { throw down }
        let outcome: Result<JSONValue, RPCError> = await withCheckedContinuation { continuation in
            let queued = exchange.withLock { exchange -> Bool in
                guard exchange.connected || exchange.rejoining, !exchange.stopped else { return false }
                let id = exchange.nextID
                exchange.nextID += 1
                guard let line = try? WireCodec.requestLine(id: .integer(id), method: method, params: params) else { return false }
                exchange.outbox.append(contentsOf: line)
                exchange.lines[id] = Array(line)
                exchange.waiting[id] = continuation
                exchange.deadlines[id] = .now + Self.callTimeout
                return true
            }
            if queued { Syscalls.writeOneByte(wake.write) } else { continuation.resume(returning: .failure(Self.dropped)) }
        }
        if case .failure(let error) = outcome, error.reason == Self.dropped.reason {
            throw .unavailable(retryAfter: 1, detail: error.message)
        }
        return outcome
    }

    /// A link method `M`, typed: its result, or the hub's refusal thrown as it gave it.
    func call<M: RPCMethod>(_: M.Type, _ params: M.Params) async throws -> M.Result {
        try WireCodec.decode(M.Result.self, from: try await call(M.name, params).get())
    }

    /// An account method called by `caller`, a process of this machine, as `link.forward`.
    func forward(_ method: String, _ params: JSONValue?, caller: ForwardedCaller) async throws(HubLinkFailure) -> Result<JSONValue, RPCError> {
        try await call(LinkForward.name, LinkForward.Params(method: method, params: params, caller: caller))
    }

    /// The same for `M`, typed: its result, or the hub's refusal thrown as it gave it.
    func forward<M: RPCMethod>(_: M.Type, _ params: M.Params, caller: ForwardedCaller) async throws -> M.Result {
        let answer = try await forward(M.name, WireCodec.decode(JSONValue.self, from: WireCodec.encodeJSON(params)), caller: caller).get()
        return try WireCodec.decode(M.Result.self, from: answer)
    }

    /// What a call waiting when the link drops gets (turned into `hub.unavailable`).
    private static let dropped = RPCError.failure(.hubUnavailable, "the link to the hub dropped")

    // MARK: The link's thread

    private func run() {
        var failures = 0
        while !exchange.withLock({ $0.stopped }) {
            do {
                let fd = try Syscalls.connectTCP(host: url.host, port: url.port, timeoutMilliseconds: Self.connectTimeoutMilliseconds)
                defer { Syscalls.close(fd) }
                let stream = try TLSStream(context: context, fd: fd, host: url.host)
                try handshake(stream, fd: fd)
                failures = 0
                connected()
                let reason = serve(stream, fd: fd)
                stream.shutdown()
                if disconnected(reason, untrusted: false) { continue }
            } catch let failure as TLSFailure {
                if case .untrusted(let detail) = failure {
                    disconnected("the hub's certificate is not trusted: \(detail)", untrusted: true)
                } else {
                    disconnected(failure.description, untrusted: false)
                }
            } catch {
                disconnected("\(error)", untrusted: false)
            }
            failures += 1
            // Jittered exponential backoff: 0.5 s, 1 s, 2 s … up to 30 s, each ±25 %.
            let base = min(30.0, 0.5 * pow(2.0, Double(min(failures - 1, 6))))
            let delay = Duration.milliseconds(Int(base * 1000 * Double.random(in: 0.75...1.25)))
            status.withLock { $0.retryAt = .now + delay }
            waitForWake(upTo: delay)
        }
    }

    private func handshake(_ stream: TLSStream, fd: Int32) throws {
        let deadline = ContinuousClock.now + handshakeTimeout
        while true {
            let progress = try stream.handshake()
            let events: Int16
            switch progress {
            case .done: return
            case .wantRead: events = Int16(POLLIN)
            case .wantWrite: events = Int16(POLLOUT)
            case .closed: throw TLSFailure.failed("the hub closed the connection")
            }
            let left = deadline - ContinuousClock.now
            guard left > .zero else { throw TLSFailure.failed("no TLS handshake within \(handshakeTimeout)") }
            var descriptor = pollfd(fd: fd, events: events, revents: 0)
            _ = Glibc.poll(&descriptor, 1, Int32(left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000))
        }
    }

    private func connected() {
        exchange.withLock { exchange in
            exchange.connected = true
            exchange.rejoining = false
        }
        status.withLock { status in
            status.state = .connected
            status.since = Date()
            status.lastError = nil
        }
        logger.notice("linked to the hub \(url)", [("AUTHD_HUB", url.description)])
        noticed.withLock { $0 }?(.linked)
    }

    /// The link is down (or did not come up); true when the hub closed it after unlinking this
    /// machine, and it is to be made again at once.
    @discardableResult
    private func disconnected(_ reason: String, untrusted: Bool) -> Bool {
        let (orphans, rejoin) = exchange.withLock { exchange -> ([CheckedContinuation<Result<JSONValue, RPCError>, Never>], Bool) in
            // Only a link that was up rejoins at once; a failed attempt falls back to the backoff.
            exchange.rejoining = exchange.rejoining && exchange.connected && !untrusted
            exchange.connected = false
            if exchange.rejoining {
                // The hub answered all it took before it closed the link and took nothing after:
                // what is unanswered was never served, and goes again on the new link, in order.
                exchange.outbox = exchange.lines.keys.sorted().flatMap { exchange.lines[$0] ?? [] }
                return ([], true)
            }
            exchange.outbox.removeAll()
            exchange.deadlines.removeAll()
            exchange.lines.removeAll()
            defer { exchange.waiting.removeAll() }
            return (Array(exchange.waiting.values), false)
        }
        for orphan in orphans { orphan.resume(returning: .failure(Self.dropped)) }
        let wasConnected = status.withLock { status -> Bool in
            let was = status.state == .connected
            let state: State = untrusted ? .untrusted : rejoin ? .connecting : .unreachable
            if status.state != state { status.since = Date() }
            status.state = state
            status.lastError = reason
            status.roundTripMs = nil
            return was
        }
        if wasConnected || untrusted {
            logger.warning("the link to the hub \(url) is down: \(reason)" + (rejoin ? "; linking again at once" : ""), [("AUTHD_HUB", url.description)])
        }
        return rejoin
    }

    /// Moves lines both ways until the link fails; returns why.
    private func serve(_ stream: TLSStream, fd: Int32) -> String {
        var framer = LineFramer()
        var pendingOut: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var lastHeard = ContinuousClock.now
        // The first heartbeat goes at once: it measures the round trip and learns the hub's idle timeout.
        var lastSent = ContinuousClock.now - .seconds(3600)
        var interval = Self.heartbeatInterval
        var ping: (id: Int64, sent: ContinuousClock.Instant)?
        var wantWrite = false
        while true {
            if exchange.withLock({ $0.stopped }) { return "authd is stopping" }
            // Heartbeat: ask when either way was quiet for a while (the hub closes a link that sends
            // nothing for its idle timeout); a ping unanswered too long ends the link.
            let now = ContinuousClock.now
            if let ping, now - ping.sent > Self.heartbeatTimeout { return "the hub did not answer a heartbeat within \(Self.heartbeatTimeout)" }
            if ping == nil && (now - lastHeard > interval || now - lastSent > interval) {
                let id = exchange.withLock { exchange -> Int64 in
                    defer { exchange.nextID += 1 }
                    return exchange.nextID
                }
                if let line = try? WireCodec.requestLine(id: .integer(id), method: LinkPing.name, params: NoParams()) {
                    pendingOut.append(contentsOf: line)
                    ping = (id, now)
                }
            }
            expireCalls(now: now)
            pendingOut.append(contentsOf: exchange.withLock { exchange -> [UInt8] in
                defer { exchange.outbox.removeAll(keepingCapacity: true) }
                return exchange.outbox
            })
            // Write what the socket takes.
            while !pendingOut.isEmpty {
                let written: TLSProgress
                do { written = try pendingOut.withUnsafeBytes { try stream.write($0) } } catch { return "\(error)" }
                switch written {
                case .done(let count): pendingOut.removeFirst(count); wantWrite = false; lastSent = .now
                case .wantWrite, .wantRead: wantWrite = true
                case .closed: return "the hub closed the link"
                }
                if wantWrite { break }
            }
            // Read everything there is.
            reading: while true {
                let read: TLSProgress
                do { read = try buffer.withUnsafeMutableBytes { try stream.read(into: $0) } } catch { return "\(error)" }
                switch read {
                case .done(let count):
                    lastHeard = .now
                    framer.append(buffer[0..<count])
                    while true {
                        let line: [UInt8]?
                        do { line = try framer.nextLine() } catch { return "the hub sent a line over 1 MiB" }
                        guard let line else { break }
                        if let answer = deliver(line, ping: ping?.id), let answered = ping {
                            let elapsed = ContinuousClock.now - answered.sent
                            status.withLock { $0.roundTripMs = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15 }
                            if let idle = answer.idleTimeout {
                                interval = min(Self.heartbeatInterval, max(.milliseconds(200), .seconds(idle) / 3))
                            }
                            ping = nil
                        }
                    }
                case .wantRead, .wantWrite: break reading
                case .closed: return "the hub closed the link"
                }
            }
            // Sleep until the socket or a caller has something, or the next heartbeat is due.
            var descriptors = [pollfd(fd: fd, events: Int16(POLLIN) | (wantWrite ? Int16(POLLOUT) : 0), revents: 0),
                               pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
            let nap = min(interval, .seconds(1))
            _ = Glibc.poll(&descriptors, 2, Int32(nap.components.seconds * 1000 + nap.components.attoseconds / 1_000_000_000_000_000))
            if descriptors[1].revents != 0 { Syscalls.drain(wake.read) }
        }
    }

    /// Hands a response to the call waiting for it, and what the hub tells to its handler. The
    /// hub's answer when it answered the heartbeat `ping`.
    private func deliver(_ line: [UInt8], ping: Int64?) -> LinkPing.Result? {
        guard StrictJSON.check(line) == nil, let incoming = try? WireCodec.decodeIncoming(line) else { return nil }
        if case .notification(LinkSessionsEnded.name, let params?) = incoming,
           let ended = try? WireCodec.decode(LinkSessionsEnded.Params.self, from: params) {
            logger.notice("the hub ended \(ended.sessions.count) session(s) of this machine (\(Redaction.printable(ended.cause, limit: 32)))"
                          + (ended.unlinked ? "; it holds none now: account methods need a new sign-in" : ""), [("AUTHD_HUB", url.description)])
            if ended.unlinked { exchange.withLock { $0.rejoining = true } }
            noticed.withLock { $0 }?(.sessionsEnded(ended))
            return nil
        }
        if case .notification(LinkSyncEvent.name, let params?) = incoming,
           let pushed = try? WireCodec.decode(LinkSyncEvent.Params.self, from: params) {
            noticed.withLock { $0 }?(.syncEvent(pushed))
            return nil
        }
        guard case .response(let id, let outcome) = incoming, case .integer(let number) = id else { return nil }
        if number == ping {
            if case .result(let value) = outcome, let answer = try? WireCodec.decode(LinkPing.Result.self, from: value) { return answer }
            return LinkPing.Result(idleTimeout: nil)
        }
        let waiter = exchange.withLock { exchange in
            exchange.deadlines[number] = nil
            exchange.lines[number] = nil
            return exchange.waiting.removeValue(forKey: number)
        }
        switch outcome {
        case .result(let value): waiter?.resume(returning: .success(value))
        case .error(let error): waiter?.resume(returning: .failure(error))
        }
        return nil
    }

    /// Calls past `callTimeout` fail as unavailable (the hub is up but did not answer).
    private func expireCalls(now: ContinuousClock.Instant) {
        let expired = exchange.withLock { exchange -> [CheckedContinuation<Result<JSONValue, RPCError>, Never>] in
            let late = exchange.deadlines.filter { $0.value < now }.map(\.key)
            return late.compactMap { id in
                exchange.deadlines[id] = nil
                exchange.lines[id] = nil
                return exchange.waiting.removeValue(forKey: id)
            }
        }
        for waiter in expired { waiter.resume(returning: .failure(.failure(.hubUnavailable, "the hub did not answer within \(Self.callTimeout)"))) }
    }

    private func waitForWake(upTo delay: Duration) {
        var descriptor = pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)
        _ = Glibc.poll(&descriptor, 1, Int32(delay.components.seconds * 1000 + delay.components.attoseconds / 1_000_000_000_000_000))
        Syscalls.drain(wake.read)
    }
}
