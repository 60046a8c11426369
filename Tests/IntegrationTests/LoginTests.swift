import Foundation
import Glibc
import Protocol
import Testing

@Suite("Login, sessions, devices")
struct LoginTests {
    /// Registers `phone` with `password` through the spool backend; returns the verify result.
    static func register(_ daemon: DaemonHarness, _ client: LineClient, phone: String, password: String, device: String = "device-1",
                         email: String = "owner@example.org") throws -> JSONValue {
        let flow = try #require(try RegistrationTests.start(client, phone)["result"]?["flow"])
        let code = try RegistrationTests.spooledCode(daemon, to: phone)
        return try client.result("account.register.verify", [
            "flow": flow, "code": .string(code), "email": .string(email), "password": .string(password), "device": ["key": .string(device), "name": "first"],
        ])
    }

    @Test("password login by phone or email; unknown account, wrong password and bad logins all look alike")
    func login() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        let registered = try Self.register(daemon, client, phone: "+37251234567", password: "a long enough passphrase")
        let byPhone = try client.result("auth.login", ["login": "5123 4567", "region": "EE", "password": "a long enough passphrase", "device": ["key": "device-1"]])
        #expect(byPhone["account"]?["id"] == registered["account"]?["id"])
        let byEmail = try client.result("auth.login", ["login": "OWNER@example.org", "password": "a long enough passphrase", "device": ["key": "device-1"]])
        #expect(byEmail["account"]?["id"] == registered["account"]?["id"])
        #expect(try client.result("session.get", ["session": byEmail["session"]!["token"]!])["amr"] == ["pwd"])
        var messages: Set<String> = []
        for (login, password) in [("+37251234567", "wrong password here"), ("+4915123456789", "a long enough passphrase"),
                                  ("nobody@example.org", "a long enough passphrase"), ("not a login", "x")] {
            let response = try client.call("auth.login", ["login": .string(login), "password": .string(password)])
            #expect(response.errorReason == "auth.failed", "\(login)")
            messages.insert(response["error"]?["message"]?.stringValue ?? "")
        }
        #expect(messages.count == 1, "one message for every failure: \(messages)")
    }

    @Test("five failures lock the account, even against the right password, and say until when")
    func lockout() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        _ = try Self.register(daemon, client, phone: "+37251234567", password: "a long enough passphrase")
        for _ in 0..<4 {
            #expect(try client.call("auth.login", ["login": "+37251234567", "password": "wrong guess 123"]).errorReason == "auth.failed")
        }
        let fifth = try client.call("auth.login", ["login": "+37251234567", "password": "wrong guess 123"])
        #expect(fifth.errorReason == "account.locked")
        #expect(fifth["error"]?["data"]?["locked_until"]?.stringValue != nil)
        #expect(try client.call("auth.login", ["login": "+37251234567", "password": "a long enough passphrase"]).errorReason == "account.locked")
        let audit = try client.result("admin.audit.tail", ["limit": 100])["records"]?.arrayValue ?? []
        #expect(audit.filter { $0["method"] == "auth.login" && $0["outcome"] == "error" }.count == 6, "every failure is audited")
    }

    @Test("the device limit: a third device is refused and gets no session; revoking a device frees its place")
    func deviceLimit() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        let first = try Self.register(daemon, client, phone: "+37251234567", password: "a long enough passphrase", device: "laptop")
        let token = try #require(first["session"]?["token"])
        _ = try client.result("auth.login", ["login": "+37251234567", "password": "a long enough passphrase", "device": ["key": "phone", "name": "Phone"]])
        let third = try client.call("auth.login", ["login": "+37251234567", "password": "a long enough passphrase", "device": ["key": "tablet", "name": "Tablet"]])
        #expect(third.errorReason == "device.limit_reached")
        #expect(third["error"]?["data"]?["limit"] == 2)
        let devices = try #require(try client.result("device.list", ["session": token])["devices"]?.arrayValue)
        #expect(devices.map { $0["name"] } == ["first", "Phone"])
        #expect(try client.result("session.list", ["session": token])["sessions"]?.arrayValue?.count == 2)
        let phone = try #require(devices.first { $0["name"] == "Phone" }?["id"])
        #expect(try client.result("device.revoke", ["session": token, "id": phone])["revoked"] == true)
        #expect(try client.result("session.list", ["session": token])["sessions"]?.arrayValue?.count == 1)
        #expect(try client.call("auth.login", ["login": "+37251234567", "password": "a long enough passphrase", "device": ["key": "tablet", "name": "Tablet"]])["result"] != nil)
        // A removed device may sign in again (as a new device under the limit): revoke the tablet, bring the phone back.
        let tablet = try #require(try client.result("device.list", ["session": token])["devices"]?.arrayValue?.first { $0["name"] == "Tablet" }?["id"])
        #expect(try client.result("device.revoke", ["session": token, "id": tablet])["revoked"] == true)
        let back = try client.call("auth.login", ["login": "+37251234567", "password": "a long enough passphrase", "device": ["key": "phone", "name": "Phone"]])
        #expect(back["result"]?["session"] != nil, "\(back)")
    }

    @Test("profile: change the password only with the current one; sessions can be revoked one by one")
    func profileAndSessions() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        let first = try Self.register(daemon, client, phone: "+37251234567", password: "a long enough passphrase")
        let token = try #require(first["session"]?["token"])
        #expect(try client.call("account.profile.set", ["session": token, "password": "another long passphrase"]).errorReason == "rpc.invalid_params")
        #expect(try client.call("account.profile.set", ["session": token, "password": "another long passphrase", "current_password": "wrong one"]).errorReason == "auth.failed")
        #expect(try client.call("account.profile.set", ["session": token, "email": "not an email"]).errorReason == "email.invalid")
        let updated = try client.result("account.profile.set", ["session": token, "password": "another long passphrase",
                                                                 "current_password": "a long enough passphrase", "email": "new@example.org"])
        #expect(updated["email"] == "new@example.org")
        #expect(try client.call("auth.login", ["login": "+37251234567", "password": "a long enough passphrase"]).errorReason == "auth.failed")
        let second = try client.result("auth.login", ["login": "new@example.org", "password": "another long passphrase"])
        let sessions = try #require(try client.result("session.list", ["session": token])["sessions"]?.arrayValue)
        #expect(sessions.count == 2)
        #expect(sessions.filter { $0["current"] == true }.count == 1)
        #expect(try client.result("session.revoke", ["session": token, "id": second["session"]!["id"]!])["revoked"] == true)
        #expect(try client.call("session.get", ["session": second["session"]!["token"]!]).errorReason == "session.invalid")
        #expect(try client.call("session.revoke", ["session": token, "id": "ses_nope"]).errorReason == "session.unknown")
    }

    @Test("auth.token: a daemon JWT for the session's account that token.verify and PyJWT accept")
    func accountToken() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        let registered = try Self.register(daemon, client, phone: "+37251234567", password: "a long enough passphrase")
        let issued = try client.result("auth.token", ["session": registered["session"]!["token"]!, "aud": "org.example.bank", "nonce": "n1"])
        let token = try #require(issued["token"]?.stringValue)
        let claims = try #require(try client.result("token.verify", ["token": .string(token), "aud": "org.example.bank"])["claims"])
        #expect(claims["sub"] == registered["account"]?["id"])
        #expect(claims["amr"] == ["otp"])
        #expect(claims["phone_number_verified"] == true)
        #expect(claims["nonce"] == "n1")
        let jwks = try daemon.authctl(["keys", "jwks"]).stdout
        let verified = try DaemonHarness.run(["/usr/bin/python3", TokenTests.pythonScript, token, jwks, "org.example.bank", "authd"])
        #expect(verified.status == 0, "\(verified.stderr)")
        #expect(try client.call("auth.token", ["session": "as1.nope", "aud": "x"]).errorReason == "session.invalid")
    }
}

@Suite("PIN second factor")
struct PINTests {
    @Test("enable a PIN; sign-in then needs it; wrong PINs fail alike and five in a row lock")
    func pinLogin() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        let registered = try LoginTests.register(daemon, client, phone: "+37251234567", password: "a long enough passphrase")
        let token = try #require(registered["session"]?["token"])
        #expect(try client.call("twofactor.pin.enable", ["session": token, "pin": "123456", "confirm": "123456"]).errorReason == "pin.weak")
        #expect(try client.call("twofactor.pin.enable", ["session": token, "pin": "480913", "confirm": "480914"]).errorReason == "pin.mismatch")
        #expect(try client.result("twofactor.pin.enable", ["session": token, "pin": "480913", "confirm": "480913"])["enabled"] == true)
        let step = try client.result("auth.login", ["login": "+37251234567", "password": "a long enough passphrase", "device": ["key": "device-1"]])
        #expect(step["next"] == "pin")
        #expect(step["session"] == nil)
        let flow = try #require(step["flow"])
        #expect(try client.call("auth.login.pin", ["flow": flow, "pin": "000000"]).errorReason == "auth.failed")
        #expect(try client.call("auth.login.pin", ["flow": flow, "pin": "abc"]).errorReason == "auth.failed")
        #expect(try client.call("auth.login.pin", ["flow": flow]).errorReason == "auth.failed", "a missing PIN is a failed PIN")
        let signedIn = try client.result("auth.login.pin", ["flow": flow, "pin": "480913"])
        #expect(try client.result("session.get", ["session": signedIn["session"]!["token"]!])["amr"] == ["pwd", "pin"])
        #expect(try client.call("auth.login.pin", ["flow": flow, "pin": "480913"]).errorReason == "auth.failed", "a flow completes once")
        // With a PIN on, 8 characters are enough for a password.
        #expect(try client.result("account.profile.set", ["session": token, "password": "eight ch", "current_password": "a long enough passphrase"])["has_password"] == true)
        // Five wrong PINs in a row lock the account.
        let next = try #require(try client.result("auth.login", ["login": "+37251234567", "password": "eight ch", "device": ["key": "device-1"]])["flow"])
        var reasons: [String] = []
        for _ in 0..<5 { reasons.append(try client.call("auth.login.pin", ["flow": next, "pin": "111112"]).errorReason ?? "?") }
        #expect(reasons == ["auth.failed", "auth.failed", "auth.failed", "auth.failed", "account.locked"])
        #expect(try client.call("auth.login.pin", ["flow": next, "pin": "480913"]).errorReason == "account.locked")
        // While the PIN is locked, guessing it through twofactor.pin.disable is locked too.
        #expect(try client.call("twofactor.pin.disable", ["session": token, "password": "eight ch", "pin": "000001"]).errorReason == "account.locked")
    }
}

@Suite("OTP login")
struct OTPLoginTests {
    static func spoolCount(_ daemon: DaemonHarness) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: daemon.stateDirectory + "/sms-spool").count) ?? 0
    }

    @Test("a code by SMS signs in; a wrong code brings a new one, at most twice, then the flow ends")
    func otpLogin() throws {
        let daemon = try DaemonHarness(config: "[accounts]\nresend_delay = 0s\n")
        try daemon.start()
        let client = try daemon.connect()
        _ = try LoginTests.register(daemon, client, phone: "+37251234567", password: "a long enough passphrase")
        // Happy path.
        let flow = try #require(try client.result("auth.otp.start", ["phone": "+37251234567"])["flow"])
        let code = try RegistrationTests.spooledCode(daemon, to: "+37251234567")
        let signedIn = try client.result("auth.otp.verify", ["flow": flow, "code": .string(code), "device": ["key": "device-1"]])
        #expect(try client.result("session.get", ["session": signedIn["session"]!["token"]!])["amr"] == ["otp"])
        // Wrong codes.
        let second = try #require(try client.result("auth.otp.start", ["phone": "+37251234567"])["flow"])
        let firstCode = try RegistrationTests.spooledCode(daemon, to: "+37251234567")
        let wrong = firstCode == "000000" ? "999999" : "000000"
        let sent = Self.spoolCount(daemon)
        let first = try client.call("auth.otp.verify", ["flow": second, "code": .string(wrong)])
        #expect(first.errorReason == "otp.wrong")
        #expect(first["error"]?["data"]?["new_code_sent"] == true)
        #expect(Self.spoolCount(daemon) == sent + 1, "a new SMS went out")
        #expect(try client.call("auth.otp.verify", ["flow": second, "code": .string(firstCode)]).errorReason == "otp.wrong", "the old code is void")
        #expect(try client.call("auth.otp.verify", ["flow": second, "code": .string(wrong)]).errorReason == "otp.attempts_exhausted")
        #expect(Self.spoolCount(daemon) == sent + 2)
    }

    @Test("a slow SMS gateway does not tell who has an account: auth.otp.start, and a wrong code's replacement, answer while the gateway still sends; the code it sends signs in")
    func slowGatewayTellsNothing() throws {
        let daemon = try DaemonHarness()
        let (outbox, hold, release) = (daemon.directory + "/outbox", daemon.directory + "/hold", daemon.directory + "/release")
        // The gateway: while `hold` exists, each SMS waits (up to 20 s) for `release` before it is sent.
        let script = daemon.directory + "/send-sms"
        try """
            #!/bin/sh
            text=$(cat)
            if [ -e \(hold) ]; then i=0; while [ ! -e \(release) ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; fi
            printf '%s\\n%s\\n' "$SMS_TO" "$text" >> \(outbox)
            """.write(toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o755)
        try "[sms]\nbackend = command\ncommand = \(script)\n[accounts]\nresend_delay = 0s\n".write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        try daemon.start()
        let client = try daemon.connect()
        let flow = try #require(try RegistrationTests.start(client, "+37251234567")["result"]?["flow"])
        let registration = try #require(try String(contentsOfFile: outbox, encoding: .utf8).firstMatch(of: /code is ([0-9]{6})/)?.output.1)
        _ = try client.result("account.register.verify", ["flow": flow, "code": .string(String(registration))])
        func codes() -> [String] { ((try? String(contentsOfFile: outbox, encoding: .utf8)) ?? "").matches(of: /code is ([0-9]{6})/).map { String($0.output.1) } }

        /// Lets the held SMS go, and waits (bounded) until the gateway sent `count` in all.
        func released(until count: Int) throws {
            _ = FileManager.default.createFile(atPath: release, contents: nil)
            let deadline = Date().addingTimeInterval(20)
            while codes().count < count && Date() < deadline { usleep(20_000) }
            try FileManager.default.removeItem(atPath: release)
        }

        /// The answer to `method`, and whether it took at least the fixed time every such answer takes.
        func timed(_ method: String, _ params: JSONValue) throws -> (answer: JSONValue, padded: Bool) {
            let begun = ContinuousClock.now
            let answer = try client.call(method, params)
            return (answer, ContinuousClock.now - begun >= .milliseconds(300))
        }
        _ = FileManager.default.createFile(atPath: hold, contents: nil)
        let (startAnswer, startPadded) = try timed("auth.otp.start", ["phone": "+37251234567"])
        let started = try #require(startAnswer["result"]?["flow"])
        #expect(codes().count == 1, "answered while the gateway still holds the code")
        let (unknown, unknownPadded) = try timed("auth.otp.start", ["phone": "+4915123456789"])
        #expect(unknown["result"]?["flow"] != nil && startPadded && unknownPadded, "both answer after the same fixed time: \(unknown)")
        try released(until: 2)
        let first = codes().last ?? ""
        let (wrong, wrongPadded) = try timed("auth.otp.verify", ["flow": started, "code": .string(first == "000000" ? "999999" : "000000")])
        #expect(wrong.errorReason == "otp.wrong" && wrong["error"]?["data"]?["new_code_sent"] == true && wrongPadded, "\(wrong)")
        #expect(codes().count == 2, "the replacement too is answered while the gateway holds it")
        try released(until: 3)
        let replacement = try #require(codes().dropFirst(2).first, "the replacement went out once released")
        let signedIn = try client.result("auth.otp.verify", ["flow": started, "code": .string(replacement), "device": ["key": "device-1"]])
        #expect(signedIn["session"] != nil, "\(signedIn)")
    }

    @Test("a number without an account gets the same answer and no SMS")
    func unknownNumber() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        let started = try client.result("auth.otp.start", ["phone": "+4915123456789"])
        #expect(started["code_length"] == 6)
        #expect(started["phone"] == "+4915123456789")
        #expect(Self.spoolCount(daemon) == 0)
        #expect(try client.call("auth.otp.verify", ["flow": started["flow"]!, "code": "123456"]).errorReason == "otp.wrong")
    }
}

@Suite("Deactivation and account admin")
struct AccountAdminTests {
    @Test("deactivation needs the password, ends every session, and the account never signs in again")
    func deactivate() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        let registered = try LoginTests.register(daemon, client, phone: "+37251234567", password: "a long enough passphrase")
        let token = try #require(registered["session"]?["token"])
        let other = try client.result("auth.login", ["login": "+37251234567", "password": "a long enough passphrase", "device": ["key": "device-2"]])
        #expect(try client.call("account.deactivate", ["session": token]).errorReason == "rpc.invalid_params")
        #expect(try client.call("account.deactivate", ["session": token, "password": "not the password"]).errorReason == "auth.failed")
        #expect(try client.result("account.deactivate", ["session": token, "password": "a long enough passphrase"])["deactivated"] == true)
        for session in [token, other["session"]!["token"]!] {
            #expect(try client.call("session.get", ["session": session]).errorReason == "session.invalid")
        }
        #expect(try client.call("auth.login", ["login": "+37251234567", "password": "a long enough passphrase"]).errorReason == "auth.failed")
        let sent = OTPLoginTests.spoolCount(daemon)
        _ = try client.result("auth.otp.start", ["phone": "+37251234567"])
        #expect(OTPLoginTests.spoolCount(daemon) == sent, "no code for a deactivated account")
        let record = try client.result("admin.accounts.show", ["account": "+372 5123 4567"])
        #expect(record["deactivated_at"]?.stringValue != nil, "the record stays, for audit")
        #expect(record["active_devices"] == 0)
    }

    @Test("admins list, show, unlock and deactivate accounts")
    func admin() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        let registered = try LoginTests.register(daemon, client, phone: "+37251234567", password: "a long enough passphrase")
        for _ in 0..<5 { _ = try client.call("auth.login", ["login": "+37251234567", "password": "wrong guess 123"]) }
        let locked = try client.result("admin.accounts.show", ["account": "owner@example.org"])
        #expect(locked["locked_until"]?.stringValue != nil)
        #expect(locked["has_password"] == true)
        let unlocked = try client.result("admin.accounts.unlock", ["account": registered["account"]!["id"]!])
        #expect(unlocked["locked_until"] == nil)
        #expect(try client.call("auth.login", ["login": "+37251234567", "password": "a long enough passphrase", "device": ["key": "device-1"]])["result"] != nil)
        let list = try #require(try client.result("admin.accounts.list")["accounts"]?.arrayValue)
        #expect(list.map { $0["phone"] } == ["+37251234567"])
        #expect(try client.result("admin.accounts.deactivate", ["account": "+37251234567"])["deactivated_at"]?.stringValue != nil)
        #expect(try client.call("admin.accounts.show", ["account": "nobody@example.org"]).errorReason == "account.unknown")
    }
}

@Suite("authctl account commands")
struct AuthctlAccountTests {
    @Test("login with password and PIN from a descriptor; sessions, devices, token account, 2fa, deactivate, admin accounts")
    func commands() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        let registered = try LoginTests.register(daemon, client, phone: "+37251234567", password: "a long enough passphrase")
        _ = try client.result("twofactor.pin.enable", ["session": registered["session"]!["token"]!, "pin": "480913", "confirm": "480913"])
        let file = ["--session-file", daemon.directory + "/cli-session"]
        let login = try daemon.authctl(["login", "+37251234567", "--password-fd", "0", "--pin-fd", "0"] + file, stdin: "a long enough passphrase\n480913\n")
        #expect(login.status == 0, "\(login.stderr)")
        #expect(login.stdout.hasPrefix("signed in as +37251234567"))
        let wrong = try daemon.authctl(["login", "+37251234567", "--password-fd", "0"] + file, stdin: "not the password\n")
        #expect(wrong.status == 5)
        #expect(wrong.stderr.contains("(auth.failed)"))
        let sessions = try daemon.authctl(["sessions"] + file)
        #expect(sessions.stdout.split(separator: "\n").filter { $0.hasPrefix("*") }.count == 1)
        #expect(sessions.stdout.contains("password and account PIN"), "\(sessions.stdout)")
        #expect(try daemon.authctl(["devices"] + file).stdout.hasPrefix("device limit: 2"))
        let token = try daemon.authctl(["token", "account", "--aud", "org.example.bank"] + file)
        #expect(token.status == 0 && token.stdout.split(separator: ".").count == 3)
        #expect(try daemon.authctl(["2fa", "disable", "--json", "--password-fd", "0", "--pin-fd", "0"] + file, stdin: "a long enough passphrase\n480913\n").stdout == "{\"enabled\":false}\n")
        let list = try daemon.authctl(["admin", "accounts", "list"])
        #expect(list.stdout.contains("+37251234567"))
        #expect(try daemon.authctl(["account", "deactivate", "--password-fd", "0"] + file, stdin: "a long enough passphrase\n").stdout == "account deactivated\n")
        #expect(try daemon.authctl(["whoami"] + file).status == 7)
        #expect(try daemon.authctl(["admin", "accounts", "show", "owner@example.org"]).stdout.contains("[deactivated"))
    }

    @Test("OTP login from a descriptor")
    func otpLogin() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        _ = try LoginTests.register(daemon, client, phone: "+37251234567", password: "a long enough passphrase")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: DaemonHarness.authctlPath)
        process.arguments = ["--socket", daemon.socketPath, "login", "+37251234567", "--otp", "--code-fd", "0", "--session-file", daemon.directory + "/s"]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        let before = OTPLoginTests.spoolCount(daemon)
        try process.run()
        for _ in 0..<500 where OTPLoginTests.spoolCount(daemon) == before { usleep(10_000) }
        try input.fileHandleForWriting.write(contentsOf: Data((try RegistrationTests.spooledCode(daemon, to: "+37251234567") + "\n").utf8))
        try input.fileHandleForWriting.close()
        let stdout = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(stdout.hasPrefix("signed in as +37251234567"))
    }
}

@Suite("Device policy")
struct DevicePolicyTests {
    @Test("replace_oldest ends the least recently used device's sessions; an admin can set a limit per account")
    func replaceOldest() throws {
        let daemon = try DaemonHarness(config: "[accounts]\ndevice_policy = replace_oldest\n")
        try daemon.start()
        let client = try daemon.connect()
        let first = try LoginTests.register(daemon, client, phone: "+37251234567", password: "a long enough passphrase", device: "laptop")
        func login(_ device: String) throws -> JSONValue {
            try client.call("auth.login", ["login": "+37251234567", "password": "a long enough passphrase", "device": ["key": .string(device)]])
        }
        // Use times have whole-second resolution: one second later, the phone is unambiguously
        // the more recently used device.
        sleep(1)
        let phone = try #require(try login("phone")["result"]?["session"]?["token"])
        _ = try client.result("session.get", ["session": phone])  // the phone is now more recently used than the laptop
        let tablet = try #require(try login("tablet")["result"]?["session"]?["token"])
        #expect(try client.call("session.get", ["session": first["session"]!["token"]!]).errorReason == "session.invalid", "the laptop made room")
        #expect(try client.result("session.get", ["session": phone])["device"] != nil)
        // Per account: limit 1, deny.
        let record = try client.result("admin.accounts.set", ["account": "+37251234567", "device_limit": 1, "device_policy": "deny"])
        #expect(record["device_limit"] == 1)
        #expect(try login("desktop").errorReason == "device.limit_reached")
        #expect(try client.result("device.list", ["session": tablet])["limit"] == 1)
        #expect(try client.call("admin.accounts.set", ["account": "+37251234567", "device_policy": "random"]).errorReason == "rpc.invalid_params")
    }
}

@Suite("Guessing through side doors")
struct SideDoorTests {
    @Test("wrong codes at the number's hourly send limit still count: the flow ends instead of erroring forever")
    func otpAtSendLimit() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        _ = try LoginTests.register(daemon, client, phone: "+37251234567", password: "a long enough passphrase")  // 1 send
        for _ in 0..<3 { _ = try client.result("auth.otp.start", ["phone": "+37251234567"]) }                        // 4 sends
        let flow = try #require(try client.result("auth.otp.start", ["phone": "+37251234567"])["flow"])              // 5 sends
        let code = try RegistrationTests.spooledCode(daemon, to: "+37251234567")
        let wrong = code == "000000" ? "111111" : "000000"
        #expect(try client.call("auth.otp.verify", ["flow": flow, "code": .string(wrong)]).errorReason == "otp.attempts_exhausted")
        #expect(try client.call("auth.otp.verify", ["flow": flow, "code": .string(code)]).errorReason == "otp.attempts_exhausted")
    }

    @Test("wrong current passwords in account.profile.set count toward the lockout")
    func profileGuessing() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        let token = try #require(try LoginTests.register(daemon, client, phone: "+37251234567", password: "a long enough passphrase")["session"]?["token"])
        var reasons: [String] = []
        for _ in 0..<5 {
            reasons.append(try client.call("account.profile.set", ["session": token, "password": "another long passphrase", "current_password": "guess guess"]).errorReason ?? "?")
        }
        #expect(reasons.last == "account.locked")
        #expect(try client.call("auth.login", ["login": "+37251234567", "password": "a long enough passphrase"]).errorReason == "account.locked")
    }

    @Test("a known device whose sessions all ended counts again when it comes back")
    func returningDevice() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        let laptop = try #require(try LoginTests.register(daemon, client, phone: "+37251234567", password: "a long enough passphrase", device: "laptop")["session"]?["token"])
        func login(_ device: String) throws -> JSONValue {
            try client.call("auth.login", ["login": "+37251234567", "password": "a long enough passphrase", "device": ["key": .string(device)]])
        }
        _ = try #require(try login("phone")["result"])
        _ = try client.result("auth.logout", ["session": laptop])
        _ = try #require(try login("tablet")["result"], "the laptop's place was free")
        #expect(try login("laptop").errorReason == "device.limit_reached")
    }
}
