import Foundation
import Protocol
import Testing

@Suite("Email changes")
struct EmailChangeTests {
    @Test("authctl account email set: the current password first where the account has one; a wrong one changes nothing")
    func authctlSetsTheEmail() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        _ = try LoginTests.register(daemon, try daemon.connect(), phone: "+37251234567", password: "a long enough passphrase")
        let file = ["--session-file", daemon.directory + "/cli-session"]
        #expect(try daemon.authctl(["login", "+37251234567", "--password-fd", "0"] + file, stdin: "a long enough passphrase\n").status == 0)
        let wrong = try daemon.authctl(["account", "email", "set", "new@example.org", "--password-fd", "0"] + file, stdin: "guess guess\n")
        #expect(wrong.status == 5 && wrong.stderr.contains("(auth.failed)"), "\(wrong)")
        #expect(try daemon.authctl(["admin", "accounts", "show", "owner@example.org"]).status == 0, "unchanged")
        let set = try daemon.authctl(["account", "email", "set", "new@example.org", "--password-fd", "0"] + file, stdin: "a long enough passphrase\n")
        #expect(set.status == 0 && set.stdout == "email set to new@example.org\n", "\(set)")
        #expect(try daemon.authctl(["admin", "accounts", "show", "new@example.org"]).status == 0)
        #expect(try daemon.authctl(["account", "email", "set", "not an address", "--password-fd", "0"] + file, stdin: "a long enough passphrase\n")
            .stderr.contains("(email.invalid)"))
    }

    @Test("an email change needs the current password, and an account makes only a few an hour, taken or not")
    func limited() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        let token = try #require(try LoginTests.register(daemon, client, phone: "+37251234567", password: "a long enough passphrase")["session"]?["token"])
        let missing = try client.call("account.profile.set", ["session": token, "email": "new@example.org"])
        #expect(missing.errorReason == "rpc.invalid_params")
        #expect(try client.call("account.profile.set", ["session": token, "email": "new@example.org", "current_password": "guess guess"])
            .errorReason == "auth.failed")
        var reasons: [String] = []
        for index in 0..<4 {
            reasons.append(try client.call("account.profile.set", ["session": token, "email": .string("n\(index)@example.org"),
                                                                   "current_password": "a long enough passphrase"]).errorReason ?? "ok")
        }
        #expect(reasons == ["ok", "ok", "ok", "rate.limited"])
        let limited = try client.call("account.profile.set", ["session": token, "email": "n9@example.org", "current_password": "a long enough passphrase"])
        #expect((limited["error"]?["data"]?["retry_after"]?.integerValue ?? 0) > 60, "\(limited)")
        // The address the account has already is no change.
        #expect(try client.result("account.profile.set", ["session": token, "email": "n2@example.org"])["email"] == "n2@example.org")
        let audit = try client.result("admin.audit.tail", ["limit": 100])["records"]?.arrayValue ?? []
        let changes = audit.filter { $0["method"] == "account.profile.set" && $0["outcome"] == "ok" }
        #expect(changes.contains { $0["detail"]?["email_to"] == "n…@example.org" }, "\(changes)")
        #expect(!changes.contains { "\($0)".contains("n1@example.org") }, "addresses are redacted in the audit log")
    }

    @Test("an account without a password sets its email with the session, limited the same way")
    func withoutPassword() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        let flow = try #require(try RegistrationTests.start(client, "+37251234567")["result"]?["flow"])
        let code = try RegistrationTests.spooledCode(daemon, to: "+37251234567")
        let registered = try client.result("account.register.verify", ["flow": flow, "code": .string(code), "device": ["key": "device-1"]])
        let token = try #require(registered["session"]?["token"])
        var reasons: [String] = []
        for index in 0..<4 {
            reasons.append(try client.call("account.profile.set", ["session": token, "email": .string("n\(index)@example.org")]).errorReason ?? "ok")
        }
        #expect(reasons == ["ok", "ok", "ok", "rate.limited"])
    }
}
