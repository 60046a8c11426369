/// Where authd's socket is: the one rule by which a daemon places its socket and clients find it,
/// so that neither needs `AUTHD_SOCKET` in the common case.
///
/// A user-mode daemon listens on `$XDG_RUNTIME_DIR/authd/authd.sock`. Where there is no
/// `XDG_RUNTIME_DIR` (a root shell on a server, a container, some ssh sessions) it listens on
/// `/tmp/authd-UID/authd/authd.sock` instead; since any user can create a directory in `/tmp`,
/// the daemon uses `/tmp/authd-UID` only when it is a directory of that user's with mode 0700,
/// and a client connects there only under the same condition (see ``fallbackDirectory(userID:)``).
/// A system-mode daemon listens on ``systemPath``.
public enum DaemonSocket {
    /// The system daemon's socket.
    public static let systemPath = "/run/authd/authd.sock"

    /// The socket of `userID`'s user-mode daemon, given the environment it runs in.
    public static func userPath(environment: [String: String], userID: UInt32) -> String {
        userRuntimeDirectory(environment: environment, userID: userID) + "/authd/authd.sock"
    }

    /// `$XDG_RUNTIME_DIR` when it is set to an absolute path, else ``fallbackDirectory(userID:)``.
    public static func userRuntimeDirectory(environment: [String: String], userID: UInt32) -> String {
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") { return runtime }
        return fallbackDirectory(userID: userID)
    }

    /// `/tmp/authd-UID`: the runtime directory without `XDG_RUNTIME_DIR`. Its name is fixed, so
    /// another user can create it first; it is trusted only as a directory (not a symbolic link)
    /// owned by `userID` with mode 0700.
    public static func fallbackDirectory(userID: UInt32) -> String {
        "/tmp/authd-\(userID)"
    }

    /// The sockets a client tries, in order, when told none (no `--socket`, no `AUTHD_SOCKET`):
    /// its user's daemon, then the system daemon.
    public static func candidates(environment: [String: String], userID: UInt32) -> [String] {
        [userPath(environment: environment, userID: userID), systemPath]
    }
}
