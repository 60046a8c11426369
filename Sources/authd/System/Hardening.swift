import CLinux
import Glibc

/// Process-wide protections applied before any secret is loaded.
enum Hardening {
    /// No core dumps, no ptrace attach by same-uid processes, a private umask, SIGPIPE ignored
    /// (writes to closed sockets return EPIPE instead), and the descriptor limit raised so
    /// thousands of idle clients can be held.
    static func apply() -> [String] {
        var warnings: [String] = []
        if authd_set_rlimit_core_zero() != 0 { warnings.append("setrlimit(RLIMIT_CORE): \(String(cString: strerror(errno)))") }
        // PR_SET_DUMPABLE 0 also makes /proc/self owned by root and blocks ptrace attach.
        if authd_disable_dumping() != 0 { warnings.append("prctl(PR_SET_DUMPABLE): \(String(cString: strerror(errno)))") }
        umask(0o077)
        signal(SIGPIPE, SIG_IGN)
        if authd_raise_nofile_limit() < 0 { warnings.append("setrlimit(RLIMIT_NOFILE): \(String(cString: strerror(errno)))") }
        return warnings
    }
}
