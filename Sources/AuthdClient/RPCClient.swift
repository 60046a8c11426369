import FoundationEssentials
import Protocol

/// A blocking JSON-RPC client of authd over a ``LineConnection``: one request at a time, the
/// daemon's notifications handed to a callback while the response is awaited.
///
/// The callback may ``post(_:_:)`` requests of its own (answers to prompts) or ``notify(method:params:)``;
/// the responses to posted requests arrive, and are consumed, while the first request still
/// waits. Streams (`events.subscribe`, a followed audit tail) are read with ``nextNotification()``
/// after the request that opened them. Ids are allocated here, counting from 1.
public final class RPCClient {
    /// Called with a notification's method and params while a request waits for its response.
    /// What it throws ends the wait (``AuthdClientError/Code/notificationHandlerFailed``, or the
    /// ``AuthdClientError`` itself when it threw one).
    public typealias NotificationHandler = (_ method: String, _ params: JSONValue?) throws -> Void

    /// The line layer underneath, for callers that also send or read raw lines.
    public let connection: LineConnection
    private var nextID: Int64 = 1
    /// Requests sent with `post` whose responses have not arrived yet.
    private var posted: Set<Int64> = []
    private let onPostedRefusal: (RPCError) -> Void

    /// - Parameter onPostedRefusal: told when the daemon refuses a request sent with ``post(_:_:)``
    ///   (the only answer to one worth reporting); by default such refusals are dropped.
    public init(connection: LineConnection, onPostedRefusal: @escaping (RPCError) -> Void = { _ in }) {
        self.connection = connection
        self.onPostedRefusal = onPostedRefusal
    }

    /// Calls a typed method and decodes its result.
    public func call<M: RPCMethod>(_: M.Type, _ params: M.Params, onNotification: NotificationHandler = { _, _ in }) throws(AuthdClientError) -> M.Result {
        let result = try callRaw(method: M.name, params: params, onNotification: onNotification)
        do {
            return try WireCodec.decode(M.Result.self, from: result)
        } catch {
            throw .unreadableResult(method: M.name, error)
        }
    }

    /// Calls any method with any params; returns the raw result, or throws the daemon's refusal
    /// as ``AuthdClientError/Code/requestRefused``.
    public func callRaw(method: String, params: some Encodable, onNotification: NotificationHandler = { _, _ in }) throws(AuthdClientError) -> JSONValue {
        switch try request(method: method, params: params, onNotification: onNotification) {
        case .result(let value): return value
        case .error(let error): throw .requestRefused(method: method, error)
        }
    }

    /// Calls any method with any params; returns the outcome, the daemon's refusal included, as
    /// a value (for callers that report the error object as it came).
    public func request(method: String, params: some Encodable, onNotification: NotificationHandler = { _, _ in }) throws(AuthdClientError) -> Incoming.Outcome {
        let id = allocateID()
        try send(method, params: params, id: id)
        while true {
            switch try nextMessage() {
            case .notification(let name, let params):
                do {
                    try onNotification(name, params)
                } catch let error as AuthdClientError {
                    throw error
                } catch {
                    throw .notificationHandlerFailed(method: method, error)
                }
            case .response(.integer(let responseID), let outcome) where posted.contains(responseID):
                posted.remove(responseID)
                if case .error(let error) = outcome { onPostedRefusal(error) }
            case .response(let responseID, let outcome) where responseID == .integer(id):
                return outcome
            case .response(.null, .error(let error)):
                // Connection-level errors (line too long, server busy) carry a null id.
                throw .connectionRefused(error)
            case .response:
                continue
            }
        }
    }

    /// Sends a request without waiting for its response (from inside a notification callback:
    /// the answer to a prompt). Its response is consumed while the current call waits.
    public func post<M: RPCMethod>(_: M.Type, _ params: M.Params) throws(AuthdClientError) {
        let id = allocateID()
        try send(M.name, params: params, id: id)
        posted.insert(id)
    }

    /// Sends a JSON-RPC notification: a request without an id, which the daemon never answers.
    public func notify(method: String, params: some Encodable) throws(AuthdClientError) {
        try send(method, params: params, id: nil)
    }

    /// Waits for the next notification (of a stream opened by an earlier call); nil when the
    /// daemon closes the connection. Responses arriving meanwhile are skipped.
    public func nextNotification() throws(AuthdClientError) -> (method: String, params: JSONValue?)? {
        while true {
            let message: Incoming
            do {
                message = try nextMessage()
            } catch where error.code == .closed {
                return nil
            }
            if case .notification(let name, let params) = message { return (name, params) }
        }
    }

    private func allocateID() -> Int64 {
        defer { nextID += 1 }
        return nextID
    }

    /// Encodes and sends one request (a notification when `id` is nil).
    private func send(_ method: String, params: some Encodable, id: Int64?) throws(AuthdClientError) {
        var line: Data
        do {
            line = try WireCodec.requestLine(id: id.map { .integer($0) }, method: method, params: params)
        } catch {
            throw .unencodableParams(method: method, error)
        }
        // A line may carry a secret (a prompt's answer, a password): it is not left in freed memory.
        defer { line.withUnsafeMutableBytes { LineConnection.wipe($0) } }
        do {
            try connection.send(line)
        } catch where error.code == .sendFailed {
            // The daemon may have refused us with an error line before closing: report that.
            if case .response(let responseID, .error(let refusal))? = try? nextMessage() {
                throw responseID == .null ? .connectionRefused(refusal) : .requestRefused(method: method, refusal)
            }
            throw error
        }
    }

    private func nextMessage() throws(AuthdClientError) -> Incoming {
        guard let line = try connection.readLine() else { throw .closed }
        do {
            return try WireCodec.decodeIncoming(line)
        } catch {
            throw .malformedMessage(error.message)
        }
    }
}
