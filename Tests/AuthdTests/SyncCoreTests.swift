import Foundation
import Protocol
import Synchronization
import Testing
@testable import authd

/// The event log on a private store, and a subscriber's follower against a log it reads and
/// hints that arrive late, twice or out of order.
@Suite("Sync log and follower")
struct SyncCoreTests {
    static let origin = SyncLog.Origin(deviceKey: "machine:test", sender: SyncSender(machine: "test", deviceID: nil, exe: nil))

    static func draft(_ text: String, key: String? = nil) throws -> SyncLog.Draft {
        try SyncLog.Draft(kind: "message", conversation: "chat", body: ["text": .string(text)], idempotencyKey: key)
    }

    @Test("positions are gap-free per account and the same key is the same event; retention purges old events and the log says where it starts")
    func logAndRetention() async throws {
        let fixture = try TestDirectory()
        let account = try await fixture.register().account.id
        let log = SyncLog(store: fixture.store, now: fixture.clock.closure)
        let first = try await log.append(account: account, try Self.draft("a", key: "k"), from: Self.origin)
        let again = try await log.append(account: account, try Self.draft("a", key: "k"), from: Self.origin)
        #expect(first.event.position == 1 && !first.duplicate && again.event.position == 1 && again.duplicate)
        _ = try await log.append(account: account, try Self.draft("b"), from: Self.origin)
        fixture.clock.advance(7200)
        _ = try await log.append(account: account, try Self.draft("c"), from: Self.origin)
        #expect(try await log.purge(retention: 3600) == 2, "the two events older than an hour")
        let window = try await log.events(account: account, after: 0, limit: 10)
        #expect(window.head == 3 && window.oldest == 3 && window.page.events.map(\.position) == [3])
        _ = try await log.append(account: account, try Self.draft("d"), from: Self.origin)
        #expect(try await log.events(account: account, after: 0, limit: 10).page.events.map(\.position) == [3, 4], "positions go on after a purge")
    }

    typealias Appended = (event: SyncEvent, duplicate: Bool)

    static func outcome(_ body: () async throws -> Appended) async -> Result<Appended, any Error> {
        do { return .success(try await body()) } catch { return .failure(error) }
    }

    @Test("appends sent while a commit is under way share the next: positions without a gap, the same key twice in the batch is one event, an append that fails (its account unknown) fails alone")
    func groupCommit() async throws {
        let fixture = try TestDirectory()
        let account = try await fixture.register().account.id
        let log = SyncLog(store: fixture.store, now: fixture.clock.closure)
        // The store's queue held, so that every append below waits for the same commit.
        let release = DispatchSemaphore(value: 0), holding = DispatchSemaphore(value: 0)
        fixture.store.perform { _ in
            holding.signal()
            release.wait()
        }
        holding.wait()
        let outcomes = try await withThrowingTaskGroup(of: (String, Result<Appended, any Error>).self) { group in
            for index in 0..<32 {
                group.addTask { ("plain \(index)", await Self.outcome { try await log.append(account: account, try Self.draft("\(index)"), from: Self.origin) }) }
            }
            for copy in 0..<2 {
                group.addTask { ("keyed \(copy)", await Self.outcome { try await log.append(account: account, try Self.draft("k", key: "same"), from: Self.origin) }) }
            }
            group.addTask { ("unknown", await Self.outcome { try await log.append(account: "no-such-account", try Self.draft("x"), from: Self.origin) }) }
            _ = await eventually(seconds: 30) { log.queue.waitingCount >= 35 }
            #expect(log.queue.waitingCount == 35, "every append waits for the one commit")
            release.signal()
            var outcomes: [String: Result<Appended, any Error>] = [:]
            for try await (name, outcome) in group { outcomes[name] = outcome }
            return outcomes
        }
        let appended: [Appended] = outcomes.filter { $0.key != "unknown" }.compactMap { try? $0.value.get() }
        #expect(appended.count == 34)
        #expect(Set(appended.filter { !$0.duplicate }.map { $0.event.position }) == Set(1...33), "33 new events, positions 1 to 33")
        let keyed: [Appended] = [outcomes["keyed 0"], outcomes["keyed 1"]].compactMap { try? $0?.get() }
        #expect(keyed.count == 2 && keyed[0].event.position == keyed[1].event.position && keyed.filter { $0.duplicate }.count == 1)
        #expect(throws: (any Error).self) { try outcomes["unknown"]?.get() }
        #expect(try await log.append(account: account, try Self.draft("next"), from: Self.origin).event.position == 34, "the failed append left no gap")
        // The commit that answered the last append ends right after it answers, on the store's thread.
        #expect(await eventually(seconds: 30) { !log.queue.isCommitting }, "no commit is left under way")
    }

    @Test("an append that fails after it wrote (here its event's insert, refused by a trigger) fails its whole batch: nothing of the batch is kept")
    func failedWriteFailsTheBatch() async throws {
        let fixture = try TestDirectory()
        let account = try await fixture.register().account.id
        let log = SyncLog(store: fixture.store, now: fixture.clock.closure)
        // The head's upsert, the append's first write, succeeds; the event's insert then fails.
        try await fixture.store.transaction { database in
            try database.execute("CREATE TRIGGER refuse_boom BEFORE INSERT ON sync_events WHEN NEW.body LIKE '%boom%' BEGIN SELECT RAISE(ABORT, 'refused'); END")
        }
        let release = DispatchSemaphore(value: 0), holding = DispatchSemaphore(value: 0)
        fixture.store.perform { _ in
            holding.signal()
            release.wait()
        }
        holding.wait()
        let outcomes = try await withThrowingTaskGroup(of: Result<Appended, any Error>.self) { group in
            for text in ["a", "b", "boom", "c"] {
                group.addTask { await Self.outcome { try await log.append(account: account, try Self.draft(text), from: Self.origin) } }
            }
            _ = await eventually(seconds: 30) { log.queue.waitingCount >= 4 }
            #expect(log.queue.waitingCount == 4, "the four appends wait for one commit")
            release.signal()
            var outcomes: [Result<Appended, any Error>] = []
            for try await outcome in group { outcomes.append(outcome) }
            return outcomes
        }
        #expect(outcomes.allSatisfy { (try? $0.get()) == nil }, "every append of the batch fails")
        #expect(try await log.events(account: account, after: 0, limit: 10).page.events.isEmpty, "none of the batch's events was kept")
        #expect(try await log.append(account: account, try Self.draft("next"), from: Self.origin).event.position == 1, "the head was not raised")
    }

    /// A log in memory the follower reads from.
    final class MemorySource: SyncSource, @unchecked Sendable {
        // @unchecked: `events` is set before the follower runs and only read after.
        var events: [SyncEvent] = []
        var oldest: Int64 = 1
        let reads = Atomic<Int>(0)

        func events(_ params: SyncEvents.Params, for caller: CallerIdentity) async throws -> SyncEvents.Result {
            reads.add(1, ordering: .relaxed)
            let after = events.filter { $0.position > params.after && $0.position >= oldest }
            return SyncEvents.Result(account: "acc", events: Array(after.prefix(params.limit ?? 500)), head: events.last?.position ?? 0, oldest: oldest)
        }

        func isTransient(_ error: any Error) -> Bool { false }
    }

    /// Collects what a stream sends.
    final class Collector: StreamingConnection, @unchecked Sendable {
        private let lines = Mutex<[JSONValue]>([])
        func openStream(requestKey: UInt64, onDrop: @escaping @Sendable () -> Void,
                        body: @escaping @Sendable (StreamSink) async -> Void) throws(StreamFailure) -> String { "s1" }
        func cancelStream(_ name: String) -> Bool { false }
        func enqueue(_ line: Data) {
            if let value = try? WireCodec.decode(JSONValue.self, from: line) { lines.withLock { $0.append(value) } }
        }
        var received: [JSONValue] { lines.withLock { $0 } }
    }

    static func event(_ position: Int64) -> SyncEvent {
        SyncEvent(position: position, kind: "message", conversation: "chat", body: ["n": .integer(position)],
                  sender: SyncSender(machine: "m", deviceID: nil, exe: nil), at: "2026-11-26T00:00:00Z", idempotencyKey: nil)
    }

    @Test("the follower delivers each event once and in order whatever the hints, reads what a hint skipped from the log, and announces purged events as one gap")
    func follower() async throws {
        let source = MemorySource()
        source.events = (1...8).map(Self.event)
        source.oldest = 3  // 1 and 2 were purged
        let (signals, hints) = AsyncStream.makeStream(of: SyncBus.Signal.self)
        let collector = Collector()
        let follower = SyncFollower(source: source, caller: CallerIdentity(uid: 1, gid: 1, pid: 1, exe: nil, username: nil, groups: []),
                                    session: "as1.x", kinds: nil, conversation: nil)
        let running = Task { await follower.run(after: 0, signals: signals, sink: StreamSink(connection: collector, name: "s1")) }
        // The first read: the gap, then 3…8. The follower then waits for hints (and reads nothing).
        _ = await eventually { collector.received.count >= 7 }
        #expect(collector.received.count == 7)
        // Late, doubled and out-of-order hints, then a new event whose predecessor was never hinted.
        source.events += [Self.event(9), Self.event(10)]
        for position: Int64 in [5, 9, 9, 4, 10] { hints.yield(.event(Self.event(position))) }
        _ = await eventually { collector.received.count >= 9 }
        source.events.append(Self.event(11))
        hints.yield(.resync)
        hints.finish()
        await running.value
        let received = collector.received
        #expect(received.first?["method"] == "sync.gap")
        #expect(received.first?["params"]?["from"] == 1 && received.first?["params"]?["to"] == 2)
        let positions = received.dropFirst().compactMap { $0["params"]?["event"]?["position"]?.integerValue }
        #expect(positions == Array(3...11), "\(positions)")
    }

    @Test("an observer of the bus hears only the events it wants, in order, and the others are not queued for it")
    func observers() async throws {
        let bus = SyncBus()
        let settings = bus.observe { $0.event.kind == "presence.settings" }
        let everything = bus.observe { _ in true }
        func event(_ position: Int64, _ kind: String) -> SyncEvent {
            SyncEvent(position: position, kind: kind, conversation: nil, body: .null, sender: SyncSender(machine: "m", deviceID: nil, exe: nil),
                      at: "2026-11-26T00:00:00Z", idempotencyKey: nil)
        }
        // More refused events than the stream buffers: had they been queued, the wanted ones
        // published last would have pushed the first wanted one out.
        bus.publish(event(1, "presence.settings"), account: "a")
        for position in 2...Int64(SyncBus.bufferedSignals + 10) { bus.publish(event(position, "message"), account: "a") }
        bus.publish(event(Int64(SyncBus.bufferedSignals + 11), "presence.settings"), account: "b", users: [1000])
        var heard: [SyncBus.Observed] = []
        for await observed in settings {
            heard.append(observed)
            if heard.count == 2 { break }
        }
        #expect(heard.map(\.event.position) == [1, Int64(SyncBus.bufferedSignals + 11)])
        #expect(heard.map(\.account) == ["a", "b"] && heard.last?.users == [1000])
        var first: SyncBus.Observed?
        for await observed in everything { first = observed; break }
        // 1…1035 published; the newest 1,024 kept.
        #expect(first?.event.position == 12, "the one taking every event keeps the newest it buffers")
    }

    // MARK: Sizes and depths of what sync answers carry

    /// `depth` arrays around a number.
    static func nested(_ depth: Int) -> JSONValue {
        (0..<depth).reduce(JSONValue.integer(1)) { inner, _ in .array([inner]) }
    }

    struct PageCase: Sendable, CustomStringConvertible {
        let count: Int, bytes: Int, takesOne: Bool
        let sizes: [Int]
        let taken: Int
        var description: String { "\(count) events, \(bytes) bytes, takes one: \(takesOne), sizes \(sizes)" }
    }

    @Test("a page stops at its count or at its size (commas counted), always takes the first event of an answer, and a later account's page may take none",
          arguments: [
              PageCase(count: 10, bytes: 100, takesOne: true, sizes: [40, 40, 40], taken: 2),
              PageCase(count: 10, bytes: 81, takesOne: true, sizes: [40, 40], taken: 2),
              PageCase(count: 10, bytes: 80, takesOne: true, sizes: [40, 40], taken: 1),
              PageCase(count: 2, bytes: 1000, takesOne: true, sizes: [10, 10, 10], taken: 2),
              PageCase(count: 10, bytes: 100, takesOne: true, sizes: [500, 1], taken: 1),
              PageCase(count: 10, bytes: 100, takesOne: false, sizes: [500, 1], taken: 0),
              PageCase(count: 10, bytes: 0, takesOne: false, sizes: [1], taken: 0),
          ])
    func page(_ test: PageCase) {
        var page = SyncPage(count: test.count, bytes: test.bytes, takesOne: test.takesOne)
        var taken = 0
        for size in test.sizes {
            guard page.admit(size) else { break }
            taken += 1
        }
        #expect(taken == test.taken && page.taken == taken)
    }

    @Test("a write counts against its user and its machine; a refusal names the one that ran out and spends neither; a machine's own writes count only as the machine's")
    func writeLimit() {
        let limit = SyncWriteLimit(perUser: 2, perMachine: 3)
        var buckets: [String: SyncWriteLimit.Bucket] = [:]
        func write(_ user: String?) -> SyncWriteLimit.Decision {
            let decision = limit.take(user: user.flatMap { buckets[$0] }, counted: user != nil, machine: buckets["m"], at: 1000)
            if case .taken(let userBucket, let machine) = decision {
                buckets["m"] = machine
                if let user { buckets[user] = userBucket }
            }
            return decision
        }
        #expect(write("u1").isTaken && write("u1").isTaken)
        #expect(write("u1") == .refused(.user, retryAfter: 30), "a token refills in 60 s / 2")
        #expect(write("u2").isTaken, "another user of the machine is not refused for u1's writes")
        #expect(write("u2") == .refused(.machine, retryAfter: 20), "the machine's three are used")
        #expect(write(nil) == .refused(.machine, retryAfter: 20))
        let later = limit.take(user: buckets["u1"], counted: true, machine: buckets["m"], at: 1030)
        #expect(later.isTaken, "after 30 s u1 has one again, and the machine one and a half")
    }

    @Test("sync.send takes a body 64 levels deep and refuses one 65 deep (sync.too_deep) before anything else")
    func depthCheck() throws {
        func params(_ depth: Int) -> SyncSend.Params {
            SyncSend.Params(session: "as1.x", kind: "message", conversation: nil, body: Self.nested(depth), idempotencyKey: nil)
        }
        #expect(Self.nested(64).nestingDepth == 64 && JSONValue.integer(1).nestingDepth == 0 && JSONValue.object(["a": [[:]]]).nestingDepth == 3)
        _ = try SyncService.check(params(64))
        #expect(throws: SyncFailure.tooDeep(limit: 64)) { try SyncService.check(params(65)) }
        #expect(throws: SyncFailure.tooDeep(limit: 64)) { try SyncService.check(params(500)) }
        #expect(SyncFailure.tooDeep(limit: 64).rpcError.reason == .syncTooDeep)
    }

    @Test("the outbox refuses before queuing what no link to the hub could carry: a body deeper than a body may be, or a line over the limit")
    func forwardable() throws {
        let caller = ForwardedCaller(uid: 1000, username: "u", exe: "/usr/bin/app", machine: "m")
        func params(session: String = "as1.x", body: JSONValue) -> SyncSend.Params {
            SyncSend.Params(session: session, kind: "message", conversation: nil, body: body, idempotencyKey: "k")
        }
        try SyncOutbox.checkForwardable(params(body: Self.nested(64)), caller: caller)
        try SyncOutbox.checkForwardable(params(body: .string(String(repeating: "x", count: 60_000))), caller: caller)
        // What a device took in before the depth limit: 510 levels parse in a local line, not in a
        // forwarded one. An entry queued then is dropped with this when its turn comes.
        #expect(throws: SyncFailure.tooDeep(limit: 64)) { try SyncOutbox.checkForwardable(params(body: Self.nested(510)), caller: caller) }
        // Just within, and just over, the line with the envelope.
        let fixed = try WireCodec.encodeJSON(params(session: "", body: [:])).count + WireCodec.encodeJSON(caller).count + SyncOutbox.envelopeBytes
        try SyncOutbox.checkForwardable(params(session: String(repeating: "s", count: LineFramer.defaultMaxLineLength - fixed), body: [:]), caller: caller)
        #expect(throws: SyncFailure.unforwardable(limit: LineFramer.defaultMaxLineLength)) {
            try SyncOutbox.checkForwardable(params(session: String(repeating: "s", count: LineFramer.defaultMaxLineLength - fixed + 1), body: [:]), caller: caller)
        }
    }

    @Test("a device's own idempotency keys sort by the time they were made, differ when made at once, and pass the hub's rule for keys")
    func idempotencyKeys() throws {
        let times = [0, 1, 255, 256, 1_764_000_000_000, 1_764_000_000_001, 99_999_999_999_999].map { Date(timeIntervalSince1970: Double($0) / 1000) }
        let keys = try times.map { try SyncOutbox.idempotencyKey(at: $0) }
        #expect(keys == keys.sorted(), "in the order of their times: \(keys)")
        let twins = try (0..<64).map { _ in try SyncOutbox.idempotencyKey(at: times[4]) }
        #expect(Set(twins).count == twins.count, "keys made in the same millisecond differ")
        for key in keys + twins {
            #expect(key.hasPrefix("authd-") && key.utf8.count == 40)
            _ = try SyncService.check(SyncSend.Params(session: "as1.x", kind: "message", conversation: nil, body: [:], idempotencyKey: key))
        }
    }

    @Test("an event stored too deep before the limit is served withheld, in its place, and every answer that carries it is written and read; the pages go on past it")
    func storedTooDeep() async throws {
        let fixture = try TestDirectory()
        let account = try await fixture.register().account.id
        let log = SyncLog(store: fixture.store, now: fixture.clock.closure)
        _ = try await log.append(account: account, try Self.draft("before"), from: Self.origin)
        // As the log took it before bodies' depth was limited (nothing but sync.send checks it).
        let deep = try SyncLog.Draft(kind: "message", conversation: "chat", body: Self.nested(505), idempotencyKey: nil)
        _ = try await log.append(account: account, deep, from: Self.origin)
        _ = try await log.append(account: account, try Self.draft("after"), from: Self.origin)

        let window = try await log.events(account: account, after: 0, limit: 10)
        let page = window.page
        #expect(page.events.map(\.position) == [1, 2, 3] && page.more == false)
        #expect(page.events[1].withheld == .syncTooDeep && page.events[1].body == .null)
        #expect(page.events[0].withheld == nil && page.events[2].body == ["text": "after"])
        // The answers as the wire has them: written, and read back by the strict reader.
        let history = try await log.history(account: account, conversation: "chat", before: nil, limit: 10)
        let lines = [try WireCodec.responseLine(id: 1, result: SyncEvents.Result(account: account, window)),
                     try WireCodec.responseLine(id: 2, result: SyncHistory.Result(account: account, history)),
                     try WireCodec.responseLine(id: 3, result: LinkSyncResume.Result(accounts: try await log.catchUp([(account, 0, [])], limit: 10).map(LinkSyncResume.Account.init)))]
        for line in lines { #expect(StrictJSON.check(line.dropLast()) == nil) }
        #expect(try await log.history(account: account, conversation: "chat", before: nil, limit: 10).events.map(\.withheld) == [nil, .syncTooDeep, nil])
    }

    @Test("pages of sync.events, sync.history and link.sync.resume stay within the line a device takes, say more, and go on from their last position to the end")
    func pagesBySize() async throws {
        let fixture = try TestDirectory()
        let first = try await fixture.register("+37251234567").account.id
        let second = try await fixture.register("+37251234568").account.id
        let log = SyncLog(store: fixture.store, now: fixture.clock.closure)
        let body = JSONValue.string(String(repeating: "x", count: 60_000))
        for account in [first, second] {
            for _ in 0..<24 {
                _ = try await log.append(account: account, try SyncLog.Draft(kind: "message", conversation: "big", body: body, idempotencyKey: nil), from: Self.origin)
            }
        }
        func fits(_ result: some Encodable) throws -> Bool { try WireCodec.responseLine(id: 1, result: result).count - 1 <= LineFramer.defaultMaxLineLength }

        var after: Int64 = 0, read: [Int64] = [], pages = 0
        while true {
            let window = try await log.events(account: first, after: after, limit: 1000)
            #expect(try fits(SyncEvents.Result(account: first, window)))
            let page = window.page
            read += page.events.map(\.position)
            pages += 1
            guard page.more, let last = page.events.last else { break }
            after = last.position
        }
        #expect(read == Array(1...24) && pages == 2)

        var before: Int64? = nil, history: [Int64] = []
        while true {
            let page = try await log.history(account: first, conversation: "big", before: before, limit: 500)
            #expect(try fits(SyncHistory.Result(account: first, page)))
            history += page.events.map(\.position)
            guard page.more, let last = page.events.last else { break }
            before = last.position
        }
        #expect(history == Array((1...24).reversed()))
        #expect(try await log.events(account: first, after: 0, limit: 5).page.more, "a page full by count says more too")
        #expect(try await !log.events(account: first, after: 19, limit: 5).page.more)

        // One resume answer for both accounts: within the line; the first account's page fills it,
        // the second's waits (more) for the next answer.
        let both = try await log.catchUp([(first, 0, [1000]), (second, 0, [1000])], limit: 500)
        #expect(try fits(LinkSyncResume.Result(accounts: both.map(LinkSyncResume.Account.init))))
        #expect(both[0].page.more && both[1].page.more && !both[0].page.events.isEmpty)
        let next = try await log.catchUp([(first, 24, [1000]), (second, 0, [1000])], limit: 500)
        #expect(next[0].page.events.isEmpty && !next[0].page.more && !next[1].page.events.isEmpty)
    }
}

extension SyncWriteLimit.Decision {
    var isTaken: Bool { if case .taken = self { true } else { false } }
}
