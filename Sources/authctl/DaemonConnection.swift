import AuthdClient
import Glibc
import Protocol

/// authctl's connection to authd: the client library's ``RPCClient``, with its failures told in
/// authctl's words, reasons and exit codes (scripts and tests match on them).
final class DaemonConnection {
    private let client: RPCClient
    let socketPath: String

    convenience init(socketPath: String) throws(CLIError) {
        do {
            try self.init(LineConnection(socketPath: socketPath), at: socketPath)
        } catch {
            throw CLIError(error)
        }
    }

    /// Connects to the daemon where the user's or the system daemon listens (``DaemonSocket``).
    convenience init(discoveringIn environment: [String: String]) throws(CLIError) {
        do {
            let (connection, path) = try LineConnection.connectToDaemon(environment: environment)
            self.init(connection, at: path)
        } catch {
            throw CLIError(error)
        }
    }

    private init(_ connection: LineConnection, at socketPath: String) {
        self.socketPath = socketPath
        // The answer to a posted request (a prompt's answer): only a refusal is worth telling the user.
        client = RPCClient(connection: connection) { Output.error(CLIError($0).line) }
    }

    /// Calls a typed method.
    func call<M: RPCMethod>(_: M.Type, _ params: M.Params, onNotification: (String, JSONValue?) throws(CLIError) -> Void = { _, _ in }) throws(CLIError) -> M.Result {
        do {
            return try client.call(M.self, params) { name, params in try onNotification(name, params) }
        } catch {
            throw CLIError(error)
        }
    }

    /// Calls any method with any params; returns the raw result.
    func callRaw(_ method: String, params: some Encodable, onNotification: (String, JSONValue?) throws(CLIError) -> Void = { _, _ in }) throws(CLIError) -> JSONValue {
        do {
            return try client.callRaw(method: method, params: params) { name, params in try onNotification(name, params) }
        } catch {
            throw CLIError(error)
        }
    }

    /// Sends a request without waiting for its response (from inside a notification callback).
    func post<M: RPCMethod>(_: M.Type, _ params: M.Params) throws(CLIError) {
        do {
            try client.post(M.self, params)
        } catch {
            throw CLIError(error)
        }
    }

    /// Waits for the next notification of a followed stream. A followed stream ends only when
    /// the person stops authctl: the daemon closing it (stopped, restarted, or the connection
    /// lost) is a failure that says so (`daemon.closed`, exit 69).
    func nextNotification() throws(CLIError) -> (String, JSONValue?) {
        let next: (method: String, params: JSONValue?)?
        do {
            next = try client.nextNotification()
        } catch where error.code == .receiveFailed {
            next = nil
        } catch {
            throw CLIError(error)
        }
        guard let next else {
            throw CLIError(message: "authd closed the connection, which ends the stream (the daemon stopped or restarted); run the command again",
                           reason: "daemon.closed", exitCode: .unavailable)
        }
        return next
    }
}

extension CLIError {
    /// The ways to start a daemon, for a person who has none running.
    static let startingTheDaemon =
        "To start one: 'make run' (or 'make run-hub', a hub and its devices) in the source tree, 'systemctl --user start authd.socket', or 'authd --user'"

    /// A client library failure as authctl reports it.
    init(_ error: AuthdClientError) {
        if let refusal = error.daemonError {
            self.init(refusal)
            return
        }
        switch error.code {
        case .connectFailed where !error.attempts.isEmpty:
            let tried = error.attempts.map { "\($0.path) (\($0.problem))" }.joined(separator: ", ")
            self.init(message: "cannot connect to authd: tried \(tried). \(Self.startingTheDaemon)", reason: "daemon.unavailable", exitCode: .unavailable)
        case .connectFailed:
            let reason = String(cString: strerror(error.errno ?? 0))
            self.init(message: "cannot connect to authd at \(error.socketPath ?? "?"): \(reason); is the daemon running? \(Self.startingTheDaemon)",
                      reason: "daemon.unavailable", exitCode: .unavailable)
        case .sendFailed:
            self.init(message: "lost the connection to authd while sending", reason: "daemon.unavailable", exitCode: .unavailable)
        case .lineTooLong:
            self.init(message: "the daemon sent an over-long line", reason: "client.bad_response", exitCode: .failure)
        case .malformedMessage:
            self.init(message: error.detail ?? error.description, reason: "client.bad_response", exitCode: .failure)
        case .unreadableResult:
            self.init(message: "the daemon's answer to \(error.method ?? "?") cannot be read (\(error.underlying.map { "\($0)" } ?? ""))", reason: "client.bad_response", exitCode: .failure)
        case .unencodableParams:
            self.init(message: "cannot encode the request: \(error.underlying.map { "\($0)" } ?? "")", reason: "client.bad_request", exitCode: .usage)
        case .notificationHandlerFailed:
            // The handlers authctl passes throw only CLIError (prompting, and posting answers).
            self = error.underlying as? CLIError ?? CLIError(message: error.description, reason: nil, exitCode: .failure)
        default:
            // .closed, .receiveFailed, .timedOut (authctl sets no timeout): every failed read.
            self.init(message: "authd closed the connection", reason: "daemon.closed", exitCode: .unavailable)
        }
    }
}
