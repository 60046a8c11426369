/// Process-wide protections applied before any secret is loaded.
enum Hardening {
    /// No core dumps, no ptrace attach by same-uid processes, a private umask, SIGPIPE ignored
    /// (writes to closed sockets return EPIPE instead), and the descriptor limit raised so
    /// thousands of idle clients can be held. Returns what could not be done, one line each.
    static func apply() -> [String] {
        var warnings: [String] = []
        do { try Syscalls.disableCoreDumps() } catch { warnings.append("\(error)") }
        // PR_SET_DUMPABLE 0 also makes /proc/self owned by root and blocks ptrace attach.
        do { try Syscalls.disableDumping() } catch { warnings.append("\(error)") }
        Syscalls.setFileCreationMask(0o077)
        Syscalls.ignoreBrokenPipes()
        do { try Syscalls.raiseDescriptorLimit() } catch { warnings.append("\(error)") }
        return warnings
    }
}
