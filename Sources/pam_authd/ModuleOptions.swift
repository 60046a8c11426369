import Protocol

/// The arguments of a `pam_authd.so` line in a PAM stack (pam_authd(8)).
struct ModuleOptions: Equatable {
    /// The system daemon's socket; `socket=PATH` replaces it (tests, a second daemon).
    var socketPath = DaemonSocket.systemPath
    /// A user with no method for the service gets PAM_USER_UNKNOWN (the stack goes on as for
    /// any user this module does not know), instead of PAM_AUTH_ERR.
    var ignoreUnknownUser = false
    /// Within how long of being called the module answers PAM_AUTHINFO_UNAVAIL when authd does
    /// not answer at all, in milliseconds: short, so a `sufficient` line falls through to
    /// pam_unix at once.
    var connectTimeoutMilliseconds = 1000
    /// Log each decision to syslog (never a secret).
    var debug = false
    /// Arguments this module does not know, logged once so a typo in a stack is seen.
    var unknown: [String] = []

    /// What of `connect_timeout` authd has to answer `hello`, counted from the module's call:
    /// all but 300 ms (at least half), which are the module's own start and the application's
    /// return, so the promise holds as the application measures it.
    var answerBound: Duration {
        .milliseconds(max(connectTimeoutMilliseconds / 2, connectTimeoutMilliseconds - 300))
    }

    init(arguments: [String]) {
        for argument in arguments {
            if argument.hasPrefix("socket="), argument.count > 7, argument.dropFirst(7).hasPrefix("/") {
                socketPath = String(argument.dropFirst(7))
            } else if argument == "ignore_unknown_user" {
                ignoreUnknownUser = true
            } else if argument.hasPrefix("connect_timeout="), let milliseconds = Int(argument.dropFirst(16)), (1...10_000).contains(milliseconds) {
                connectTimeoutMilliseconds = milliseconds
            } else if argument == "debug" {
                debug = true
            } else {
                unknown.append(argument)
            }
        }
    }
}
