import Foundation
import Glibc
import Testing

/// The development SMS spool: one file per message, named by time and number, and
/// `authctl admin sms last` to read the newest code without a third terminal.
@Suite("SMS spool")
struct SMSSpoolTests {
    @Test("each message is its own file, named by time and number; admin sms last prints the newest, to any or one number")
    func lastMessage() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        _ = try #require(try RegistrationTests.start(client, "+37251234567")["result"])
        usleep(2_000)  // two messages in the same millisecond would sort by their random part
        _ = try #require(try RegistrationTests.start(client, "+4915123456789")["result"])
        let names = try FileManager.default.contentsOfDirectory(atPath: daemon.stateDirectory + "/sms-spool").sorted()
        #expect(names.count == 2)
        #expect(names.first?.range(of: #"^[0-9]{8}T[0-9]{6}\.[0-9]{3}Z-\+37251234567-[A-Za-z0-9_-]+\.sms$"#, options: .regularExpression) != nil, "\(names)")
        #expect(names.last?.contains("-+4915123456789-") == true, "names sort by time: \(names)")

        let newest = try daemon.authctl(["admin", "sms", "last"])
        #expect(newest.status == 0, "\(newest.stderr)")
        let lines = newest.stdout.split(separator: "\n")
        #expect(lines.first?.hasPrefix("To +4915123456789, spooled ") == true, "\(newest.stdout)")
        #expect(lines.dropFirst().first?.contains("Your authd code is \(try RegistrationTests.spooledCode(daemon, to: "+4915123456789"))") == true,
                "\(newest.stdout)")
        let toFirst = try daemon.authctl(["admin", "sms", "last", "+37251234567", "--json"])
        #expect(toFirst.status == 0, "\(toFirst.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(toFirst.stdout.utf8)) as? [String: Any])
        #expect(json["to"] as? String == "+37251234567")
        #expect((json["text"] as? String)?.contains("code is \(try RegistrationTests.spooledCode(daemon, to: "+37251234567"))") == true)
        #expect((json["file"] as? String)?.hasSuffix(names[0]) == true)

        let nobody = try daemon.authctl(["admin", "sms", "last", "+37255555555"])
        #expect(nobody.status == 1)
        #expect(nobody.stderr.contains("No SMS to +372••••••55 is in the spool"), "\(nobody.stderr)")
        #expect(nobody.stderr.hasSuffix("(sms.none_spooled)\n"), "\(nobody.stderr)")
        let invalid = try daemon.authctl(["admin", "sms", "last", "12"])
        #expect(invalid.stderr.contains("(phone.invalid)"), "\(invalid.stderr)")
        // The code reaches the caller only: the audit log names the number, redacted.
        let audit = try daemon.authctl(["admin", "audit", "--limit", "10"])
        #expect(audit.stdout.contains("admin.sms.last ok to=+491••••••••89"), "\(audit.stdout)")
        #expect(!audit.stdout.contains("code is"))
    }

    @Test("an empty spool, and a backend that sends instead of spooling: clear, typed errors")
    func typedErrors() throws {
        let empty = try DaemonHarness()
        try empty.start()
        let none = try empty.authctl(["admin", "sms", "last"])
        #expect(none.status == 1)
        #expect(none.stderr == "authctl: No SMS is in the spool (messages are deleted after a day) (sms.none_spooled)\n")

        let sending = try DaemonHarness(config: "[sms]\nbackend = command\ncommand = /bin/true\n")
        try sending.start()
        let refused = try sending.authctl(["admin", "sms", "last"])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("through the command backend, which keeps no copy"), "\(refused.stderr)")
        #expect(refused.stderr.hasSuffix("(sms.not_spooled)\n"), "\(refused.stderr)")
    }

    @Test("system mode: only root or the admin group may read the spool")
    func onlyAdmins() throws {
        try #require(getuid() == 0, "needs root to run a client as another user")
        let daemon = try DaemonHarness()
        try daemon.start(arguments: ["--system"])
        chmod(daemon.directory + "/run", 0o755)
        _ = try #require(try RegistrationTests.start(daemon.connect(), "+37251234567")["result"])
        let other = try daemon.authctl(["admin", "sms", "last"], user: "nobody")
        #expect(other.status == 1)
        #expect(other.stderr.contains("(auth.forbidden)"), "\(other.stderr)")
        #expect(!other.stdout.contains("code"))
        #expect(try daemon.authctl(["admin", "sms", "last"]).status == 0)
    }
}
