import Dispatch
import FoundationEssentials
import Glibc
import Protocol

/// One client connection: framing, per-connection back-pressure, in-flight requests,
/// streams, and ordered writes.
///
/// Concurrency: every mutable property is touched only on `queue`, a serial queue owned by
/// this connection; public entry points hop onto it. That confinement is what makes the
/// `@unchecked Sendable` sound. A stalled or hostile client therefore only ever occupies its
/// own queue, never another client's.
final class Connection: @unchecked Sendable {
    let id: UInt64
    let caller: CallerIdentity
    /// Prompts raised by this connection's requests, answered on this connection only.
    let prompts = PromptBroker()

    /// More requests than this in flight on one connection pauses reading from it.
    static let maxInFlightPerConnection = 64
    /// A client that lets this much unread output pile up is disconnected.
    static let maxPendingOutput = 16 << 20
    static let maxSubscriptions = 16

    private let fd: Int32
    private let queue: DispatchQueue
    private let dispatcher: Dispatcher
    private let onClose: @Sendable (Connection) -> Void

    private var readSource: (any DispatchSourceRead)?
    private var writeSource: (any DispatchSourceWrite)?
    private var writeSourceResumed = false
    private var readPaused = false
    private var framer = LineFramer()
    private var outbox: [UInt8] = []
    private var outboxOffset = 0
    private var nextRequestKey: UInt64 = 0
    private var inFlight: [UInt64: Task<Void, Never>] = [:]
    private var pendingSubscriptions: [UInt64: [PendingSubscription]] = [:]

    /// A stream waiting for its request's response. `onDrop` runs if it never starts (the
    /// request failed, the client left, the daemon is stopping), so its source can let go.
    private struct PendingSubscription {
        let name: String
        let body: @Sendable (SubscriptionSink) async -> Void
        let onDrop: @Sendable () -> Void
    }
    private var subscriptions: [String: Task<Void, Never>] = [:]
    private var nextSubscription = 0
    private var draining = false
    private var halfClosed = false
    private var state = State.open
    private var openSources = 0

    private enum State { case open, closingAfterFlush, closed }

    init(id: UInt64, fd: Int32, caller: CallerIdentity, dispatcher: Dispatcher, onClose: @escaping @Sendable (Connection) -> Void) {
        self.id = id
        self.fd = fd
        self.caller = caller
        self.dispatcher = dispatcher
        self.onClose = onClose
        queue = DispatchQueue(label: "authd.connection.\(id)")
    }

    func start() {
        queue.async { [self] in
            let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
            source.setEventHandler { [unowned self] in readable() }
            source.setCancelHandler { [self] in sourceCancelled() }
            openSources += 1
            readSource = source
            source.resume()
        }
    }

    // MARK: Reading

    /// Reads until the socket has nothing more (EAGAIN) or ends. Stopping at a short read would
    /// lose an end-of-file that arrived with the data: the source reports edges, so nothing
    /// would wake us again and the connection would stay open forever.
    private func readable() {
        guard state == .open, !readPaused else { return }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        // Bounded work per turn; the rest is picked up by a re-queued turn, after whatever else
        // is waiting on this connection's queue.
        for _ in 0..<16 {
            let result: Syscalls.IOResult
            do {
                result = try buffer.withUnsafeMutableBytes { try Syscalls.read(fd, into: $0) }
            } catch {
                closeNow()
                return
            }
            switch result {
            case .bytes(let count):
                framer.append(buffer[0..<count])
                processBufferedLines()
                if state != .open || readPaused { return }
            case .wouldBlock:
                return
            case .endOfFile:
                if Syscalls.peerHasClosed(fd) {
                    // The client is gone: cancel what it asked for (DESIGN §3).
                    closeNow()
                } else {
                    // Half-close (`shutdown(SHUT_WR)`, as `socat` does after its input): the
                    // client still reads, so answer what it sent, then close.
                    halfClosed = true
                    pauseReading()
                    closeIfFinished()
                }
                return
            }
        }
        queue.async { [self] in readable() }
    }

    private func processBufferedLines() {
        while state == .open {
            if inFlight.count >= Self.maxInFlightPerConnection {
                pauseReading()
                return
            }
            let line: [UInt8]
            do {
                guard let next = try framer.nextLine() else { return }
                line = next
            } catch {
                send(WireCodec.errorLine(id: .null, error: .lineTooLong(limit: framer.maxLineLength)))
                closeAfterFlush()
                return
            }
            handle(line)
        }
    }

    private func handle(_ line: [UInt8]) {
        let request: Request
        switch WireCodec.decodeRequest(line) {
        case .failure(let failure):
            send(WireCodec.errorLine(id: failure.id, error: failure.error))
            return
        case .success(let decoded):
            request = decoded
        }
        if draining {
            if let id = request.id { send(WireCodec.errorLine(id: id, error: .shuttingDown)) }
            return
        }
        let key = nextRequestKey
        nextRequestKey += 1
        let context = RequestContext(caller: caller, connection: self, requestKey: key)
        let dispatcher = self.dispatcher
        dispatcher.tracker.begin()
        inFlight[key] = Task { [self] in
            let response = await dispatcher.respond(to: request, context: context)
            queue.async { [self] in
                dispatcher.tracker.end()
                inFlight.removeValue(forKey: key)
                if let line = response.line { send(line) }
                startSubscriptions(for: key, accepted: response.succeeded)
                if readPaused && state == .open {
                    if !halfClosed { resumeReading() }
                    processBufferedLines()
                }
                closeIfFinished()
            }
        }
    }

    /// After a half-close: close once every request is answered and no stream is open.
    private func closeIfFinished() {
        if halfClosed && state == .open && inFlight.isEmpty && subscriptions.isEmpty && pendingSubscriptions.isEmpty {
            closeAfterFlush()
        }
    }

    private func pauseReading() {
        guard !readPaused else { return }
        readPaused = true
        readSource?.suspend()
    }

    private func resumeReading() {
        guard readPaused else { return }
        readPaused = false
        readSource?.resume()
        // Data (or end-of-file) that arrived while paused raised no new event: look now.
        queue.async { [self] in readable() }
    }

    // MARK: Writing

    /// Queues a line for the client (responses and notifications alike).
    func enqueue(_ line: Data) {
        queue.async { [self] in send(line) }
    }

    private func send(_ line: Data) {
        guard state != .closed else { return }
        outbox.append(contentsOf: line)
        guard outbox.count - outboxOffset <= Self.maxPendingOutput else {
            dispatcher.logger.warning("closing a connection whose client does not read its responses",
                                      [("AUTHD_CONNECTION", String(id)), ("AUTHD_CALLER_PID", String(caller.pid))])
            closeNow()
            return
        }
        flush()
    }

    private func flush() {
        while outboxOffset < outbox.count {
            let result: Syscalls.IOResult
            do {
                result = try outbox.withUnsafeBytes { try Syscalls.send(fd, UnsafeRawBufferPointer(rebasing: $0[outboxOffset...])) }
            } catch {
                closeNow()
                return
            }
            switch result {
            case .bytes(let count):
                outboxOffset += count
            case .wouldBlock, .endOfFile:
                waitUntilWritable()
                return
            }
        }
        outbox.removeAll(keepingCapacity: outbox.capacity <= 1 << 20)
        outboxOffset = 0
        if writeSourceResumed {
            writeSourceResumed = false
            writeSource?.suspend()
        }
        if state == .closingAfterFlush { closeNow() }
    }

    private func waitUntilWritable() {
        if writeSource == nil {
            let source = DispatchSource.makeWriteSource(fileDescriptor: fd, queue: queue)
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

    /// Registers a stream started by the request `requestKey`; it begins only after that
    /// request's response has been written, so notifications never overtake the response.
    func addSubscription(requestKey: UInt64, onDrop: @escaping @Sendable () -> Void,
                         body: @escaping @Sendable (SubscriptionSink) async -> Void) throws(RPCError) -> String {
        let result: Result<String, RPCError> = queue.sync {
            if draining { return .failure(.shuttingDown) }
            // The client already left: nothing would ever start or drop this stream.
            if state != .open { return .failure(.cancelled) }
            guard subscriptions.count + pendingSubscriptions.values.map(\.count).reduce(0, +) < Self.maxSubscriptions else {
                return .failure(.failure(.subscriptionLimit, "This connection has too many open streams (at most \(Self.maxSubscriptions))."))
            }
            nextSubscription += 1
            let name = "s\(nextSubscription)"
            pendingSubscriptions[requestKey, default: []].append(PendingSubscription(name: name, body: body, onDrop: onDrop))
            return .success(name)
        }
        return try result.get()
    }

    private func startSubscriptions(for key: UInt64, accepted: Bool) {
        guard let pending = pendingSubscriptions.removeValue(forKey: key) else { return }
        guard accepted, state == .open, !draining else {
            pending.forEach { $0.onDrop() }
            return
        }
        for subscription in pending {
            let sink = SubscriptionSink(connection: self, name: subscription.name)
            subscriptions[subscription.name] = Task { [self] in
                await subscription.body(sink)
                subscriptionEnded(subscription.name)
            }
        }
    }

    /// Ends a stream; false when this connection has no stream by that name.
    func cancelSubscription(_ name: String) -> Bool {
        queue.sync {
            guard let task = subscriptions.removeValue(forKey: name) else { return false }
            task.cancel()
            return true
        }
    }

    /// A stream's body returned (its source ended).
    fileprivate func subscriptionEnded(_ name: String) {
        queue.async { [self] in
            subscriptions.removeValue(forKey: name)
            closeIfFinished()
        }
    }

    // MARK: Lifecycle

    /// Shutdown: refuse new requests and end streams; in-flight requests finish.
    func beginDraining() {
        queue.async { [self] in
            draining = true
            for task in subscriptions.values { task.cancel() }
            subscriptions.removeAll()
            dropPendingSubscriptions()
        }
    }

    private func dropPendingSubscriptions() {
        for pending in pendingSubscriptions.values.joined() { pending.onDrop() }
        pendingSubscriptions.removeAll()
    }

    /// Shutdown deadline passed: cancel what is still running.
    func cancelInFlight() {
        queue.async { [self] in for task in inFlight.values { task.cancel() } }
    }

    func close() {
        queue.async { [self] in
            if outboxOffset < outbox.count { closeAfterFlush() } else { closeNow() }
        }
    }

    private func closeAfterFlush() {
        guard state == .open else { return }
        state = .closingAfterFlush
        if outboxOffset >= outbox.count { closeNow() }
    }

    private func closeNow() {
        guard state != .closed else { return }
        state = .closed
        for task in inFlight.values { task.cancel() }
        for task in subscriptions.values { task.cancel() }
        subscriptions.removeAll()
        dropPendingSubscriptions()
        outbox = []
        outboxOffset = 0
        if readPaused { readPaused = false; readSource?.resume() }
        if let writeSource, !writeSourceResumed { writeSourceResumed = true; writeSource.resume() }
        readSource?.cancel()
        writeSource?.cancel()
        if openSources == 0 { Glibc.close(fd) }
        onClose(self)
    }

    /// The descriptor is closed only after every dispatch source on it has been cancelled,
    /// as libdispatch requires.
    private func sourceCancelled() {
        openSources -= 1
        if openSources == 0 {
            readSource = nil
            writeSource = nil
            Glibc.close(fd)
        }
    }
}

/// Where a stream's notifications go.
struct SubscriptionSink: Sendable {
    let connection: Connection
    let name: String

    func notify<N: RPCNotification>(_: N.Type, _ params: N.Params) {
        guard let line = try? WireCodec.notificationLine(method: N.name, params: params) else { return }
        connection.enqueue(line)
    }
}
