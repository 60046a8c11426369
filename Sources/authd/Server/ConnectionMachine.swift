import FoundationEssentials
import Protocol

/// The protocol state of one client connection, with no I/O (in the shape of swift-nio's state
/// machines): a transport feeds it what happened on its socket and performs the actions it
/// returns. Framing and the line cap, the in-flight limit and back-pressure on reading, the
/// output budget, streams that start only after their request's response, half-close and
/// draining live here once, for every transport (the Unix socket today; TLS for the hub).
struct ConnectionMachine {
    struct Limits: Sendable, Equatable {
        /// More requests than this in flight on one connection pauses reading from it.
        var maxInFlight = 64
        /// A client that lets this much unread output pile up is disconnected.
        var maxPendingOutput = 16 << 20
        /// While more than this waits for the client to read it, no new request is read from
        /// it (back-pressure: a client that does not read its answers asks nothing more).
        var readPauseOutput = 1 << 20
        var maxStreams = 16
        var maxLineLength = LineFramer.defaultMaxLineLength
        /// How many lines one turn takes (see ``newTurn()``): a client that sends thousands at
        /// once is served this many per round of its event loop, like every other client.
        var linesPerTurn = 8
    }

    /// Why a connection closes.
    enum CloseReason: Sendable, Equatable {
        /// The client went away, or its socket failed: nothing more can be written.
        case peerGone
        /// The client does not read its responses (`maxPendingOutput`).
        case unreadOutput
        /// A line over the cap: its error was written first.
        case lineTooLong
        /// Everything asked was answered after the client stopped sending, or the daemon
        /// closed it (shutdown).
        case finished
        /// No request, nothing in flight and no stream for `[server] idle_timeout`.
        case idle
        /// The caller's connections, or everyone's, hold more than the daemon's budget of
        /// unread answers and unfinished lines (see ``ConnectionRegistry``).
        case overBudget
        /// Let go at once for another: the oldest newcomer at a hub with `[hub] max_newcomers`
        /// of them, when one more arrives.
        case evicted
    }

    enum Action: Sendable, Equatable {
        /// Run the request; report `requestFinished(key:…)` when it has its response.
        case dispatch(Request, key: UInt64)
        /// Output is waiting: write what the socket takes from `pendingOutput`, report `wrote`.
        case flush
        case pauseReading
        case resumeReading
        /// Read now: data or an end of input may have arrived while reading was paused, and a
        /// paused source raises no event for it.
        case readAgain
        /// This turn's lines are taken and more are buffered: call ``newTurn()`` once the other
        /// connections had theirs.
        case anotherTurn
        /// The streams these requests opened may start (their responses are queued).
        case startStreams([String])
        /// Streams that will never start: their sources let go (`onDrop`).
        case dropStreams([String])
        case cancelStreams([String])
        case cancelRequests([UInt64])
        /// Close the socket (the outbox is empty, or what is in it can never be written).
        case close(CloseReason)
    }

    enum StreamRefusal: Error, Equatable {
        case shuttingDown, closed, limit
    }

    private enum State: Equatable { case open, closingAfterFlush(CloseReason), closed }

    private(set) var limits: Limits
    private var state = State.open
    private var framer: LineFramer
    private var outbox = LineOutbox()
    private var inFlight: Set<UInt64> = []
    private var nextKey: UInt64 = 0
    /// Streams opened by requests still running, by request key: they start after the response.
    private var pendingStreams: [UInt64: [String]] = [:]
    private var streams: Set<String> = []
    private var nextStream = 0
    private var readPaused = false
    /// Lines taken since ``newTurn()``; whether `anotherTurn` is asked for and not yet begun.
    private var takenThisTurn = 0
    private var turnRequested = false
    private var turnSpent: Bool { takenThisTurn >= limits.linesPerTurn }
    private var halfClosed = false
    private var draining = false
    /// Whether a whole request line arrived, work ended or the client read some output, since
    /// the last idle check. Bytes of an unfinished line do not count: a client trickling one
    /// byte a minute is idle.
    private var activeSinceIdleCheck = false
    /// Requests in flight that wait for an answer to a prompt: they hold no in-flight slot, or
    /// 64 of them would stop reading the very answers they wait for.
    private var questionsWaiting = 0
    private var busyRequests: Int { inFlight.count - min(questionsWaiting, inFlight.count) }
    /// Whether another request may be taken: an in-flight slot is free and the client reads
    /// its answers.
    private var canTakeRequest: Bool { busyRequests < limits.maxInFlight && pendingOutputCount <= limits.readPauseOutput }

    init(limits: Limits = Limits()) {
        self.limits = limits
        framer = LineFramer(maxLineLength: limits.maxLineLength)
    }

    var isClosed: Bool { state == .closed }
    var requestsInFlight: Int { inFlight.count }
    var pendingOutputCount: Int { outbox.pendingCount }
    /// Bytes of a line the client has not finished (or lines not yet taken, while paused).
    var pendingInputCount: Int { framer.bufferedByteCount }

    // MARK: Input

    /// Bytes from the client.
    mutating func received(_ bytes: some Collection<UInt8>) -> [Action] {
        // After a half-close nothing more comes; after `closeWhenAnswered` nothing more is taken.
        guard state == .open, !halfClosed else { return [] }
        framer.append(bytes)
        var actions: [Action] = []
        processBufferedLines(into: &actions)
        return actions
    }

    /// The client sent no more. `peerGone`: it is gone altogether (cancel what it asked, as
    /// DESIGN §3 says); otherwise it half-closed (`shutdown(SHUT_WR)`, as socat does after its
    /// input) and still reads: answer what it sent, then close.
    mutating func endOfInput(peerGone: Bool) -> [Action] {
        if case .closingAfterFlush = state {
            // Closing once its last output is written: a client that left never reads it, and
            // one that half-closed is not read again (its end of input stays readable, and
            // would wake the loop for nothing until then).
            if peerGone { return closeNow(.peerGone) }
            halfClosed = true
            var actions: [Action] = []
            pauseReading(into: &actions)
            return actions
        }
        guard state == .open else { return [] }
        if peerGone { return closeNow(.peerGone) }
        halfClosed = true
        var actions: [Action] = []
        pauseReading(into: &actions)
        closeIfFinished(into: &actions)
        return actions
    }

    /// A new turn of the connection's: up to `linesPerTurn` more lines may be taken.
    mutating func newTurn() -> [Action] {
        takenThisTurn = 0
        turnRequested = false
        var actions: [Action] = []
        resumeIfPossible(into: &actions)
        return actions
    }

    private mutating func processBufferedLines(into actions: inout [Action]) {
        while state == .open {
            if !canTakeRequest {
                pauseReading(into: &actions)
                return
            }
            if turnSpent {
                // Nothing buffered: nothing waits for a turn, and reading goes on.
                if framer.bufferedByteCount > 0 {
                    pauseReading(into: &actions)
                    requestTurn(into: &actions)
                }
                return
            }
            let line: [UInt8]
            do {
                guard let next = try framer.nextLine() else { return }
                line = next
            } catch {
                send(WireCodec.errorLine(id: .null, error: .lineTooLong(limit: framer.maxLineLength)), into: &actions)
                closeAfterFlush(.lineTooLong, into: &actions)
                return
            }
            takenThisTurn += 1
            handle(line, into: &actions)
        }
    }

    private mutating func requestTurn(into actions: inout [Action]) {
        guard !turnRequested else { return }
        turnRequested = true
        actions.append(.anotherTurn)
    }

    private mutating func handle(_ line: [UInt8], into actions: inout [Action]) {
        let request: Request
        switch WireCodec.decodeRequest(line) {
        case .failure(let failure):
            send(WireCodec.errorLine(id: failure.id, error: failure.error), into: &actions)
            return
        case .success(let decoded):
            request = decoded
        }
        if draining {
            if let id = request.id { send(WireCodec.errorLine(id: id, error: .shuttingDown), into: &actions) }
            return
        }
        let key = nextKey
        nextKey += 1
        inFlight.insert(key)
        activeSinceIdleCheck = true
        actions.append(.dispatch(request, key: key))
    }

    /// A request has its response (`line`; nil for a JSON-RPC notification). `accepted` starts
    /// the streams it opened; otherwise they are dropped.
    mutating func requestFinished(key: UInt64, line: [UInt8]?, accepted: Bool) -> [Action] {
        guard inFlight.remove(key) != nil else { return [] }
        activeSinceIdleCheck = true
        var actions: [Action] = []
        if let line { send(line, into: &actions) }
        if let opened = pendingStreams.removeValue(forKey: key) {
            if accepted && state == .open && !draining {
                streams.formUnion(opened)
                actions.append(.startStreams(opened))
            } else {
                actions.append(.dropStreams(opened))
            }
        }
        resumeIfPossible(into: &actions)
        closeIfFinished(into: &actions)
        return actions
    }

    /// Reading was paused (the in-flight limit, unread output, the turn's lines, a half-close):
    /// take the buffered lines, and read from the client again unless it half-closed, once a
    /// request may be taken and the turn has lines left (else in the next turn).
    private mutating func resumeIfPossible(into actions: inout [Action]) {
        guard readPaused && state == .open && canTakeRequest else { return }
        if turnSpent {
            requestTurn(into: &actions)
            return
        }
        if !halfClosed { resumeReading(into: &actions) }
        processBufferedLines(into: &actions)
    }

    /// The connection's prompt broker reports how many questions wait for an answer.
    mutating func questionsWaiting(_ count: Int) -> [Action] {
        questionsWaiting = count
        var actions: [Action] = []
        resumeIfPossible(into: &actions)
        return actions
    }

    /// The daemon's memory budget (see ``ConnectionRegistry``) is spent: this client and its
    /// caller's others hold too many unread answers and unfinished lines.
    mutating func overBudget() -> [Action] {
        closeNow(.overBudget)
    }

    // MARK: Output

    /// A line for the client: a notification (responses come with `requestFinished`).
    mutating func enqueue(_ line: Data) -> [Action] {
        var actions: [Action] = []
        send(line, into: &actions)
        return actions
    }

    private mutating func send(_ line: some ContiguousBytes, into actions: inout [Action]) {
        guard state != .closed else { return }
        outbox.append(line)
        guard pendingOutputCount <= limits.maxPendingOutput else {
            actions += closeNow(.unreadOutput)
            return
        }
        if !actions.contains(.flush) { actions.append(.flush) }
    }

    /// What waits to be written.
    func withPendingOutput<T>(_ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        try outbox.withPending(body)
    }

    /// The transport wrote `count` bytes of `pendingOutput`.
    mutating func wrote(_ count: Int) -> [Action] {
        var actions: [Action] = []
        // A client that reads what it is sent is not idle.
        if count > 0 { activeSinceIdleCheck = true }
        guard outbox.wrote(count) else {
            resumeIfPossible(into: &actions)
            return actions
        }
        if case .closingAfterFlush(let reason) = state { return closeNow(reason) }
        resumeIfPossible(into: &actions)
        return actions
    }

    // MARK: Streams

    /// Registers a stream opened by the request `key`; it starts only after that request's
    /// response has been queued, so notifications never overtake the response.
    mutating func openStream(for key: UInt64) -> Result<String, StreamRefusal> {
        if draining { return .failure(.shuttingDown) }
        // The client already left: nothing would ever start or drop this stream.
        guard state == .open else { return .failure(.closed) }
        guard streams.count + pendingStreams.values.map(\.count).reduce(0, +) < limits.maxStreams else { return .failure(.limit) }
        nextStream += 1
        let name = "s\(nextStream)"
        pendingStreams[key, default: []].append(name)
        return .success(name)
    }

    /// `subscription.cancel`: false when no running stream has that name.
    mutating func cancelStream(_ name: String) -> (found: Bool, actions: [Action]) {
        guard streams.remove(name) != nil else { return (false, []) }
        return (true, [.cancelStreams([name])])
    }

    /// A stream's source ended by itself.
    mutating func streamEnded(_ name: String) -> [Action] {
        guard streams.remove(name) != nil else { return [] }
        activeSinceIdleCheck = true
        var actions: [Action] = []
        closeIfFinished(into: &actions)
        return actions
    }

    // MARK: Lifecycle

    /// Lines up to `length` are taken from now on, the one being read included (a machine that
    /// signed in is no longer held to a newcomer's short lines).
    mutating func raiseLineLimit(to length: Int) {
        guard length > limits.maxLineLength else { return }
        limits.maxLineLength = length
        framer.maxLineLength = length
    }

    /// Shutdown: refuse new requests and end streams; requests in flight finish.
    mutating func drain() -> [Action] {
        draining = true
        var actions: [Action] = []
        if !streams.isEmpty { actions.append(.cancelStreams(streams.sorted())) }
        streams.removeAll()
        dropPendingStreams(into: &actions)
        return actions
    }

    /// The transport's idle timer fired (every `[server] idle_timeout`): a connection with no
    /// request in flight, no stream and no request since the previous tick is closed, so a
    /// forgotten or hostile client gives its slot back after one to two timeouts. A request
    /// waiting on a prompt is in flight; a subscription is a stream: neither is idle.
    mutating func idleTick() -> [Action] {
        defer { activeSinceIdleCheck = false }
        // Closing after its last output: a client that read none of it for a whole period does
        // not hold its slot any longer.
        if case .closingAfterFlush(let reason) = state { return activeSinceIdleCheck ? [] : closeNow(reason) }
        guard state == .open, !activeSinceIdleCheck, inFlight.isEmpty, streams.isEmpty, pendingStreams.isEmpty else { return [] }
        var actions: [Action] = []
        closeAfterFlush(.idle, into: &actions)
        return actions
    }

    /// The shutdown deadline passed: cancel what still runs.
    func cancelInFlight() -> [Action] {
        inFlight.isEmpty ? [] : [.cancelRequests(inFlight.sorted())]
    }

    /// The daemon ends the connection once what it is serving is answered (the hub unlinking a
    /// machine): no new request is taken, and it closes after the last answer is written — as
    /// after a client's half-close.
    mutating func closeWhenAnswered() -> [Action] {
        guard state == .open else { return [] }
        halfClosed = true
        // Lines received but not yet taken are dropped with the rest: their sender sees the close.
        framer = LineFramer(maxLineLength: limits.maxLineLength)
        var actions: [Action] = []
        pauseReading(into: &actions)
        if !streams.isEmpty { actions.append(.cancelStreams(streams.sorted())) }
        streams.removeAll()
        closeIfFinished(into: &actions)
        return actions
    }

    /// The daemon closes the connection: after what is queued is written.
    mutating func close() -> [Action] {
        var actions: [Action] = []
        if pendingOutputCount > 0 { closeAfterFlush(.finished, into: &actions) } else { actions += closeNow(.finished) }
        return actions
    }

    /// The socket failed: nothing more can be read or written.
    mutating func failed() -> [Action] {
        closeNow(.peerGone)
    }

    /// Let go for another (`CloseReason.evicted`): closed now, what it asked cancelled and what
    /// was queued for it dropped; waiting for a client that reads nothing would keep it.
    mutating func evict() -> [Action] {
        closeNow(.evicted)
    }

    private mutating func pauseReading(into actions: inout [Action]) {
        guard !readPaused else { return }
        readPaused = true
        actions.append(.pauseReading)
    }

    private mutating func resumeReading(into actions: inout [Action]) {
        guard readPaused else { return }
        readPaused = false
        actions += [.resumeReading, .readAgain]
    }

    /// After a half-close: close once every request is answered and no stream is open.
    private mutating func closeIfFinished(into actions: inout [Action]) {
        if halfClosed && state == .open && inFlight.isEmpty && streams.isEmpty && pendingStreams.isEmpty {
            closeAfterFlush(.finished, into: &actions)
        }
    }

    private mutating func closeAfterFlush(_ reason: CloseReason, into actions: inout [Action]) {
        guard state == .open else { return }
        state = .closingAfterFlush(reason)
        if pendingOutputCount == 0 { actions += closeNow(reason) }
    }

    private mutating func dropPendingStreams(into actions: inout [Action]) {
        let pending = pendingStreams.keys.sorted().flatMap { pendingStreams[$0] ?? [] }
        pendingStreams.removeAll()
        if !pending.isEmpty { actions.append(.dropStreams(pending)) }
    }

    private mutating func closeNow(_ reason: CloseReason) -> [Action] {
        guard state != .closed else { return [] }
        state = .closed
        var actions: [Action] = []
        if !inFlight.isEmpty { actions.append(.cancelRequests(inFlight.sorted())) }
        if !streams.isEmpty { actions.append(.cancelStreams(streams.sorted())) }
        streams.removeAll()
        dropPendingStreams(into: &actions)
        outbox.discard()
        actions.append(.close(reason))
        return actions
    }
}
