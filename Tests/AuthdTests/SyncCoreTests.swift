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
        let page = try await log.events(account: account, after: 0, limit: 10)
        #expect(page.head == 3 && page.oldest == 3 && page.events.map(\.position) == [3])
        _ = try await log.append(account: account, try Self.draft("d"), from: Self.origin)
        #expect(try await log.events(account: account, after: 0, limit: 10).events.map(\.position) == [3, 4], "positions go on after a purge")
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
        for _ in 0..<500 where collector.received.count < 7 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(collector.received.count == 7)
        // Late, doubled and out-of-order hints, then a new event whose predecessor was never hinted.
        source.events += [Self.event(9), Self.event(10)]
        for position: Int64 in [5, 9, 9, 4, 10] { hints.yield(.event(Self.event(position))) }
        for _ in 0..<500 where collector.received.count < 9 { try await Task.sleep(for: .milliseconds(10)) }
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
}
