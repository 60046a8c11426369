import Foundation
import Glibc
import Protocol

/// Reading answers from the person at the terminal, or from a file descriptor for scripts
/// (`--code-fd 3`, `--password-fd 4`), never from the command line where `ps` shows them.
enum Prompt {
    /// One line from `fd` (without its newline), at most 4096 bytes.
    static func readLine(fd: Int32) throws(CLIError) -> String {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while bytes.count < 4096 {
            let count = read(fd, &byte, 1)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else {
                if bytes.isEmpty { throw CLIError(message: "nothing to read on file descriptor \(fd)", reason: "user.cancelled", exitCode: .cancelled) }
                break
            }
            if byte == UInt8(ascii: "\n") { break }
            bytes.append(byte)
        }
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Asks on the terminal (/dev/tty), echo off when `secret`. Ctrl-D cancels.
    static func ask(_ question: String, secret: Bool) throws(CLIError) -> String {
        let tty = open("/dev/tty", O_RDWR | O_CLOEXEC)
        guard tty >= 0 else {
            throw CLIError.usage("no terminal to ask on; pass the answer with the matching --*-fd option")
        }
        defer { close(tty) }
        var saved = termios()
        let canHide = tcgetattr(tty, &saved) == 0
        if secret && canHide {
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            // Ctrl-C while echo is off must not leave the terminal silent.
            TerminalGuard.arm(fd: tty, settings: saved)
            tcsetattr(tty, TCSAFLUSH, &quiet)
        }
        defer {
            if secret && canHide {
                tcsetattr(tty, TCSAFLUSH, &saved)
                TerminalGuard.disarm()
                _ = write(tty, "\n", 1)
            }
        }
        _ = question.withCString { write(tty, $0, strlen($0)) }
        return try readLine(fd: tty)
    }

    /// From `--NAME-fd` when given, else asked on the terminal.
    static func answer(_ invocation: Invocation, fdOption: String, question: String, secret: Bool) throws(CLIError) -> String {
        if let text = invocation.value(fdOption) {
            guard let fd = Int32(text), fd >= 0 else { throw .usage("--\(fdOption) needs a file descriptor number") }
            return try readLine(fd: fd)
        }
        return try ask(question, secret: secret)
    }
}

/// Restores the terminal's settings if SIGINT or SIGTERM arrives while a secret is being typed
/// with echo off, then exits with 130 like an interrupted shell command.
enum TerminalGuard {
    // Written before the handler is installed and only read inside it: the handler can run
    // only between arm and disarm, on this single-threaded CLI.
    nonisolated(unsafe) static var fd: Int32 = -1
    nonisolated(unsafe) static var settings = termios()

    static func arm(fd: Int32, settings: termios) {
        Self.fd = fd
        Self.settings = settings
        for number in [SIGINT, SIGTERM] {
            signal(number) { _ in
                tcsetattr(TerminalGuard.fd, TCSAFLUSH, &TerminalGuard.settings)
                _ = write(TerminalGuard.fd, "\n", 1)
                _exit(130)
            }
        }
    }

    static func disarm() {
        signal(SIGINT, SIG_DFL)
        signal(SIGTERM, SIG_DFL)
    }
}

/// Where authctl keeps the session token between commands: a 0600 file in
/// `$XDG_STATE_HOME/authctl/session` (or `--session-file`). The daemon stores only its hash.
enum SessionFile {
    static func path(_ invocation: Invocation) -> String {
        if let explicit = invocation.value("session-file") { return explicit }
        let environment = ProcessInfo.processInfo.environment
        let state = environment["XDG_STATE_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? (environment["HOME"] ?? NSHomeDirectory()) + "/.local/state"
        return state + "/authctl/session"
    }

    static func save(_ token: String, invocation: Invocation) throws(CLIError) {
        let path = path(invocation)
        let directory = (path as NSString).deletingLastPathComponent
        // Parents as a fresh home may lack them (~/.local/state), the last one private.
        try? FileManager.default.createDirectory(atPath: (directory as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        mkdir(directory, 0o700)
        let temporary = path + ".new"
        unlink(temporary)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw CLIError(message: "cannot save the session in \(path): \(String(cString: strerror(errno)))", reason: nil, exitCode: .failure) }
        let bytes = Array((token + "\n").utf8)
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        guard written == bytes.count, rename(temporary, path) == 0 else {
            unlink(temporary)
            throw CLIError(message: "cannot save the session in \(path)", reason: nil, exitCode: .failure)
        }
    }

    static func load(_ invocation: Invocation) throws(CLIError) -> String {
        let path = path(invocation)
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { throw CLIError(message: "not logged in (no session in \(path))", reason: "session.invalid", exitCode: .notLoggedIn) }
        defer { close(fd) }
        return try Prompt.readLine(fd: fd)
    }

    static func remove(_ invocation: Invocation) {
        unlink(path(invocation))
    }
}

/// Runs one request and answers the `prompt` notifications it raises: secrets from `--pin-fd`,
/// `--can-fd`, `--password-fd` or the terminal without echo (Ctrl-D declines); progress ("present
/// your card", "touch the fingerprint reader") on stderr, rewritten in place on a terminal;
/// otherwise each new message once, and the card countdown every 10 s.
struct RequestPrompter {
    let invocation: Invocation
    let connection: DaemonConnection
    private let progressInPlace = isatty(STDERR_FILENO) == 1
    private var progressShown = false
    private var lastSecondsShown: Int?
    private var lastMessage: String?

    init(invocation: Invocation, connection: DaemonConnection) {
        self.invocation = invocation
        self.connection = connection
    }

    mutating func run<M: RPCMethod>(_ method: M.Type, _ params: M.Params) throws(CLIError) -> M.Result {
        defer { endProgress() }
        return try connection.call(method, params) { (name, params) throws(CLIError) in
            try self.handle(name, params)
        }
    }

    private mutating func handle(_ name: String, _ params: JSONValue?) throws(CLIError) {
        guard name == PromptNotification.name, let params,
              let prompt = try? WireCodec.decode(PromptNotification.Params.self, from: params) else { return }
        if let url = prompt.url, prompt.kind == .browser || prompt.kind == .deviceCode { return showLink(prompt, url: url) }
        guard prompt.expectsAnswer else { return showProgress(prompt) }
        endProgress()
        let fdOption = [PromptKind.can: "can-fd", .password: "password-fd", .code: "code-fd"][prompt.kind] ?? "pin-fd"
        let retries = prompt.retriesLeft.map { " (\($0) tries left)" } ?? ""
        let answer: String
        do {
            answer = try Prompt.answer(invocation, fdOption: fdOption, question: "\(prompt.message)\(retries): ", secret: prompt.kind != .code)
        } catch where error.reason == "user.cancelled" {
            // Declined (Ctrl-D, or the descriptor is empty): authd ends the request with user.cancelled.
            return try connection.post(PromptCancel.self, .init(promptId: prompt.promptId))
        }
        try connection.post(PromptAnswer.self, .init(promptId: prompt.promptId, value: answer.trimmingCharacters(in: .whitespaces)))
    }

    /// A sign-in address: printed on stderr (the person may need to copy it to another device)
    /// and, for the browser flow on a desktop, opened with xdg-open.
    private mutating func showLink(_ prompt: PromptNotification.Params, url: String) {
        endProgress()
        Output.error(prompt.message + ":")
        Output.error("  " + url)
        if let code = prompt.userCode { Output.error("  code: " + code) }
        let environment = ProcessInfo.processInfo.environment
        let desktop = !(environment["DISPLAY"] ?? "").isEmpty || !(environment["WAYLAND_DISPLAY"] ?? "").isEmpty
        guard prompt.kind == .browser, desktop, !invocation.flag("no-browser") else { return }
        var pid: pid_t = 0
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let argv = [strdup("xdg-open"), strdup(url), nil]
        defer { argv.forEach { free($0) } }
        if posix_spawnp(&pid, "xdg-open", &actions, nil, argv, environ) != 0 {
            Output.error("(could not run xdg-open; open the address yourself)")
        }
    }

    private mutating func showProgress(_ prompt: PromptNotification.Params) {
        if progressInPlace {
            FileHandle.standardError.write(Data("\r\(prompt.message)\u{1B}[K".utf8))
        } else if prompt.kind == .card ? !progressShown || (prompt.secondsLeft.map { $0 % 10 == 0 && $0 != lastSecondsShown } ?? false)
                                        : prompt.message != lastMessage {
            Output.error(prompt.message)
            lastSecondsShown = prompt.secondsLeft
        }
        lastMessage = prompt.message
        progressShown = true
    }

    private mutating func endProgress() {
        if progressShown && progressInPlace { FileHandle.standardError.write(Data("\n".utf8)) }
        progressShown = false
        lastSecondsShown = nil
        lastMessage = nil
    }
}
