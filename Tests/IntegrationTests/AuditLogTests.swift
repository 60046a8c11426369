import Foundation
import Glibc
import Protocol
import Testing

/// The audit log against the real daemon: a record for every change even across kill -9, floods
/// of refusals summarised, and its size in admin.status.
@Suite("Audit log")
struct AuditLogTests {
    @Test("after kill -9 in the middle of a burst of registrations, every account has its registration record")
    func registrationRecordsSurviveKill9() throws {
        let daemon = try DaemonHarness(config: "[accounts]\nstarts_per_minute = 100000\n")
        try daemon.start()
        let client = try daemon.connect()
        var lines: [String] = []
        for index in 0..<60 {
            let phone = "+3725\(String(format: "%07d", 1_000_000 + index))"
            let flow = try #require(try RegistrationTests.start(client, phone)["result"]?["flow"]?.stringValue, "\(phone)")
            let code = try RegistrationTests.spooledCode(daemon, to: phone)
            lines.append(#"{"jsonrpc":"2.0","id":\#(index),"method":"account.register.verify","params":{"flow":"\#(flow)","code":"\#(code)"}}"#)
        }
        // Four connections send their share at once; the daemon dies while it works through them.
        let senders = try (0..<4).map { _ in try daemon.connect() }
        for (offset, line) in lines.enumerated() { try senders[offset % 4].send(line + "\n") }
        _ = try #require(try senders[0].readJSON(), "the first registrations went through")
        try daemon.kill9()
        try daemon.start()
        let admin = try daemon.connect()
        let accounts = try #require(try admin.result("admin.accounts.list", ["limit": 1000])["accounts"]?.arrayValue).compactMap { $0["id"]?.stringValue }
        #expect(!accounts.isEmpty)
        let records = try #require(try admin.result("admin.audit.tail", ["limit": 10_000])["records"]?.arrayValue)
        let recorded = Set(records.filter { $0["method"] == "account.register.verify" && $0["outcome"] == "ok" }.compactMap { $0["detail"]?["account"]?.stringValue })
        let missing = accounts.filter { !recorded.contains($0) }
        #expect(missing.isEmpty, "\(missing.count) of \(accounts.count) accounts have no registration record")
    }

    @Test("a flood of refused calls leaves a bounded number of records that count them all; admin.status shows the size")
    func refusalFloodIsBounded() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        let before = try #require(try client.result("admin.status")["audit"])
        let flood = 2000
        let request = #"{"jsonrpc":"2.0","id":1,"method":"auth.token","params":{"session":"as1.not-a-session","aud":"app.example"}}"# + "\n"
        for _ in 0..<flood { try client.send(request) }
        for _ in 0..<flood { #expect(try client.readJSON()?.errorReason == "session.invalid") }
        let status = try client.result("admin.status")
        let audit = try #require(status["audit"])
        let written = (audit["rows"]?.integerValue ?? 0) - (before["rows"]?.integerValue ?? 0)
        #expect(written > 0 && written < 10, "\(written) records for \(flood) refusals")
        #expect(audit["integrity"] == "ok")
        #expect((audit["bytes"]?.integerValue ?? 0) > 0)
        #expect(audit["oldest"]?.stringValue != nil)
        #expect(audit["max_bytes"] == .integer(64 << 20))
        #expect(audit["retention_s"] == .integer(90 * 86400))
        // SIGTERM writes the count of the flood still open.
        #expect(try daemon.terminate() == 0)
        try daemon.start()
        let records = try #require(try daemon.connect().result("admin.audit.tail", ["limit": 100])["records"]?.arrayValue)
        let refused = records.filter { $0["method"] == "auth.token" }
        let counted = refused.reduce(Int64(0)) { $0 + ($1["detail"]?["repeated"]?.integerValue ?? 1) }
        #expect(counted == Int64(flood))
        let printed = try daemon.authctl(["admin", "status"])
        #expect(printed.stdout.contains("audit:       integrity ok, "), "\(printed.stdout)")
        // A record removed behind the daemon's back fails the check, and the exit status says
        // so, with --json as without.
        _ = try daemon.storeRows("DELETE FROM audit WHERE id = (SELECT min(id) + 1 FROM audit)", readOnly: false)
        for arguments in [["admin", "status"], ["admin", "status", "--json"]] {
            let failed = try daemon.authctl(arguments)
            #expect(failed.status == 1, "\(arguments): \(failed.stdout)")
            #expect(failed.stdout.contains("missing after id"), "\(arguments): \(failed.stdout)")
        }
    }
}
