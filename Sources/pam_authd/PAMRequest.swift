import AuthdClient
import CPAM
import Glibc
import Protocol

/// One call of the module: the user and origin from PAM, one connection to the system authd,
/// authd's prompts as PAM conversation messages, and authd's answer as a PAM code.
struct PAMRequest {
    let handle: OpaquePointer
    let flags: Int32
    let options: ModuleOptions
    /// When PAM called the module: authd's time to answer counts from here.
    let called = ContinuousClock.now

    /// PAM_SILENT: no informational messages (secrets are still asked for).
    private var silent: Bool { UInt32(bitPattern: flags) & UInt32(PAM_SILENT) != 0 }

    /// Why authd could not be asked.
    struct Unavailable: Error {
        let why: String
    }

    // MARK: Entry points

    func authenticate() -> Int32 {
        if !options.unknown.isEmpty { log(LOG_WARNING, "unknown arguments ignored: \(options.unknown.joined(separator: " "))") }
        guard let user = user() else { return PAM_USER_UNKNOWN }
        let client: RPCClient
        do {
            client = try connect()
        } catch {
            log(LOG_NOTICE, "authd is not available (\(error.why)); the next line of the stack decides")
            return PAM_AUTHINFO_UNAVAIL
        }
        var conversation = Conversation(request: self)
        let outcome: Incoming.Outcome
        do {
            outcome = try client.request(method: PAMAuthenticate.name, params: params(user)) { method, params in
                try conversation.relay(method, params, client: client)
            }
        } catch {
            log(LOG_ERR, "the request to authd failed: \(error)")
            return conversation.failed ? PAM_CONV_ERR : PAM_AUTHINFO_UNAVAIL
        }
        switch outcome {
        case .result(let result):
            if options.debug { log(LOG_INFO, "\(user) proved by \(result["method"]?.stringValue ?? "?")") }
            return PAM_SUCCESS
        case .error(let error):
            let code = conversation.failed ? PAM_CONV_ERR : authenticationCode(error.reason)
            log(code == PAM_AUTHINFO_UNAVAIL ? LOG_NOTICE : LOG_INFO, "\(user): \(error.reason): \(error.message)")
            // A user this module has nothing for hears nothing from it: the stack goes on quietly.
            let unknown = error.reason == .pamNoMethod || error.reason == .pamUnknownUser
            if (code == PAM_AUTH_ERR || code == PAM_MAXTRIES) && !unknown { say(PAM_ERROR_MSG, error.message) }
            return code
        }
    }

    func checkAccount() -> Int32 {
        guard let user = user() else { return PAM_USER_UNKNOWN }
        let client: RPCClient
        do {
            client = try connect()
        } catch {
            // authd being down must not lock everyone out of a machine whose stack requires this
            // line: this module then has no say, and pam_unix's account check stands.
            log(LOG_NOTICE, "authd is not available (\(error.why)); no account decision")
            return PAM_IGNORE
        }
        let outcome: Incoming.Outcome
        do {
            outcome = try client.request(method: PAMAccount.name, params: params(user))
        } catch {
            log(LOG_ERR, "the request to authd failed: \(error)")
            return PAM_IGNORE
        }
        switch outcome {
        case .result:
            return PAM_SUCCESS
        case .error(let error):
            log(LOG_INFO, "\(user): \(error.reason): \(error.message)")
            switch error.reason {
            case .pamAccountDeactivated:
                say(PAM_ERROR_MSG, error.message)
                return PAM_ACCT_EXPIRED
            case .accountLocked:
                say(PAM_ERROR_MSG, error.message)
                return PAM_PERM_DENIED
            case .pamUnknownUser:
                return options.ignoreUnknownUser ? PAM_USER_UNKNOWN : PAM_IGNORE
            default:
                return PAM_IGNORE
            }
        }
    }

    /// The PAM code an admin expects for authd's refusal of `pam.authenticate`.
    func authenticationCode(_ reason: Reason) -> Int32 {
        switch reason {
        case .pamNoMethod, .pamUnknownUser:
            // A user this module has nothing for: only with ignore_unknown_user is that "unknown".
            options.ignoreUnknownUser ? PAM_USER_UNKNOWN : PAM_AUTH_ERR
        case .accountLocked, .pinBlocked, .biometricCutOff:
            PAM_MAXTRIES
        case .forbidden, .serverBusy, .shuttingDown, .internal, .cardNoReader, .cardServiceUnavailable, .cardError,
             .biometricUnavailable, .biometricFailed:
            // authd cannot decide (this program is not root, or a reader failed): let the stack go on.
            PAM_AUTHINFO_UNAVAIL
        default:
            PAM_AUTH_ERR
        }
    }

    // MARK: PAM items

    /// The user PAM authenticates (asked for by libpam's own prompt when the application set none).
    private func user() -> String? {
        var name: UnsafePointer<CChar>?
        guard pam_get_user(handle, &name, nil) == PAM_SUCCESS, let name else { return nil }
        let user = String(cString: name)
        return user.isEmpty ? nil : user
    }

    private func item(_ type: Int32) -> String? {
        authd_pam_string_item(handle, type).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
    }

    private func params(_ user: String) -> PAMAuthenticate.Params {
        PAMAuthenticate.Params(user: user, service: item(PAM_SERVICE) ?? "other", tty: item(PAM_TTY), rhost: item(PAM_RHOST))
    }

    // MARK: authd

    /// A connection to authd that answered `hello` within the connect timeout and serves `pam`.
    /// The socket must be root's, and so must the process that listens on it (for the packaged
    /// socket unit, the service manager): anyone else could collect the PINs and passwords.
    private func connect() throws(Unavailable) -> RPCClient {
        let path = options.socketPath
        var info = stat()
        guard lstat(path, &info) == 0 else { throw Unavailable(why: "\(path): \(String(cString: strerror(errno)))") }
        guard info.st_mode & S_IFMT == S_IFSOCK, info.st_uid == 0 else {
            throw Unavailable(why: "\(path) is not a socket owned by root; refused")
        }
        // One deadline for connecting, sending and authd's hello, from the module's call.
        let deadline = called + options.answerBound
        func left() -> Duration { max(deadline - ContinuousClock.now, .milliseconds(1)) }
        let bound = left()
        let connection: LineConnection
        do {
            connection = try LineConnection(socketPath: path, receiveTimeout: bound, sendTimeout: bound)
        } catch {
            throw Unavailable(why: "\(error)")
        }
        guard connection.peerUserID() == 0 else { throw Unavailable(why: "the process listening on \(path) is not root's; refused") }
        let client = RPCClient(connection: connection)
        do {
            connection.setReceiveTimeout(left())
            let hello = try client.call(Hello.self, NoParams())
            guard hello.features.contains("pam") else { throw Unavailable(why: "this authd does not serve pam_authd (no pam feature)") }
            // From here on the waits are a person's (a PIN typed, a card found, a finger): the
            // daemon's own windows bound them; this only guards against a daemon that hangs.
            connection.setReceiveTimeout(.seconds(900))
        } catch let unavailable as Unavailable {
            throw unavailable
        } catch {
            throw Unavailable(why: "\(error)")
        }
        return client
    }

    // MARK: Conversation

    /// Shows `text` through the application's conversation (`PAM_TEXT_INFO`, `PAM_ERROR_MSG`).
    func say(_ style: Int32, _ text: String) {
        guard !silent || style == PAM_ERROR_MSG else { return }
        var response: UnsafeMutablePointer<CChar>?
        _ = authd_pam_prompt(handle, style, &response, text)
        free(response)
    }

    /// Asks `text` without echo; the answer is copied out and the conversation's buffer wiped.
    func askSecret(_ text: String) -> String? {
        var response: UnsafeMutablePointer<CChar>?
        guard authd_pam_prompt(handle, PAM_PROMPT_ECHO_OFF, &response, text) == PAM_SUCCESS, let response else { return nil }
        defer {
            explicit_bzero(response, strlen(response))
            free(response)
        }
        return String(cString: response)
    }

    func log(_ priority: Int32, _ text: String) {
        authd_pam_syslog(handle, priority, "pam_authd: " + text)
    }
}

/// authd's prompts, relayed: a question as `PAM_PROMPT_ECHO_OFF` (every question authd asks is a
/// secret), progress ("Place your ID card…", "Touch the fingerprint reader…") as `PAM_TEXT_INFO`,
/// shown once per prompt unless its words change (a countdown's seconds are not a change).
struct Conversation {
    let request: PAMRequest
    /// The conversation failed (the application could not ask): the prompt was cancelled.
    private(set) var failed = false
    private var shown: [String: String] = [:]

    init(request: PAMRequest) { self.request = request }

    mutating func relay(_ method: String, _ params: JSONValue?, client: RPCClient) throws {
        guard method == PromptNotification.name, let params,
              let id = params["prompt_id"]?.stringValue, let message = params["message"]?.stringValue else { return }
        guard params["expects_answer"] == .bool(true) else {
            let words = String(message.unicodeScalars.filter { !("0"..."9").contains($0) })
            if shown[id] != words {
                shown[id] = words
                request.say(PAM_TEXT_INFO, message)
            }
            return
        }
        guard let answer = request.askSecret(message) else {
            failed = true
            try client.post(PromptCancel.self, .init(promptId: id))
            return
        }
        try client.post(PromptAnswer.self, .init(promptId: id, value: answer))
    }
}
