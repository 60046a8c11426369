import Foundation
import Glibc
import Protocol
import Synchronization
import Testing

/// Registration by phone number against the real daemon, with the spool and command SMS
/// backends.
@Suite("Registration")
struct RegistrationTests {
    /// The code in the newest spooled SMS to `phone`.
    static func spooledCode(_ daemon: DaemonHarness, to phone: String) throws -> String {
        let directory = daemon.stateDirectory + "/sms-spool"
        let files = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
        for file in files.reversed() {
            let text = try String(contentsOfFile: directory + "/" + file, encoding: .utf8)
            guard text.hasPrefix("To: \(phone)\n"), let range = text.range(of: #"code is [0-9]{6}"#, options: .regularExpression) else { continue }
            return String(text[range].suffix(6))
        }
        throw HarnessError("no SMS to \(phone) in \(directory)")
    }

    static func start(_ client: LineClient, _ phone: String, region: String? = nil) throws -> JSONValue {
        var params: [String: JSONValue] = ["phone": .string(phone)]
        if let region { params["region"] = .string(region) }
        return try client.call("account.register.start", .object(params))
    }

    @Test("start, code by SMS, verify: account with verified phone and a session at once")
    func happyPath() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        let started = try #require(try Self.start(client, "5123 4567", region: "EE")["result"])
        #expect(started["phone"] == "+37251234567")
        #expect(started["code_length"] == 6)
        #expect(started["resends_left"] == 2)
        let flow = try #require(started["flow"])
        let code = try Self.spooledCode(daemon, to: "+37251234567")
        let signedIn = try client.result("account.register.verify", ["flow": flow, "code": .string(code), "email": "Ann@Example.com", "password": "a long enough passphrase"])
        #expect(signedIn["account"]?["phone"] == "+37251234567")
        #expect(signedIn["account"]?["email"] == "ann@example.com")
        #expect(signedIn["account"]?["has_password"] == true)
        let token = try #require(signedIn["session"]?["token"])
        let session = try client.result("session.get", ["session": token])
        #expect(session["amr"] == ["otp"], "the password was set, not used to sign in")
        #expect(session["account"]?["id"] == signedIn["account"]?["id"])
        #expect(try client.result("auth.logout", ["session": token])["logged_out"] == true)
        #expect(try client.call("session.get", ["session": token]).errorReason == "session.invalid")
        // The number is taken now — said only to someone who proved it with a code.
        let again = try #require(try Self.start(client, "+37251234567")["result"])
        let secondCode = try Self.spooledCode(daemon, to: "+37251234567")
        #expect(try client.call("account.register.verify", ["flow": again["flow"]!, "code": .string(secondCode)]).errorReason == "phone.taken")
    }

    @Test("an email that is taken keeps the flow open for another try; unknown device members are refused")
    func emailTaken() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        let first = try #require(try Self.start(client, "+37251234567")["result"]?["flow"])
        _ = try client.result("account.register.verify", ["flow": first, "code": .string(try Self.spooledCode(daemon, to: "+37251234567")), "email": "ann@example.com"])
        let second = try #require(try Self.start(client, "+4915123456789")["result"]?["flow"])
        let code = try Self.spooledCode(daemon, to: "+4915123456789")
        #expect(try client.call("account.register.verify", ["flow": second, "code": .string(code), "email": "ANN@example.com"]).errorReason == "email.taken")
        let typo = try client.call("account.register.verify", ["flow": second, "code": .string(code), "device": ["kee": "x"]])
        #expect(typo.errorReason == "rpc.invalid_params")
        #expect(typo["error"]?["data"]?["field"] == "device.kee")
        #expect(try client.result("account.register.verify", ["flow": second, "code": .string(code), "email": "bob@example.com"])["account"]?["email"] == "bob@example.com")
    }

    @Test("invalid numbers store and send nothing", arguments: ["123", "5123 4567", "+999 1234 5678", "+372 640 0000"])
    func invalidNumbers(phone: String) throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let response = try Self.start(try daemon.connect(), phone)
        #expect(["phone.invalid", "phone.not_mobile"].contains(response.errorReason))
        #expect(!FileManager.default.fileExists(atPath: daemon.stateDirectory + "/sms-spool"))
    }

    @Test("wrong codes count down, then the flow is dead; a weak password burns no attempt")
    func wrongCodes() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        let flow = try #require(try Self.start(client, "+4915123456789")["result"]?["flow"])
        let code = try Self.spooledCode(daemon, to: "+4915123456789")
        let weak = try client.call("account.register.verify", ["flow": flow, "code": .string(code), "password": "short"])
        #expect(weak.errorReason == "password.weak")
        let wrong = code == "000000" ? "111111" : "000000"
        for left in [4, 3, 2, 1] {
            let response = try client.call("account.register.verify", ["flow": flow, "code": .string(wrong)])
            #expect(response.errorReason == "otp.wrong")
            #expect(response["error"]?["data"]?["attempts_left"] == .integer(Int64(left)))
        }
        #expect(try client.call("account.register.verify", ["flow": flow, "code": .string(wrong)]).errorReason == "otp.attempts_exhausted")
        #expect(try client.call("account.register.verify", ["flow": flow, "code": .string(code)]).errorReason == "otp.attempts_exhausted")
        #expect(try client.call("account.register.verify", ["flow": flow, "code": "12345"]).errorReason == "rpc.invalid_params")
    }

    @Test("a code expires after the configured lifetime")
    func expiry() throws {
        let daemon = try DaemonHarness(config: "[accounts]\ncode_lifetime = 1s\n")
        try daemon.start()
        let client = try daemon.connect()
        let flow = try #require(try Self.start(client, "+447400123456")["result"]?["flow"])
        let code = try Self.spooledCode(daemon, to: "+447400123456")
        sleep(2)  // whole seconds: the lifetime is 1 s, so 2 s is always past it
        #expect(try client.call("account.register.verify", ["flow": flow, "code": .string(code)]).errorReason == "otp.expired")
    }

    @Test("resends: a new code replaces the old, at most two per flow and five sends per number per hour")
    func resendLimits() throws {
        let daemon = try DaemonHarness(config: "[accounts]\nresend_delay = 0s\n")
        try daemon.start()
        let client = try daemon.connect()
        let phone = "+33612345678"
        let flow = try #require(try Self.start(client, phone)["result"]?["flow"])
        let first = try Self.spooledCode(daemon, to: phone)
        usleep(5_000)
        #expect(try client.result("account.register.resend", ["flow": flow])["resends_left"] == 1)
        let second = try Self.spooledCode(daemon, to: phone)
        usleep(5_000)
        #expect(try client.result("account.register.resend", ["flow": flow])["resends_left"] == 0)
        let third = try Self.spooledCode(daemon, to: phone)
        #expect(try client.call("account.register.resend", ["flow": flow]).errorReason == "otp.too_many_sends")
        if first != third {
            #expect(try client.call("account.register.verify", ["flow": flow, "code": .string(first)]).errorReason == "otp.wrong")
        }
        _ = second
        // Per number: 3 codes sent so far; two more flows fit, the sixth send does not.
        usleep(5_000)
        #expect(try Self.start(client, phone)["result"] != nil)
        usleep(5_000)
        #expect(try Self.start(client, phone)["result"] != nil)
        let limited = try Self.start(client, phone)
        #expect(limited.errorReason == "otp.too_many_sends")
        #expect((limited["error"]?["data"]?["retry_after"]?.integerValue ?? 0) > 3000)
        // The newest code of the first flow still works.
        usleep(5_000)
        #expect(try client.call("account.register.verify", ["flow": flow, "code": .string(third)])["result"] != nil)
    }

    @Test("resend before the delay is otp.too_early with the seconds to wait")
    func resendTooEarly() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        let flow = try #require(try Self.start(client, "+12015550123")["result"]?["flow"])
        let response = try client.call("account.register.resend", ["flow": flow])
        #expect(response.errorReason == "otp.too_early")
        #expect((response["error"]?["data"]?["retry_after"]?.integerValue ?? 0) > 50)
        #expect(try client.call("account.register.resend", ["flow": "flow_nope"]).errorReason == "otp.unknown_flow")
    }

    @Test("command backend: the number in SMS_TO, the text on stdin; a failing gateway makes that code never valid")
    func commandBackend() throws {
        let daemon = try DaemonHarness()
        let script = daemon.directory + "/send-sms"
        let outbox = daemon.directory + "/outbox"
        try "#!/bin/sh\n{ echo \"$SMS_TO\"; cat; } >> \(outbox)\n[ -e \(daemon.directory)/gateway-down ] && exit 1\nexit 0\n"
            .write(toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o755)
        try "[sms]\nbackend = command\ncommand = \(script)\n[accounts]\nresend_delay = 0s\n".write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        try daemon.start()
        let client = try daemon.connect()
        _ = FileManager.default.createFile(atPath: daemon.directory + "/gateway-down", contents: nil)
        let down = try Self.start(client, "+37251234567")
        #expect(down.errorReason == "sms.undeliverable")
        let flow = try #require(down["error"]?["data"]?["flow"])
        let lost = try #require(try String(contentsOfFile: outbox, encoding: .utf8).range(of: #"code is [0-9]{6}"#, options: .regularExpression))
        let lostCode = String(try String(contentsOfFile: outbox, encoding: .utf8)[lost].suffix(6))
        #expect(try client.call("account.register.verify", ["flow": flow, "code": .string(lostCode)]).errorReason == "otp.wrong",
                "a code whose delivery failed is never valid")
        try FileManager.default.removeItem(atPath: daemon.directory + "/gateway-down")
        #expect(try client.result("account.register.resend", ["flow": flow])["resends_left"] == 1)
        let text = try String(contentsOfFile: outbox, encoding: .utf8)
        #expect(text.contains("+37251234567\nYour authd code is"))
        let code = String(text.matches(of: /code is ([0-9]{6})/).last!.output.1)
        #expect(try client.result("account.register.verify", ["flow": flow, "code": .string(code)])["account"]?["phone"] == "+37251234567")
    }

    @Test("concurrent verifies of one code: exactly one succeeds")
    func concurrentVerifies() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        let flow = try #require(try Self.start(client, "+37251234567")["result"]?["flow"])
        let code = try Self.spooledCode(daemon, to: "+37251234567")
        let socket = daemon.socketPath
        let reasons = Mutex<[String]>([])
        let errors = onThreads(16) { _ in
            let response = try LineClient(socketPath: socket).call("account.register.verify", ["flow": flow, "code": .string(code)])
            reasons.withLock { $0.append(response["result"] != nil ? "ok" : response.errorReason ?? "?") }
        }
        #expect(errors.isEmpty)
        let all = reasons.withLock { $0 }
        #expect(all.filter { $0 == "ok" }.count == 1, "\(all)")
        #expect(all.filter { $0 == "otp.used" }.count == 15, "\(all)")
    }

    @Test("a restart between start and verify keeps the flow")
    func restartKeepsFlow() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let flow = try #require(try Self.start(try daemon.connect(), "+37251234567")["result"]?["flow"])
        let code = try Self.spooledCode(daemon, to: "+37251234567")
        #expect(try daemon.terminate() == 0)
        try daemon.start()
        #expect(try daemon.connect().result("account.register.verify", ["flow": flow, "code": .string(code)])["session"]?["token"] != nil)
    }

    @Test("no code, password, session token or full number in the log after a full run")
    func noSecretsInLog() throws {
        let daemon = try DaemonHarness(config: "[log]\nlevel = debug\n")
        try daemon.start()
        let client = try daemon.connect()
        let flow = try #require(try Self.start(client, "+37251234567")["result"]?["flow"])
        let code = try Self.spooledCode(daemon, to: "+37251234567")
        _ = try client.call("account.register.verify", ["flow": flow, "code": "000001"])
        let signedIn = try client.result("account.register.verify", ["flow": flow, "code": .string(code), "password": "my secret passphrase 42"])
        let token = try #require(signedIn["session"]?["token"]?.stringValue)
        _ = try client.result("session.get", ["session": .string(token)])
        let audit = try client.result("admin.audit.tail", ["limit": 100])
        #expect(try daemon.terminate() == 0)
        let log = daemon.log
        #expect(log.contains("account registered"))
        for secret in [code, "my secret passphrase", token, String(token.dropFirst(4)), "+37251234567", "51234567"] {
            #expect(!log.contains(secret), "\(secret) in the log")
            #expect(!"\(audit)".contains(secret), "\(secret) in the audit log")
        }
    }

    @Test("authctl register reads the code (and password) from a descriptor, saves the session; whoami and logout use it")
    func authctlRegister() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let sessionFile = daemon.directory + "/authctl-session"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: DaemonHarness.authctlPath)
        process.arguments = ["--socket", daemon.socketPath, "register", "5123 4567", "--region", "EE", "--password-fd", "0", "--code-fd", "0",
                             "--session-file", sessionFile]
        let input = Pipe(), output = Pipe(), errors = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        try input.fileHandleForWriting.write(contentsOf: Data("a long enough passphrase\n".utf8))
        var code: String?
        for _ in 0..<500 where code == nil {
            code = try? Self.spooledCode(daemon, to: "+37251234567")
            if code == nil { usleep(10_000) }
        }
        try input.fileHandleForWriting.write(contentsOf: Data((try #require(code) + "\n").utf8))
        try input.fileHandleForWriting.close()
        let stdout = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(stderr)")
        #expect(stdout.hasPrefix("registered +37251234567 as acc_"))
        #expect(stderr.contains("A 6-digit code was sent to +37251234567; it expires in ") && stderr.contains(" min "))
        var info = stat()
        #expect(stat(sessionFile, &info) == 0 && info.st_mode & 0o777 == 0o600)
        let whoami = try daemon.authctl(["whoami", "--session-file", sessionFile])
        #expect(whoami.status == 0)
        #expect(whoami.stdout.contains("+37251234567"))
        #expect(whoami.stdout.contains("signed in with SMS code at"), "\(whoami.stdout)")
        #expect(try daemon.authctl(["logout", "--session-file", sessionFile]).stdout == "logged out\n")
        #expect(access(sessionFile, F_OK) != 0)
        let after = try daemon.authctl(["whoami", "--session-file", sessionFile])
        #expect(after.status == 7, "not logged in")
    }

    @Test("http backend: authd-http POSTs the number and text as JSON with the bearer token; non-2xx is undeliverable")
    func httpBackend() throws {
        let daemon = try DaemonHarness()
        let gateway = Process()
        gateway.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        gateway.arguments = [URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Python/sms_gateway.py").path, daemon.directory]
        gateway.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        try gateway.run()
        let gatewayPID = gateway.processIdentifier
        defer { kill(gatewayPID, SIGKILL) }
        var port: String?
        for _ in 0..<500 where port == nil {
            port = try? String(contentsOfFile: daemon.directory + "/port", encoding: .utf8)
            if port == nil { usleep(10_000) }
        }
        let gatewayPort = try #require(port)
        try "s3cret-token\n".write(toFile: daemon.directory + "/sms-token", atomically: true, encoding: .utf8)
        try "[sms]\nbackend = http\nurl = http://127.0.0.1:\(gatewayPort)/send\ntoken_file = \(daemon.directory)/sms-token\ntimeout = 5s\n[accounts]\nresend_delay = 0s\n"
            .write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        try daemon.start()
        let client = try daemon.connect()
        let flow = try #require(try Self.start(client, "+37251234567")["result"]?["flow"])
        let log = try String(contentsOfFile: daemon.directory + "/requests.log", encoding: .utf8)
        #expect(log.contains("AUTH Bearer s3cret-token\nTYPE application/json\nBODY {\"text\":\"Your authd code is "))
        #expect(log.contains(#""to":"+37251234567"}"#))
        let code = String(log.matches(of: /code is ([0-9]{6})/).last!.output.1)
        #expect(try client.result("account.register.verify", ["flow": flow, "code": .string(code)])["account"] != nil)
        _ = FileManager.default.createFile(atPath: daemon.directory + "/down", contents: nil)
        #expect(try Self.start(client, "+4915123456789").errorReason == "sms.undeliverable")
        #expect(!daemon.log.contains("s3cret-token"))
    }

    @Test("the http backend refuses clear-text URLs to other hosts", arguments: ["http://sms.example.com/send", "http://localhost.evil.example/send", "http://127.0.0.1.evil.example/"])
    func httpNeedsTLS(url: String) throws {
        let daemon = try DaemonHarness(config: "[sms]\nbackend = http\nurl = \(url)\n")
        #expect(throws: HarnessError.self) { try daemon.start() }
        #expect(daemon.log.contains("sms.url: must be an https:// URL"))
    }
}
