import CLinux
import Foundation
import Glibc

/// A program run on a pseudo-terminal of its own, which is its controlling terminal (so its
/// /dev/tty) and its stdin, stdout and stderr: what a person at a terminal sees and types.
/// Answers are typed only once their question has appeared, because a prompt that turns echo
/// off flushes whatever was typed before it (TCSAFLUSH). Every wait is bounded.
final class TerminalSession {
    private let master: Int32
    /// Our own descriptor of the terminal, so that its master side never reads as hung up
    /// before the program has opened it or after it ended.
    private let terminal: Int32
    private let pid: pid_t
    private var exitStatus: Int32?
    /// Everything the program wrote to the terminal so far.
    private(set) var transcript = ""
    /// Where the next `expect` starts looking, so a question asked twice is waited for twice.
    private var consumed: String.Index

    init(_ arguments: [String], environment: [String: String]) throws {
        // posix_openpt, unlockpt and ptsname are not imported into Swift; what they do on Linux
        // is open /dev/ptmx, TIOCSPTLCK(0) and TIOCGPTN (ioctl numbers from asm-generic/ioctls.h).
        let master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        var unlock: CInt = 0
        var number: CUnsignedInt = 0
        guard master >= 0, ioctl(master, 0x4004_5431, &unlock) == 0, ioctl(master, 0x8004_5430, &number) == 0 else {
            throw HarnessError("no pseudo-terminal: \(String(cString: strerror(errno)))")
        }
        self.master = master
        let terminal = "/dev/pts/\(number)"
        self.terminal = open(terminal, O_RDWR | O_NOCTTY | O_CLOEXEC)
        // POSIX_SPAWN_SETSID (glibc's 0x80, not imported into Swift): a new session, whose first
        // terminal opened below becomes its controlling terminal.
        var attributes = ChildProcess.cleanSignals(flags: 0x80)
        defer { posix_spawnattr_destroy(&attributes) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, terminal, O_RDWR, 0)
        posix_spawn_file_actions_adddup2(&actions, 0, 1)
        posix_spawn_file_actions_adddup2(&actions, 0, 2)
        authd_spawn_close_from(&actions, 3)
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.merging(DaemonHarness.sanitizerOptions) { own, _ in own }.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, arguments[0], &actions, &attributes, argv, envp)
        guard status == 0 else {
            close(master)
            close(self.terminal)
            throw HarnessError("posix_spawn \(arguments[0]): \(String(cString: strerror(status)))")
        }
        self.pid = pid
        consumed = transcript.startIndex
    }

    deinit {
        if exitStatus == nil { ChildProcess.reap(pid) }
        close(master)
        close(terminal)
    }

    /// Reads what arrives within `milliseconds`; whether anything did.
    @discardableResult
    private func read(milliseconds: Int32) -> Bool {
        var poller = pollfd(fd: master, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, milliseconds) > 0 else { return false }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = Glibc.read(master, &buffer, buffer.count)
        guard count > 0 else { return false }
        let offset = transcript.distance(from: transcript.startIndex, to: consumed)
        transcript += String(decoding: buffer.prefix(count), as: UTF8.self)
        consumed = transcript.index(transcript.startIndex, offsetBy: offset)
        return true
    }

    /// Waits (at most `seconds`) until `text` appears after what earlier waits found.
    func expect(_ text: String, seconds: Double = 20) throws {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            if let found = transcript.range(of: text, range: consumed..<transcript.endIndex) {
                consumed = found.upperBound
                return
            }
            guard Date() < deadline else { throw HarnessError("\"\(text)\" never appeared; the terminal shows: \(transcript)") }
            read(milliseconds: 100)
        }
    }

    /// Types `line` and Enter.
    func type(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(master, $0.baseAddress, $0.count) }
    }

    /// Waits for `question` and for the program to turn echo off (as a PIN entry does before it
    /// reads: what is typed earlier is flushed), then types `line`.
    func answerSecret(_ question: String, _ line: String, seconds: Double = 20) throws {
        try expect(question, seconds: seconds)
        let deadline = Date().addingTimeInterval(seconds)
        var modes = termios()
        while tcgetattr(terminal, &modes) == 0 && modes.c_lflag & tcflag_t(ECHO) != 0 {
            guard Date() < deadline else { throw HarnessError("echo stayed on after \"\(question)\"; the terminal shows: \(transcript)") }
            read(milliseconds: 10)
        }
        type(line)
    }

    /// Waits for `question`, then types `line`.
    func answer(_ question: String, _ line: String) throws {
        try expect(question)
        type(line)
    }

    /// Waits (at most `seconds`) for the program to end, reading what it still writes; its exit status.
    func finish(seconds: Double = 20) throws -> Int32 {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                while read(milliseconds: 50) {}
                exitStatus = (status >> 8) & 0xFF
                return exitStatus!
            }
            read(milliseconds: 50)
        }
        throw HarnessError("the program did not end; the terminal shows: \(transcript)")
    }
}
