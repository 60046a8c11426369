import FoundationEssentials
import Protocol

/// Where authd runs: a person's session (`user`) or the machine (`system`).
enum Mode: String, Sendable {
    case user, system
}

/// The daemon's command line, environment and the paths they resolve to (DESIGN §4).
/// Precedence: flag, then environment variable, then the mode's default.
struct DaemonOptions: Sendable, Equatable {
    var mode: Mode
    var socketPath: String
    var stateDirectory: String
    var configPath: String
    /// Only validate the configuration file and exit (`--check-config`).
    var checkConfigOnly = false

    static let usage = """
        Usage: authd [--user | --system] [--socket PATH] [--state-dir DIR] [--config FILE]
               authd --check-config [--config FILE]
               authd --desktop [--socket PATH] [--pinentry PATH]
               authd --version | --help

        The authentication daemon. Runs in the foreground; logs to journald or stderr.

          --user            per-user daemon (default): $XDG_RUNTIME_DIR/authd/authd.sock,
                            without XDG_RUNTIME_DIR /tmp/authd-UID/authd/authd.sock
          --system          machine-wide daemon: /run/authd/authd.sock, /var/lib/authd
          --socket PATH     listening socket          (env AUTHD_SOCKET)
          --state-dir DIR   store and key file        (env AUTHD_STATE_DIR)
          --config FILE     configuration, authd.conf(5) (env AUTHD_CONFIG)
          --check-config    validate the configuration and exit (0 valid, 1 invalid)
          --desktop         this user's desktop agent: asks authd's questions (PIN, CAN,
                            consent) through pinentry, serves org.authd.Desktop on the
                            session bus, shows authd's notifications (run in the user's
                            session; default socket /run/authd/authd.sock)
          --pinentry PATH   the agent's pinentry (default: authd's [prompts] pinentry,
                            else pinentry on the PATH)
          --version         print the version and exit

        See authd(8).
        """

    enum ParseOutcome: Equatable {
        case run(DaemonOptions)
        /// `authd --desktop`: the desktop of the user it runs as, for the authd at `socketPath`;
        /// `pinentry` when given.
        case desktop(socketPath: String, pinentry: String?)
        case exit(message: String, status: Int32)
    }

    /// `userID` is the user the daemon runs as, whose socket a user-mode daemon places by
    /// ``DaemonSocket``'s rule.
    static func parse(_ arguments: [String], environment: [String: String], userID: UInt32 = Syscalls.effectiveUserID()) -> ParseOutcome {
        var mode = Mode.user
        var socket: String?
        var state: String?
        var config: String?
        var check = false
        var desktop = false
        var pinentry: String?
        var others: [String] = []
        var remaining = arguments[...]
        while let argument = remaining.popFirst() {
            // `--name=value` or `--name value`; an empty inline value stays empty (and is refused).
            let parts = argument.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0])
            let inline = parts.count > 1 ? String(parts[1]) : nil
            let knownFlag = ["--user", "--system", "--check-config", "--desktop", "--version", "--help", "-h"].contains(name)
            if knownFlag && inline != nil {
                return .exit(message: "authd: \(name) takes no value\n\(usage)", status: 2)
            }
            func value() -> String? {
                let value = inline ?? remaining.popFirst()
                return value?.isEmpty == false ? value : nil
            }
            if !["--socket", "--desktop", "--pinentry"].contains(name) { others.append(name) }
            switch name {
            case "--desktop": desktop = true
            case "--pinentry": pinentry = value()
                guard let pinentry, pinentry.hasPrefix("/") else { return .exit(message: "authd: --pinentry needs an absolute path\n\(usage)", status: 2) }
            case "--user": mode = .user
            case "--system": mode = .system
            case "--socket": socket = value()
                if socket == nil { return .exit(message: "authd: --socket needs a path\n\(usage)", status: 2) }
            case "--state-dir": state = value()
                if state == nil { return .exit(message: "authd: --state-dir needs a directory\n\(usage)", status: 2) }
            case "--config": config = value()
                if config == nil { return .exit(message: "authd: --config needs a file\n\(usage)", status: 2) }
            case "--check-config": check = true
            case "--version": return .exit(message: "authd \(DaemonVersion.string)", status: 0)
            case "--help", "-h": return .exit(message: usage, status: 0)
            default: return .exit(message: "authd: unknown argument '\(Redaction.printable(argument, limit: 80))'\n\(usage)", status: 2)
            }
        }
        socket = socket ?? environment["AUTHD_SOCKET"]
        if desktop {
            guard others.isEmpty else { return .exit(message: "authd: --desktop takes only --socket and --pinentry, not \(others[0])\n\(usage)", status: 2) }
            let path = socket ?? DaemonSocket.systemPath
            guard path.hasPrefix("/") else { return .exit(message: "authd: the socket path must be absolute: \(path)", status: 2) }
            return .desktop(socketPath: path, pinentry: pinentry)
        }
        if pinentry != nil { return .exit(message: "authd: --pinentry is for --desktop\n\(usage)", status: 2) }
        state = state ?? environment["AUTHD_STATE_DIR"]
        config = config ?? environment["AUTHD_CONFIG"]

        let home = environment["HOME"] ?? Syscalls.homeDirectory() ?? "/"
        switch mode {
        case .system:
            socket = socket ?? DaemonSocket.systemPath
            state = state ?? environment["STATE_DIRECTORY"] ?? "/var/lib/authd"
            config = config ?? "/etc/authd/authd.conf"
        case .user:
            socket = socket ?? DaemonSocket.userPath(environment: environment, userID: userID)
            state = state ?? UserState.directory(environment: environment, home: home) + "/authd"
            config = config ?? (environment["XDG_CONFIG_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? home + "/.config") + "/authd/authd.conf"
        }
        for (name, path) in [("socket", socket!), ("state directory", state!), ("config", config!)] where !path.hasPrefix("/") {
            return .exit(message: "authd: the \(name) path must be absolute: \(path)", status: 2)
        }
        return .run(DaemonOptions(mode: mode, socketPath: socket!, stateDirectory: state!, configPath: config!, checkConfigOnly: check))
    }

    /// The shared-directory runtime directory (`/tmp/authd-UID`) the socket lies in, if it does:
    /// the daemon uses it only as a private directory of its own.
    var sharedRuntimeDirectory: String? {
        let directory = DaemonSocket.fallbackDirectory(userID: Syscalls.effectiveUserID())
        return mode == .user && socketPath.hasPrefix(directory + "/") ? directory : nil
    }

    var databasePath: String { stateDirectory + "/authd.db" }
    /// Where the `spool` SMS backend writes its messages.
    var smsSpoolDirectory: String { stateDirectory + "/sms-spool" }
    var keyFilePath: String { stateDirectory + "/master.key" }
}

enum DaemonVersion {
    static let string = AuthdRelease.version
}
