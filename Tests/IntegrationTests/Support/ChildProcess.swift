import CLinux
import Glibc

/// Starting and stopping the helper processes of the test rigs (pcscd, the virtual card,
/// dbus-daemon, the fprintd stand-in): posix_spawn rather than Foundation's Process, which
/// blocks in waitpid beside children such as systemd-socket-activate.
enum ChildProcess {
    enum Output {
        case file(String)
        case pipe(Int32)
    }

    /// posix_spawn with stdin from `stdin` (or /dev/null), stdout as given, stderr to `stderr` (or with stdout
    /// when that is a file), and no other descriptor of ours.
    static func spawn(_ arguments: [String], environment: [String], stdin: Int32? = nil, stdout: Output, stderr: String? = nil) throws -> pid_t {
        ignoreBrokenPipes()
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let stdin {
            posix_spawn_file_actions_adddup2(&actions, stdin, 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        switch stdout {
        case .file(let path):
            posix_spawn_file_actions_addopen(&actions, 1, path, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        case .pipe(let fd):
            posix_spawn_file_actions_adddup2(&actions, fd, 1)
        }
        if let stderr {
            posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        } else {
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        }
        authd_spawn_close_from(&actions, 3)
        var attributes = Self.cleanSignals()
        defer { posix_spawnattr_destroy(&attributes) }
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, arguments[0], &actions, &attributes, argv, envp)
        guard status == 0 else { throw HarnessError("posix_spawn \(arguments[0]): \(String(cString: strerror(status)))") }
        return pid
    }

    /// Makes a write to a pipe whose reader has gone fail with EPIPE where it is made, instead
    /// of ending the whole test process (every test in it) with SIGPIPE: a child that exits
    /// before reading its stdin fails one test. Each way the tests start a child calls this
    /// first. Children started here get every signal back at its default (`cleanSignals`);
    /// those Foundation's `Process` starts keep SIGPIPE ignored, as authd does for itself.
    static func ignoreBrokenPipes() {
        signal(SIGPIPE, SIG_IGN)
    }

    /// Spawn attributes that start a child with no signal blocked and every signal at its
    /// default action, as a shell starts a command (with `flags` too). Without them a child
    /// inherits the mask of the thread that spawns it, and the threads of the cooperative pool
    /// block nearly every signal (a `make` run's shell had SIGTERM blocked).
    static func cleanSignals(flags: Int16 = 0) -> posix_spawnattr_t {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, flags | Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        return attributes
    }

    /// Waits for `pid` to exit, at most `timeout`: its exit status (128 + the signal for one
    /// killed by a signal), or nil while it still runs (`.zero`: looks once).
    static func waitForExit(_ pid: pid_t, within timeout: Duration) -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while true {
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid { return (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f) }
            guard ContinuousClock.now < deadline else { return nil }
            usleep(10_000)
        }
    }

    /// SIGKILL and wait. Also reaps a process that already exited (the mock after "MOCK: quit").
    static func reap(_ pid: pid_t) {
        kill(pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
    }
}
