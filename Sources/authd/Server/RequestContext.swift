import FoundationEssentials
import Protocol

/// What the handler of a `machine` method knows about its request: the local process that asked,
/// and the prompts and streams of the connection it came on — never the transport itself.
struct RequestContext: Sendable {
    /// The peer as read once at accept.
    let caller: CallerIdentity
    /// Prompts raised by this request, answered on its connection or on the person's desktop
    /// (DESIGN §3, §12).
    let prompts: RequestPrompts
    /// Streams this request opens.
    let streams: RequestStreams

    /// A session token in the request, as a process on this machine presents it.
    func session(_ token: String) -> PresentedSession { .local(token) }
}

/// What the handler of an `account` method knows about its request: who asked. Account methods
/// take their secrets as params and never prompt (a device forwards them to its hub).
struct AccountContext: Sendable {
    let caller: Caller

    /// A session token in the request, as this caller presents it (bound to its machine).
    func session(_ token: String) -> PresentedSession { PresentedSession(token, from: caller) }
}

/// What a connection offers the request it dispatches; each method's `Home` makes its handler's
/// context from it.
struct RequestEnvironment: Sendable {
    let caller: Caller
    let prompts: PromptBroker
    let streams: RequestStreams
    /// Set when the request asked for `prompt: desktop` (by the dispatcher, after consent).
    var desktop: DesktopSession? = nil
}

/// The streams (`sync.subscribe`, `events.subscribe`, `admin.audit.tail` with follow) a request
/// opens on its connection, as the connection lets handlers see them.
struct RequestStreams: Sendable {
    let connection: any StreamingConnection
    /// Identifies the request within its connection (not the JSON-RPC id, which clients choose).
    let requestKey: UInt64

    /// Opens a stream whose notifications start after this request's response. `onDrop` runs
    /// instead of `body` if the stream never starts (the request failed, the client left).
    func open(onDrop: @escaping @Sendable () -> Void, _ body: @escaping @Sendable (StreamSink) async -> Void) throws(StreamFailure) -> String {
        try connection.openStream(requestKey: requestKey, onDrop: onDrop, body: body)
    }

    /// `subscription.cancel`: false when the connection has no stream by that name.
    func cancel(_ name: String) -> Bool {
        connection.cancelStream(name)
    }
}

/// A connection that carries streams: what `RequestStreams` and `StreamSink` need of a
/// transport, so handlers never hold one.
protocol StreamingConnection: Sendable {
    func openStream(requestKey: UInt64, onDrop: @escaping @Sendable () -> Void,
                    body: @escaping @Sendable (StreamSink) async -> Void) throws(StreamFailure) -> String
    func cancelStream(_ name: String) -> Bool
    /// Queues a line for the client (notifications).
    func enqueue(_ line: Data)
}

/// Where a stream's notifications go.
struct StreamSink: Sendable {
    let connection: any StreamingConnection
    let name: String

    func notify<N: RPCNotification>(_: N.Type, _ params: N.Params) {
        guard let line = try? WireCodec.notificationLine(method: N.name, params: params) else { return }
        connection.enqueue(line)
    }
}

/// Why a stream did not open, or could not be cancelled.
enum StreamFailure: WireErrorConvertible, Equatable {
    case shuttingDown
    /// The client already left: nothing would ever start the stream.
    case clientGone
    case limit(Int)
    /// `subscription.cancel` of a stream this connection does not have.
    case unknown(String)

    var rpcError: RPCError {
        switch self {
        case .shuttingDown: .shuttingDown
        case .clientGone: .cancelled
        case .limit(let most): .failure(.subscriptionLimit, "This connection has too many open streams (at most \(most)).")
        case .unknown(let name): .failure(.unknownSubscription, "This connection has no stream '\(Redaction.printable(name, limit: 64))'.")
        }
    }
}
