import Dispatch
import FoundationEssentials
import OpenSSLCrypto
import Protocol
import Synchronization

extension ForwardedCaller {
    /// A process of this machine, as its hub is told of it: with the machine's name now. A
    /// value the hub would refuse (``ForwardedCaller/check()``) is told as not known, as an
    /// executable that could not be read is: a file or host name may hold control characters,
    /// and the bytes of a path that are not UTF-8 are read as U+FFFD, three bytes each, so even
    /// a path within PATH_MAX may come out longer than ``ForwardedCaller/maxExeBytes``.
    init(_ peer: CallerIdentity) {
        self.init(uid: peer.uid, username: Self.told(peer.username, maxBytes: Self.maxUsernameBytes),
                  exe: Self.told(peer.exe, maxBytes: Self.maxExeBytes), machine: Self.told(MachineName.current, maxBytes: Self.maxMachineBytes))
    }

    private static func told(_ value: String?, maxBytes: Int) -> String? {
        value.flatMap { fits($0, maxBytes: maxBytes) ? $0 : nil }
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
/// account calls, multiplexed by id, with heartbeats; it reconnects by itself, trying the hub's
/// addresses in order and waiting with jittered backoff after a round in which none answered.
/// While it is down, `call` fails at once: account methods answer `hub.unavailable` (or
/// `hub.untrusted`) and never wait for a hub that is not there.
///
/// Every decision is its `LinkMachine`'s (where and when to connect, heartbeats, which call an
/// answer is for, what `hub.status` says); this class performs them, as `Connection` performs its
/// `ConnectionMachine`'s: it dials, drives the TLS handshake by the socket's readiness, moves
/// lines through the shared `LineFramer` (with the protocol's line limit) and `LineOutbox`
/// (with a connection's output limit) over a `TLSChannel`, keeps one timer at the machine's
/// next deadline, and hands each answer to the call waiting for it.
///
/// Concurrency: `machine`, `waiting`, `connection`, `attempt` and the timer's bookkeeping are
/// touched only on `loop`'s thread (an `EventLoop` of the link's own, the kind that serves the
/// daemon's connections); every entry point hops onto it. That confinement is what makes the
/// `@unchecked Sendable` sound. Nothing on the loop waits: the TCP connect, which may resolve a
/// name and waits up to `connectTimeoutMilliseconds`, runs on a global queue and hands its
/// socket over, so a call while the link is down is answered at once.
final class HubLink: @unchecked Sendable {
    typealias State = LinkMachine.State
    typealias Notice = LinkMachine.Notice

    struct Status: Sendable {
        var state = State.connecting
        /// The address the link is on, is being tried, or failed last (see `LinkMachine.Status`).
        var url: HostPort
        var since = Date()
        var roundTripMs: Double?
        var lastError: String?
    }

    static let connectTimeoutMilliseconds: Int32 = 3000
    /// A hub that leaves this much of what the device sends unread is given up on, as a client
    /// that does not read its answers is.
    static let outputLimit = ConnectionMachine.Limits().maxPendingOutput
    /// Lines from the hub are held to the protocol's limit, the one the hub holds the device to.
    static let lineLimit = ConnectionMachine.Limits().maxLineLength

    /// The hub's addresses, in the order the link tries them.
    let addresses: [HostPort]
    private let context: TLSContext
    private let logger: Logger
    private let loop: EventLoop
    /// What `currentStatus` reads without waiting for the loop.
    private let published: Mutex<Status>
    private let noticed = Mutex<Callback<Notice>?>(nil)

    // On `loop` only.
    private var machine: LinkMachine
    private var waiting: [Int64: CheckedContinuation<Result<Result<RawJSON, RPCError>, HubLinkFailure>, Never>] = [:]
    private var connection: LinkConnection?
    /// Lines are queued and wait for the end of the loop's round to be written.
    private var flushDue = false
    /// Numbers the attempts: a dial that ends after its attempt was given up (its deadline, a
    /// stop) is recognised, and its socket closed.
    private var attempt = 0
    private var timer: (any DispatchSourceTimer)?
    private var timerDue: ContinuousClock.Instant?
    /// `machine.status.since`, and the wall-clock time it stands for.
    private var since: (instant: ContinuousClock.Instant, date: Date)?

    /// The socket of one attempt, through its handshake and then as the link.
    private struct LinkConnection {
        let attempt: Int
        let address: HostPort
        let fd: Int32
        let stream: TLSStream
        let channel: TLSChannel
        var handshaking = true
        var framer = LineFramer(maxLineLength: HubLink.lineLimit)
        var outbox = LineOutbox()
        /// What the loop watches for (`register` starts with input).
        var watching = (read: true, write: false)
    }

    /// `addresses`: at least one, the preferred first.
    init(addresses: [HostPort], context: TLSContext, handshakeTimeoutSeconds: Int, logger: Logger) throws {
        self.addresses = addresses
        self.context = context
        self.logger = logger
        var settings = LinkMachine.Settings()
        settings.attemptTimeout = .milliseconds(Int(Self.connectTimeoutMilliseconds)) + .seconds(handshakeTimeoutSeconds)
        machine = LinkMachine(addresses: addresses, settings: settings, now: .now)
        published = Mutex(Status(url: machine.status.address))
        loop = try EventLoop(label: "authd.hub-link")
    }

    func start() {
        loop.execute { [self] in perform(machine.start(now: .now)) }
    }

    func stop() {
        loop.execute { [self] in perform(machine.stop()) }
    }

    var currentStatus: Status { published.withLock { $0 } }

    /// The link's thread, for a task that takes what the link delivers (`Task(executorPreference:)`):
    /// each notice then reaches it without waking another thread.
    var taskExecutor: any TaskExecutor { loop }

    /// What runs for each notice (on the link's thread: hand anything slow on).
    func onNotice(_ handler: @escaping @Sendable (Notice) -> Void) {
        noticed.withLock { $0 = Callback(handler) }
    }

    // MARK: Calls

    /// Sends `method` with `params` and waits for the hub's answer: its result (as the hub
    /// wrote it), or its error as the hub gave it. Fails at once while the link is down.
    func call(_ method: String, _ params: some Encodable & Sendable) async throws(HubLinkFailure) -> Result<RawJSON, RPCError> {
        let outcome = await withCheckedContinuation { (answer: CheckedContinuation<Result<Result<RawJSON, RPCError>, HubLinkFailure>, Never>) in
            loop.execute { [self] in
                let (id, actions) = machine.call(method, params, now: .now)
                waiting[id] = answer
                perform(actions)
            }
        }
        return try outcome.get()
    }

    /// A link method `M`, typed: its result, or the hub's refusal thrown as it gave it.
    func call<M: RPCMethod>(_: M.Type, _ params: M.Params) async throws -> M.Result {
        try await call(M.name, params).get().decode(M.Result.self)
    }

    /// An account method called by `caller`, a process of this machine, as `link.forward`:
    /// its params and the hub's answer are passed on as their text (``RawJSON``).
    func forward(_ method: String, _ params: RawJSON?, caller: ForwardedCaller) async throws(HubLinkFailure) -> Result<RawJSON, RPCError> {
        try await call(LinkForward.name, LinkForward.Params(method: method, params: params, caller: caller))
    }

    /// The same for `M`, typed: its result, or the hub's refusal thrown as it gave it.
    func forward<M: RPCMethod>(_: M.Type, _ params: M.Params, caller: ForwardedCaller) async throws -> M.Result {
        try await forward(M.name, RawJSON(encoding: params), caller: caller).get().decode(M.Result.self)
    }

    // MARK: Performing the machine's actions (on the loop)

    private func perform(_ actions: [LinkMachine.Action]) {
        var queued = false
        for action in actions {
            switch action {
            case .connect(let address, let after):
                // A later attempt needs nothing now: the timer's tick at the machine's deadline starts it.
                if after == .zero { dial(address) }
            case .send(let line):
                if connection?.handshaking == false {
                    connection?.outbox.append(line)
                    queued = true
                }
            case .answer(let id, let result):
                waiting.removeValue(forKey: id)?.resume(returning: .success(result))
            case .fail(let ids, let failure):
                for id in ids { waiting.removeValue(forKey: id)?.resume(returning: .failure(failure)) }
            case .notice(let notice):
                announce(notice)
            case .reportDown(let address, let reason, let next):
                let then = next.map { $0 == address ? "; linking again at once" : "; linking to \($0) at once" } ?? ""
                logger.warning("the link to the hub \(address) is down: \(reason)" + then, [("AUTHD_HUB", address.description)])
            case .close:
                closeConnection()
            }
        }
        // Written once the actions are done, and at the end of the loop's round: a failed write
        // is then one more event, not a change under the actions still in hand, and the calls
        // of one round leave in one write (a TLS record and a TCP send for them all).
        if queued && !flushDue {
            flushDue = true
            loop.afterRound { [self] in
                flushDue = false
                flush()
            }
        }
        publish()
        schedule()
    }

    private func announce(_ notice: Notice) {
        // The link is up when the machine gives notice: its status names the address it is on.
        let url = machine.status.address
        switch notice {
        case .linked:
            logger.notice("linked to the hub \(url)", [("AUTHD_HUB", url.description)])
        case .sessionsEnded(let ended):
            logger.notice("the hub ended \(ended.sessions.count) session(s) of this machine (\(Redaction.printable(ended.cause, limit: 32)))"
                          + (ended.unlinked ? "; it holds none now: account methods need a new sign-in" : ""), [("AUTHD_HUB", url.description)])
        case .syncEvent:
            break
        }
        noticed.withLock { $0 }?.call(notice)
    }

    /// Publishes what `hub.status` reads; the state's start as a wall-clock time, taken once.
    private func publish() {
        let status = machine.status
        if since?.instant != status.since {
            since = (status.since, Date().addingTimeInterval(-LinkMachine.milliseconds(ContinuousClock.now - status.since) / 1000))
        }
        let date = since?.date ?? Date()
        published.withLock {
            $0 = Status(state: status.state, url: status.address, since: date, roundTripMs: status.roundTrip.map(LinkMachine.milliseconds),
                        lastError: status.lastError)
        }
    }

    /// Keeps the one timer at the machine's next deadline.
    private func schedule() {
        let due = machine.nextDeadline
        guard due != timerDue else { return }
        // A later deadline (each call moves the next heartbeat) keeps the armed timer: its tick
        // comes early, finds nothing due and arms it again, once per heartbeat interval rather
        // than a re-arm per call.
        if let due, let armed = timerDue, armed < due { return }
        timerDue = due
        if timer == nil {
            let timer = DispatchSource.makeTimerSource(queue: .global(qos: .userInitiated))
            timer.setEventHandler { [weak self] in
                guard let self else { return }
                loop.execute { [self] in
                    timerDue = nil
                    perform(machine.tick(now: .now))
                }
            }
            timer.resume()
            self.timer = timer
        }
        guard let due else {
            timer?.schedule(deadline: .distantFuture)
            return
        }
        // A millisecond late rather than early: the machine decides by its own clock.
        let left = max(0, LinkMachine.milliseconds(due - .now)) + 1
        timer?.schedule(deadline: .now() + .microseconds(Int(left * 1000)), leeway: .milliseconds(5))
    }

    // MARK: The connection (on the loop)

    /// One attempt at `url`: the TCP connect on a global queue (it may wait), then the handshake here.
    private func dial(_ url: HostPort) {
        closeConnection()
        attempt += 1
        let attempt = self.attempt
        let context = self.context
        DispatchQueue.global(qos: .userInitiated).async { [self] in
            let outcome: Result<(fd: Int32, stream: TLSStream), any Error>
            do {
                let fd = try Syscalls.connectTCP(host: url.host, port: url.port, timeoutMilliseconds: Self.connectTimeoutMilliseconds)
                do {
                    outcome = .success((fd, try TLSStream(context: context, fd: fd, host: url.host)))
                } catch {
                    Syscalls.close(fd)
                    throw error
                }
            } catch {
                outcome = .failure(error)
            }
            loop.execute { [self] in dialed(outcome, attempt: attempt, address: url) }
        }
    }

    private func dialed(_ outcome: Result<(fd: Int32, stream: TLSStream), any Error>, attempt: Int, address: HostPort) {
        guard attempt == self.attempt else {
            if case .success(let dialed) = outcome { Syscalls.close(dialed.fd) }
            return
        }
        switch outcome {
        case .failure(let error):
            attemptFailed(error, address: address)
        case .success(let dialed):
            do {
                try loop.register(dialed.fd, handler: .init(readable: { [self] in readable() }, writable: { [self] in writable() }))
            } catch {
                Syscalls.close(dialed.fd)
                return attemptFailed(error, address: address)
            }
            connection = LinkConnection(attempt: attempt, address: address, fd: dialed.fd, stream: dialed.stream,
                                        channel: TLSChannel(fd: dialed.fd, stream: dialed.stream))
            handshake()
        }
    }

    private func attemptFailed(_ error: any Error, address: HostPort) {
        closeConnection()
        if case .untrusted(let detail) = error as? TLSFailure {
            perform(machine.untrustedCertificate(detail, now: .now))
        } else {
            let reason = (error as? TLSFailure)?.description ?? "\(error)"
            // Not a warning: the machine tries the next address, or waits; `hub.status` has it.
            logger.debug("no link to the hub \(address): \(reason)", [("AUTHD_HUB", address.description)])
            perform(machine.connectFailed(reason, now: .now))
        }
    }

    private func handshake() {
        guard let current = connection, current.handshaking else { return }
        do {
            switch try current.stream.handshake() {
            case .done:
                connection?.handshaking = false
                watch(read: true, write: false)
                perform(machine.connectSucceeded(now: .now))
                // What came with the handshake's last flight is buffered in TLS, not the socket.
                readable()
            case .wantRead: watch(read: true, write: false)
            case .wantWrite: watch(read: false, write: true)
            case .closed: attemptFailed(TLSFailure.failed("the hub closed the connection"), address: current.address)
            }
        } catch {
            attemptFailed(error, address: current.address)
        }
    }

    private func writable() {
        if connection?.handshaking == true { handshake() } else { flush() }
    }

    /// Reads until the channel has nothing more (TLS hands over a record at a time), and hands
    /// the machine each line.
    private func readable() {
        guard let current = connection else { return }
        if current.handshaking { return handshake() }
        let buffer = loop.readBuffer
        while connection?.attempt == current.attempt {
            let result: Syscalls.IOResult
            do { result = try current.channel.read(into: buffer) } catch { return lost("\(error)") }
            switch result {
            case .bytes(let count):
                connection?.framer.append(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
                while connection?.attempt == current.attempt {
                    let line: [UInt8]?
                    do { line = try connection?.framer.nextLine() } catch { return lost("the hub sent a line over \(Self.lineLimit >> 20) MiB") }
                    guard let line else { break }
                    perform(machine.received(line, now: .now))
                }
            case .wouldBlock:
                return
            case .endOfFile:
                return lost("the hub closed the link")
            }
        }
    }

    /// Writes what the socket takes; waits for it to be writable for the rest.
    private func flush() {
        guard let current = connection, !current.handshaking else { return }
        if current.outbox.pendingCount > Self.outputLimit { return lost("the hub does not read what this machine sends") }
        while let pending = connection, pending.attempt == current.attempt, pending.outbox.pendingCount > 0 {
            let result: Syscalls.IOResult
            do { result = try pending.outbox.withPending { try pending.channel.write($0) } } catch { return lost("\(error)") }
            switch result {
            case .bytes(let count):
                _ = connection?.outbox.wrote(count)
            case .wouldBlock:
                return watch(read: true, write: true)
            case .endOfFile:
                return lost("the hub closed the link")
            }
        }
        if connection?.attempt == current.attempt { watch(read: true, write: false) }
    }

    /// The link failed under the machine: the socket goes whatever the machine makes of it.
    private func lost(_ reason: String) {
        let actions = machine.peerClosed(reason, now: .now)
        closeConnection()
        perform(actions)
    }

    private func watch(read: Bool, write: Bool) {
        guard let current = connection, current.watching != (read, write) else { return }
        connection?.watching = (read, write)
        loop.watch(current.fd, read: read, write: write)
    }

    /// Drops the connection or the attempt in progress (a dial still connecting is given up).
    private func closeConnection() {
        attempt += 1
        guard let current = connection else { return }
        connection = nil
        // The loop forgets the descriptor before it is closed (its number may be reused at once).
        loop.deregister(current.fd)
        // A link sends close_notify; a handshake that did not finish has nothing to close.
        if current.handshaking { Syscalls.close(current.fd) } else { current.channel.close() }
    }
}
