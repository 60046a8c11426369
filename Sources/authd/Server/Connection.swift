import Dispatch
import FoundationEssentials
import Protocol

/// A byte stream under a connection: a Unix stream socket here; TLS over TCP is a second one.
protocol ByteChannel: Sendable {
    /// The descriptor whose readiness drives the connection.
    var fd: Int32 { get }
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Syscalls.IOResult
    /// Whether a read that did not fill the buffer took everything there was (a socket's does;
    /// TLS hands over a record at a time).
    var shortReadDrains: Bool { get }
    /// Whether what the connection's requests answer and are pushed in one round of its loop
    /// waits for the round's end and leaves in one write (TLS: each write is a record of its own
    /// and a TCP send; a hub's answers after a group commit and the events they push go
    /// together). A Unix socket writes each line at once: a local client has one answer in a
    /// round, which would only wait.
    var gathersWrites: Bool { get }
    func write(_ bytes: UnsafeRawBufferPointer) throws(SystemError) -> Syscalls.IOResult
    /// After a read saw end of input: whether the peer is gone altogether, not just half-closed.
    func peerHasClosed() -> Bool
    /// Closes the descriptor (once every dispatch source on it is cancelled).
    func close()
}

/// A connected Unix stream socket.
struct UnixSocketChannel: ByteChannel {
    let fd: Int32

    func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Syscalls.IOResult { try Syscalls.read(fd, into: buffer) }
    var shortReadDrains: Bool { true }
    var gathersWrites: Bool { false }
    func write(_ bytes: UnsafeRawBufferPointer) throws(SystemError) -> Syscalls.IOResult { try Syscalls.send(fd, bytes) }
    func peerHasClosed() -> Bool { Syscalls.peerHasClosed(fd) }
    func close() { Syscalls.close(fd) }
}

/// One client connection: the transport that performs what its `ConnectionMachine` decides.
/// It reads and writes the channel, runs each dispatched request as a task, and runs streams;
/// every protocol decision (framing, limits, back-pressure, stream order, draining) is the
/// machine's. The same class serves any `ByteChannel`.
///
/// Concurrency: every mutable property is touched only on `loop`'s thread, the event loop the
/// connection was given; public entry points hop onto it. That confinement is what makes the
/// `@unchecked Sendable` sound. Nothing on the loop waits: a stalled or hostile client is only
/// ever a descriptor the loop is not told is ready, and a request's work runs in a task.
final class Connection: StreamingConnection, @unchecked Sendable {
    let id: UInt64
    let caller: Caller
    /// Prompts raised by this connection's requests, answered on this connection only.
    let prompts: PromptBroker

    private let channel: any ByteChannel
    private let loop: EventLoop
    private let dispatcher: Dispatcher
    private let registry: ConnectionRegistry
    private let idleTimeout: DispatchTimeInterval
    /// What the connection held when it last reported to `registry`'s budget.
    private var reported = ConnectionRegistry.Held()

    private var machine = ConnectionMachine()
    private var idleTimer: (any DispatchSourceTimer)?
    /// The channel is registered with the loop until it closes; what the loop watches for.
    private var registered = false
    private var waitingToWrite = false
    /// A flush waits for the end of the loop's round (`ByteChannel.gathersWrites`).
    private var flushAtRoundEnd = false
    private var readSuspended = false
    /// What the loop was last told to watch for (`register` starts with input): most turns
    /// change nothing, and then the loop is not asked.
    private var watching = (read: true, write: false)
    /// A turn of this connection's is queued on the loop (`queueTurn`): at most one at a time.
    private var turnQueued = false
    private var requests: [UInt64: Task<Void, Never>] = [:]
    /// Streams waiting for their request's response: what they run, or how they let go.
    private var pendingStreams: [String: (body: @Sendable (StreamSink) async -> Void, onDrop: @Sendable () -> Void)] = [:]
    private var streamTasks: [String: Task<Void, Never>] = [:]
    /// Requests answered on the spot (`Dispatcher.respondNow`), waiting for `perform` to
    /// finish the actions in hand; how deep `perform` is now.
    private var answeredNow: [(key: UInt64, response: Dispatcher.Response)] = []
    private var performing = 0

    /// `timeouts`: `[server] idle_timeout` (see ``ConnectionMachine/idleTick()``) and
    /// `prompt_timeout` (see ``PromptBroker``), in seconds.
    /// `registry` counts the connection's unread output against the daemon's budget and forgets
    /// the connection when it closes.
    /// `newcomer`: a machine that has not signed in, whose lines are small until it does
    /// (`promoted()`); the registry keeps its standing.
    init(id: UInt64, channel: any ByteChannel, caller: Caller, newcomer: Bool = false, dispatcher: Dispatcher,
         timeouts: (idle: Int, prompt: Int), registry: ConnectionRegistry) {
        self.id = id
        if newcomer {
            machine = ConnectionMachine(limits: .init(maxLineLength: ConnectionRegistry.newcomerLineLength))
        }
        idleTimeout = .seconds(timeouts.idle)
        prompts = PromptBroker(timeout: .seconds(timeouts.prompt))
        self.channel = channel
        self.caller = caller
        self.dispatcher = dispatcher
        self.registry = registry
        loop = registry.loops.nextLoop()
        prompts.connect({ [weak self] line in self?.enqueue(line) }, waiting: { [weak self] count in
            guard let self else { return }
            loop.execute { [self] in perform(machine.questionsWaiting(count)) }
        })
    }

    func start() {
        loop.execute { [self] in
            // The loop holds the connection (its handlers) until `closeChannel` deregisters it.
            do {
                try loop.register(channel.fd, handler: .init(readable: { [self] in turn() }, writable: { [self] in flush() }))
                registered = true
            } catch {
                dispatcher.logger.warning("cannot watch a new connection: \(error)", [("AUTHD_CONNECTION", String(id))] + caller.logFields)
                perform(machine.failed())
                return
            }
            // The idle check is rare: a timer of libdispatch's hands each tick to the loop.
            let timer = DispatchSource.makeTimerSource(queue: .global(qos: .utility))
            timer.schedule(deadline: .now() + idleTimeout, repeating: idleTimeout, leeway: .seconds(1))
            timer.setEventHandler { [weak self] in
                guard let self else { return }
                loop.execute { [self] in perform(machine.idleTick()) }
            }
            idleTimer = timer
            timer.resume()
        }
    }

    // MARK: Performing the machine's actions

    private func perform(_ actions: [ConnectionMachine.Action]) {
        performing += 1
        defer { performing -= 1 }
        for action in actions {
            switch action {
            case .dispatch(let request, let key): dispatch(request, key: key)
            case .flush where channel.gathersWrites:
                guard !flushAtRoundEnd else { break }
                flushAtRoundEnd = true
                loop.afterRound { [self] in
                    flushAtRoundEnd = false
                    flush()
                }
            case .flush: flush()
            case .pauseReading:
                if !readSuspended { readSuspended = true; watch() }
            case .resumeReading:
                if readSuspended { readSuspended = false; watch() }
            case .readAgain, .anotherTurn: queueTurn()
            case .startStreams(let names): names.forEach(startStream)
            case .dropStreams(let names):
                for name in names { pendingStreams.removeValue(forKey: name)?.onDrop() }
            case .cancelStreams(let names):
                // A stream the machine counts as started may not be running here yet: its start
                // is an action behind this one when writing its request's answer failed. It is
                // dropped instead, so it never starts on a closed connection.
                for name in names {
                    if let task = streamTasks.removeValue(forKey: name) { task.cancel() } else { pendingStreams.removeValue(forKey: name)?.onDrop() }
                }
            case .cancelRequests(let keys):
                for key in keys { requests[key]?.cancel() }
            case .close(let reason): closeChannel(reason)
            }
        }
        // Requests answered at once are finished only after the actions that came with them
        // (a pause after a batch of dispatches must not land after the resume their answers
        // cause), in the order they were answered. Finishing one may take the next buffered
        // line; the machine's lines per turn bound how many.
        guard performing == 1 else { return }
        while !answeredNow.isEmpty {
            let (key, response) = answeredNow.removeFirst()
            perform(machine.requestFinished(key: key, line: response.line, accepted: response.succeeded))
        }
        accountHeld()
        applyWatch()
    }

    /// One turn of the loop for this connection: a new helping of lines, then what the socket has.
    private func turn() {
        perform(machine.newTurn())
        readable()
    }

    /// Queues this connection's next turn behind the other connections' (`executeLater`). Only
    /// one is ever queued, so a busy connection gets one turn per round of the loop however
    /// often it asks: a flood on many connections delays another client by one round.
    private func queueTurn() {
        guard !turnQueued else { return }
        turnQueued = true
        loop.executeLater { [self] in
            turnQueued = false
            turn()
        }
    }

    /// Reports the change in unread output and unfinished input to the budget; a connection
    /// that takes its caller, or everyone, over it is closed. A closed one gives back all it held.
    private func accountHeld() {
        let now = machine.isClosed
            ? ConnectionRegistry.Held()
            : ConnectionRegistry.Held(input: machine.pendingInputCount, output: machine.pendingOutputCount)
        guard now != reported else { return }
        let delta = ConnectionRegistry.Held(input: now.input - reported.input, output: now.output - reported.output)
        reported = now
        if !registry.heldChanged(of: self, by: delta) {
            perform(machine.overBudget())
            accountHeld()  // closed: it gives back all it held
        }
    }

    private func dispatch(_ request: Request, key: UInt64) {
        let environment = RequestEnvironment(caller: caller, prompts: prompts, streams: RequestStreams(connection: self, requestKey: key))
        if let response = dispatcher.respondNow(to: request, environment: environment) {
            answeredNow.append((key, response))
            return
        }
        let dispatcher = self.dispatcher
        dispatcher.tracker.begin()
        requests[key] = Task(executorPreference: loop) { [self] in
            let response = await dispatcher.respond(to: request, environment: environment)
            let finish: @Sendable () -> Void = { [self] in
                dispatcher.tracker.end()
                requests.removeValue(forKey: key)
                perform(machine.requestFinished(key: key, line: response.line, accepted: response.succeeded))
            }
            // The task ends on the loop (its executor preference) unless it was last somewhere
            // else: the answer is then written at once, in the round that computed it.
            if loop.isCurrent { finish() } else { loop.execute(finish) }
        }
    }

    // MARK: Reading

    /// Reads until the channel has nothing more (EAGAIN, or a short read where that says so) or
    /// ends. The loop's epoll is level-triggered: what arrives afterwards, an end of input
    /// included, wakes the connection again.
    private func readable() {
        guard !machine.isClosed else { return }
        if readSuspended {
            // Not reading (a half-close, the in-flight limit, unread answers): the loop wakes
            // the connection only for a hang-up then, which says the client is gone altogether
            // (it cancels what it asked). The descriptor's own state, not the channel's: a TLS
            // channel's end of input is a hang-up already.
            if Syscalls.peerHasClosed(channel.fd) { perform(machine.endOfInput(peerGone: true)) }
            return
        }
        let buffer = loop.readBuffer
        // Bounded work per turn; the rest is picked up by a re-queued turn, after the other
        // connections on the loop had theirs.
        for _ in 0..<16 {
            let result: Syscalls.IOResult
            do {
                result = try channel.read(into: buffer)
            } catch {
                perform(machine.failed())
                return
            }
            switch result {
            case .bytes(let count):
                perform(machine.received(UnsafeRawBufferPointer(rebasing: buffer[0..<count])))
                // A short read took all the socket held: another would only say "would block".
                if machine.isClosed || readSuspended || (count < buffer.count && channel.shortReadDrains) { return }
            case .wouldBlock:
                return
            case .endOfFile:
                perform(machine.endOfInput(peerGone: channel.peerHasClosed()))
                return
            }
        }
        queueTurn()
    }

    // MARK: Writing

    /// Queues a line for the client (notifications; responses come through the machine).
    func enqueue(_ line: Data) {
        loop.execute { [self] in perform(machine.enqueue(line)) }
    }

    private func flush() {
        while machine.pendingOutputCount > 0 && !machine.isClosed {
            let result: Syscalls.IOResult
            do {
                result = try machine.withPendingOutput { try channel.write($0) }
            } catch {
                perform(machine.failed())
                return
            }
            switch result {
            case .bytes(let count):
                perform(machine.wrote(count))
            case .wouldBlock, .endOfFile:
                if !waitingToWrite { waitingToWrite = true; watch() }
                return
            }
        }
        if waitingToWrite && !machine.isClosed { waitingToWrite = false; watch() }
    }

    /// Tells the loop what this connection waits for: input unless reading is paused, and the
    /// socket's room while output waits. Inside `perform` only its end does (a flooded
    /// connection pauses and resumes once per answer, which is no change to the loop).
    private func watch() {
        if performing == 0 { applyWatch() }
    }

    private func applyWatch() {
        let wanted = (read: !readSuspended, write: waitingToWrite)
        guard registered, wanted != watching else { return }
        watching = wanted
        loop.watch(channel.fd, read: wanted.read, write: wanted.write, hangUp: true)
    }

    // MARK: Streams

    func openStream(requestKey: UInt64, onDrop: @escaping @Sendable () -> Void,
                    body: @escaping @Sendable (StreamSink) async -> Void) throws(StreamFailure) -> String {
        let result: Result<String, StreamFailure> = loop.sync { [self] in
            switch machine.openStream(for: requestKey) {
            case .success(let name):
                pendingStreams[name] = (body, onDrop)
                return .success(name)
            case .failure(.shuttingDown): return .failure(.shuttingDown)
            case .failure(.closed): return .failure(.clientGone)
            case .failure(.limit): return .failure(.limit(machine.limits.maxStreams))
            }
        }
        return try result.get()
    }

    private func startStream(_ name: String) {
        guard let pending = pendingStreams.removeValue(forKey: name) else { return }
        let sink = StreamSink(connection: self, name: name)
        streamTasks[name] = Task { [self] in
            await pending.body(sink)
            loop.execute { [self] in
                streamTasks.removeValue(forKey: name)
                perform(machine.streamEnded(name))
            }
        }
    }

    func cancelStream(_ name: String) -> Bool {
        loop.sync { [self] in
            let (found, actions) = machine.cancelStream(name)
            perform(actions)
            return found
        }
    }

    // MARK: Lifecycle

    /// Shutdown: refuse new requests and end streams; requests in flight finish.
    func beginDraining() {
        loop.execute { [self] in perform(machine.drain()) }
    }

    /// How many of this connection's requests are in flight, as its machine counts them, read
    /// on the loop in a turn of its own: after every turn queued before it, so what a turn in
    /// hand would still take is counted (tests prove with it that a request was not taken).
    func requestsInFlight() async -> Int {
        await withCheckedContinuation { answer in loop.executeLater { [self] in answer.resume(returning: machine.requestsInFlight) } }
    }

    /// Shutdown deadline passed: cancel what is still running.
    func cancelInFlight() {
        loop.execute { [self] in perform(machine.cancelInFlight()) }
    }

    func close() {
        loop.execute { [self] in perform(machine.close()) }
    }

    /// The machine signed in (the registry moved it to the members): its lines may be as long
    /// as anyone's.
    func promoted() {
        loop.execute { [self] in machine.raiseLineLimit(to: LineFramer.defaultMaxLineLength) }
    }

    /// Closes now, dropping what is queued (`ConnectionMachine.evict`).
    func evict() {
        loop.execute { [self] in perform(machine.evict()) }
    }

    /// Closes once the requests in flight are answered and written; takes no new one.
    func closeWhenAnswered() {
        loop.execute { [self] in perform(machine.closeWhenAnswered()) }
    }

    private func closeChannel(_ reason: ConnectionMachine.CloseReason) {
        switch reason {
        case .unreadOutput:
            dispatcher.logger.warning("closing a connection whose client does not read its responses",
                                      [("AUTHD_CONNECTION", String(id))] + caller.logFields)
        case .overBudget:
            dispatcher.logger.warning("closing a connection: its user's connections hold more unread answers and unfinished lines than the daemon allows",
                                      [("AUTHD_CONNECTION", String(id))] + caller.logFields)
        default:
            break
        }
        idleTimer?.cancel()
        idleTimer = nil
        // The loop forgets the descriptor before it is closed (its number may be reused at once).
        if registered {
            registered = false
            loop.deregister(channel.fd)
        }
        channel.close()
        // What it held goes back while the registry still knows its standing, and so the pool
        // it was drawn from (the remote machines', the newcomers').
        accountHeld()
        registry.remove(self)
        MemoryReturn.shared.connectionClosed(remaining: registry.count)
    }
}
