import Dispatch
import FoundationEssentials
import Protocol

/// A byte stream under a connection: a Unix stream socket here; TLS over TCP is a second one.
protocol ByteChannel: Sendable {
    /// The descriptor whose readiness drives the connection.
    var fd: Int32 { get }
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Syscalls.IOResult
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
    func write(_ bytes: UnsafeRawBufferPointer) throws(SystemError) -> Syscalls.IOResult { try Syscalls.send(fd, bytes) }
    func peerHasClosed() -> Bool { Syscalls.peerHasClosed(fd) }
    func close() { Syscalls.close(fd) }
}

/// One client connection: the transport that performs what its `ConnectionMachine` decides.
/// It reads and writes the channel, runs each dispatched request as a task, and runs streams;
/// every protocol decision (framing, limits, back-pressure, stream order, draining) is the
/// machine's. The same class serves any `ByteChannel`.
///
/// Concurrency: every mutable property is touched only on `queue`, a serial queue owned by
/// this connection; public entry points hop onto it. That confinement is what makes the
/// `@unchecked Sendable` sound. A stalled or hostile client therefore only ever occupies its
/// own queue, never another client's.
final class Connection: StreamingConnection, @unchecked Sendable {
    let id: UInt64
    let caller: Caller
    /// Prompts raised by this connection's requests, answered on this connection only.
    let prompts: PromptBroker

    private let channel: any ByteChannel
    private let queue: DispatchQueue
    private let dispatcher: Dispatcher
    private let registry: ConnectionRegistry
    private let idleTimeout: DispatchTimeInterval
    /// What the connection held when it last reported to `registry`'s budget.
    private var reported = ConnectionRegistry.Held()

    private var machine = ConnectionMachine()
    private var idleTimer: (any DispatchSourceTimer)?
    private var readSource: (any DispatchSourceRead)?
    private var writeSource: (any DispatchSourceWrite)?
    private var writeSourceResumed = false
    private var readSuspended = false
    private var openSources = 0
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
    init(id: UInt64, channel: any ByteChannel, caller: Caller, dispatcher: Dispatcher, timeouts: (idle: Int, prompt: Int),
         registry: ConnectionRegistry) {
        self.id = id
        idleTimeout = .seconds(timeouts.idle)
        prompts = PromptBroker(timeout: .seconds(timeouts.prompt))
        self.channel = channel
        self.caller = caller
        self.dispatcher = dispatcher
        self.registry = registry
        queue = DispatchQueue(label: "authd.connection.\(id)")
        prompts.connect({ [weak self] line in self?.enqueue(line) }, waiting: { [weak self] count in
            guard let self else { return }
            queue.async { [self] in perform(machine.questionsWaiting(count)) }
        })
    }

    func start() {
        queue.async { [self] in
            let source = DispatchSource.makeReadSource(fileDescriptor: channel.fd, queue: queue)
            source.setEventHandler { [unowned self] in readable() }
            source.setCancelHandler { [self] in sourceCancelled() }
            openSources += 1
            readSource = source
            source.resume()
            let timer = DispatchSource.makeTimerSource(queue: queue)
            timer.schedule(deadline: .now() + idleTimeout, repeating: idleTimeout, leeway: .seconds(1))
            timer.setEventHandler { [unowned self] in perform(machine.idleTick()) }
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
            case .flush: flush()
            case .pauseReading:
                if !readSuspended { readSuspended = true; readSource?.suspend() }
            case .resumeReading:
                if readSuspended { readSuspended = false; readSource?.resume() }
            case .readAgain: queue.async { [self] in readable() }
            case .startStreams(let names): names.forEach(startStream)
            case .dropStreams(let names):
                for name in names { pendingStreams.removeValue(forKey: name)?.onDrop() }
            case .cancelStreams(let names):
                for name in names { streamTasks.removeValue(forKey: name)?.cancel() }
            case .cancelRequests(let keys):
                for key in keys { requests[key]?.cancel() }
            case .close(let reason): closeChannel(reason)
            }
        }
        // Requests answered at once are finished only after the actions that came with them
        // (a pause after a batch of dispatches must not land after the resume their answers
        // cause), in the order they were answered.
        while performing == 1, !answeredNow.isEmpty {
            let (key, response) = answeredNow.removeFirst()
            perform(machine.requestFinished(key: key, line: response.line, accepted: response.succeeded))
        }
        accountHeld()
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
        if !registry.heldChanged(of: caller, by: delta) { perform(machine.overBudget()) }
    }

    private func dispatch(_ request: Request, key: UInt64) {
        let environment = RequestEnvironment(caller: caller, prompts: prompts, streams: RequestStreams(connection: self, requestKey: key))
        if let response = dispatcher.respondNow(to: request, environment: environment) {
            answeredNow.append((key, response))
            return
        }
        let dispatcher = self.dispatcher
        dispatcher.tracker.begin()
        requests[key] = Task { [self] in
            let response = await dispatcher.respond(to: request, environment: environment)
            queue.async { [self] in
                dispatcher.tracker.end()
                requests.removeValue(forKey: key)
                perform(machine.requestFinished(key: key, line: response.line, accepted: response.succeeded))
            }
        }
    }

    // MARK: Reading

    /// Reads until the channel has nothing more (EAGAIN) or ends. Stopping at a short read would
    /// lose an end of input that arrived with the data: the source reports edges, so nothing
    /// would wake us again and the connection would stay open forever.
    private func readable() {
        guard !machine.isClosed, !readSuspended else { return }
        // Not zeroed: only the bytes a read wrote are ever looked at. Taken per turn, not kept
        // per connection, so a thousand idle connections hold no buffers.
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 1)
        defer { buffer.deallocate() }
        // Bounded work per turn; the rest is picked up by a re-queued turn, after whatever else
        // is waiting on this connection's queue.
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
                if machine.isClosed || readSuspended { return }
            case .wouldBlock:
                return
            case .endOfFile:
                perform(machine.endOfInput(peerGone: channel.peerHasClosed()))
                return
            }
        }
        queue.async { [self] in readable() }
    }

    // MARK: Writing

    /// Queues a line for the client (notifications; responses come through the machine).
    func enqueue(_ line: Data) {
        queue.async { [self] in perform(machine.enqueue(line)) }
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
                waitUntilWritable()
                return
            }
        }
        // Not once the machine closed: closing resumed and cancelled the source, and a source
        // suspended after its cancel never runs its cancel handler (the descriptor would leak).
        if writeSourceResumed && !machine.isClosed {
            writeSourceResumed = false
            writeSource?.suspend()
        }
    }

    private func waitUntilWritable() {
        if writeSource == nil {
            let source = DispatchSource.makeWriteSource(fileDescriptor: channel.fd, queue: queue)
            source.setEventHandler { [unowned self] in flush() }
            source.setCancelHandler { [self] in sourceCancelled() }
            openSources += 1
            writeSource = source
            writeSourceResumed = true
            source.resume()
        } else if !writeSourceResumed {
            writeSourceResumed = true
            writeSource?.resume()
        }
    }

    // MARK: Streams

    func openStream(requestKey: UInt64, onDrop: @escaping @Sendable () -> Void,
                    body: @escaping @Sendable (StreamSink) async -> Void) throws(StreamFailure) -> String {
        let result: Result<String, StreamFailure> = queue.sync {
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
            queue.async { [self] in
                streamTasks.removeValue(forKey: name)
                perform(machine.streamEnded(name))
            }
        }
    }

    func cancelStream(_ name: String) -> Bool {
        queue.sync {
            let (found, actions) = machine.cancelStream(name)
            perform(actions)
            return found
        }
    }

    // MARK: Lifecycle

    /// Shutdown: refuse new requests and end streams; requests in flight finish.
    func beginDraining() {
        queue.async { [self] in perform(machine.drain()) }
    }

    /// Shutdown deadline passed: cancel what is still running.
    func cancelInFlight() {
        queue.async { [self] in perform(machine.cancelInFlight()) }
    }

    func close() {
        queue.async { [self] in perform(machine.close()) }
    }

    /// Closes once the requests in flight are answered and written; takes no new one.
    func closeWhenAnswered() {
        queue.async { [self] in perform(machine.closeWhenAnswered()) }
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
        if readSuspended { readSuspended = false; readSource?.resume() }
        if let writeSource, !writeSourceResumed { writeSourceResumed = true; writeSource.resume() }
        readSource?.cancel()
        writeSource?.cancel()
        if openSources == 0 { channel.close() }
        registry.remove(self)
    }

    /// The descriptor is closed only after every dispatch source on it has been cancelled,
    /// as libdispatch requires.
    private func sourceCancelled() {
        openSources -= 1
        if openSources == 0 {
            readSource = nil
            writeSource = nil
            channel.close()
        }
    }
}
