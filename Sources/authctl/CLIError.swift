import Protocol

/// authctl's exit codes, documented in authctl(1). Scripts rely on them: never renumber.
enum ExitCode: Int32 {
    case ok = 0
    case failure = 1
    case usage = 2
    case cancelled = 3
    case timedOut = 4
    case authenticationFailed = 5
    case lockedOrBlocked = 6
    case notLoggedIn = 7
    case unavailable = 69

    /// The exit code for a daemon error reason. Exact reasons first, then families.
    static func forReason(_ reason: String) -> ExitCode {
        if Reason.sessionOver.contains(Reason(reason)) { return .notLoggedIn }
        switch reason {
        case "user.cancelled", "request.cancelled", "prompt.cancelled", "consent.denied": return .cancelled
        case "server.busy", "server.shutting_down", "daemon.unavailable", "daemon.closed", "account.busy", "prompt.no_desktop": return .unavailable
        case "pin.blocked", "account.locked", "session.locked", "card.blocked": return .lockedOrBlocked
        case "auth.failed", "pin.wrong", "otp.wrong", "otp.attempts_exhausted", "otp.expired", "otp.used", "card.can_mismatch", "biometric.no_match", "biometric.cut_off",
             "passkey.uv_failed", "passkey.invalid",
             "token.malformed", "token.bad_signature", "token.expired", "token.not_yet_valid", "token.wrong_audience", "token.unknown_key", "token.wrong_issuer":
            return .authenticationFailed
        case "card.timeout", "prompt.timeout", "biometric.timeout", "federation.timeout": return .timedOut
        case "rpc.invalid_params": return .usage
        // Every other reason, a new one included, is a plain failure until it is listed here:
        // a reason's exit code is decided, never inferred from its name.
        default: return .failure
        }
    }
}

/// A failure to report as `authctl: <message> (<reason>)` with an exit code.
struct CLIError: Error {
    var message: String
    let reason: String?
    let exitCode: ExitCode
    /// What authd says to do instead (`data.fallback`: `pin`, `otp`), when it says.
    var fallback: String?
    /// How many more wrong PINs the card takes (`data.retries_left` of `pin.wrong`), when said.
    var retriesLeft: Int?

    init(message: String, reason: String?, exitCode: ExitCode) {
        self.message = message
        self.reason = reason
        self.exitCode = exitCode
    }

    init(_ error: RPCError) {
        message = error.message
        reason = error.reason.rawValue
        exitCode = ExitCode.forReason(error.reason.rawValue)
        fallback = error.details["fallback"]?.stringValue
        retriesLeft = error.details["retries_left"]?.integerValue.map { Int($0) }
    }

    static func usage(_ message: String) -> CLIError {
        CLIError(message: message, reason: nil, exitCode: .usage)
    }

    /// The one line written to stderr.
    var line: String {
        var text = message
        while text.hasSuffix(".") { text.removeLast() }
        return reason.map { "authctl: \(text) (\($0))" } ?? "authctl: \(text)"
    }
}
