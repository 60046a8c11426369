import AuthdClient
import Dispatch
import FoundationEssentials
import Glibc
import Protocol
import Synchronization

/// What the desktop agent does with a call an app makes on the session bus (``AgentBus``): it
/// passes it on to authd as that app's (`desktop.forward` with the pid the bus vouched for), on a
/// connection of its own, turns authd's progress into the caller's `Progress` signals, and answers
/// with the token or authd's reason. authd reads who the app is and asks the person on the
/// desktop itself; the agent never sees a PIN of it. An account token uses the session authctl
/// keeps for this user (`$XDG_STATE_HOME/authctl/session`).
struct AgentForwarder: Sendable {
    let socketPath: String
    let environment: [String: String]
    /// The agent's registration, which names it to authd as this user's agent.
    let token: AgentToken

    func handle(_ call: AgentBusCall) async -> Result<String, AgentBusFailure> {
        let method: String
        let params: JSONValue
        do {
            switch call.request {
            case .cardLogin(let audience, let nonce):
                (method, params) = (CardLogin.name, try Self.json(CardLogin.Params(aud: audience, nonce: nonce)))
            case .cardSign(let audience, let description, let hashAlg, let hash):
                (method, params) = (CardSign.name, try Self.json(CardSign.Params(aud: audience, hash: hash, hashAlg: hashAlg, description: description)))
            case .accountToken(let audience, let nonce):
                guard let session = sessionToken() else {
                    return .failure(AgentBusFailure(reason: Reason.sessionInvalid.rawValue,
                                                    message: "This user is not signed in to an authd account on this machine (authctl login)."))
                }
                (method, params) = (AuthToken.name, try Self.json(AuthToken.Params(session: session, aud: audience, nonce: nonce)))
            }
        } catch {
            return .failure(AgentBusFailure(reason: Reason.internal.rawValue, message: "The request could not be encoded."))
        }
        guard let agentToken = token.current else {
            return .failure(AgentBusFailure(reason: "daemon.unavailable", message: "The desktop agent is not registered with authd at \(socketPath) yet."))
        }
        let forwarded = DesktopForward.Params(agentToken: agentToken, pid: call.pid, method: method, params: params)
        let open = OpenConnection()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<String, AgentBusFailure>, Never>) in
                DispatchQueue.global().async {
                    continuation.resume(returning: Self.run(forwarded, socketPath: socketPath, progress: call.progress, open: open))
                }
            }
        } onCancel: {
            open.shutDown()
        }
    }

    /// The call on a connection of its own (blocking): the token, or why not.
    private static func run(_ forwarded: DesktopForward.Params, socketPath: String,
                            progress: @Sendable (String, String, Int?) -> Void, open: OpenConnection) -> Result<String, AgentBusFailure> {
        do {
            let connection = try LineConnection(socketPath: socketPath)
            guard open.hold(connection) else { return .failure(AgentBusFailure(reason: "request.cancelled", message: "The caller left.")) }
            defer { open.release() }
            let outcome = try RPCClient(connection: connection).request(method: DesktopForward.name, params: forwarded) { name, params in
                guard name == PromptNotification.name, let params, let prompt = try? WireCodec.decode(PromptNotification.Params.self, from: params) else { return }
                progress(prompt.kind.rawValue, prompt.message, prompt.secondsLeft)
            }
            switch outcome {
            case .result(let value):
                guard let token = value["token"]?.stringValue else {
                    return .failure(AgentBusFailure(reason: Reason.internal.rawValue, message: "authd answered without a token."))
                }
                return .success(token)
            case .error(let error):
                return .failure(AgentBusFailure(reason: error.reason.rawValue, message: error.message))
            }
        } catch {
            return .failure(AgentBusFailure(reason: "daemon.unavailable", message: "authd cannot be reached at \(socketPath): \(error)"))
        }
    }

    private static func json(_ value: some Encodable) throws -> JSONValue {
        try WireCodec.decode(JSONValue.self, from: WireCodec.encodeJSON(value))
    }

    /// The session authctl keeps for this user, when there is one.
    private func sessionToken() -> String? {
        let path = UserState.authctlSession(environment: environment, home: environment["HOME"] ?? Syscalls.homeDirectory() ?? "/nonexistent")
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = read(fd, &buffer, buffer.count)
        defer { buffer.withUnsafeMutableBytes { LineConnection.wipe($0) } }
        guard count > 0 else { return nil }
        let token = String(decoding: buffer.prefix(count).prefix { $0 > 0x20 }, as: UTF8.self)
        return token.isEmpty ? nil : token
    }
}

/// The connection of one forwarded call, which a cancellation shuts down from another thread.
private final class OpenConnection: @unchecked Sendable {
    // @unchecked: `connection` and `cancelled` are touched only under `lock`; the connection is
    // used by the one blocking thread, and `shutDown` (thread-safe) is all others call on it.
    private let lock = Mutex(())
    private var connection: LineConnection?
    private var cancelled = false

    /// False when the call was cancelled before it began.
    func hold(_ opened: LineConnection) -> Bool {
        lock.withLock { _ in
            guard !cancelled else { return false }
            connection = opened
            return true
        }
    }

    func release() { lock.withLock { _ in connection = nil } }

    func shutDown() {
        lock.withLock { _ in
            cancelled = true
            connection?.shutDown()
        }
    }
}
