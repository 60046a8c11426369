import Foundation
import Protocol
import Testing
@testable import authd

/// The device's end of the hub link with no socket and no clock: attempts, lines, ticks and
/// calls in, actions out.
@Suite("Hub link state machine")
struct LinkMachineTests {
    private static let t0 = ContinuousClock.now

    private static func at(_ milliseconds: Int) -> ContinuousClock.Instant { t0 + .milliseconds(milliseconds) }

    /// The hub's addresses, in the order a device lists them.
    private static let a = HostPort(host: "hub1.example.org", port: 7443)
    private static let b = HostPort(host: "hub2.example.org", port: 7443)
    private static let c = HostPort(host: "192.0.2.7", port: 7443)

    /// A machine of a hub at `addresses` whose backoff is varied by exactly `factor`.
    private static func machine(jitter factor: Double = 1, addresses: [HostPort] = [a]) -> LinkMachine {
        LinkMachine(addresses: addresses, now: t0, jitter: { range in
            precondition(range == 0.75...1.25, "a quarter either way")
            return factor
        })
    }

    /// A machine whose link is up since `t0` (its first heartbeat, id 1, sent then).
    private static func linked(jitter factor: Double = 1) -> LinkMachine {
        var machine = machine(jitter: factor)
        _ = machine.start(now: t0)
        _ = machine.connectSucceeded(now: t0)
        return machine
    }

    private static func response(_ id: Int64, result: String = #"{"ok":true}"#) -> [UInt8] {
        Array(#"{"jsonrpc":"2.0","id":\#(id),"result":\#(result)}"#.utf8)
    }

    private static func errorResponse(_ id: Int64, reason: String) -> [UInt8] {
        Array(#"{"jsonrpc":"2.0","id":\#(id),"error":{"code":-32000,"message":"no","data":{"reason":"\#(reason)"}}}"#.utf8)
    }

    private static func request(_ id: Int64, _ method: String) -> [UInt8] {
        Array((try? WireCodec.requestLine(id: .integer(id), method: method, params: NoParams())) ?? Data())
    }

    private static func ended(unlinked: Bool) -> LinkSessionsEnded.Params {
        LinkSessionsEnded.Params(sessions: [], cause: "device.revoke", unlinked: unlinked, at: "2026-11-28T14:00:00Z")
    }

    private static func notification(_ params: LinkSessionsEnded.Params) -> [UInt8] {
        Array(Array((try? WireCodec.notificationLine(method: LinkSessionsEnded.name, params: params)) ?? Data()).dropLast())
    }

    private static func sent(_ actions: [LinkMachine.Action]) -> [[UInt8]] {
        actions.compactMap { if case .send(let line) = $0 { line } else { nil } }
    }

    private static func delay(_ actions: [LinkMachine.Action]) -> Duration? {
        actions.lazy.compactMap { if case .connect(_, let after) = $0 { after } else { nil } }.first
    }

    // MARK: Attempts and backoff

    @Test("the first attempt goes at once; a connected link sends a heartbeat at once and reports it is linked")
    func startAndLink() {
        var machine = Self.machine()
        #expect(machine.start(now: Self.t0) == [.connect(Self.a, after: .zero)])
        #expect(machine.start(now: Self.t0).isEmpty, "started once")
        #expect(machine.status == .init(state: .connecting, address: Self.a, since: Self.t0))
        let actions = machine.connectSucceeded(now: Self.at(40))
        #expect(actions == [.send(Self.request(1, LinkPing.name)), .notice(.linked)])
        #expect(machine.status == .init(state: .connected, address: Self.a, since: Self.at(40)))
        #expect(machine.connectSucceeded(now: Self.at(50)).isEmpty, "no attempt is under way")
    }

    /// The delay after the n-th failed attempt in a row, with the jitter factor chosen.
    @Test("failed attempts back off 0.5 s, 1 s, 2 s … up to 30 s, each varied by a quarter", arguments: [
        (failures: 1, factor: 1.0, milliseconds: 500),
        (failures: 2, factor: 1.0, milliseconds: 1000),
        (failures: 3, factor: 1.0, milliseconds: 2000),
        (failures: 6, factor: 1.0, milliseconds: 16000),
        (failures: 7, factor: 1.0, milliseconds: 30000),
        (failures: 40, factor: 1.0, milliseconds: 30000),
        (failures: 1, factor: 0.75, milliseconds: 375),
        (failures: 1, factor: 1.25, milliseconds: 625),
        (failures: 7, factor: 1.25, milliseconds: 37500),
        (failures: 7, factor: 0.75, milliseconds: 22500),
    ])
    func backoff(failures: Int, factor: Double, milliseconds: Int) {
        var machine = Self.machine(jitter: factor)
        var now = Self.t0
        var actions = machine.start(now: now)
        for _ in 0..<failures {
            #expect(actions.last == .connect(Self.a, after: .zero))
            actions = machine.connectFailed("connection refused", now: now)
            guard let delay = Self.delay(actions) else { Issue.record("no next attempt: \(actions)"); return }
            #expect(machine.tick(now: now + delay - .milliseconds(1)).isEmpty, "not before its time")
            #expect(machine.nextDeadline == now + delay)
            now = now + delay
            actions = machine.tick(now: now)
        }
        #expect(actions == [.connect(Self.a, after: .zero)])
        #expect(machine.status.state == .unreachable)
        #expect(machine.status.since == Self.t0, "unreachable since the first failure")
        _ = machine.connectFailed("connection refused", now: now)
        #expect(Self.delay(machine.connectFailed("again", now: now)) == nil, "no attempt is under way")
        var fresh = Self.machine(jitter: factor)
        _ = fresh.start(now: Self.t0)
        for _ in 1..<failures {
            _ = fresh.connectFailed("connection refused", now: Self.t0)
            _ = fresh.tick(now: Self.at(60_000))
        }
        #expect(Self.delay(fresh.connectFailed("connection refused", now: Self.t0)) == .milliseconds(milliseconds))
    }

    @Test("a link that was up backs off from the start again when it drops")
    func backoffResets() {
        var machine = Self.machine()
        _ = machine.start(now: Self.t0)
        for _ in 0..<4 {
            _ = machine.connectFailed("connection refused", now: Self.t0)
            _ = machine.tick(now: Self.at(60_000))
        }
        _ = machine.connectSucceeded(now: Self.at(60_000))
        let actions = machine.peerClosed("the hub closed the link", now: Self.at(61_000))
        #expect(actions == [.close("the hub closed the link"), .reportDown(Self.a, "the hub closed the link", next: nil), .connect(Self.a, after: .milliseconds(500))])
    }

    @Test("an attempt that takes too long is given up and backs off")
    func attemptTimeout() {
        var machine = Self.machine()
        _ = machine.start(now: Self.t0)
        #expect(machine.nextDeadline == Self.at(13_000))
        #expect(machine.tick(now: Self.at(12_999)).isEmpty)
        let actions = machine.tick(now: Self.at(13_000))
        #expect(actions == [.close("no link within 13 s"), .connect(Self.a, after: .milliseconds(500))], "no warning: it never was up")
        #expect(machine.status.state == .unreachable)
        #expect(machine.status.lastError == "no link within 13 s")
    }

    @Test("an untrusted hub is reported, says so to every call, and is tried again with backoff")
    func untrusted() {
        var machine = Self.machine()
        _ = machine.start(now: Self.t0)
        let actions = machine.untrustedCertificate("certificate verify failed", now: Self.at(10))
        let reason = "the hub's certificate is not trusted: certificate verify failed"
        #expect(actions == [.reportDown(Self.a, reason, next: nil), .connect(Self.a, after: .milliseconds(500))])
        #expect(machine.status == .init(state: .untrusted, address: Self.a, since: Self.at(10), lastError: reason))
        #expect(machine.call("account.get", NoParams(), now: Self.at(20)).actions == [.fail([1], .untrusted(reason))])
        #expect(machine.tick(now: Self.at(510)) == [.connect(Self.a, after: .zero)])
        #expect(machine.status.state == .untrusted, "still untrusted while the next attempt runs")
        _ = machine.connectSucceeded(now: Self.at(600))
        #expect(machine.status == .init(state: .connected, address: Self.a, since: Self.at(600)))
    }

    // MARK: Several addresses

    /// What one attempt finds.
    enum Outcome: Sendable {
        case refused, untrusted, timeout, linked
    }

    /// Plays `outcomes` against a machine of `count` addresses: for each attempt, which address
    /// it went to and how long after the attempt before it (0: at once).
    private static func attempts(_ outcomes: [Outcome], count: Int, jitter factor: Double = 1) -> [(address: Int, afterMs: Int)] {
        let addresses = [a, b, c, HostPort(host: "hub4.example.org", port: 7443)].prefix(count)
        var machine = machine(jitter: factor, addresses: Array(addresses))
        var now = t0
        var actions = machine.start(now: now)
        var tried: [(address: Int, afterMs: Int)] = []
        for outcome in outcomes {
            guard let connect = actions.last, case .connect(let address, let after) = connect,
                  let index = addresses.firstIndex(of: address) else {
                Issue.record("no attempt after \(tried): \(actions)")
                return tried
            }
            tried.append((index, Int(LinkMachine.milliseconds(after))))
            if after > .zero {
                #expect(machine.nextDeadline == now + after)
                #expect(machine.tick(now: now + after - .milliseconds(1)).isEmpty, "not before its time")
                now = now + after
                #expect(machine.tick(now: now) == [.connect(address, after: .zero)])
            }
            switch outcome {
            case .refused: actions = machine.connectFailed("connection refused", now: now)
            case .untrusted: actions = machine.untrustedCertificate("certificate verify failed", now: now)
            case .timeout:
                now = now + .seconds(13)
                actions = machine.tick(now: now)
            case .linked:
                actions = machine.connectSucceeded(now: now)
                #expect(machine.status.state == .connected && machine.status.address == address)
            }
        }
        return tried
    }

    /// Each row: the addresses listed, what successive attempts find, and where each attempt
    /// went and after how long.
    @Test("a round tries the addresses in order, the next at once when one fails; only a round in which all failed waits, doubling, and the next round starts from the first", arguments: [
        (1, [Outcome.refused, .refused, .linked], [(0, 0), (0, 500), (0, 1000)]),
        (2, [.linked], [(0, 0)]),
        (2, [.refused, .linked], [(0, 0), (1, 0)]),
        (2, [.refused, .refused, .refused, .linked], [(0, 0), (1, 0), (0, 500), (1, 0)]),
        (3, [.refused, .refused, .refused, .refused, .refused, .refused, .linked], [(0, 0), (1, 0), (2, 0), (0, 500), (1, 0), (2, 0), (0, 1000)]),
        (3, [.timeout, .untrusted, .linked], [(0, 0), (1, 0), (2, 0)]),
        (3, [.untrusted, .timeout, .refused, .linked], [(0, 0), (1, 0), (2, 0), (0, 500)]),
        (4, [.refused, .refused, .refused, .refused, .refused, .linked], [(0, 0), (1, 0), (2, 0), (3, 0), (0, 500), (1, 0)]),
    ] as [(Int, [Outcome], [(Int, Int)])])
    func rounds(count: Int, outcomes: [Outcome], expected: [(Int, Int)]) {
        let tried = Self.attempts(outcomes, count: count)
        #expect(tried.map(\.address) == expected.map(\.0), "the addresses tried")
        #expect(tried.map(\.afterMs) == expected.map(\.1), "the waits before them")
    }

    @Test("jitter varies only the wait between rounds, never the step to the next address", arguments: [0.75, 1.25])
    func jitterOnlyBetweenRounds(factor: Double) {
        let tried = Self.attempts([.refused, .refused, .refused, .refused, .refused, .refused, .linked], count: 3, jitter: factor)
        #expect(tried.map(\.afterMs) == [0, 0, 0, Int(500 * factor), 0, 0, Int(1000 * factor)])
    }

    @Test("with the real random source, each wait between rounds stays within a quarter of its base and varies", arguments: [1, 2, 4, 7, 12])
    func realJitter(rounds: Int) {
        let base = min(30_000.0, 500.0 * Double(1 << (rounds - 1)))
        var seen = Set<Int>()
        for _ in 0..<200 {
            var machine = LinkMachine(addresses: [Self.a, Self.b], now: Self.t0)
            var actions = machine.start(now: Self.t0)
            for round in 1...rounds {
                _ = machine.connectFailed("connection refused", now: Self.t0)
                actions = machine.connectFailed("connection refused", now: Self.t0)
                if round < rounds { _ = machine.tick(now: Self.at(60_000)) }
            }
            guard let delay = Self.delay(actions) else { Issue.record("no next round: \(actions)"); return }
            let milliseconds = LinkMachine.milliseconds(delay)
            #expect(milliseconds >= base * 0.75 && milliseconds <= base * 1.25, "\(milliseconds) ms for a base of \(base) ms")
            #expect(actions.last == .connect(Self.a, after: delay), "the next round starts from the first address")
            seen.insert(Int(milliseconds))
        }
        #expect(seen.count > 10, "the waits vary: \(seen.sorted())")
    }

    @Test("a link lost at any address starts again from the first, after the first backoff: the backoff resets once a round links")
    func lostLinkStartsFromTheFirst() {
        var machine = Self.machine(addresses: [Self.a, Self.b, Self.c])
        _ = machine.start(now: Self.t0)
        // Two failed rounds (0.5 s, then 1 s), then b answers.
        for round in 0..<2 {
            _ = machine.connectFailed("connection refused", now: Self.t0)
            _ = machine.connectFailed("connection refused", now: Self.t0)
            #expect(Self.delay(machine.connectFailed("connection refused", now: Self.t0)) == .milliseconds(500 << round))
            _ = machine.tick(now: Self.at(60_000))
        }
        #expect(machine.connectFailed("connection refused", now: Self.at(60_000)) == [.connect(Self.b, after: .zero)])
        _ = machine.connectSucceeded(now: Self.at(60_010))
        #expect(machine.status.address == Self.b)
        let actions = machine.peerClosed("the hub closed the link", now: Self.at(61_000))
        #expect(actions == [.close("the hub closed the link"), .reportDown(Self.b, "the hub closed the link", next: nil), .connect(Self.a, after: .milliseconds(500))])
        #expect(machine.status == .init(state: .unreachable, address: Self.b, since: Self.at(61_000), lastError: "the hub closed the link"))
        #expect(machine.tick(now: Self.at(61_500)) == [.connect(Self.a, after: .zero)])
        // The preferred address is back: the link goes there.
        _ = machine.connectSucceeded(now: Self.at(61_510))
        #expect(machine.status == .init(state: .connected, address: Self.a, since: Self.at(61_510)))
    }

    /// The status after each step of: start, a refused, b untrusted, c linked, the link lost.
    @Test("the status names the address being tried, the one that failed last (with its error), or the one the link is on")
    func statusNamesTheAddress() {
        var machine = Self.machine(addresses: [Self.a, Self.b, Self.c])
        _ = machine.start(now: Self.t0)
        #expect(machine.status == .init(state: .connecting, address: Self.a, since: Self.t0))
        _ = machine.connectFailed("connection refused", now: Self.at(10))
        #expect(machine.status == .init(state: .unreachable, address: Self.a, since: Self.at(10), lastError: "connection refused"))
        let untrusted = machine.untrustedCertificate("certificate verify failed", now: Self.at(20))
        let reason = "the hub's certificate is not trusted: certificate verify failed"
        #expect(untrusted == [.reportDown(Self.b, reason, next: Self.c), .connect(Self.c, after: .zero)], "never accepted silently, and the next is tried")
        #expect(machine.status == .init(state: .untrusted, address: Self.b, since: Self.at(20), lastError: reason))
        #expect(machine.call("account.get", NoParams(), now: Self.at(25)).actions == [.fail([1], .untrusted(reason))])
        _ = machine.connectSucceeded(now: Self.at(30))
        #expect(machine.status == .init(state: .connected, address: Self.c, since: Self.at(30)))
        _ = machine.peerClosed("the hub closed the link", now: Self.at(40))
        #expect(machine.status == .init(state: .unreachable, address: Self.c, since: Self.at(40), lastError: "the hub closed the link"))
        _ = machine.tick(now: Self.at(540))
        #expect(machine.status.address == Self.c, "still the address that failed, while the first is tried again")
    }

    @Test("an attempt that takes too long at one address is dropped and the next is tried at once")
    func attemptTimeoutHandsOver() {
        var machine = Self.machine(addresses: [Self.a, Self.b])
        _ = machine.start(now: Self.t0)
        #expect(machine.tick(now: Self.at(13_000)) == [.close("no link within 13 s"), .connect(Self.b, after: .zero)])
        #expect(machine.nextDeadline == Self.at(26_000), "the next address has an attempt's whole time")
        #expect(machine.tick(now: Self.at(26_000)) == [.close("no link within 13 s"), .connect(Self.a, after: .milliseconds(500))])
    }

    @Test("unlinked by the hub, the link is made again from the first address; its calls wait through the round, and fail only when all of it failed", arguments: [true, false])
    func rejoinRound(secondAnswers: Bool) {
        var machine = Self.machine(addresses: [Self.a, Self.b])
        _ = machine.start(now: Self.t0)
        _ = machine.connectFailed("connection refused", now: Self.t0)
        _ = machine.connectSucceeded(now: Self.t0)
        #expect(machine.status.address == Self.b)
        _ = machine.received(Self.response(1), now: Self.at(1))
        _ = machine.call("a.b", NoParams(), now: Self.at(2))
        _ = machine.received(Self.notification(Self.ended(unlinked: true)), now: Self.at(3))
        #expect(machine.peerClosed("the hub closed the link", now: Self.at(5))
                == [.close("the hub closed the link"), .reportDown(Self.b, "the hub closed the link", next: Self.a), .connect(Self.a, after: .zero)])
        #expect(machine.status == .init(state: .connecting, address: Self.a, since: Self.at(5), lastError: "the hub closed the link"))
        #expect(machine.connectFailed("connection refused", now: Self.at(6)) == [.connect(Self.b, after: .zero)], "the call still waits")
        #expect(machine.rejoining)
        #expect(machine.call("c.d", NoParams(), now: Self.at(7)).actions.isEmpty, "a call made meanwhile waits too")
        if secondAnswers {
            #expect(machine.connectSucceeded(now: Self.at(8)) == [
                .send(Self.request(4, LinkPing.name)), .send(Self.request(2, "a.b")), .send(Self.request(3, "c.d")), .notice(.linked),
            ])
            #expect(machine.status == .init(state: .connected, address: Self.b, since: Self.at(8)))
        } else {
            #expect(machine.connectFailed("connection refused", now: Self.at(8))
                    == [.fail([2, 3], .unavailable(retryAfter: 1, detail: LinkMachine.dropped)), .connect(Self.a, after: .milliseconds(500))])
            #expect(!machine.rejoining)
        }
    }

    // MARK: Heartbeats

    /// The heartbeat interval that follows from the idle timeout the hub answers the first one with.
    @Test("heartbeats every 5 s, or a third of the hub's idle timeout, at least every 200 ms", arguments: [
        (idle: nil, interval: Duration.seconds(5)),
        (idle: 300, interval: .seconds(5)),
        (idle: 15, interval: .seconds(5)),
        (idle: 9, interval: .seconds(3)),
        (idle: 1, interval: .seconds(1) / 3),
        (idle: 0, interval: .milliseconds(200)),
    ] as [(idle: Int?, interval: Duration)])
    func heartbeatInterval(idle: Int?, interval: Duration) {
        var machine = Self.linked()
        let answer = idle.map { #"{"ok":true,"idle_timeout":\#($0)}"# } ?? #"{"ok":true}"#
        #expect(machine.received(Self.response(1, result: answer), now: Self.at(30)).isEmpty)
        #expect(machine.status.roundTrip == .milliseconds(30))
        // Quiet since the heartbeat went at t0 (its answer came at 30 ms): the next is due at
        // t0 + interval, when the sending side has been quiet that long.
        #expect(machine.nextDeadline == Self.t0 + interval)
        #expect(machine.tick(now: Self.t0 + interval - .milliseconds(1)).isEmpty)
        #expect(Self.sent(machine.tick(now: Self.t0 + interval)) == [Self.request(2, LinkPing.name)])
        #expect(machine.tick(now: Self.t0 + interval + .milliseconds(1)).isEmpty, "one heartbeat waits at a time")
    }

    @Test("a link that carries calls sends no heartbeat until one way has been quiet for the interval")
    func trafficDefersHeartbeat() {
        var machine = Self.linked()
        _ = machine.received(Self.response(1), now: Self.at(10))
        _ = machine.call("account.get", NoParams(), now: Self.at(4000))
        _ = machine.received(Self.response(2), now: Self.at(4100))
        #expect(machine.nextDeadline == Self.at(9000), "5 s after the device last sent")
        #expect(machine.tick(now: Self.at(8999)).isEmpty)
        #expect(Self.sent(machine.tick(now: Self.at(9000))) == [Self.request(3, LinkPing.name)])
    }

    @Test("a heartbeat unanswered for 10 s drops the link, fails what waits, and backs off", arguments: [9_999, 10_000])
    func heartbeatTimeout(elapsed: Int) {
        var machine = Self.linked()
        let call = machine.call("account.get", NoParams(), now: Self.at(5))
        #expect(call.id == 2)
        #expect(machine.nextDeadline == Self.at(10_000))
        let actions = machine.tick(now: Self.at(elapsed))
        if elapsed < 10_000 {
            #expect(actions.isEmpty)
            #expect(machine.isUp)
            return
        }
        let reason = "the hub did not answer a heartbeat within 10 s"
        #expect(actions == [.close(reason), .fail([2], .unavailable(retryAfter: 1, detail: LinkMachine.dropped)),
                            .reportDown(Self.a, reason, next: nil), .connect(Self.a, after: .milliseconds(500))])
        #expect(machine.status == .init(state: .unreachable, address: Self.a, since: Self.at(10_000), lastError: reason))
    }

    // MARK: Calls

    @Test("calls are multiplexed by id: answers in any order reach their own call; unknown ids and junk are ignored")
    func multiplexing() {
        var machine = Self.linked()
        let first = machine.call("account.get", NoParams(), now: Self.at(1))
        let second = machine.call("session.get", NoParams(), now: Self.at(2))
        #expect(first.actions == [.send(Self.request(2, "account.get"))])
        #expect(second.actions == [.send(Self.request(3, "session.get"))])
        #expect(machine.callsWaiting == 2)
        let refused = machine.received(Self.errorResponse(3, reason: "session.expired"), now: Self.at(3))
        guard refused.count == 1, case .answer(3, .failure(let error)) = refused[0] else { Issue.record("\(refused)"); return }
        #expect(error.reason.rawValue == "session.expired", "the hub's refusal reaches its call as the hub gave it")
        #expect(machine.received(Array("not json".utf8), now: Self.at(4)).isEmpty)
        #expect(machine.received(Self.response(99), now: Self.at(5)).isEmpty)
        let answered = machine.received(Self.response(2, result: "42"), now: Self.at(6))
        guard answered.count == 1, case .answer(2, .success(let value)) = answered[0] else { Issue.record("\(answered)"); return }
        #expect(value.value == .integer(42) && Array(value.bytes) == Array("42".utf8))
        #expect(machine.received(Self.response(2, result: "42"), now: Self.at(7)).isEmpty, "answered once")
        #expect(machine.callsWaiting == 0)
    }

    /// A call made in each state the link can be in, and what it gets at once.
    @Test("while the link is down a call fails at once, saying when to try again", arguments: [
        (failures: 0, elapsed: 0, expected: LinkMachine.Action.fail([1], .unavailable(retryAfter: 1, detail: "not connected yet"))),
        (failures: 1, elapsed: 0, expected: .fail([1], .unavailable(retryAfter: 1, detail: "connection refused"))),
        (failures: 6, elapsed: 0, expected: .fail([1], .unavailable(retryAfter: 17, detail: "connection refused"))),
        (failures: 6, elapsed: 15_500, expected: .fail([1], .unavailable(retryAfter: 1, detail: "connection refused"))),
        (failures: 7, elapsed: 0, expected: .fail([1], .unavailable(retryAfter: 31, detail: "connection refused"))),
    ])
    func failsAtOnceWhileDown(failures: Int, elapsed: Int, expected: LinkMachine.Action) {
        var machine = Self.machine()
        if failures > 0 {
            _ = machine.start(now: Self.t0)
            for _ in 1..<failures {
                _ = machine.connectFailed("connection refused", now: Self.t0)
                _ = machine.tick(now: Self.at(60_000))
            }
            _ = machine.connectFailed("connection refused", now: Self.t0)
        }
        #expect(machine.call("account.get", NoParams(), now: Self.at(elapsed)).actions == [expected])
        #expect(machine.callsWaiting == 0, "nothing waits for a hub that is not there")
    }

    @Test("a call the hub does not answer within 60 s fails; the link stays")
    func callTimeout() {
        var machine = Self.linked()
        _ = machine.received(Self.response(1), now: Self.at(1))
        _ = machine.call("account.get", NoParams(), now: Self.at(100))
        let before = machine.tick(now: Self.at(60_099))
        #expect(Self.sent(before) == [Self.request(3, LinkPing.name)], "only a heartbeat: the call has 1 ms left")
        #expect(machine.nextDeadline == Self.at(60_100))
        #expect(machine.tick(now: Self.at(60_100)) == [.fail([2], .unavailable(retryAfter: 1, detail: "the hub did not answer within 60 s"))])
        #expect(machine.isUp)
        #expect(machine.received(Self.response(2), now: Self.at(60_200)).isEmpty, "a late answer finds no one")
    }

    @Test("a link that drops fails every call waiting on it")
    func dropFailsCalls() {
        var machine = Self.linked()
        _ = machine.call("a.b", NoParams(), now: Self.at(1))
        _ = machine.call("c.d", NoParams(), now: Self.at(2))
        let actions = machine.peerClosed("the hub closed the link", now: Self.at(3))
        #expect(actions == [.close("the hub closed the link"), .fail([2, 3], .unavailable(retryAfter: 1, detail: LinkMachine.dropped)),
                            .reportDown(Self.a, "the hub closed the link", next: nil), .connect(Self.a, after: .milliseconds(500))])
        #expect(machine.peerClosed("again", now: Self.at(4)).isEmpty, "down once")
    }

    // MARK: Rejoining

    @Test("unlinked by the hub, the link is made again at once and the calls it did not answer go again, in order, after the heartbeat")
    func rejoin() {
        var machine = Self.linked()
        _ = machine.received(Self.response(1), now: Self.at(1))
        _ = machine.call("a.b", NoParams(), now: Self.at(2))
        #expect(machine.received(Self.notification(Self.ended(unlinked: true)), now: Self.at(3)) == [.notice(.sessionsEnded(Self.ended(unlinked: true)))])
        _ = machine.call("c.d", NoParams(), now: Self.at(4))
        let actions = machine.peerClosed("the hub closed the link", now: Self.at(5))
        #expect(actions == [.close("the hub closed the link"), .reportDown(Self.a, "the hub closed the link", next: Self.a), .connect(Self.a, after: .zero)])
        #expect(machine.status.state == .connecting)
        // A call while the new link is being made waits for it.
        #expect(machine.call("e.f", NoParams(), now: Self.at(6)).actions.isEmpty)
        #expect(machine.connectSucceeded(now: Self.at(7)) == [
            .send(Self.request(5, LinkPing.name)), .send(Self.request(2, "a.b")), .send(Self.request(3, "c.d")), .send(Self.request(4, "e.f")), .notice(.linked),
        ])
        #expect(!machine.rejoining)
    }

    @Test("only a link that was up rejoins at once: when the new attempt fails, the calls fail and the backoff applies")
    func rejoinFails() {
        var machine = Self.linked()
        _ = machine.call("a.b", NoParams(), now: Self.at(2))
        _ = machine.received(Self.notification(Self.ended(unlinked: true)), now: Self.at(3))
        _ = machine.peerClosed("the hub closed the link", now: Self.at(5))
        let actions = machine.connectFailed("connection refused", now: Self.at(6))
        #expect(actions == [.fail([2], .unavailable(retryAfter: 1, detail: LinkMachine.dropped)), .connect(Self.a, after: .milliseconds(500))])
        #expect(machine.status.state == .unreachable)
        #expect(!machine.rejoining)
    }

    @Test("sessions ended without unlinking are told, and the link stays as it is")
    func sessionsEndedKeepsLink() {
        var machine = Self.linked()
        #expect(machine.received(Self.notification(Self.ended(unlinked: false)), now: Self.at(3)) == [.notice(.sessionsEnded(Self.ended(unlinked: false)))])
        #expect(!machine.rejoining)
        #expect(Self.delay(machine.peerClosed("the hub closed the link", now: Self.at(5))) == .milliseconds(500))
    }

    // MARK: Stopping

    @Test("stopping fails what waits and drops the link; nothing is attempted after")
    func stop() {
        var machine = Self.linked()
        _ = machine.call("a.b", NoParams(), now: Self.at(2))
        #expect(machine.stop() == [.fail([2], .unavailable(retryAfter: 1, detail: "authd is stopping")), .close("authd is stopping")])
        #expect(machine.nextDeadline == nil)
        #expect(machine.tick(now: Self.at(60_000)).isEmpty)
        #expect(machine.call("a.b", NoParams(), now: Self.at(3)).actions == [.fail([3], .unavailable(retryAfter: 1, detail: "authd is stopping"))])
    }

    // MARK: What a device tells its hub

    @Test("what a device tells its hub of a local caller, the hub takes: a name with a control character, or a path whose bytes are not UTF-8 and grow past 4096 bytes as they are read, is told as not known")
    func forwardedCallerOfAProcess() throws {
        func told(exe: String?, username: String? = "alice") throws -> ForwardedCaller {
            let caller = ForwardedCaller(CallerIdentity(uid: 1000, gid: 1000, pid: 1, exe: exe, username: username, groups: []))
            // Read at the hub as every forwarded call is.
            let line = try WireCodec.requestLine(id: 1, method: LinkForward.name, params: LinkForward.Params(method: "hello", params: nil, caller: caller))
            let (_, read) = try WireCodec.decodeForwarded(try WireCodec.decodeRequest(Array(line.dropLast())).get())
            #expect(read == caller)
            return caller
        }
        #expect(try told(exe: "/usr/bin/app").exe == "/usr/bin/app")
        #expect(try told(exe: "/" + String(repeating: "x", count: 4095)).exe?.utf8.count == 4096)
        // A path of PATH_MAX bytes that are not UTF-8, as Syscalls.readLink reads it: each byte
        // becomes U+FFFD, three bytes.
        let unreadable = String(decoding: [UInt8](repeating: 0xFF, count: 4096), as: UTF8.self)
        #expect(try told(exe: unreadable).exe == nil)
        #expect(try told(exe: "/tmp/app\nAUTHD_FORGED=1").exe == nil)
        let named = try told(exe: "/usr/bin/app", username: "alice\u{7F}")
        #expect(named.username == nil && named.exe == "/usr/bin/app" && named.uid == 1000)
    }
}
