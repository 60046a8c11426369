import OpenSSLCrypto

// Asking the person through GnuPG's pinentry (DESIGN §12): one process per dialog, spoken to in
// Assuan over its stdin and stdout, as gpg-agent does. Which pinentry runs (gnome3, qt, gtk2,
// curses, tty) is the person's choice through Debian's `pinentry` alternative, or
// `[prompts] pinentry = PATH`.
//
// What is never sent: `OPTION allow-external-password-cache` and `SETKEYINFO`, with which a
// graphical pinentry may offer to keep the PIN in the desktop's keyring; and `SETQUALITYBAR`,
// with which pinentry would send us what is typed, as it is typed (`INQUIRE QUALITY`).

/// What one pinentry dialog shows and asks.
struct PinentryDialog: Sendable, Equatable {
    enum Question: Sendable, Equatable {
        /// GETPIN with SETPROMPT `prompt`.
        case secret(prompt: String)
        /// CONFIRM with up to three buttons: SETOK `ok`, SETNOTOK `notOK` (optional), SETCANCEL `cancel`.
        case confirm(ok: String, notOK: String?, cancel: String)
    }

    var question: Question
    /// SETTITLE.
    var title: String
    /// SETDESC: may hold several lines, joined with "\n". Text from outside goes in through
    /// `Pinentry.field`, so that it cannot add a line of its own.
    var description: String
    /// SETERROR, e.g. "Wrong PIN — 2 tries left".
    var error: String? = nil
    /// SETTIMEOUT, in seconds: pinentry gives up by itself (`timedOut`) after this long.
    var timeout: Int? = nil
}

/// What the person answered. Its description never shows a secret.
enum PinentryAnswer: Sendable, Equatable, CustomStringConvertible {
    /// GETPIN's data, unescaped.
    case secret(String)
    /// CONFIRM: the OK button, or the "not OK" one (`ERR … NOT_CONFIRMED`).
    case ok, notOK
    /// `ERR … CANCELED`: the person cancelled or closed the dialog.
    case cancelled
    /// `ERR … TIMEOUT`: pinentry's own timeout passed, or pinentry sat on the question past it.
    case timedOut

    var description: String {
        switch self {
        case .secret(let secret): "secret (\(secret.count) characters)"
        case .ok: "ok"
        case .notOK: "notOK"
        case .cancelled: "cancelled"
        case .timedOut: "timedOut"
        }
    }
}

enum PinentryFailure: Error, Equatable {
    /// No executable at the path.
    case notFound(String)
    /// It crashed, broke the protocol, refused the dialog (no display, no terminal) or hung
    /// before asking. The words never hold what was typed.
    case failed(String)
}

extension PinentryFailure: CustomStringConvertible {
    var description: String {
        switch self {
        case .notFound(let path): "no pinentry program at \(path)"
        case .failed(let words): words
        }
    }
}

/// A pinentry program and the session it draws in.
struct Pinentry: Sendable {
    /// The program (`[prompts] pinentry = PATH`, else `pinentry` found in PATH — Debian's
    /// alternative /usr/bin/pinentry).
    let path: String
    /// The environment pinentry runs with (`sessionEnvironment`); nothing else is passed.
    let environment: [String: String]
    /// A terminal to draw on (pinentry-curses and -tty need one): sent as OPTION ttyname /
    /// ttytype; nil for none.
    let tty: (name: String, type: String)?

    /// How long past the dialog's own timeout a pinentry that has not answered is killed (its
    /// own timeout answers first).
    static let margin: Duration = .seconds(5)
    /// The longest a dialog without a timeout of its own stays up.
    static let longestDialog: Duration = .seconds(600)
    /// How long pinentry has to start and take the dialog's settings.
    static let setupLimit: Duration = .seconds(15)
    /// Between SIGTERM and SIGKILL.
    static let terminationGrace: Duration = .seconds(1)

    /// The variables of a desktop session that pinentry needs to find the display, the session
    /// bus, the terminal and the language, taken from `environment`.
    static let sessionVariables = ["DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY", "DBUS_SESSION_BUS_ADDRESS",
                                   "XDG_RUNTIME_DIR", "XDG_SESSION_TYPE", "XDG_CURRENT_DESKTOP", "HOME",
                                   "TERM", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES"]

    static func sessionEnvironment(_ environment: [String: String]) -> [String: String] {
        environment.filter { sessionVariables.contains($0.key) }
    }

    /// Where `resolve` looks for a pinentry named without a path: the PATH of `environment`
    /// (the program's own), which pinentry itself does not get.
    static func searchEnvironment(_ environment: [String: String]) -> [String: String] {
        environment["PATH"].map { ["PATH": $0] } ?? [:]
    }

    /// The program to run: `configured` (an absolute path, or a name looked up in PATH), else
    /// `pinentry` looked up in `environment`'s PATH (only its absolute directories). Nil when
    /// there is no executable regular file there.
    static func resolve(configured: String?, environment: [String: String]) -> String? {
        let name = configured ?? "pinentry"
        if name.contains("/") { return name.hasPrefix("/") && isProgram(name) ? name : nil }
        let search = environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for directory in search.split(separator: ":") where directory.hasPrefix("/") {
            let candidate = directory.hasSuffix("/") ? "\(directory)\(name)" : "\(directory)/\(name)"
            if isProgram(candidate) { return candidate }
        }
        return nil
    }

    private static func isProgram(_ path: String) -> Bool {
        Syscalls.fileStatus(atPath: path, followingLinks: true)?.kind == .regular && Syscalls.isExecutable(path)
    }

    /// `untrusted` (an audience, a program's name, a document's description: anything from
    /// outside) made safe to place inside one line of a dialog: control characters (C0, DEL,
    /// C1), line and paragraph separators, format characters (bidirectional overrides and
    /// isolates, zero-width ones), private-use and unassigned code points, spaces other than
    /// U+0020, blank-looking letters (U+2800, the Hangul fillers) and combining marks past the
    /// third of one character become a visible `\u{XXXX}`, so none can start a line, reorder,
    /// pad or hide what surrounds it. At most `limit` bytes as sent (Assuan's escaping
    /// counted: a `%` takes three), cut between characters and marked with "…", so that the
    /// fixed lines of a dialog always fit its 1000-byte line.
    static func field(_ untrusted: String, limit: Int = 160) -> String {
        var safe = ""
        var sent = 0
        for character in untrusted {
            var piece = ""
            for (index, scalar) in character.unicodeScalars.enumerated() {
                let visible = switch scalar.properties.generalCategory {
                case .control, .format, .lineSeparator, .paragraphSeparator, .privateUse, .unassigned, .surrogate: false
                case .spaceSeparator: scalar == " "
                default: index < 4 && !blankLetters.contains(scalar.value)
                }
                if visible { piece.unicodeScalars.append(scalar) } else { piece += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}" }
            }
            // Nothing else in a piece is escaped: every control character became `\u{…}`.
            let size = piece.utf8.count + 2 * piece.utf8.count(where: { $0 == UInt8(ascii: "%") })
            if sent + size > limit { return safe + "…" }
            safe += piece
            sent += size
        }
        return safe
    }

    /// Letters that draw nothing: the Braille blank and the Hangul fillers.
    private static let blankLetters: Set<UInt32> = [0x2800, 0x115F, 0x1160, 0x3164, 0xFFA0]

    /// Runs one pinentry process for one dialog and returns the person's answer. Task
    /// cancellation kills pinentry (SIGTERM, then SIGKILL after `terminationGrace`) and throws
    /// `CancellationError`. The blocking I/O runs on a queue of its own, never on the
    /// cooperative pool (a person may take a minute).
    func ask(_ dialog: PinentryDialog) async throws -> PinentryAnswer {
        try Task.checkCancellation()
        guard Self.isProgram(path) else { throw PinentryFailure.notFound(path) }
        let session = PinentrySession()
        let conversation = PinentryConversation(dialog: dialog, tty: tty)
        let limit = dialog.timeout.map { Duration.seconds(max(0, $0)) + Self.margin } ?? Self.longestDialog
        return try await withTaskCancellationHandler {
            try await session.run(path: path, environment: environment, conversation: conversation, dialogLimit: limit)
        } onCancel: {
            session.cancel()
        }
    }
}

/// One pinentry dialog as a pure machine (the shape of `ConnectionMachine`): what to send, and
/// what each line pinentry sends means. No I/O.
struct PinentryConversation {
    enum Action: Equatable {
        case send(String)
        case finish(PinentryAnswer)
        case fail(String)
    }

    /// In order; the last is the question (GETPIN or CONFIRM).
    let commands: [String]
    private let asksSecret: Bool
    /// The command whose answer is awaited; nil while pinentry's greeting is.
    private var awaiting: Int?
    private var finished = false
    private var secret: [UInt8] = []

    /// More than any PIN, password or code; a pinentry sending more is broken.
    static let secretLimit = 4096

    init(dialog: PinentryDialog, tty: (name: String, type: String)?) {
        var commands: [String] = []
        // Pinentry takes OPTION values as they are, unescaped: a name that would need escaping
        // names no terminal, and is not sent.
        let plain = { (text: String) in !text.isEmpty && text.unicodeScalars.allSatisfy { $0.value > 0x20 && $0 != "%" && $0.value != 0x7F } }
        if let tty, plain(tty.name), plain(tty.type) {
            commands.append("OPTION ttyname=\(tty.name)")
            commands.append("OPTION ttytype=\(tty.type)")
        }
        // An empty text is not sent: pinentry then shows its default (pinentry-tty shows the
        // title only when there is no description, and an empty one is one).
        if !dialog.title.isEmpty { commands.append(Assuan.line("SETTITLE", dialog.title)) }
        if !dialog.description.isEmpty { commands.append(Assuan.line("SETDESC", dialog.description)) }
        if let error = dialog.error { commands.append(Assuan.line("SETERROR", error)) }
        switch dialog.question {
        case .secret(let prompt):
            commands.append(Assuan.line("SETPROMPT", prompt))
        case .confirm(let ok, let notOK, let cancel):
            commands.append(Assuan.line("SETOK", ok))
            if let notOK { commands.append(Assuan.line("SETNOTOK", notOK)) }
            commands.append(Assuan.line("SETCANCEL", cancel))
        }
        if let timeout = dialog.timeout { commands.append("SETTIMEOUT \(max(0, timeout))") }
        if case .secret = dialog.question {
            commands.append("GETPIN")
            asksSecret = true
        } else {
            commands.append("CONFIRM")
            asksSecret = false
        }
        self.commands = commands
    }

    /// The question has been sent: the dialog is up and the person decides.
    var isAsking: Bool { awaiting == commands.count - 1 }

    /// What to do about one line from pinentry (without its LF); nil: read on.
    mutating func receive(_ line: Substring) -> Action? {
        guard !finished else { return nil }
        guard let response = Assuan.Response(line) else { return end(.fail("pinentry broke the Assuan protocol")) }
        switch response {
        case .comment, .status:
            return nil
        case .inquire:
            // Nothing we send makes pinentry inquire (no quality bar, no constraints); CAN is
            // the protocol's refusal, after which pinentry goes on without the answer.
            return .send("CAN")
        case .data(let bytes):
            guard isAsking && asksSecret else { return end(.fail("pinentry sent data before it was asked")) }
            secret += bytes
            return secret.count > Self.secretLimit ? end(.fail("pinentry sent more than \(Self.secretLimit) bytes")) : nil
        case .ok:
            if isAsking {
                let answer: PinentryAnswer = asksSecret ? .secret(String(decoding: secret, as: UTF8.self)) : .ok
                return end(.finish(answer))
            }
            return advance()
        case .error(let code, let message):
            let said = Pinentry.field(message, limit: 120)
            if isAsking {
                switch code & 0xFFFF {
                case Assuan.ErrorCode.canceled, Assuan.ErrorCode.fullyCanceled: return end(.finish(.cancelled))
                case Assuan.ErrorCode.notConfirmed: return end(.finish(asksSecret ? .cancelled : .notOK))
                case Assuan.ErrorCode.timeout: return end(.finish(.timedOut))
                default: return end(.fail("pinentry could not ask: \(said) (\(code & 0xFFFF))"))
                }
            }
            guard let awaiting else { return end(.fail("pinentry did not start: \(said)")) }
            // An older pinentry without an option still draws the dialog.
            if commands[awaiting].hasPrefix("OPTION "), code & 0xFFFF == Assuan.ErrorCode.unknownOption { return advance() }
            let command = commands[awaiting].prefix { $0 != " " }
            return end(.fail("pinentry refused \(command): \(said)"))
        }
    }

    private mutating func advance() -> Action {
        let next = awaiting.map { $0 + 1 } ?? 0
        awaiting = next
        return .send(commands[next])
    }

    private mutating func end(_ action: Action) -> Action {
        finished = true
        OpenSSL.wipe(&secret)
        return action
    }
}

/// One pinentry process, run on a queue of its own: the person may take a minute to answer,
/// which must hold neither a thread of the cooperative pool nor a worker of a shared pool.
private actor PinentrySession {
    private let executor = BlockingExecutor(label: "authd.pinentry")
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    /// Set from any thread; the loop looks at it at least every 100 ms.
    private let cancelled = CancelFlag()

    nonisolated func cancel() { cancelled.set() }

    /// A line from pinentry longer than this is no Assuan line (they are at most 1000 bytes).
    private static let longestLine = 4 * Assuan.lineLimit

    func run(path: String, environment: [String: String], conversation: PinentryConversation,
             dialogLimit: Duration) throws -> PinentryAnswer {
        var conversation = conversation
        let child: Syscalls.Conversation
        do {
            child = try Syscalls.spawnConversation(path, environment: environment, nonBlockingInput: true)
        } catch {
            throw PinentryFailure.failed("cannot start \(path): \(error)")
        }
        var input: Int32? = child.input
        var ended = false
        defer {
            if let input { Syscalls.close(input) }
            Syscalls.close(child.output)
            if !ended { stop(child.pid) }
        }
        var pending: [UInt8] = []
        defer { OpenSSL.wipe(&pending) }
        var chunk = [UInt8](repeating: 0, count: 4096)
        defer { OpenSSL.wipe(&chunk) }
        var deadline = ContinuousClock.now + Pinentry.setupLimit
        var asked = false

        while true {
            if cancelled.isSet { throw CancellationError() }
            let now = ContinuousClock.now
            if now >= deadline {
                // Past its own timeout and our margin, a person had their chance; before the
                // question, pinentry never got as far as asking.
                if asked { return .timedOut }
                throw PinentryFailure.failed("pinentry did not start within \(Pinentry.setupLimit)")
            }
            let wait = min(Duration.milliseconds(100), deadline - now)
            let milliseconds = Int32(wait.components.seconds * 1000 + wait.components.attoseconds / 1_000_000_000_000_000)
            guard (try? Syscalls.waitUntilReadable([child.output], timeoutMilliseconds: max(1, milliseconds)))?.first == true else { continue }
            let result = try chunk.withUnsafeMutableBytes { try Syscalls.read(child.output, into: $0) }
            switch result {
            case .wouldBlock: continue
            case .endOfFile: throw PinentryFailure.failed("pinentry ended without answering")
            case .bytes(let count): pending += chunk[..<count]
            }
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let action = conversation.receive(Substring(String(decoding: pending[..<newline], as: UTF8.self)))
                OpenSSL.wipe(&pending, first: newline + 1)
                pending.removeFirst(newline + 1)
                switch action {
                case nil: continue
                case .send(let line)?:
                    guard let fd = input else { continue }
                    try send(line, to: fd)
                    if conversation.isAsking && !asked {
                        asked = true
                        deadline = ContinuousClock.now + dialogLimit
                    }
                case .finish(let answer)?:
                    if let fd = input {
                        _ = try? Array("BYE\n".utf8).withUnsafeBytes { try Syscalls.writeAll(fd, $0, name: "pinentry") }
                        Syscalls.close(fd)
                        input = nil
                    }
                    ended = waitForExit(child.pid, within: .milliseconds(500))
                    return answer
                case .fail(let reason)?:
                    throw PinentryFailure.failed(reason)
                }
            }
            if pending.count > Self.longestLine { throw PinentryFailure.failed("pinentry sent a line longer than \(Self.longestLine) bytes") }
        }
    }

    /// Writes one line to pinentry. pinentry reads each command before it answers, so what it
    /// has not read never fills the pipe (64 KiB); a full one means it does not read at all
    /// (the pipe does not block: a write waiting for it would hold the card, and every dialog
    /// after this one, for good).
    private func send(_ line: String, to fd: Int32) throws {
        do {
            try Array((line + "\n").utf8).withUnsafeBytes { try Syscalls.writeAll(fd, $0, name: "pinentry") }
        } catch let error as SystemError where error.wouldBlock {
            throw PinentryFailure.failed("pinentry does not read what it is sent")
        } catch {
            throw PinentryFailure.failed("pinentry ended before it was asked")
        }
    }

    /// Ends pinentry and everything it started: SIGTERM to its process group, SIGKILL after
    /// `terminationGrace`, and reaps it.
    private func stop(_ pid: Int32) {
        Syscalls.signalProcessGroup(pid, forcibly: false)
        if waitForExit(pid, within: Pinentry.terminationGrace) { return }
        Syscalls.signalProcessGroup(pid, forcibly: true)
        _ = waitForExit(pid, within: .seconds(5))
    }

    /// Whether `pid` ended (and was reaped) within `limit`.
    private func waitForExit(_ pid: Int32, within limit: Duration) -> Bool {
        let deadline = ContinuousClock.now + limit
        while !Syscalls.reapIfEnded(pid) {
            if ContinuousClock.now >= deadline { return false }
            Syscalls.sleep(milliseconds: 5)
        }
        return true
    }
}
