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

    /// How many times a person at the terminal may give an answer that cannot be taken (a weak
    /// new PIN, two entries that differ, a PIN the card refused) before authctl gives up, as
    /// passwd(1) does. Answers from a descriptor get one try: a script cannot type again.
    static let attempts = 3

    /// Asks on the terminal (/dev/tty), echo off when `secret`. Ctrl-D cancels. Without a
    /// terminal, the error names `fdOption`, the option that gives the answer instead.
    static func ask(_ question: String, secret: Bool, fdOption: String? = nil) throws(CLIError) -> String {
        let tty = open("/dev/tty", O_RDWR | O_CLOEXEC)
        guard tty >= 0 else {
            throw CLIError.usage(noTerminal(fdOption: fdOption))
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
        return try ask(question, secret: secret, fdOption: fdOption)
    }

    /// The error for a question with no terminal to ask it on.
    static func noTerminal(fdOption: String?) -> String {
        guard let fdOption else { return "no terminal to ask on; give the answer with the command's --…-fd option (see its --help)" }
        return "no terminal to ask on; give the answer with --\(fdOption) N (read from file descriptor N)"
    }

    /// A new secret, typed twice on a terminal (see ``newSecretAtTerminal``), or with
    /// `--fdOption` one line, read once: the daemon judges it.
    static func newSecret(_ invocation: Invocation, fdOption: String, question: String, repeatQuestion: String, differ: String,
                          weakness: (String) throws(CLIError) -> CLIError? = { _ in nil }) throws(CLIError) -> String {
        if invocation.value(fdOption) != nil {
            return try answer(invocation, fdOption: fdOption, question: question, secret: true)
        }
        return try newSecretAtTerminal(question: question, repeatQuestion: repeatQuestion, differ: differ, weakness: weakness) { text throws(CLIError) in
            try Prompt.ask(text, secret: true, fdOption: fdOption)
        }
    }

    /// A new secret typed twice. `weakness` is checked before the repeat is asked (so a
    /// refused PIN is not typed twice for nothing); a weak one, or two entries that differ, asks
    /// for both again, up to ``attempts`` times; then the last error ends the command. `ask`
    /// puts one question (to the terminal, without echo).
    static func newSecretAtTerminal(question: String, repeatQuestion: String, differ: String, weakness: (String) throws(CLIError) -> CLIError?,
                                    ask: (String) throws(CLIError) -> String) throws(CLIError) -> String {
        var attempt = 1
        while true {
            let secret = try ask(question)
            let problem: CLIError
            if let weak = try weakness(secret) {
                problem = weak
            } else if try ask(repeatQuestion) == secret {
                return secret
            } else {
                problem = .usage(differ)
            }
            guard attempt < attempts else { throw problem }
            Output.error(problem.line)
            attempt += 1
        }
    }
}

/// Restores the terminal's settings if SIGINT or SIGTERM arrives while a secret is being typed
/// with echo off, then exits with 130 like an interrupted shell command.
enum TerminalGuard {
    // Written before the handler is installed and only read inside it: the handler can run
    // only between arm and disarm, on this single-threaded CLI.
    nonisolated(unsafe) static var fd: Int32 = -1
    // Allocated, not a static `termios` variable: Swift 6.3 emits such a global 57 bytes long,
    // without the struct's 3 bytes of tail padding, so storing a 60-byte termios into it
    // wrote past it (AddressSanitizer: global-buffer-overflow). A heap block has its real size.
    nonisolated(unsafe) static let settings: UnsafeMutablePointer<termios> = {
        let pointer = UnsafeMutablePointer<termios>.allocate(capacity: 1)
        pointer.initialize(to: termios())
        return pointer
    }()

    static func arm(fd: Int32, settings: termios) {
        Self.fd = fd
        Self.settings.pointee = settings
        for number in [SIGINT, SIGTERM] {
            signal(number) { _ in
                tcsetattr(TerminalGuard.fd, TCSAFLUSH, TerminalGuard.settings)
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
        return UserState.authctlSession(environment: environment, home: environment["HOME"] ?? NSHomeDirectory())
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
    /// Whether the last request's PIN was typed at the terminal (so asking again makes sense).
    private var typedPIN = false

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

    /// `run` for a request that asks for an ID-card PIN: when the card refused the PIN typed at
    /// the terminal (with tries left) or it had the wrong length, says so and runs the request
    /// again, so the PIN is asked again, up to ``Prompt/attempts`` times in all.
    mutating func runAskingPINAgain<M: RPCMethod>(_ method: M.Type, _ params: M.Params) throws(CLIError) -> M.Result {
        var attempt = 1
        while true {
            typedPIN = false
            do {
                return try run(method, params)
            } catch where attempt < Prompt.attempts && Self.asksAgain(after: error, typedAtTerminal: typedPIN) {
                Output.error(error.line)
                attempt += 1
            }
        }
    }

    /// Whether a card PIN refusal is worth another try: the person typed the PIN (a script's
    /// descriptor or a saved PIN cannot be typed again), and the card still has tries left.
    static func asksAgain(after error: CLIError, typedAtTerminal: Bool) -> Bool {
        guard typedAtTerminal else { return false }
        switch error.reason {
        case "pin.invalid_length": return true
        case "pin.wrong": return (error.retriesLeft ?? 0) > 0
        default: return false
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
        if (prompt.kind == .pin1 || prompt.kind == .pin2) && invocation.value(fdOption) == nil { typedPIN = true }
        try connection.post(PromptAnswer.self, .init(promptId: prompt.promptId, value: Self.sent(answer, kind: prompt.kind)))
    }

    /// What goes to authd of an answer typed or read: a password as it is (spaces at either end
    /// are part of it, as at `register` and `login`); a PIN, CAN or code without stray spaces.
    static func sent(_ answer: String, kind: PromptKind) -> String {
        kind == .password ? answer : answer.trimmingCharacters(in: .whitespaces)
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
