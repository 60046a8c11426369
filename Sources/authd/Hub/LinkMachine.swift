import FoundationEssentials
import Protocol

/// The device's end of the hub link (DESIGN §8) with no I/O, in the shape of
/// `ConnectionMachine`: the transport (`HubLink`) tells it what happened — an attempt that
/// failed or succeeded, a line from the hub, a timer, a call — and performs the actions it
/// returns. Every decision about the link lives here once: which of the hub's addresses to
/// connect to, when, and how long to back off, when to send a heartbeat and when a silent hub is
/// given up on, which call an answer belongs to, when calls fail at once, and what `hub.status`
/// reports.
///
/// The hub may have several addresses (replicas of one hub on one database, with one
/// certificate). A round tries them in order, from the first: an attempt that fails hands over
/// to the next address at once, and only a round in which every address failed waits out the
/// backoff before the next. A link that was up and is lost starts its next round from the
/// first address again, so a device returns to the preferred address when it can.
///
/// Time comes in with each event (`now`) and randomness through `jitter`, so a table of
/// events and instants tests it exactly.
struct LinkMachine {
    struct Settings: Sendable, Equatable {
        /// Heartbeats while either way is quiet this long (less when the hub's idle timeout is
        /// short: a third of it, never under `shortestHeartbeat`).
        var heartbeatInterval = Duration.seconds(5)
        var shortestHeartbeat = Duration.milliseconds(200)
        /// A heartbeat unanswered this long drops the link.
        var heartbeatTimeout = Duration.seconds(10)
        /// The longest a forwarded call waits for its answer.
        var callTimeout = Duration.seconds(60)
        /// The longest one attempt may take: the TCP connect and the TLS handshake.
        var attemptTimeout = Duration.seconds(13)
        /// Backoff after failed rounds (and after a lost link): doubling from `firstBackoff` up
        /// to `longestBackoff`, each varied by `jitter` either way so that devices do not return
        /// all at once.
        var firstBackoff = Duration.milliseconds(500)
        var longestBackoff = Duration.seconds(30)
        var jitter = 0.25
    }

    /// What `hub.status` reports.
    enum State: String, Sendable, Equatable { case connecting, connected, unreachable, untrusted }

    struct Status: Sendable, Equatable {
        var state = State.connecting
        /// The address `state` is about: the one the link is on (connected), the one being tried
        /// (connecting), or the one whose attempt failed last (unreachable, untrusted), which
        /// `lastError` is about.
        var address: HostPort
        /// When `state` last changed.
        var since: ContinuousClock.Instant
        var roundTrip: Duration?
        var lastError: String?
    }

    /// What the hub tells a device besides answers, and the link coming up.
    enum Notice: Sendable, Equatable {
        case sessionsEnded(LinkSessionsEnded.Params)
        case syncEvent(LinkSyncEvent.Params)
        /// The link is up (again): what was pushed while it was down must be read from the hub.
        case linked
    }

    enum Action: Sendable, Equatable {
        /// Connect (TCP, then the TLS handshake) to this address after `after`; `.zero` is now.
        /// A later delay needs nothing but the timer: `tick` at ``nextDeadline`` answers
        /// `.connect(address, after: .zero)`.
        case connect(HostPort, after: Duration)
        /// Write this line (a request, with its `\n`) to the hub.
        case send([UInt8])
        /// The hub answered call `id`.
        case answer(Int64, Result<RawJSON, RPCError>)
        /// These calls get no answer from the hub.
        case fail([Int64], HubLinkFailure)
        case notice(Notice)
        /// The link at this address went down (or an attempt there found an untrusted hub):
        /// worth a warning. `next`: the address a new attempt goes to at once (the first, after
        /// the hub unlinked this machine; the next of the round, after an untrusted one); nil
        /// when the next round waits for the backoff.
        case reportDown(HostPort, String, next: HostPort?)
        /// Drop the connection, or the attempt in progress, for this reason.
        case close(String)
    }

    private struct Ping: Equatable {
        let id: Int64
        let sent: ContinuousClock.Instant
    }

    /// A link that is up: when each way last carried something, how often heartbeats go, and
    /// the one heartbeat that waits for its answer.
    private struct Up: Equatable {
        var lastHeard: ContinuousClock.Instant
        var lastSent: ContinuousClock.Instant
        var interval: Duration
        var ping: Ping?
    }

    private enum Phase: Equatable {
        case idle
        /// An attempt is under way; it is given up at `deadline`.
        case dialing(deadline: ContinuousClock.Instant)
        case up(Up)
        /// Down; the next attempt is due at `until`.
        case waiting(until: ContinuousClock.Instant)
        case stopped
    }

    private struct Call {
        /// The request line, to send again on a rejoined link.
        let line: [UInt8]
        let deadline: ContinuousClock.Instant
    }

    let settings: Settings
    /// The hub's addresses, in the order a round tries them; the first is the preferred one.
    let addresses: [HostPort]
    private let jitter: @Sendable (ClosedRange<Double>) -> Double
    private var phase = Phase.idle
    private(set) var status: Status
    /// Which of `addresses` the attempt under way, or the link, is at.
    private var current = 0
    /// Rounds that failed in a row (a lost link counts as one): the backoff doubles with each.
    private var failures = 0
    /// The hub unlinked this machine and closes the link on purpose: a new one is made at once,
    /// and calls wait for it (they get the hub's answer, `device.revoked` say, not
    /// `hub.unavailable`). Cleared when it is up, or when that one round of attempts fails.
    private(set) var rejoining = false
    private var nextID: Int64 = 1
    private var calls: [Int64: Call] = [:]

    /// What a call waiting when the link drops is told.
    static let dropped = "the link to the hub dropped"

    /// `addresses`: at least one. `jitter` picks the factor a backoff is varied by, from the
    /// range it is given.
    init(addresses: [HostPort], settings: Settings = Settings(), now: ContinuousClock.Instant,
         jitter: @escaping @Sendable (ClosedRange<Double>) -> Double = { Double.random(in: $0) }) {
        precondition(!addresses.isEmpty, "a link needs at least one address of the hub")
        self.addresses = addresses
        self.settings = settings
        self.jitter = jitter
        status = Status(address: addresses[0], since: now)
    }

    var isUp: Bool { if case .up = phase { true } else { false } }
    var callsWaiting: Int { calls.count }

    /// When the transport must call ``tick(now:)`` next: the attempt's deadline, the next
    /// attempt, the heartbeat or its timeout, or the first call's deadline. Nil: nothing is timed.
    var nextDeadline: ContinuousClock.Instant? {
        var due = calls.values.map(\.deadline)
        switch phase {
        case .idle, .stopped: return nil
        case .dialing(let deadline): due.append(deadline)
        case .waiting(let until): due.append(until)
        case .up(let up):
            if let ping = up.ping {
                due.append(ping.sent + settings.heartbeatTimeout)
            } else {
                due.append(min(up.lastHeard, up.lastSent) + up.interval)
            }
        }
        return due.min()
    }

    // MARK: Attempts

    /// The daemon starts: the first attempt goes at once, to the first address.
    mutating func start(now: ContinuousClock.Instant) -> [Action] {
        guard phase == .idle else { return [] }
        return dial(0, now: now)
    }

    /// The TCP connection is made and the hub proved its certificate: the link is up. The first
    /// heartbeat goes at once (it measures the round trip and learns the hub's idle timeout),
    /// then what waited for a rejoined link, in the order it was asked.
    mutating func connectSucceeded(now: ContinuousClock.Instant) -> [Action] {
        guard case .dialing = phase else { return [] }
        failures = 0
        rejoining = false
        phase = .up(Up(lastHeard: now, lastSent: now, interval: settings.heartbeatInterval, ping: nil))
        status.address = addresses[current]
        enter(.connected, now: now)
        status.lastError = nil
        var actions = sendPing(now: now)
        for id in calls.keys.sorted() {
            if let line = calls[id]?.line { actions.append(.send(line)) }
        }
        actions.append(.notice(.linked))
        return actions
    }

    /// The attempt under way failed (no TCP connection, a failed handshake, the hub closed it
    /// first).
    mutating func connectFailed(_ reason: String, now: ContinuousClock.Instant) -> [Action] {
        guard case .dialing = phase else { return [] }
        return down(reason, untrusted: false, close: false, now: now)
    }

    /// The hub presented a certificate that is not the configured one: never accepted, and said
    /// so to every call (`hub.untrusted`) until an attempt finds the right one.
    mutating func untrustedCertificate(_ detail: String, now: ContinuousClock.Instant) -> [Action] {
        guard case .dialing = phase else { return [] }
        return down("the hub's certificate is not trusted: \(detail)", untrusted: true, close: false, now: now)
    }

    /// The hub closed the link, or it failed (a read or write error, a line over the limit).
    mutating func peerClosed(_ reason: String, now: ContinuousClock.Instant) -> [Action] {
        guard case .up = phase else { return [] }
        return down(reason, untrusted: false, close: true, now: now)
    }

    /// The daemon stops: calls waiting fail, and the link is dropped.
    mutating func stop() -> [Action] {
        let held: Bool
        switch phase {
        case .up, .dialing: held = true
        case .idle, .waiting, .stopped: held = false
        }
        phase = .stopped
        rejoining = false
        var actions = failAll(HubLinkFailure.unavailable(retryAfter: 1, detail: "authd is stopping"))
        if held { actions.append(.close("authd is stopping")) }
        return actions
    }

    // MARK: Lines and time

    /// A line from the hub: an answer to a call or to a heartbeat, or a notification.
    mutating func received(_ line: [UInt8], now: ContinuousClock.Instant) -> [Action] {
        guard case .up(var up) = phase else { return [] }
        up.lastHeard = now
        defer { phase = .up(up) }
        // Read once, its result left as the hub wrote it: a forwarded call's goes back to its
        // caller as it is, a link call's is decoded typed from it.
        guard let incoming = try? WireCodec.decodeIncomingRaw(line) else { return [] }
        switch incoming {
        case .notification(LinkSessionsEnded.name, let params?):
            guard let ended = try? params.decode(LinkSessionsEnded.Params.self) else { return [] }
            // The hub closes the link after this line: make the next one at once.
            if ended.unlinked { rejoining = true }
            return [.notice(.sessionsEnded(ended))]
        case .notification(LinkSyncEvent.name, let params?):
            guard let pushed = try? params.decode(LinkSyncEvent.Params.self) else { return [] }
            return [.notice(.syncEvent(pushed))]
        case .notification:
            return []
        case .response(let id, let outcome):
            guard case .integer(let number) = id else { return [] }
            if let ping = up.ping, ping.id == number {
                up.ping = nil
                status.roundTrip = now - ping.sent
                if case .success(let value) = outcome, let answer = try? value.decode(LinkPing.Result.self),
                   let idle = answer.idleTimeout {
                    // The hub closes a link quiet for its idle timeout: speak three times within it.
                    up.interval = min(settings.heartbeatInterval, max(settings.shortestHeartbeat, .seconds(idle) / 3))
                }
                return []
            }
            guard calls.removeValue(forKey: number) != nil else { return [] }
            return [.answer(number, outcome)]
        }
    }

    /// The timer fired (see ``nextDeadline``): calls past their deadline fail; a due attempt
    /// starts, an attempt past its deadline is given up; a quiet link sends a heartbeat, and a
    /// heartbeat unanswered too long drops the link.
    mutating func tick(now: ContinuousClock.Instant) -> [Action] {
        var actions = expireCalls(now: now)
        switch phase {
        case .idle, .stopped:
            break
        case .waiting(let until):
            if now >= until { actions += dial(0, now: now) }
        case .dialing(let deadline):
            if now >= deadline {
                actions += down("no link within \(Self.words(settings.attemptTimeout))", untrusted: false, close: true, now: now)
            }
        case .up(let up):
            if let ping = up.ping {
                if now - ping.sent >= settings.heartbeatTimeout {
                    actions += down("the hub did not answer a heartbeat within \(Self.words(settings.heartbeatTimeout))",
                                    untrusted: false, close: true, now: now)
                }
            } else if now - up.lastHeard >= up.interval || now - up.lastSent >= up.interval {
                actions += sendPing(now: now)
            }
        }
        return actions
    }

    // MARK: Calls

    /// A call of `method`: its id, and what to do — send it, or (while the link is down) fail
    /// it at once. Its answer comes as `.answer(id, …)` or `.fail([id, …], …)`.
    mutating func call(_ method: String, _ params: some Encodable, now: ContinuousClock.Instant) -> (id: Int64, actions: [Action]) {
        let id = nextID
        nextID += 1
        if let refusal = refusal(now: now) { return (id, [.fail([id], refusal)]) }
        guard let line = try? WireCodec.requestLine(id: .integer(id), method: method, params: params) else {
            return (id, [.fail([id], .unavailable(retryAfter: 1, detail: "the call could not be encoded"))])
        }
        calls[id] = Call(line: Array(line), deadline: now + settings.callTimeout)
        // While rejoining and not yet up, it waits for the new link (`connectSucceeded`).
        guard isUp else { return (id, []) }
        return (id, send(Array(line), now: now))
    }

    /// Why a call made now fails at once; nil while the link is up or being made again.
    private func refusal(now: ContinuousClock.Instant) -> HubLinkFailure? {
        switch phase {
        case .up: return nil
        case .dialing where rejoining: return nil
        case .idle: return .unavailable(retryAfter: 1, detail: status.lastError ?? "not connected yet")
        case .stopped: return .unavailable(retryAfter: 1, detail: "authd is stopping")
        case .dialing, .waiting:
            if status.state == .untrusted { return .untrusted(status.lastError ?? "certificate mismatch") }
            var left = Duration.zero
            if case .waiting(let until) = phase { left = until - now }
            return .unavailable(retryAfter: max(1, Int(left.components.seconds) + 1), detail: status.lastError ?? "not connected yet")
        }
    }

    private mutating func expireCalls(now: ContinuousClock.Instant) -> [Action] {
        let late = calls.filter { $0.value.deadline <= now }.keys.sorted()
        guard !late.isEmpty else { return [] }
        for id in late { calls[id] = nil }
        return [.fail(late, .unavailable(retryAfter: 1, detail: "the hub did not answer within \(Self.words(settings.callTimeout))"))]
    }

    private mutating func failAll(_ failure: HubLinkFailure) -> [Action] {
        let ids = calls.keys.sorted()
        calls.removeAll()
        return ids.isEmpty ? [] : [.fail(ids, failure)]
    }

    // MARK: Transitions

    /// An attempt at `addresses[index]`, now; the status names it until it has an outcome.
    private mutating func dial(_ index: Int, now: ContinuousClock.Instant) -> [Action] {
        current = index
        phase = .dialing(deadline: now + settings.attemptTimeout)
        if status.state == .connecting { status.address = addresses[index] }
        return [.connect(addresses[index], after: .zero)]
    }

    private mutating func send(_ line: [UInt8], now: ContinuousClock.Instant) -> [Action] {
        if case .up(var up) = phase {
            up.lastSent = now
            phase = .up(up)
        }
        return [.send(line)]
    }

    private mutating func sendPing(now: ContinuousClock.Instant) -> [Action] {
        guard case .up(var up) = phase,
              let line = try? WireCodec.requestLine(id: .integer(nextID), method: LinkPing.name, params: NoParams()) else { return [] }
        up.ping = Ping(id: nextID, sent: now)
        nextID += 1
        phase = .up(up)
        return send(Array(line), now: now)
    }

    /// The link is down, or an attempt failed. An attempt that failed hands over to the next
    /// address of its round at once. A link that was up, and that the hub closed after unlinking
    /// this machine, is made again at once from the first address (the hub answered all it took
    /// before it closed the link and took nothing after: what is unanswered was never served,
    /// and goes again on the new link; its calls wait through that round). Otherwise the calls
    /// waiting fail, and the next round, from the first address, waits for the backoff.
    private mutating func down(_ reason: String, untrusted: Bool, close: Bool, now: ContinuousClock.Instant) -> [Action] {
        let wasUp = isUp
        let address = addresses[current]
        let rest = !wasUp && current + 1 < addresses.count ? current + 1 : nil
        var actions: [Action] = close ? [.close(reason)] : []
        rejoining = rejoining && (wasUp || rest != nil)
        status.lastError = reason
        status.roundTrip = nil
        if wasUp && rejoining {
            enter(.connecting, now: now)
            actions.append(.reportDown(address, reason, next: addresses[0]))
            return actions + dial(0, now: now)
        }
        status.address = address
        enter(untrusted ? .untrusted : .unreachable, now: now)
        if let rest {
            if untrusted { actions.append(.reportDown(address, reason, next: addresses[rest])) }
            return actions + dial(rest, now: now)
        }
        actions += failAll(.unavailable(retryAfter: 1, detail: Self.dropped))
        if wasUp || untrusted { actions.append(.reportDown(address, reason, next: nil)) }
        failures += 1
        let delay = backoff(failures: failures)
        phase = .waiting(until: now + delay)
        actions.append(.connect(addresses[0], after: delay))
        return actions
    }

    /// 0.5 s, 1 s, 2 s … up to 30 s after the first, second, third … failed round (or lost
    /// link) in a row, each varied by `jitter` either way.
    private func backoff(failures: Int) -> Duration {
        let doubled = settings.firstBackoff * (1 << min(max(failures - 1, 0), 16))
        let base = min(settings.longestBackoff, doubled)
        let factor = jitter((1 - settings.jitter)...(1 + settings.jitter))
        return .milliseconds(Int((Self.milliseconds(base) * factor).rounded()))
    }

    private mutating func enter(_ state: State, now: ContinuousClock.Instant) {
        if status.state != state { status.since = now }
        status.state = state
    }

    static func milliseconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
    }

    /// "10 s", "200 ms": a duration in an error message.
    private static func words(_ duration: Duration) -> String {
        let milliseconds = Int(Self.milliseconds(duration).rounded())
        return milliseconds % 1000 == 0 ? "\(milliseconds / 1000) s" : "\(milliseconds) ms"
    }
}
