import Foundation
import Glibc
import Protocol
import Synchronization
import Testing

/// `prompt: desktop` through pinentry (DESIGN §12): a user-mode authd runs it itself; a system
/// authd through the user's `authd --desktop`. The pinentry is the tests' scripted one (it speaks
/// Assuan and records what it is told) or Debian's pinentry-tty on a pseudo-terminal; the desktop
/// apps' entry point is the agent's service on a private session bus.
@Suite("Desktop prompts through pinentry", .serialized)
struct PinentryPromptTests {
    static let scriptedPinentry = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Python/scripted_pinentry.py").path
    static let verifier = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Python/verify_card_jwt.py").path

    /// A scripted pinentry for one test: its answers, and what it was told, by the pinentry
    /// process (one per dialog). `path` is a wrapper that sets its environment, since authd
    /// passes pinentry only the desktop's variables.
    final class Script {
        let directory: String
        var path: String { directory + "/pinentry" }
        var logPath: String { directory + "/pinentry.log" }

        init(_ answers: [JSONValue]) throws {
            var template = Array("/tmp/authd-pinentry-XXXXXX".utf8CString)
            guard let made = mkdtemp(&template) else { throw HarnessError("mkdtemp failed") }
            directory = String(cString: made)
            chmod(directory, 0o755)
            try String(decoding: try WireCodec.encodeJSON(JSONValue.array(answers)), as: UTF8.self).write(toFile: directory + "/script.json", atomically: true, encoding: .utf8)
            try """
            #!/bin/sh
            export SCRIPTED_PINENTRY_SCRIPT=\(directory)/script.json SCRIPTED_PINENTRY_LOG=\(logPath)
            exec /usr/bin/python3 \(PinentryPromptTests.scriptedPinentry) "$@"

            """.write(toFile: path, atomically: true, encoding: .utf8)
            chmod(path, 0o755)
        }

        deinit { try? FileManager.default.removeItem(atPath: directory) }

        /// Every command received, in order: (pinentry pid, command, argument).
        var commands: [(pid: Int64, command: String, argument: String)] {
            let text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").compactMap { line in
                guard let entry = try? WireCodec.decode(JSONValue.self, from: Data(line.utf8)), let command = entry["command"]?.stringValue else { return nil }
                return (entry["pid"]?.integerValue ?? 0, command, entry["argument"]?.stringValue ?? "")
            }
        }

        /// The dialogs shown, each as its commands by name (the last of each).
        var dialogs: [[String: String]] {
            var order: [Int64] = []
            var byPID: [Int64: [String: String]] = [:]
            for (pid, command, argument) in commands {
                if byPID[pid] == nil { order.append(pid) }
                byPID[pid, default: [:]][command] = argument
            }
            return order.map { byPID[$0]! }
        }
    }

    /// This test process's executable: the program authd names in its dialogs.
    static var ownExecutable: String { DesktopPromptTests.ownExecutable }

    /// Reads a whole exchange on a raw connection: every line (to check no secret crossed it) and the response.
    static func exchange(_ client: LineClient, _ method: String, _ params: JSONValue) throws -> (response: JSONValue, lines: String) {
        try client.send(WireCodec.requestLine(id: .integer(1), method: method, params: params))
        var lines: [String] = []
        while let line = try client.readLine() {
            lines.append(String(decoding: line, as: UTF8.self))
            let message = try WireCodec.decode(JSONValue.self, from: Data(line))
            if message["id"] == 1 { return (message, lines.joined(separator: "\n")) }
        }
        throw HarnessError("the connection closed before the response: \(lines)")
    }

    @Test("user mode: consent, then a wrong PIN1 asked again with SETERROR, then the right one; the token, and no PIN on the asking connection")
    func wrongThenRightPIN() throws {
        let rig = try CardRig()
        try rig.insertCard()
        let script = try Script([["confirm": "ok"], ["pin": "9999"], ["pin": "1234"]])
        let daemon = try DaemonHarness(config: "[prompts]\npinentry = \(script.path)\n")
        try daemon.start(environment: rig.environment)
        let (response, lines) = try Self.exchange(try daemon.connect(), "card.login", ["aud": "https://rp.example", "nonce": "n-1", "prompt": "desktop"])
        let token = try #require(response["result"]?["token"]?.stringValue, "\(response)\n\(script.commands)")
        let verified = try DaemonHarness.run(["/usr/bin/python3", Self.verifier, token, rig.caPath, "https://rp.example"])
        #expect(verified.status == 0, "\(verified.stderr)")
        #expect(!lines.contains("9999") && !lines.contains("1234"), "a PIN crossed the asking connection")
        #expect(lines.contains(#""kind":"consent""#) && lines.contains(#""kind":"pin1""#), "the asking program hears that the desktop asks")

        let dialogs = script.dialogs
        try #require(dialogs.count == 3, "\(script.commands)")
        #expect(dialogs[0]["SETOK"] == "_Always allow" && dialogs[0]["SETNOTOK"] == "Allow _once" && dialogs[0]["SETCANCEL"] == "_Deny")
        #expect(dialogs[0]["SETDESC"]?.contains("https://rp.example") == true && dialogs[0]["SETDESC"]?.contains(Self.ownExecutable) == true,
                "\(dialogs[0])")
        #expect(dialogs[1]["SETPROMPT"] == "PIN1:" && dialogs[1]["SETERROR"] == nil)
        #expect(dialogs[1]["SETDESC"]?.contains("sign you in to https://rp.example") == true)
        #expect(dialogs[2]["SETERROR"] == "Wrong PIN1: 2 tries left.", "\(dialogs[2])")
        // Remembered: the next login asks only for PIN1 (the script holds no more answers, so a
        // consent question would be cancelled).
        let again = try Script([["pin": "1234"]])
        try Self.reconfigure(daemon, pinentry: again.path)
        let second = try daemon.connect().call("card.login", ["aud": "https://rp.example", "prompt": "desktop"])
        #expect(second["result"]?["token"]?.stringValue != nil, "\(second)\n\(again.commands)")
        #expect(again.dialogs.count == 1 && again.dialogs.first?["SETPROMPT"] == "PIN1:")
    }

    /// Points the running daemon at another pinentry (`admin.reload` of its configuration).
    static func reconfigure(_ daemon: DaemonHarness, pinentry: String, consent: String = "first") throws {
        try "[prompts]\npinentry = \(pinentry)\nconsent = \(consent)\n".write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        let reloaded = try daemon.connect().call("admin.reload")
        guard reloaded["result"] != nil else { throw HarnessError("admin.reload failed: \(reloaded)") }
    }

    @Test("the dialog cancelled is prompt.cancelled, its timeout prompt.timeout, a pinentry that breaks off prompt.no_desktop; the daemon serves on")
    func cancelTimeoutCrash() throws {
        let script = try Script([["cancel": true], ["timeout": true], ["crash": true]])
        let daemon = try DaemonHarness(config: "[prompts]\npinentry = \(script.path)\nconsent = never\n")
        try daemon.start()
        let client = try daemon.connect()
        let params: JSONValue = ["aud": "https://rp.example", "prompt": "desktop", "timeout_s": 30]
        #expect(try client.call("card.login", params)["error"]?["data"]?["reason"] == "prompt.cancelled")
        let timedOut = try client.call("card.login", params)
        #expect(timedOut["error"]?["data"]?["reason"] == "prompt.timeout", "\(timedOut)")
        #expect(try client.call("card.login", params)["error"]?["data"]?["reason"] == "prompt.no_desktop")
        #expect(script.dialogs.count == 3)
        #expect(script.dialogs.first?["SETTIMEOUT"] == "30", "the card's window bounds the dialog: \(script.dialogs)")
        #expect(try client.result("hello")["protocol_version"] == 1)
    }

    @Test("who asks is read, never claimed: two programs are two consents; a Flatpak app is named by its application id")
    func programsAndFlatpak() throws {
        let script = try Script([["confirm": "ok"], ["confirm": "ok"], ["confirm": "notok"]])
        let daemon = try DaemonHarness(config: "[prompts]\npinentry = \(script.path)\n")
        try daemon.start()
        let client = try daemon.connect()
        let registered = try LoginTests.register(daemon, client, phone: "+37251234567", password: DesktopPromptTests.password)
        let session = try #require(registered["session"]?["token"]?.stringValue)
        let params: JSONValue = ["session": .string(session), "aud": "https://shop.example", "prompt": "desktop"]
        #expect(try client.call("auth.token", params)["result"] != nil)
        // python3 is another program: asked again, though this test's own consent stands.
        let python = try DaemonHarness.run(["/usr/bin/python3", "-c", Self.pythonClient, daemon.socketPath, String(decoding: try WireCodec.encodeJSON(params), as: UTF8.self)])
        #expect(python.stdout.contains(#""token""#), "\(python.stdout) \(python.stderr)")
        #expect(script.dialogs.count == 2 && script.dialogs[1]["SETDESC"]?.contains("python3") == true, "\(script.dialogs)")
        let programs = (try client.result("consents.list")["consents"]?.arrayValue ?? []).compactMap { $0["program"]?.stringValue }
        #expect(programs.contains("exe:" + Self.ownExecutable) && programs.contains { $0.hasPrefix("exe:/usr/bin/python3") }, "\(programs)")

        // The same client inside a mount namespace whose root holds a .flatpak-info: authd names
        // it by the application id there, and its consent is its own ("Allow once": not kept).
        let sandboxed = try FlatpakSandbox.run(appID: "org.example.Shop", binding: (daemon.socketPath as NSString).deletingLastPathComponent,
                                               ["/usr/bin/python3", "-c", Self.pythonClient, daemon.socketPath,
                                                String(decoding: try WireCodec.encodeJSON(params), as: UTF8.self)])
        #expect(sandboxed.stdout.contains(#""token""#), "\(sandboxed.stdout) \(sandboxed.stderr)" as Comment)
        #expect(script.dialogs.count == 3 && script.dialogs[2]["SETDESC"]?.contains("org.example.Shop") == true, "\(script.dialogs)")
        let after = (try client.result("consents.list")["consents"]?.arrayValue ?? []).compactMap { $0["program"]?.stringValue }
        #expect(!after.contains { $0.hasPrefix("flatpak:") }, "Allow once is not remembered: \(after)")
    }

    /// A client in another executable: connects to argv[1], sends auth.token with argv[2] as params, prints the response.
    static let pythonClient = """
    import json, socket, sys
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "auth.token", "params": json.loads(sys.argv[2])}).encode() + b"\\n")
    for line in s.makefile():
        message = json.loads(line)
        if message.get("id") == 1:
            print(json.dumps(message.get("result") or message.get("error")))
            break
    """

    @Test("what the dialog shows is escaped: a description's newline and control characters draw no line of their own; a control character in an audience is refused before anyone is asked")
    func escaping() throws {
        let rig = try CardRig()
        try rig.insertCard()
        let script = try Script([["pin": "12345"]])
        let daemon = try DaemonHarness(config: "[prompts]\npinentry = \(script.path)\nconsent = never\n")
        try daemon.start(environment: rig.environment)
        let client = try daemon.connect()
        let refused = try client.call("card.login", ["aud": "https://rp.example\nPIN1 for your bank:", "prompt": "desktop"])
        #expect(refused["error"]?["data"]?["reason"] == "rpc.invalid_params" && script.dialogs.isEmpty)
        let signed = try client.call("card.sign", ["aud": "https://rp.example", "description": "Loan\nDocument: nothing to worry about\u{1b}[2J",
                                                   "hash": .string(String(repeating: "A", count: 43)), "hash_alg": "SHA-256", "prompt": "desktop"])
        #expect(signed["result"]?["token"] != nil, "\(signed)")
        let description = try #require(script.dialogs.first?["SETDESC"])
        let lines = description.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(!lines.contains { $0.hasPrefix("Document: nothing") }, "the description drew a line of its own: \(description)")
        #expect(!description.contains("\u{1b}"), "a control character reached the dialog")
    }

    @Test("a system authd asks through the user's agent running Debian's pinentry-tty on a terminal: PIN1 typed there, the token to the asking program, no PIN on its connection")
    func realPinentryThroughAgent() throws {
        let rig = try CardRig()
        try rig.insertCard()
        let daemon = try DaemonHarness(config: "[prompts]\nconsent = never\n")
        try daemon.start(arguments: ["--system"], environment: rig.environment)
        let agent = try TerminalSession([DaemonHarness.authdPath, "--desktop", "--socket", daemon.socketPath, "--pinentry", "/usr/bin/pinentry-tty"],
                                        environment: ["PATH": "/usr/bin:/bin", "TERM": "xterm", "HOME": daemon.directory])
        try agent.expect("asking authd's questions")
        let asker = try daemon.connect()
        let (response, lines) = try DesktopPromptTests.alongside({
            try Self.exchange(asker, "card.login", ["aud": "https://rp.example", "nonce": "n-2", "prompt": "desktop"])
        }) {
            try agent.expect("sign you in to https://rp.example")
            try agent.answerSecret("PIN1:", "1234")
        }
        let token = try #require(response["result"]?["token"]?.stringValue, "\(response)\n\(agent.transcript)")
        #expect(try DaemonHarness.run(["/usr/bin/python3", Self.verifier, token, rig.caPath, "https://rp.example"]).status == 0)
        #expect(!lines.contains("1234"), "the PIN crossed the asking connection")
        #expect(!agent.transcript.contains("1234"), "pinentry echoed the PIN")
        #expect(agent.transcript.contains(Self.ownExecutable), "the dialog names the asking program: \(agent.transcript)")
    }

    @Test("a desktop app on the session bus: the agent's org.authd.Desktop1 asks consent and PIN1 on the desktop for gdbus, by its own identity, shows the card's progress as a notification, and returns the token")
    func sessionBusCardLogin() throws {
        let rig = try CardRig()
        let daemon = try DaemonHarness()
        try daemon.start(arguments: ["--system"], environment: rig.environment)
        let desktop = try NotificationDesktop()
        let script = try Script([["confirm": "ok"], ["pin": "1234"], ["confirm": "ok"], ["confirm": "cancel"]])
        let log = desktop.bus.directory + "/agent.log"
        // The account session authctl keeps for this user, which AccountToken uses.
        let state = desktop.bus.directory + "/state"
        try FileManager.default.createDirectory(atPath: state + "/authctl", withIntermediateDirectories: true)
        let client = try daemon.connect()
        let registered = try LoginTests.register(daemon, client, phone: "+37251234567", password: DesktopPromptTests.password)
        try (try #require(registered["session"]?["token"]?.stringValue) + "\n").write(toFile: state + "/authctl/session", atomically: true, encoding: .utf8)
        let agent = try ChildProcess.spawn([DaemonHarness.authdPath, "--desktop", "--socket", daemon.socketPath, "--pinentry", script.path],
                                           environment: ["DBUS_SESSION_BUS_ADDRESS=\(desktop.address)", "PATH=/usr/bin:/bin", "XDG_STATE_HOME=\(state)"]
                                               + DaemonHarness.sanitizerOptions.map { "\($0)=\($1)" },
                                           stdout: .file(log), stderr: log)
        defer { ChildProcess.reap(agent) }
        let deadline = Date().addingTimeInterval(15)
        while !((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("serving org.authd.Desktop") {
            guard Date() < deadline else { throw HarnessError("the agent did not serve org.authd.Desktop within 15 s: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")") }
            usleep(20_000)
        }
        let gdbus = ["/usr/bin/timeout", "60", "/usr/bin/gdbus", "call", "--address", desktop.address, "--dest", "org.authd.Desktop",
                     "--object-path", "/org/authd/Desktop", "--method"]
        // No card yet: the desktop shows "place your card" until one is there.
        let call = try DesktopPromptTests.alongside({ try DaemonHarness.run(gdbus + ["org.authd.Desktop1.CardLogin", "https://rp.example", ""]) }) {
            guard desktop.shows("Place your ID card", within: 30) else { throw HarnessError("no card notification: \(desktop.log)") }
            try rig.insertCard()
        }
        let token = try #require(call.stdout.split(separator: "'").dropFirst().first.map(String.init), "\(call.stdout) \(call.stderr)")
        #expect(try DaemonHarness.run(["/usr/bin/python3", Self.verifier, token, rig.caPath, "https://rp.example"]).status == 0)
        #expect(script.dialogs.first?["SETDESC"]?.contains("/usr/bin/gdbus") == true, "\(script.dialogs)")
        let programs = (try client.result("consents.list")["consents"]?.arrayValue ?? []).compactMap { $0["program"]?.stringValue }
        #expect(programs == ["exe:/usr/bin/gdbus"])

        // An account token, with the session authctl keeps, after the person's consent.
        let account = try DaemonHarness.run(gdbus + ["org.authd.Desktop1.AccountToken", "https://shop.example", "n-3"])
        let accountToken = try #require(account.stdout.split(separator: "'").dropFirst().first.map(String.init), "\(account.stdout) \(account.stderr)")
        #expect(try client.result("token.verify", ["token": .string(accountToken), "aud": "https://shop.example"])["claims"]?["nonce"] == "n-3")

        // A refusal on the desktop reaches the app as the reason's D-Bus error.
        let denied = try DaemonHarness.run(gdbus + ["org.authd.Desktop1.CardLogin", "https://other.example", ""])
        #expect(denied.status != 0 && denied.stderr.contains("org.authd.Error.Consent.Denied"), "\(denied.stdout) \(denied.stderr)")
    }

    @Test("a website's login on the desktop always asks PIN1, showing whose name goes to the site, even with PIN1 saved")
    func webEIDLoginIgnoresSavedPIN1() throws {
        let rig = try CardRig()
        try rig.insertCard()
        let script = try Script([["pin": "1234"]])
        let daemon = try DaemonHarness(config: "[prompts]\npinentry = \(script.path)\nconsent = never\n")
        try daemon.start(environment: rig.environment)
        let client = try daemon.connect()
        _ = try client.result("card.pin1.save", ["pin": "1234"])
        let login = try client.call("card.login", ["aud": "https://rp.example", "nonce": .string(String(repeating: "n", count: 44)), "format": "web-eid",
                                                   "prompt": "desktop"])
        #expect(login["result"]?["format"] == "web-eid", "\(login)")
        #expect(script.dialogs.count == 1 && script.dialogs.first?["SETPROMPT"] == "PIN1:", "\(script.commands)")
        #expect(script.dialogs.first?["SETDESC"]?.contains("go to the site") == true)
    }
}
