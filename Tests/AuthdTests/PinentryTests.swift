import Foundation
import Glibc
import Testing
@testable import authd

@Suite("Assuan: escaping, lines, responses")
struct AssuanTests {
    @Test(arguments: [
        ("plain words", "plain words"),
        ("100%", "100%25"),
        ("two\nlines", "two%0Alines"),
        ("cr\r", "cr%0D"),
        ("tab\there", "tab%09here"),
        ("nul\u{0}", "nul%00"),
        ("del\u{7F}", "del%7F"),
        ("%0A stays text", "%250A stays text"),
        ("Tõnis — ÕÄÖÜ 🔑", "Tõnis — ÕÄÖÜ 🔑"),
    ])
    func escapesWhatAssuanRequires(text: String, escaped: String) {
        #expect(Assuan.escape(text) == escaped)
        #expect(Assuan.unescape(Substring(escaped)) == Array(text.utf8))
    }

    @Test func unescapeKeepsABrokenEscape() {
        #expect(Assuan.unescape("12%2534 5") == Array("12%34 5".utf8))
        #expect(Assuan.unescape("%zz%4") == Array("%zz%4".utf8))
    }

    @Test func aLongLineIsCutBetweenCharacters() {
        // Every "%" becomes three bytes: a cut in the middle of one would leave "%2" for pinentry.
        let percent = Assuan.line("SETDESC", String(repeating: "%", count: 600))
        #expect(percent.utf8.count <= Assuan.lineLimit)
        #expect(percent.hasSuffix("%25…"))
        // "é" is two bytes of UTF-8; "🔑" four.
        let accents = Assuan.line("SETDESC", String(repeating: "é🔑", count: 300))
        #expect(accents.utf8.count <= Assuan.lineLimit)
        #expect(accents.dropFirst("SETDESC ".count).dropLast().allSatisfy { $0 == "é" || $0 == "🔑" })
        // What fits is sent whole.
        let fits = String(repeating: "a", count: Assuan.lineLimit - "SETDESC ".count)
        #expect(Assuan.line("SETDESC", fits) == "SETDESC " + fits)
    }

    @Test(arguments: [
        ("OK", Assuan.Response.ok),
        ("OK Pleased to meet you", .ok),
        ("ERR 83886179 Operation cancelled <Pinentry>", .error(code: 83886179, message: "Operation cancelled <Pinentry>")),
        ("D 12%2534", .data(Array("12%34".utf8))),
        ("S ERROR tty.? 83886142", .status("ERROR")),
        ("INQUIRE QUALITY 1234", .inquire("QUALITY")),
        ("# a comment", .comment),
    ])
    func parsesResponses(line: String, response: Assuan.Response) {
        #expect(Assuan.Response(Substring(line)) == response)
    }

    @Test func refusesWhatIsNotAssuan() {
        #expect(Assuan.Response("HELLO") == nil)
        #expect(Assuan.Response("ERR notanumber x") == nil)
    }

    @Test func neitherDataNorAnInquiryShowTheirBytes() {
        #expect(Assuan.Response("D 482193")!.description == "D (6 bytes)")
        #expect(Assuan.Response("INQUIRE QUALITY 482193")!.description == "INQUIRE QUALITY")
        #expect(PinentryAnswer.secret("482193").description == "secret (6 characters)")
    }

    @Test func errorCodesAreMatchedOnTheirLow16Bits() {
        #expect(Assuan.Response("ERR 83886179 x")!.errorCode == Assuan.ErrorCode.canceled)
        #expect(Assuan.Response("ERR 83886194 x")!.errorCode == Assuan.ErrorCode.notConfirmed)
        #expect(Assuan.Response("ERR 83886142 x")!.errorCode == Assuan.ErrorCode.timeout)
    }
}

@Suite("Text from outside in a dialog")
struct PinentryFieldTests {
    @Test(arguments: [
        ("bank.example\nAllow: everything", "bank.example\\u{A}Allow: everything"),
        ("bank.example\r\nOK", "bank.example\\u{D}\\u{A}OK"),
        ("a\u{2028}b\u{2029}c", "a\\u{2028}b\\u{2029}c"),
        ("evil\u{202E}moc.knab", "evil\\u{202E}moc.knab"),
        ("x\u{2066}y\u{2069}", "x\\u{2066}y\\u{2069}"),
        ("nel\u{85}", "nel\\u{85}"),
        ("zero\u{200B}width", "zero\\u{200B}width"),
        ("bell\u{7}", "bell\\u{7}"),
        ("Tõnis Mägi 🔑 https://bank.example/login?x=1%", "Tõnis Mägi 🔑 https://bank.example/login?x=1%"),
    ])
    func controlCharactersBecomeVisible(untrusted: String, shown: String) {
        #expect(Pinentry.field(untrusted) == shown)
    }

    @Test func aNewlineInAnAudienceCannotMakeADialogLine() {
        let audience = "bank.example\nThis request is safe, enter your PIN"
        let description = ["Sign in to \(Pinentry.field(audience))", "with your ID card"].joined(separator: "\n")
        let line = Assuan.line("SETDESC", description)
        // One %0A: the one between the two lines we meant.
        #expect(line.components(separatedBy: "%0A").count == 2)
        #expect(!line.contains("\n"))
        #expect(String(decoding: Assuan.unescape(line.dropFirst("SETDESC ".count)), as: UTF8.self).split(separator: "\n").count == 2)
    }

    @Test func longFieldsAreCut() {
        #expect(Pinentry.field(String(repeating: "a", count: 500), limit: 10) == String(repeating: "a", count: 10) + "…")
        #expect(Pinentry.field("short", limit: 10) == "short")
    }
}

@Suite("Pinentry conversation")
struct PinentryConversationTests {
    static let pinDialog = PinentryDialog(question: .secret(prompt: "PIN1:"), title: "authd", description: "Sign in to bank.example\nwith your ID card",
                                          error: "Wrong PIN — 2 tries left", timeout: 30)

    @Test func sendsTheDialogThenTheQuestion() {
        let conversation = PinentryConversation(dialog: Self.pinDialog, tty: ("/dev/pts/7", "xterm"))
        #expect(conversation.commands == [
            "OPTION ttyname=/dev/pts/7", "OPTION ttytype=xterm", "SETTITLE authd",
            "SETDESC Sign in to bank.example%0Awith your ID card", "SETERROR Wrong PIN — 2 tries left",
            "SETPROMPT PIN1:", "SETTIMEOUT 30", "GETPIN",
        ])
        let confirm = PinentryConversation(dialog: PinentryDialog(question: .confirm(ok: "Allow", notOK: nil, cancel: "Deny"), title: "t", description: "d"), tty: nil)
        #expect(confirm.commands == ["SETTITLE t", "SETDESC d", "SETOK Allow", "SETCANCEL Deny", "CONFIRM"])
    }

    @Test func aTerminalNameThatWouldNeedEscapingIsNotSent() {
        let conversation = PinentryConversation(dialog: Self.pinDialog, tty: ("/dev/pts/7\nSETDESC x", "xterm"))
        #expect(!conversation.commands.contains { $0.hasPrefix("OPTION") })
    }

    /// Drives a conversation: pinentry's greeting, OK to each setting, then `answer` to the question.
    static func converse(_ dialog: PinentryDialog, answer: [String]) -> [PinentryConversation.Action] {
        var conversation = PinentryConversation(dialog: dialog, tty: nil)
        var actions: [PinentryConversation.Action] = []
        var line: Substring = "OK Pleased to meet you"
        while !conversation.isAsking {
            guard let action = conversation.receive(line) else { break }
            actions.append(action)
            guard case .send = action else { return actions }
            line = "OK"
        }
        for line in answer {
            if let action = conversation.receive(Substring(line)) { actions.append(action) }
        }
        return actions
    }

    @Test(arguments: [
        (["D 4821", "OK"], PinentryAnswer.secret("4821")),
        (["# comment", "S PIN_REPEATED", "D 48", "D 21%25", "OK"], .secret("4821%")),
        (["OK"], .secret("")),
        (["ERR 83886179 Operation cancelled"], .cancelled),
        (["ERR 83886278 Fully canceled"], .cancelled),
        (["S ERROR tty.? 83886142", "ERR 83886142 Timeout"], .timedOut),
    ])
    func answersAGetpin(lines: [String], answer: PinentryAnswer) {
        #expect(Self.converse(Self.pinDialog, answer: lines).last == .finish(answer))
    }

    @Test(arguments: [
        ("OK", PinentryAnswer.ok),
        ("ERR 83886194 Not confirmed", .notOK),
        ("ERR 83886179 Operation cancelled", .cancelled),
        ("ERR 83886142 Timeout", .timedOut),
    ])
    func answersAConfirm(line: String, answer: PinentryAnswer) {
        let dialog = PinentryDialog(question: .confirm(ok: "Allow", notOK: "Deny", cancel: "Cancel"), title: "t", description: "d")
        #expect(Self.converse(dialog, answer: [line]).last == .finish(answer))
    }

    @Test func refusesAnInquiryAndGoesOn() {
        let actions = Self.converse(Self.pinDialog, answer: ["INQUIRE QUALITY 48", "D 4821", "OK"])
        #expect(actions.suffix(2) == [.send("CAN"), .finish(.secret("4821"))])
    }

    @Test func anUnknownOptionIsNoFailure() {
        var conversation = PinentryConversation(dialog: Self.pinDialog, tty: ("/dev/pts/7", "xterm"))
        #expect(conversation.receive("OK hello") == .send("OPTION ttyname=/dev/pts/7"))
        #expect(conversation.receive("ERR 83886254 Unknown option") == .send("OPTION ttytype=xterm"))
        #expect(conversation.receive("OK") == .send("SETTITLE authd"))
        #expect(conversation.receive("ERR 536871187 Unknown IPC command") == .fail("pinentry refused SETTITLE: Unknown IPC command"))
        #expect(conversation.receive("OK") == nil)
    }

    @Test(arguments: ["ERR 83886179 no display", "HELLO", "D 1234"])
    func failsBeforeAsking(line: String) {
        var conversation = PinentryConversation(dialog: Self.pinDialog, tty: nil)
        guard case .fail(let reason)? = conversation.receive(Substring(line)) else {
            Issue.record("\(line) did not fail the conversation")
            return
        }
        #expect(!reason.contains("1234"))
    }

    @Test func anErrorAfterTheQuestionSaysWhatPinentrySaid() {
        let actions = Self.converse(Self.pinDialog, answer: ["ERR 83886340 No display"])
        #expect(actions.last == .fail("pinentry could not ask: No display (260)"))
    }
}

/// The scripted Assuan pinentry (Tests/IntegrationTests/Python/scripted_pinentry.py) with a
/// script and a log of its own.
final class ScriptedPinentry {
    static let program = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("IntegrationTests/Python/scripted_pinentry.py").path
    let directory = TemporaryDirectory()
    var scriptPath: String { directory.path + "/script.json" }
    var logPath: String { directory.path + "/log.jsonl" }

    init(_ answers: String) throws {
        try answers.write(toFile: scriptPath, atomically: true, encoding: .utf8)
    }

    var pinentry: Pinentry {
        Pinentry(path: Self.program, environment: ["SCRIPTED_PINENTRY_SCRIPT": scriptPath, "SCRIPTED_PINENTRY_LOG": logPath, "LANG": "C.UTF-8"], tty: nil)
    }

    /// Every entry of the log so far.
    var log: [[String: Any]] {
        guard let text = try? String(contentsOfFile: logPath, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    /// The commands received, unescaped, as "COMMAND argument".
    var commands: [String] {
        log.compactMap { entry in
            (entry["command"] as? String).map { command in
                let argument = entry["argument"] as? String ?? ""
                return argument.isEmpty ? command : "\(command) \(argument)"
            }
        }
    }

    var pids: [Int32] { log.compactMap { ($0["started"] != nil) ? ($0["pid"] as? Int).map(Int32.init) : nil } }
}

/// Whether a process with this id exists (a zombie counts).
func processExists(_ pid: Int32) -> Bool {
    kill(pid, 0) == 0 || errno != ESRCH
}

@Suite("Pinentry against the scripted pinentry")
struct ScriptedPinentryTests {
    static let dialog = PinentryConversationTests.pinDialog

    @Test func returnsThePinTyped() async throws {
        let scripted = try ScriptedPinentry(#"[{"pin": "482193"}]"#)
        #expect(try await scripted.pinentry.ask(Self.dialog) == .secret("482193"))
        #expect(scripted.commands == [
            "SETTITLE authd", "SETDESC Sign in to bank.example\nwith your ID card", "SETERROR Wrong PIN — 2 tries left",
            "SETPROMPT PIN1:", "SETTIMEOUT 30", "GETPIN", "BYE",
        ])
        let pid = try #require(scripted.pids.first)
        #expect(await eventually { !processExists(pid) }, "pinentry was left running after BYE")
    }

    @Test func aPinSurvivesEscaping() async throws {
        let scripted = try ScriptedPinentry(#"[{"pin": "1%2 3\nÕ4"}]"#)
        #expect(try await scripted.pinentry.ask(Self.dialog) == .secret("1%2 3\nÕ4"))
    }

    @Test func anInquiryIsRefused() async throws {
        let scripted = try ScriptedPinentry(#"[{"pin": "4821", "inquire": true}]"#)
        #expect(try await scripted.pinentry.ask(Self.dialog) == .secret("4821"))
        #expect(scripted.commands.contains("CAN"))
    }

    @Test(arguments: [
        (#"{"cancel": true}"#, PinentryAnswer.cancelled),
        (#"{"timeout": true}"#, .timedOut),
    ])
    func endsWithoutAPin(script: String, answer: PinentryAnswer) async throws {
        let scripted = try ScriptedPinentry("[\(script)]")
        #expect(try await scripted.pinentry.ask(Self.dialog) == answer)
    }

    @Test(arguments: [("ok", PinentryAnswer.ok), ("notok", .notOK), ("cancel", .cancelled)])
    func confirmsThreeWays(choice: String, answer: PinentryAnswer) async throws {
        let scripted = try ScriptedPinentry(#"[{"confirm": "\#(choice)"}]"#)
        let dialog = PinentryDialog(question: .confirm(ok: "Allow", notOK: "Allow once", cancel: "Deny"), title: "authd",
                                    description: "Allow /usr/bin/python3 to sign you in to bank.example?")
        #expect(try await scripted.pinentry.ask(dialog) == answer)
        #expect(scripted.commands.suffix(5) == ["SETOK Allow", "SETNOTOK Allow once", "SETCANCEL Deny", "CONFIRM", "BYE"])
    }

    @Test func answersAcrossProcessesInOrder() async throws {
        let scripted = try ScriptedPinentry(#"[{"pin": "1111"}, {"pin": "2222"}]"#)
        #expect(try await scripted.pinentry.ask(Self.dialog) == .secret("1111"))
        #expect(try await scripted.pinentry.ask(Self.dialog) == .secret("2222"))
        #expect(try await scripted.pinentry.ask(Self.dialog) == .cancelled)
        #expect(Set(scripted.pids).count == 3)
    }

    @Test func aCrashIsAFailureWithoutThePin() async throws {
        let scripted = try ScriptedPinentry(#"[{"crash": true}]"#)
        await #expect(throws: PinentryFailure.failed("pinentry ended without answering")) {
            try await scripted.pinentry.ask(Self.dialog)
        }
    }

    @Test func aMissingProgramIsNotFound() async throws {
        let pinentry = Pinentry(path: "/nonexistent/pinentry", environment: [:], tty: nil)
        await #expect(throws: PinentryFailure.notFound("/nonexistent/pinentry")) { try await pinentry.ask(Self.dialog) }
    }

    /// Cancelling the task ends a pinentry that never answers: SIGTERM, or SIGKILL when it
    /// ignores that.
    @Test(arguments: [#"{"hang": true}"#, #"{"hang": "stubborn"}"#])
    func cancellationKillsAHungPinentry(script: String) async throws {
        let scripted = try ScriptedPinentry("[\(script)]")
        let pinentry = scripted.pinentry
        let asking = Task { try await pinentry.ask(Self.dialog) }
        #expect(await eventually { scripted.commands.contains("GETPIN") }, "pinentry was never asked")
        let pid = try #require(scripted.pids.first)
        let cancelled = ContinuousClock.now
        asking.cancel()
        await #expect(throws: CancellationError.self) { try await asking.value }
        #expect(await eventually(seconds: 10) { !processExists(pid) }, "pinentry still runs after the task was cancelled")
        // SIGTERM at once; SIGKILL after Pinentry.terminationGrace (1 s). Generous: the
        // integration tests in this process may keep the cooperative pool busy.
        #expect(ContinuousClock.now - cancelled < .seconds(10))
    }

    /// A pinentry that sends inquiry after inquiry and reads none of authd's refusals: once the
    /// pipe to it is full, it is a failure, not a write that waits for good (holding the card
    /// and every later dialog).
    @Test(.timeLimit(.minutes(1))) func aPinentryThatDoesNotReadFails() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/deaf-pinentry"
        try "#!/bin/sh\necho 'OK hello'\nexec yes 'INQUIRE X'\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(chmod(path, 0o755) == 0)
        let pinentry = Pinentry(path: path, environment: [:], tty: nil)
        await #expect(throws: PinentryFailure.failed("pinentry does not read what it is sent")) { try await pinentry.ask(Self.dialog) }
    }

    @Test func aPinentryThatSitsPastItsTimeoutIsKilled() async throws {
        let scripted = try ScriptedPinentry(#"[{"hang": true}]"#)
        var dialog = Self.dialog
        dialog.timeout = 1
        let started = ContinuousClock.now
        #expect(try await scripted.pinentry.ask(dialog) == .timedOut)
        #expect(ContinuousClock.now - started >= .seconds(1) + Pinentry.margin)
        let pid = try #require(scripted.pids.first)
        #expect(!processExists(pid))
    }

    @Test func resolvesTheProgram() throws {
        let scripted = try ScriptedPinentry("[]")
        let directory = URL(fileURLWithPath: ScriptedPinentry.program).deletingLastPathComponent().path
        #expect(Pinentry.resolve(configured: ScriptedPinentry.program, environment: [:]) == ScriptedPinentry.program)
        #expect(Pinentry.resolve(configured: "scripted_pinentry.py", environment: ["PATH": "relative:\(scripted.directory.path):\(directory)"]) == ScriptedPinentry.program)
        #expect(Pinentry.resolve(configured: "scripted_pinentry.py", environment: ["PATH": "."]) == nil)
        #expect(Pinentry.resolve(configured: "/nonexistent/pinentry", environment: [:]) == nil)
        #expect(Pinentry.resolve(configured: "relative/pinentry", environment: [:]) == nil)
        #expect(Pinentry.resolve(configured: nil, environment: ["PATH": scripted.directory.path]) == nil)
        #expect(Pinentry.resolve(configured: directory, environment: [:]) == nil)
    }

    /// authd-protocol(7): with no `[prompts] pinentry`, `pinentry` on the PATH (authd's own),
    /// though pinentry itself gets only the desktop session's variables.
    @Test func theDeskLooksForPinentryOnAuthdsPath() throws {
        let directory = TemporaryDirectory()
        #expect(symlink(ScriptedPinentry.program, directory.path + "/pinentry") == 0)
        let desk = PinentryDesk(config: ConfigHolder(Config()), environment: ["PATH": "/nonexistent:" + directory.path, "DISPLAY": ":0"], notes: nil)
        #expect(desk.program == directory.path + "/pinentry")
        #expect(desk.environment["PATH"] == nil && desk.environment["DISPLAY"] == ":0", "pinentry gets the session's variables only")
        let none = PinentryDesk(config: ConfigHolder(Config()), environment: ["PATH": directory.path + "/none"], notes: nil)
        #expect(none.program == nil && !none.reachable(uid: getuid()))
    }
}

/// A pseudo-terminal whose slave side pinentry opens by name (`OPTION ttyname`): what a person
/// at that terminal sees, and what they type. Every wait is bounded.
final class PseudoTerminal {
    let master: Int32
    /// Kept open so the master never reads as hung up, and to look at the terminal's modes.
    let slave: Int32
    let name: String
    private(set) var transcript = ""

    init() throws {
        // posix_openpt, unlockpt and ptsname are not imported into Swift: /dev/ptmx,
        // TIOCSPTLCK(0) and TIOCGPTN (asm-generic/ioctls.h) are what they do on Linux.
        master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        var unlock: CInt = 0
        var number: CUnsignedInt = 0
        guard master >= 0, ioctl(master, 0x4004_5431, &unlock) == 0, ioctl(master, 0x8004_5430, &number) == 0 else {
            throw PinentryFailure.failed("no pseudo-terminal: \(String(cString: strerror(errno)))")
        }
        name = "/dev/pts/\(number)"
        slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)
    }

    deinit {
        close(master)
        close(slave)
    }

    private func read(milliseconds: Int32) {
        var poller = pollfd(fd: master, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, milliseconds) > 0 else { return }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = Glibc.read(master, &buffer, buffer.count)
        if count > 0 { transcript += String(decoding: buffer.prefix(count), as: UTF8.self) }
    }

    /// Waits (at most `seconds`) until `text` has appeared on the terminal.
    func expect(_ text: String, seconds: Double = 30) async throws {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while !transcript.contains(text) {
            guard ContinuousClock.now < deadline else { throw PinentryFailure.failed("\"\(text)\" never appeared; the terminal shows: \(transcript)") }
            read(milliseconds: 50)
            await Task.yield()
        }
    }

    /// Waits (at most `seconds`) until the program reading the terminal has turned echo off:
    /// pinentry-tty does so with TCSAFLUSH, which would throw away what was typed before.
    func expectEchoOff(seconds: Double = 30) async throws {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        var modes = termios()
        while tcgetattr(slave, &modes) == 0 && modes.c_lflag & tcflag_t(ECHO) != 0 {
            guard ContinuousClock.now < deadline else { throw PinentryFailure.failed("echo stayed on; the terminal shows: \(transcript)") }
            read(milliseconds: 20)
            await Task.yield()
        }
    }

    func type(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { write(master, $0.baseAddress, $0.count) }
    }
}

@Suite("Pinentry against Debian's pinentry-tty")
struct RealPinentryTests {
    static let program = "/usr/bin/pinentry-tty"

    func pinentry(on terminal: PseudoTerminal) throws -> Pinentry {
        try #require(Syscalls.isExecutable(Self.program), "\(Self.program) is missing: make deps installs pinentry-tty")
        return Pinentry(path: Self.program, environment: ["TERM": "xterm", "LANG": "C.UTF-8"], tty: (terminal.name, "xterm"))
    }

    @Test func thePinTypedIsTheAnswer() async throws {
        let terminal = try PseudoTerminal()
        let pinentry = try pinentry(on: terminal)
        let dialog = PinentryDialog(question: .secret(prompt: "PIN1:"), title: "authd",
                                    description: "Sign in to \(Pinentry.field("bank.example\nEnter PIN here:")) with your ID card\nCaller: /usr/bin/python3",
                                    error: "Wrong PIN — 2 tries left", timeout: 60)
        let asking = Task { try await pinentry.ask(dialog) }
        try await terminal.expect("PIN1:")
        try await terminal.expectEchoOff()
        terminal.type("4821\n")
        #expect(try await asking.value == .secret("4821"))
        // pinentry-tty shows the description (the title only when there is none) and the error.
        #expect(terminal.transcript.contains("Sign in to bank.example\\u{A}Enter PIN here: with your ID card\r\nCaller: /usr/bin/python3\r\n"))
        #expect(terminal.transcript.contains("Wrong PIN — 2 tries left"))
        #expect(!terminal.transcript.contains("4821"), "the PIN was echoed")
    }

    @Test func theTitleIsShownWithoutADescription() async throws {
        let terminal = try PseudoTerminal()
        let pinentry = try pinentry(on: terminal)
        let asking = Task { try await pinentry.ask(PinentryDialog(question: .secret(prompt: "CAN:"), title: "authd: the card's CAN", description: "", timeout: 60)) }
        try await terminal.expect("CAN:")
        try await terminal.expectEchoOff()
        terminal.type("123456\n")
        #expect(try await asking.value == .secret("123456"))
        #expect(terminal.transcript.contains("authd: the card's CAN\r\nCAN: "))
    }

    @Test func threeButtons() async throws {
        let terminal = try PseudoTerminal()
        let pinentry = try pinentry(on: terminal)
        let dialog = PinentryDialog(question: .confirm(ok: "_Allow", notOK: "_Just once", cancel: "_Deny"), title: "authd",
                                    description: "Allow /usr/bin/python3 to sign you in to bank.example?", timeout: 60)
        let asking = Task { try await pinentry.ask(dialog) }
        // pinentry-tty lists the buttons' keys: OK, cancel, not OK.
        try await terminal.expect("[adj]? ")
        try await terminal.expectEchoOff()
        terminal.type("j")
        #expect(try await asking.value == .notOK)
        #expect(terminal.transcript.contains("Allow /usr/bin/python3 to sign you in to bank.example?"))
    }
}
