import Foundation
import Protocol
import Testing
@testable import authd

/// The audit log: floods of refusals summarised, bounds by age and size with a verifiable
/// purge, and records written in the transaction of the change they record.
@Suite("Audit log")
struct AuditTests {
    static let caller = Caller.local(CallerIdentity(uid: 1000, gid: 1000, pid: 42, exe: "/usr/bin/app", username: "ann", groups: []))

    static func rows(_ store: Store, where condition: String = "1") async throws -> Int {
        try await store.read { try $0.queryOne("SELECT count(*) FROM audit WHERE \(condition)") { $0.int(0) } ?? 0 }
    }

    static func refusal(_ method: String = "auth.local", reason: Reason = .sessionLocked, caller: Caller = caller) -> AuditLog.Entry {
        AuditLog.Entry(caller: caller, method: method, outcome: .error, reason: reason, detail: [:])
    }

    /// Every refusal a set of records stands for: one for a full record, `repeated` for a summary.
    static func refusalsCounted(_ records: [AuditRecord]) -> Int64 {
        records.reduce(0) { $0 + ($1.detail["repeated"]?.integerValue ?? 1) }
    }

    @Test("a flood of identical refusals becomes a few records that count every one")
    func floodIsSummarised() async throws {
        let fixture = try await TestKeys()
        let audit = AuditLog(store: fixture.store, now: fixture.clock.closure, summaryWindow: .seconds(60), summaryMaxCount: 1000)
        for _ in 0..<5000 { try await audit.refused(Self.refusal(), summarizable: true) }
        // Another method, reason or user is another flood; its first refusal is written at once.
        try await audit.refused(Self.refusal("auth.token", reason: .sessionInvalid), summarizable: true)
        let other = Caller.local(CallerIdentity(uid: 1001, gid: 1001, pid: 7, exe: nil, username: nil, groups: []))
        try await audit.refused(Self.refusal(caller: other), summarizable: true)
        fixture.clock.advance(61)
        await audit.closeFloods()
        #expect(await audit.openFloods == 0)
        let records = try await audit.tail(limit: 10_000)
        #expect(records.count <= 12, "\(records.count) records for 5002 refusals")
        let locked = records.filter { $0.method == "auth.local" && $0.caller.uid == 1000 }
        #expect(Self.refusalsCounted(locked) == 5000)
        #expect(locked.allSatisfy { $0.reason == "session.locked" && $0.outcome == "error" })
        #expect(records.filter { $0.method == "auth.token" }.count == 1)
        #expect(records.filter { $0.caller.uid == 1001 }.count == 1)
    }

    @Test("a wrong secret is never summarised, and the window's end writes the count")
    func countedFailuresAreWrittenInFull() async throws {
        let fixture = try await TestKeys()
        let audit = AuditLog(store: fixture.store, now: fixture.clock.closure)
        for _ in 0..<50 { try await audit.refused(Self.refusal("auth.login", reason: .authFailed), summarizable: !AuditLog.countedFailures.contains(.authFailed)) }
        #expect(try await Self.rows(fixture.store, where: "method = 'auth.login'") == 50)
        for _ in 0..<3 { try await audit.refused(Self.refusal(), summarizable: true) }
        #expect(try await Self.rows(fixture.store, where: "method = 'auth.local'") == 1, "the first at once, the rest counted")
        await audit.closeFloods()
        #expect(try await Self.rows(fixture.store, where: "method = 'auth.local'") == 1, "the window is still open")
        fixture.clock.advance(60)
        await audit.closeFloods()
        let records = try await audit.tail(limit: 10).filter { $0.method == "auth.local" }
        #expect(records.count == 2)
        #expect(records.last?.detail["repeated"] == 2)
    }

    @Test("retention purges old records, leaves a record of the purge, and the log checks out")
    func retentionPurge() async throws {
        let fixture = try await TestKeys()
        let bounds = AuditLog.Bounds(retentionSeconds: 86400, maxBytes: 64 << 20)
        let audit = AuditLog(store: fixture.store, now: fixture.clock.closure, bounds: { bounds })
        for index in 0..<30 {
            try await audit.record(.init(caller: Self.caller, method: "auth.local", outcome: .ok, reason: nil, detail: ["n": .integer(Int64(index))]))
        }
        fixture.clock.advance(2 * 86400)
        for _ in 0..<5 { try await audit.record(.init(caller: Self.caller, method: "auth.local", outcome: .ok, reason: nil, detail: [:])) }
        let purge = try #require(try await audit.enforceBounds())
        #expect(purge.rows == 30)
        #expect(purge.throughID == 30)
        #expect(purge.why == ["retention"])
        #expect(try await audit.enforceBounds() == nil, "nothing more is due")
        let size = try await audit.size()
        #expect(size.rows == 6, "five kept and the purge's own record")
        #expect(size.purgedThrough == 30)
        #expect(size.integrity == "ok")
        #expect(size.oldest == fixture.clock.now)
        let anchor = try #require(try await audit.tail(limit: 1).first)
        #expect(anchor.method == "audit.purge")
        #expect(anchor.detail["rows"] == 30)
        #expect(try await fixture.store.health().integrity == "ok")
    }

    @Test("a record stamped in the past after younger ones (the clock set back) takes none of them with it; only the log's beginning goes")
    func retentionWithClockSetBack() async throws {
        let fixture = try await TestKeys()
        let audit = AuditLog(store: fixture.store, now: fixture.clock.closure, bounds: { .init(retentionSeconds: 90 * 86400, maxBytes: 64 << 20) })
        let entry = AuditLog.Entry(caller: Self.caller, method: "auth.local", outcome: .ok, reason: nil, detail: [:])
        fixture.clock.advance(-100 * 86400)
        for _ in 0..<3 { try await audit.record(entry) }  // ids 1–3: old enough to go
        fixture.clock.advance(99 * 86400)
        for _ in 0..<10 { try await audit.record(entry) }  // 4–13: a day old
        fixture.clock.advance(-200 * 86400)
        try await audit.record(entry)  // 14: the clock set back
        fixture.clock.advance(201 * 86400)
        try await audit.record(entry)  // 15: now
        let purge = try #require(try await audit.enforceBounds())
        #expect(purge.throughID == 3, "the beginning up to the first record within the retention")
        #expect(purge.rows == 3)
        let size = try await audit.size()
        #expect(size.rows == 13, "4–15 and the purge's record")
        #expect(size.integrity == "ok")
    }

    @Test("max_size purges the oldest records until the log is back under it, and a gap is found")
    func sizePurge() async throws {
        let fixture = try await TestKeys()
        let maxBytes: Int64 = 64 << 10
        let audit = AuditLog(store: fixture.store, now: fixture.clock.closure, bounds: { .init(retentionSeconds: 90 * 86400, maxBytes: maxBytes) })
        for _ in 0..<2000 {
            try await audit.record(.init(caller: Self.caller, method: "auth.local", outcome: .ok, reason: nil, detail: ["aud": "app.example"]))
        }
        #expect(try await audit.size().bytes > maxBytes)
        let purge = try #require(try await audit.enforceBounds())
        #expect(purge.why == ["max_size"])
        let size = try await audit.size()
        #expect(size.bytes <= maxBytes)
        #expect(size.bytes > maxBytes / 2, "only the oldest went")
        #expect(size.integrity == "ok")
        #expect(size.purgedThrough == purge.throughID)
        // A record removed behind the daemon's back shows.
        try await fixture.store.transaction { try $0.execute("DELETE FROM audit WHERE id = ?", [.integer(purge.throughID + 5)]) }
        #expect(try await audit.size().integrity == "1 record(s) missing after id \(purge.throughID)")
    }

    @Test("followers get a change's record as its transaction commits, before a record committed after it, and the purge's record the same way",
          .timeLimit(.minutes(1)))
    func followersInIDOrder() async throws {
        let fixture = try await TestKeys()
        let audit = AuditLog(store: fixture.store, now: fixture.clock.closure, bounds: { .init(retentionSeconds: 86400, maxBytes: 64 << 20) })
        let (_, records) = await audit.follow()
        var iterator = records.makeAsyncIterator()
        let scope = AuditScope(caller: Self.caller, method: "admin.keys.rotate", auditHome: "sqlite", now: fixture.clock.closure, publish: audit.publish, noticeOrigin: nil)
        // The call goes on after its change committed (it waits, say, for the lock to
        // remember a sign-in) while another call's record commits.
        try await AuditScope.$current.withValue(scope) {
            try await fixture.store.transaction { database in try AuditScope.record(in: database, ["change": true]) }
        }
        try await audit.record(.init(caller: Self.caller, method: "auth.local", outcome: .ok, reason: nil, detail: [:]))
        var seen: [AuditRecord] = []
        for _ in 0..<2 { if let record = await iterator.next() { seen.append(record) } }
        #expect(seen.map(\.id) == [1, 2])
        #expect(seen.map(\.method) == ["admin.keys.rotate", "auth.local"])

        fixture.clock.advance(2 * 86400)
        try await audit.enforceBounds()
        try await audit.record(.init(caller: Self.caller, method: "auth.local", outcome: .ok, reason: nil, detail: [:]))
        seen = []
        for _ in 0..<2 { if let record = await iterator.next() { seen.append(record) } }
        #expect(seen.map(\.method) == [AuditLog.purgeMethod, "auth.local"])
        #expect(seen.map(\.id) == [3, 4])
    }

    @Test("a state change's record is written in its transaction; a failed transaction writes neither")
    func recordInTheChangesTransaction() async throws {
        let fixture = try await TestKeys()
        let scope = AuditScope(caller: Self.caller, method: "admin.keys.rotate", auditHome: "sqlite", now: fixture.clock.closure, publish: { _ in }, noticeOrigin: nil)
        struct Refused: Error {}
        await #expect(throws: Refused.self) {
            try await AuditScope.$current.withValue(scope) {
                try await fixture.store.transaction { database in
                    try database.execute("INSERT INTO meta (key, value) VALUES ('probe', x'00')")
                    try AuditScope.record(in: database, ["probe": true])
                    throw Refused()
                }
            }
        }
        #expect(try await Self.rows(fixture.store) == 0)
        #expect(try await fixture.store.read { try $0.queryOne("SELECT count(*) FROM meta WHERE key = 'probe'") { $0.int(0) } } == 0)
        #expect(scope.committed.isEmpty)

        // A real change: the key rotation commits its record with it, before anyone else writes.
        let rotation = try await AuditScope.$current.withValue(scope) { try await fixture.keys.rotate(now: fixture.clock.now) }
        let records = try await AuditLog(store: fixture.store, now: fixture.clock.closure).tail(limit: 10)
        #expect(records.count == 1)
        #expect(records.first?.method == "admin.keys.rotate")
        #expect(records.first?.detail["kid"] == .string(rotation.kid))
        #expect(scope.committed == records)
        // Outside an audited call, a change writes no record.
        _ = try await fixture.keys.rotate(now: fixture.clock.now)
        #expect(try await Self.rows(fixture.store) == 1)
    }

    @Test("timestamps: RFC 3339 in UTC, as Foundation writes whole seconds, and milliseconds exact from their count")
    func timestamps() {
        #expect(Timestamp.rfc3339(epochSeconds: 0) == "1970-01-01T00:00:00Z")
        #expect(Timestamp.rfc3339(epochSeconds: 1_795_711_477) == "2026-11-26T16:44:37Z")
        #expect(Timestamp.rfc3339(epochSeconds: 951_782_400) == "2000-02-29T00:00:00Z")
        #expect(Timestamp.rfc3339(epochMilliseconds: 1_795_711_477_001) == "2026-11-26T16:44:37.001Z")
        #expect(Timestamp.rfc3339(epochMilliseconds: 1_795_711_477_999) == "2026-11-26T16:44:37.999Z")
        #expect(Timestamp.rfc3339(epochMilliseconds: -1) == "1969-12-31T23:59:59.999Z")
        #expect(Timestamp.rfc3339(Date(timeIntervalSince1970: 1_795_711_477.5), milliseconds: true) == "2026-11-26T16:44:37.500Z")
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let seconds = Int64.random(in: 0...253_402_300_799, using: &generator)  // through 9999-12-31
            let date = Date(timeIntervalSince1970: TimeInterval(seconds))
            #expect(Timestamp.rfc3339(epochSeconds: seconds) == date.formatted(Date.ISO8601FormatStyle(timeZone: .gmt)))
        }
    }

    @Test("[audit] retention and max_size are read, with units, and checked")
    func configuration() throws {
        let config = try Config.parse("[audit]\nretention = 30d\nmax_size = 16M\n", file: "authd.conf")
        #expect(config.auditRetentionSeconds == 30 * 86400)
        #expect(config.auditMaxBytes == 16 << 20)
        #expect(Config().auditRetentionSeconds == 90 * 86400)
        #expect(Config().auditMaxBytes == 64 << 20)
        #expect(throws: ConfigError.self) { try Config.parse("[audit]\nmax_size = 12X\n", file: "authd.conf") }
        #expect(throws: ConfigError.self) { try Config.parse("[audit]\nretention = 1h\n", file: "authd.conf") }
    }
}
