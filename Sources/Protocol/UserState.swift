/// Where a user's state lives, by the XDG base directory rule: `$XDG_STATE_HOME` when it is an
/// absolute path, else `~/.local/state`. A user-mode authd keeps its store in `authd/` there, and
/// authctl the session it signed in with in `authctl/session`, which the desktop agent reads too.
public enum UserState {
    public static func directory(environment: [String: String], home: String) -> String {
        environment["XDG_STATE_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? home + "/.local/state"
    }

    /// The session authctl keeps (unless told another file with `--session-file`).
    public static func authctlSession(environment: [String: String], home: String) -> String {
        directory(environment: environment, home: home) + "/authctl/session"
    }
}
