import Glibc
import Protocol

/// Why talking to authd failed: the socket (connecting, sending, receiving, a timeout, the
/// daemon closing), a line that is not the protocol, or the daemon's own refusal.
///
/// One error type for the module with an extensible ``Code``, as swift-certificates does: new
/// codes can be added without breaking a caller's `switch`. Equality and hashing look at the code
/// only, so a test can expect `.closed` whatever errno came with it. An error carries the socket
/// path and errno where they help; never anything a request contained (a PIN, a password).
public struct AuthdClientError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What failed.
    public let code: Code
    /// The socket the connection was made to (``Code/connectFailed``).
    public let socketPath: String?
    /// Every socket tried, in order, when the daemon was looked for rather than named
    /// (``LineConnection/connectToDaemon(environment:)``); empty otherwise.
    public let attempts: [SocketAttempt]
    /// The `errno` of the system call that failed (connect, send, receive), when one did.
    public let errno: Int32?
    /// The method of the request that failed, when the failure belongs to one request.
    public let method: String?
    /// The daemon's error object (``Code/requestRefused``, ``Code/connectionRefused``).
    public let daemonError: RPCError?
    /// What the code alone does not say, in words (``Code/malformedMessage``).
    public let detail: String?
    /// The error underneath: the encoder's, the decoder's, or the notification handler's.
    ///
    /// Not part of ``description``: an encoding error can quote the value it could not encode.
    public let underlying: (any Error)?

    private init(_ code: Code, socketPath: String? = nil, attempts: [SocketAttempt] = [], errno: Int32? = nil, method: String? = nil,
                 daemonError: RPCError? = nil, detail: String? = nil, underlying: (any Error)? = nil) {
        self.code = code
        self.socketPath = socketPath
        self.attempts = attempts
        self.errno = errno
        self.method = method
        self.daemonError = daemonError
        self.detail = detail
        self.underlying = underlying
    }

    public static func == (lhs: AuthdClientError, rhs: AuthdClientError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    public var description: String {
        let cause = errno.map { ": " + String(cString: strerror($0)) } ?? ""
        switch code {
        case .connectFailed where !attempts.isEmpty:
            return "cannot connect to authd: tried " + attempts.map { "\($0.path) (\($0.problem))" }.joined(separator: ", ")
        case .connectFailed: return "cannot connect to authd" + (socketPath.map { " at \($0)" } ?? "") + cause
        case .sendFailed: return "lost the connection to authd while sending\(cause)"
        case .receiveFailed: return "cannot receive from authd\(cause)"
        case .timedOut: return "timed out waiting for authd"
        case .closed: return "authd closed the connection"
        case .lineTooLong: return "authd sent a line over the limit"
        case .malformedMessage: return detail ?? "authd sent a line that is not a JSON-RPC 2.0 message"
        case .unencodableParams: return "the params of \(method ?? "the request") cannot be encoded"
        case .unreadableResult: return "authd's answer to \(method ?? "the request") cannot be read"
        case .requestRefused, .connectionRefused: return daemonError?.description ?? "authd refused the request"
        case .notificationHandlerFailed: return underlying.map { "\($0)" } ?? "the notification handler failed"
        default: return code.description
        }
    }

    /// The kinds of failure. A struct of static values rather than an enum, so that adding one
    /// is not a breaking change for code that switches over them.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Kind: Hashable, Sendable {
            case connectFailed, sendFailed, receiveFailed, timedOut, closed, lineTooLong, malformedMessage
            case unencodableParams, unreadableResult, requestRefused, connectionRefused, notificationHandlerFailed
        }
        private let kind: Kind
        private init(_ kind: Kind) { self.kind = kind }

        /// The socket could not be connected to, or set up (``AuthdClientError/socketPath``, ``AuthdClientError/errno``).
        public static let connectFailed = Code(.connectFailed)
        /// Sending failed: the daemon is gone, or the connection was closed here.
        public static let sendFailed = Code(.sendFailed)
        /// Receiving failed for a reason other than the daemon closing the connection.
        public static let receiveFailed = Code(.receiveFailed)
        /// The receive or send timeout passed.
        public static let timedOut = Code(.timedOut)
        /// The daemon closed the connection (end of stream, or a reset).
        public static let closed = Code(.closed)
        /// The daemon sent a line longer than the connection's maximum.
        public static let lineTooLong = Code(.lineTooLong)
        /// The daemon sent a line that is not a JSON-RPC 2.0 response or notification.
        public static let malformedMessage = Code(.malformedMessage)
        /// The params could not be encoded as JSON; nothing was sent.
        public static let unencodableParams = Code(.unencodableParams)
        /// The result does not decode as the method's result type.
        public static let unreadableResult = Code(.unreadableResult)
        /// The daemon answered the request with an error (``AuthdClientError/daemonError``).
        public static let requestRefused = Code(.requestRefused)
        /// The daemon sent an error with a null id: about the connection, not one request (the
        /// daemon is busy or stopping, a line was too long); it usually closes the connection next.
        public static let connectionRefused = Code(.connectionRefused)
        /// The notification handler threw (``AuthdClientError/underlying``); the request's answer was not waited for.
        public static let notificationHandlerFailed = Code(.notificationHandlerFailed)

        public var description: String { "\(kind)" }
    }
}

extension AuthdClientError {
    static func connectFailed(path: String?, errno: Int32) -> AuthdClientError {
        AuthdClientError(.connectFailed, socketPath: path, errno: errno)
    }
    static func connectFailed(attempts: [SocketAttempt]) -> AuthdClientError {
        AuthdClientError(.connectFailed, attempts: attempts)
    }
    static func sendFailed(errno: Int32?) -> AuthdClientError { AuthdClientError(.sendFailed, errno: errno) }
    static func receiveFailed(errno: Int32) -> AuthdClientError { AuthdClientError(.receiveFailed, errno: errno) }
    static let timedOut = AuthdClientError(.timedOut)
    static let closed = AuthdClientError(.closed)
    static let lineTooLong = AuthdClientError(.lineTooLong)
    static func malformedMessage(_ detail: String) -> AuthdClientError { AuthdClientError(.malformedMessage, detail: detail) }
    static func unencodableParams(method: String, _ error: any Error) -> AuthdClientError {
        AuthdClientError(.unencodableParams, method: method, underlying: error)
    }
    static func unreadableResult(method: String, _ error: any Error) -> AuthdClientError {
        AuthdClientError(.unreadableResult, method: method, underlying: error)
    }
    static func requestRefused(method: String, _ error: RPCError) -> AuthdClientError {
        AuthdClientError(.requestRefused, method: method, daemonError: error)
    }
    static func connectionRefused(_ error: RPCError) -> AuthdClientError { AuthdClientError(.connectionRefused, daemonError: error) }
    static func notificationHandlerFailed(method: String, _ error: any Error) -> AuthdClientError {
        AuthdClientError(.notificationHandlerFailed, method: method, underlying: error)
    }
}

/// A socket a client tried while looking for the daemon, and why it could not use it.
public struct SocketAttempt: Sendable, Equatable {
    public let path: String
    /// In words: the system's reason (`No such file or directory`), or why the socket was not
    /// even tried (its directory is not a private one of the user's).
    public let problem: String

    public init(path: String, problem: String) {
        self.path = path
        self.problem = problem
    }
}
