import Foundation
import Glibc
import Protocol
import Testing

/// The lock as a newcomer meets it through authctl alone: an account registered without a
/// password unlocks with a code sent by SMS, `password set` and `password change` give and
/// change the password, and a user whom nothing could unlock is never locked.
@Suite("Unlocking without a password, and the password commands")
struct UnlockTests {
    static let phone = "+37251234567"
    static let password = "a long enough passphrase"

    /// Runs authctl with its standard input on a pipe, answering the SMS codes it waits for: for
    /// each of `answers`, waits (at most 10 s) for one more SMS than had been sent, then writes
    /// what `answer` makes of the newest code to `phone`, one line each.
    static func authctlAnsweringCodes(_ daemon: DaemonHarness, _ arguments: [String], phone: String = phone,
                                      answers: [(String) -> String]) throws -> DaemonHarness.CommandResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: DaemonHarness.authctlPath)
        process.arguments = ["--socket", daemon.socketPath] + arguments
        process.environment = ["PATH": "/usr/bin:/bin", "HOME": daemon.directory]
        let input = Pipe(), output = Pipe(), errors = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        var sent = OTPLoginTests.spoolCount(daemon)
        try process.run()
        for answer in answers {
            // Bounded, but generously: under a full parallel run the daemon's commit and spool
            // write before the SMS can take seconds (fsync behind a hundred other tests).
            for _ in 0..<6000 where OTPLoginTests.spoolCount(daemon) == sent && process.isRunning { usleep(10_000) }
            guard OTPLoginTests.spoolCount(daemon) > sent else { break }
            sent = OTPLoginTests.spoolCount(daemon)
            try input.fileHandleForWriting.write(contentsOf: Data((answer(try RegistrationTests.spooledCode(daemon, to: phone)) + "\n").utf8))
        }
        try input.fileHandleForWriting.close()
        let stdout = output.fileHandleForReading.readDataToEndOfFile()
        let stderr = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return .init(status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self), stderr: String(decoding: stderr, as: UTF8.self))
    }

    /// A code that is surely not `code`.
    static func wrong(_ code: String) -> String { code == "000000" ? "111111" : "000000" }

    @Test("the newcomer's path: register without a password, lock, unlock with the code sent by SMS (a wrong one brings a new one), token local works again")
    func newcomerUnlocksBySMS() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let registered = try Self.authctlAnsweringCodes(daemon, ["register", Self.phone, "--code-fd", "0"], answers: [{ $0 }])
        #expect(registered.status == 0, "\(registered.stderr)")
        let lock = try daemon.authctl(["lock"])
        #expect(lock.status == 0 && lock.stdout == "locked\n", "\(lock)")
        let status = try daemon.authctl(["lock", "--status"])
        #expect(status.stdout.contains("unlock with: SMS code\n"), "\(status.stdout)")
        let locked = try daemon.authctl(["token", "local", "--aud", "myapp"])
        #expect(locked.status == 6, "locked")
        #expect(locked.stderr.contains("(a code sent by SMS)") && !locked.stderr.contains("fingerprint"), "only what opens it: \(locked.stderr)")

        // The first code typed wrong: authd sends a new one and asks again.
        let unlock = try Self.authctlAnsweringCodes(daemon, ["unlock", "--code-fd", "0"], answers: [Self.wrong, { $0 }])
        #expect(unlock.status == 0, "\(unlock.stderr)")
        #expect(unlock.stdout == "unlocked (SMS code)\n")
        let token = try daemon.authctl(["token", "local", "--aud", "myapp"])
        #expect(token.status == 0 && token.stdout.split(separator: ".").count == 3, "\(token.stderr)")
        #expect(try daemon.authctl(["lock", "--status"]).stdout.hasPrefix("unlocked\n"))
        #expect(!daemon.log.contains(try RegistrationTests.spooledCode(daemon, to: Self.phone)), "no code in the log")
    }

    @Test("password set: refused while locked and when too weak; then the password unlocks, and --sms still asks for a code")
    func passwordSetThenUnlockByPassword() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        #expect(try Self.authctlAnsweringCodes(daemon, ["register", Self.phone, "--code-fd", "0"], answers: [{ $0 }]).status == 0)
        let noneYet = try daemon.authctl(["password", "change", "--password-fd", "0"], stdin: "anything\n\(Self.password)\n")
        #expect(noneYet.status == 1 && noneYet.stderr.contains("authctl password set"), "\(noneYet)")
        #expect(try daemon.authctl(["unlock", "--password-fd", "0"], stdin: "guess\n").stderr.contains("no password"), "not locked, but told why")

        #expect(try daemon.authctl(["lock"]).status == 0)
        let whileLocked = try daemon.authctl(["password", "set", "--password-fd", "0"], stdin: Self.password + "\n")
        #expect(whileLocked.status == 6 && whileLocked.stderr.contains("(session.locked)"), "\(whileLocked)")
        let byCode = try Self.authctlAnsweringCodes(daemon, ["unlock", "--code-fd", "0"], answers: [{ $0 }])
        #expect(byCode.status == 0, "\(byCode)\n\(daemon.log)")

        let weak = try daemon.authctl(["password", "set", "--password-fd", "0"], stdin: "short\n")
        #expect(weak.status == 1 && weak.stderr.contains("(password.weak)"), "\(weak)")
        #expect(try daemon.authctl(["lock", "--status"]).stdout.contains("unlock with: SMS code\n"), "nothing changed")
        let set = try daemon.authctl(["password", "set", "--password-fd", "0"], stdin: Self.password + "\n")
        #expect(set.status == 0 && set.stdout == "password set\n", "\(set)")
        let again = try daemon.authctl(["password", "set", "--password-fd", "0"], stdin: Self.password + "\n")
        #expect(again.status == 1 && again.stderr.contains("authctl password change"), "\(again)")
        #expect(try daemon.authctl(["lock", "--status"]).stdout.contains("unlock with: password, SMS code\n"))

        #expect(try daemon.authctl(["lock"]).status == 0)
        let wrong = try daemon.authctl(["unlock", "--password-fd", "0"], stdin: "not the password\n")
        #expect(wrong.status == 5 && wrong.stderr.contains("(auth.failed)"), "\(wrong)")
        let unlocked = try daemon.authctl(["unlock", "--password-fd", "0"], stdin: Self.password + "\n")
        #expect(unlocked.status == 0 && unlocked.stdout == "unlocked (password)\n", "\(unlocked)")
        #expect(try daemon.authctl(["token", "local", "--aud", "myapp"]).status == 0)

        #expect(try daemon.authctl(["lock"]).status == 0)
        let bySMS = try Self.authctlAnsweringCodes(daemon, ["unlock", "--sms", "--code-fd", "0"], answers: [{ $0 }])
        #expect(bySMS.status == 0 && bySMS.stdout == "unlocked (SMS code)\n", "\(bySMS)")
        let login = try daemon.authctl(["login", Self.phone, "--password-fd", "0", "--session-file", daemon.directory + "/other"], stdin: Self.password + "\n")
        #expect(login.status == 0, "the password signs in: \(login.stderr)")
    }

    @Test("password change: a wrong current password is refused and counts toward the lockout; the right one changes it")
    func passwordChange() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        let registered = try LoginTests.register(daemon, client, phone: Self.phone, password: Self.password)
        let file = daemon.directory + "/session"
        try (registered["session"]!["token"]!.stringValue! + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        let session = ["--session-file", file]
        let newPassword = "another long passphrase"

        let changed = try daemon.authctl(["password", "change", "--password-fd", "0"] + session, stdin: "\(Self.password)\n\(newPassword)\n")
        #expect(changed.status == 0 && changed.stdout == "password changed\n", "\(changed)")
        #expect(try client.call("auth.login", ["login": .string(Self.phone), "password": .string(Self.password)]).errorReason == "auth.failed")
        #expect(try client.call("auth.login", ["login": .string(Self.phone), "password": .string(newPassword)])["result"] != nil)

        let wrong = try daemon.authctl(["password", "change", "--password-fd", "0"] + session, stdin: "a wrong guess\nyet another long passphrase\n")
        #expect(wrong.status == 5 && wrong.stderr.contains("(auth.failed)"), "\(wrong)")
        // That was the first failure in a row: four more wrong sign-ins make five, and lock.
        var reasons: [String] = []
        for _ in 0..<4 {
            reasons.append(try client.call("auth.login", ["login": .string(Self.phone), "password": "another guess"]).errorReason ?? "?")
        }
        #expect(reasons == ["auth.failed", "auth.failed", "auth.failed", "account.locked"], "the wrong current password counted")
        #expect(try client.call("auth.login", ["login": .string(Self.phone), "password": .string(newPassword)]).errorReason == "account.locked",
                "the password did not change")
    }

    @Test("nothing could unlock a federated account signed in here with a passkey: lock is refused with the reason, the idle lock does not arm")
    func noUnlockMethod() throws {
        let fixture = try FederationFixture()
        let client = fixture.client
        // A phone account first: its PIN verifies the person for the passkey below.
        let phoneAccount = try LoginTests.register(fixture.daemon, client, phone: Self.phone, password: Self.password)
        _ = try client.result("twofactor.pin.enable", ["session": phoneAccount["session"]!["token"]!, "pin": .string(PasskeyFixture.pin),
                                                       "confirm": .string(PasskeyFixture.pin)])
        let federated = try fixture.signedIn()
        let federatedToken = try #require(federated["session"]?["token"])
        let begun = try client.result("auth.passkey.register.begin", ["session": federatedToken])
        guard case .object(var creation) = begun["options"] else { throw HarnessError("no options: \(begun)") }
        creation["origin"] = begun["origin"]
        let created = try #require(try client.exchange("passkey.create", .object(creation), answers: ["pin": PasskeyFixture.pin]).result)
        _ = try client.result("auth.passkey.register.finish", ["session": federatedToken, "flow": begun["flow"]!, "credential": created])
        let login = try client.result("auth.passkey.login.begin")
        guard case .object(var request) = login["options"] else { throw HarnessError("no options: \(login)") }
        request["origin"] = login["origin"]
        let asserted = try #require(try client.exchange("passkey.get", .object(request), answers: ["pin": PasskeyFixture.pin]).result)
        let signedIn = try client.result("auth.passkey.login.finish", ["flow": login["flow"]!, "credential": asserted, "device": ["key": "device-1"]])
        #expect(signedIn["account"]?["id"] == federated["account"]?["id"], "the federated account signed in here")

        // Only now a short auto-lock, so that the steps above cannot run into it.
        let config = try String(contentsOfFile: fixture.daemon.configPath, encoding: .utf8)
        try (config + "[lock]\nidle = 3\n").write(toFile: fixture.daemon.configPath, atomically: true, encoding: .utf8)
        #expect(try fixture.daemon.authctl(["admin", "reload"]).status == 0)

        let status = try client.result("lock.status")
        #expect(status["idle_seconds"] == 3)
        #expect(status["account"] == federated["account"]?["id"])
        #expect(status["unlock_methods"] == [])
        let lock = try fixture.daemon.authctl(["lock"])
        #expect(lock.status == 1 && lock.stderr.contains("(lock.no_unlock_method)") && lock.stderr.contains("authctl password set"), "\(lock)")
        #expect(try client.result("lock.status")["locked"] == false)
        #expect(try fixture.daemon.authctl(["lock", "--status"]).stdout.contains("auto-lock: off until something can unlock\n"))

        // Idle for longer than [lock] idle: a lock nothing could open does not arm.
        usleep(4_500_000)
        #expect(try client.result("lock.status")["locked"] == false)
        #expect(try client.result("auth.local", ["aud": "app.example"])["token"]?.stringValue != nil)
    }
}
