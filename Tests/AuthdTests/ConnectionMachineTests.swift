import Foundation
import Protocol
import Testing
@testable import authd

/// The connection's protocol state with no socket: bytes and completions in, actions out.
@Suite("Connection state machine")
struct ConnectionMachineTests {
    private static func line(_ id: Int, _ method: String = "hello") -> [UInt8] {
        Array(#"{"jsonrpc":"2.0","id":\#(id),"method":"\#(method)"}"#.utf8) + [0x0A]
    }

    private static func dispatched(_ actions: [ConnectionMachine.Action]) -> [UInt64] {
        actions.compactMap { if case .dispatch(_, let key) = $0 { key } else { nil } }
    }

    private static func output(_ machine: ConnectionMachine) -> String {
        machine.withPendingOutput { String(decoding: $0, as: UTF8.self) }
    }

    @Test("requests are framed across reads and dispatched in order; a bad line is answered and the connection stays")
    func framing() {
        var machine = ConnectionMachine()
        let bytes = Self.line(1) + Array("not json\n".utf8) + Self.line(2)
        var actions = machine.received(bytes.prefix(10))
        #expect(actions.isEmpty)
        actions = machine.received(bytes.dropFirst(10))
        #expect(Self.dispatched(actions) == [0, 1])
        #expect(actions.contains(.flush))
        #expect(Self.output(machine).contains("rpc.parse_error"))
        #expect(!machine.isClosed)
    }

    @Test("a response is queued, and writing it empties the outbox")
    func responses() {
        var machine = ConnectionMachine()
        _ = machine.received(Self.line(1))
        let actions = machine.requestFinished(key: 0, line: Array("answer\n".utf8), accepted: true)
        #expect(actions == [.flush])
        #expect(Self.output(machine) == "answer\n")
        #expect(machine.wrote(3).isEmpty)
        #expect(Self.output(machine) == "wer\n")
        _ = machine.wrote(4)
        #expect(machine.pendingOutputCount == 0)
    }

    @Test("reading pauses at the in-flight limit and resumes, with the buffered lines, when a request finishes")
    func backPressure() {
        var machine = ConnectionMachine(limits: .init(maxInFlight: 2))
        let actions = machine.received(Self.line(1) + Self.line(2) + Self.line(3))
        #expect(Self.dispatched(actions) == [0, 1])
        #expect(actions.last == .pauseReading)
        let resumed = machine.requestFinished(key: 0, line: nil, accepted: true)
        #expect(resumed.prefix(2) == [.resumeReading, .readAgain])
        #expect(Self.dispatched(resumed) == [2])
    }

    @Test("a turn takes a bounded number of lines; the rest waits, unread, for the connection's next turn")
    func linesPerTurn() {
        var machine = ConnectionMachine(limits: .init(linesPerTurn: 3))
        let lines = (1...7).flatMap { Self.line($0) }
        var actions = machine.received(lines)
        #expect(Self.dispatched(actions) == [0, 1, 2])
        #expect(actions.suffix(2) == [.pauseReading, .anotherTurn], "more are buffered: reading waits for another turn")
        actions = machine.requestFinished(key: 0, line: nil, accepted: true)
        #expect(actions.isEmpty, "a finished request takes no line of a spent turn, and asks for no second turn")
        actions = machine.newTurn()
        #expect(actions.prefix(2) == [.resumeReading, .readAgain])
        #expect(Self.dispatched(actions) == [3, 4, 5])
        #expect(actions.suffix(2) == [.pauseReading, .anotherTurn])
        actions = machine.newTurn()
        #expect(Self.dispatched(actions) == [6])
        #expect(!actions.contains(.anotherTurn) && actions.last != .pauseReading, "nothing more buffered: reading goes on")
        // A spent turn with nothing buffered keeps reading; the next line waits for a new turn.
        _ = machine.received(Self.line(8) + Self.line(9))
        actions = machine.received(Self.line(10))
        #expect(Self.dispatched(actions).isEmpty)
        #expect(actions == [.pauseReading, .anotherTurn])
        #expect(Self.dispatched(machine.newTurn()) == [9])
    }

    @Test("a client that leaves its answers unread is read no further until it reads them")
    func outputBackPressure() {
        var machine = ConnectionMachine(limits: .init(readPauseOutput: 8))
        var actions = machine.received(Self.line(1))
        #expect(Self.dispatched(actions) == [0])
        _ = machine.requestFinished(key: 0, line: Array("0123456789\n".utf8), accepted: true)
        actions = machine.received(Self.line(2) + Self.line(3))
        #expect(Self.dispatched(actions).isEmpty, "11 bytes unread > 8: nothing more is taken")
        #expect(actions == [.pauseReading])
        #expect(machine.wrote(2).isEmpty, "9 bytes still unread")
        actions = machine.wrote(5)
        #expect(actions.prefix(2) == [.resumeReading, .readAgain], "4 bytes unread: reading again")
        #expect(Self.dispatched(actions) == [1, 2], "with the lines it had buffered")
    }

    @Test("the memory budget: unread answers and unfinished lines count together; a caller past its share, or everyone past the total, is told so; giving back is always within")
    func heldBudget() {
        let registry = ConnectionRegistry()
        let alice = Caller.local(CallerIdentity(uid: 1000, gid: 1000, pid: 1, exe: "/a", username: "alice", groups: []))
        let bob = Caller.local(CallerIdentity(uid: 1001, gid: 1001, pid: 2, exe: "/b", username: "bob", groups: []))
        let half = ConnectionRegistry.bufferedPerCaller / 2
        #expect(registry.heldChanged(of: alice, standing: .local, by: .init(output: half)))
        #expect(registry.heldChanged(of: alice, standing: .local, by: .init(input: half)), "exactly alice's share")
        #expect(!registry.heldChanged(of: alice, standing: .local, by: .init(input: 1)), "one byte of an unfinished line past alice's share")
        #expect(registry.heldChanged(of: bob, standing: .local, by: .init(output: 1024)), "bob's share is his own")
        #expect(registry.heldChanged(of: alice, standing: .local, by: .init(input: -half - 1, output: -half)))
        #expect(registry.held == .init(input: 0, output: 1024))
        #expect(registry.heldChanged(of: bob, standing: .local, by: .init(output: -1024)))
        #expect(registry.held == .init())
    }

    @Test("strangers draw on a small pool of their own, other machines never on the local users' reserve")
    func heldPools() {
        let registry = ConnectionRegistry()
        let root = Caller.local(CallerIdentity(uid: 0, gid: 0, pid: 1, exe: "/r", username: "root", groups: []))
        let strangers = (0..<80).map { Caller.device(DeviceID(description: "stranger-\($0)")) }
        let line = ConnectionRegistry.newcomerLineLength
        // Strangers each holding an unfinished line fill their pool and no more.
        var admitted = 0
        for stranger in strangers {
            if registry.heldChanged(of: stranger, standing: .newcomer, by: .init(input: line)) {
                admitted += 1
            } else {
                _ = registry.heldChanged(of: stranger, standing: .newcomer, by: .init(input: -line))  // closed: it gives back
            }
        }
        #expect(admitted == ConnectionRegistry.bufferedNewcomers / line, "the newcomers' pool holds exactly this many lines")
        #expect(registry.held.total <= ConnectionRegistry.bufferedNewcomers + line)
        // Signed-in machines fill theirs up to the remote share; the local reserve stays.
        let members = (0..<20).map { Caller.device(DeviceID(description: "member-\($0)")) }
        var remote = 0
        for member in members {
            while registry.heldChanged(of: member, standing: .member, by: .init(output: 1 << 20)) { remote += 1 }
            _ = registry.heldChanged(of: member, standing: .member, by: .init(output: -(1 << 20)))
        }
        #expect(remote > 0)
        let reserve = ConnectionRegistry.bufferedTotal - ConnectionRegistry.bufferedRemote
        #expect(registry.held.total > ConnectionRegistry.bufferedRemote - (1 << 20), "the machines hold all they may")
        #expect(registry.heldChanged(of: root, standing: .local, by: .init(input: 300 << 10, output: 2400 << 10)),
                "root's 300 KB request and 2.4 MB answer fit in the reserve however full the machines' pools are")
        #expect(reserve >= ConnectionRegistry.bufferedPerCaller, "the reserve holds at least one local user's whole share")
    }

    @Test("an unfinished line is what the connection holds; once its lines are taken it holds nothing")
    func pendingInput() {
        var machine = ConnectionMachine()
        let start = Array(#"{"jsonrpc":"2.0","id":1,"#.utf8)
        _ = machine.received(start)
        #expect(machine.pendingInputCount == start.count)
        _ = machine.received(Array(#""method":"hello"}"#.utf8) + [0x0A])
        #expect(machine.pendingInputCount == 0)
    }

    @Test("a line over the cap is answered, then the connection closes once that is written")
    func lineTooLong() {
        var machine = ConnectionMachine(limits: .init(maxLineLength: 16))
        let actions = machine.received(Array(repeating: UInt8(ascii: "x"), count: 40))
        #expect(actions == [.flush])
        #expect(Self.output(machine).contains("rpc.line_too_long"))
        #expect(machine.wrote(machine.pendingOutputCount) == [.close(.lineTooLong)])
        #expect(machine.isClosed)
    }

    @Test("a client that does not read is closed at the output budget, and what it asked is cancelled")
    func unreadOutput() {
        var machine = ConnectionMachine(limits: .init(maxPendingOutput: 10))
        _ = machine.received(Self.line(1) + Self.line(2))
        _ = machine.enqueue(Data("12345\n".utf8))
        let actions = machine.enqueue(Data("67890\n".utf8))
        #expect(actions == [.cancelRequests([0, 1]), .close(.unreadOutput)])
        #expect(machine.pendingOutputCount == 0)
    }

    @Test("a client that leaves cancels its requests and streams")
    func peerGone() {
        var machine = ConnectionMachine()
        _ = machine.received(Self.line(1) + Self.line(2))
        guard case .success(let stream) = machine.openStream(for: 0) else { Issue.record("no stream"); return }
        _ = machine.requestFinished(key: 0, line: Array("ok\n".utf8), accepted: true)
        guard case .success(let pending) = machine.openStream(for: 1) else { Issue.record("no stream"); return }
        #expect(machine.endOfInput(peerGone: true) == [.cancelRequests([1]), .cancelStreams([stream]), .dropStreams([pending]), .close(.peerGone)])
    }

    @Test("after a half-close every request is answered, then the connection closes")
    func halfClose() {
        var machine = ConnectionMachine()
        _ = machine.received(Self.line(1))
        #expect(machine.endOfInput(peerGone: false) == [.pauseReading])
        let actions = machine.requestFinished(key: 0, line: Array("ok\n".utf8), accepted: true)
        #expect(actions == [.flush])
        #expect(machine.wrote(3) == [.close(.finished)])
    }

    @Test("closing after its last output: a half-close stops reading (the end of input would wake the loop again and again), a client gone closes at once")
    func endOfInputWhileClosing() {
        var machine = ConnectionMachine(limits: .init(maxLineLength: 64))
        _ = machine.received(Self.line(1))
        _ = machine.requestFinished(key: 0, line: Array("ok\n".utf8), accepted: true)
        let tooLong = machine.received([UInt8](repeating: 0x20, count: 100))
        #expect(tooLong == [.flush], "the error is queued behind the answer the client has not read")
        #expect(machine.endOfInput(peerGone: false) == [.pauseReading])
        #expect(machine.endOfInput(peerGone: false).isEmpty)
        #expect(machine.wrote(machine.pendingOutputCount) == [.close(.lineTooLong)], "it still closes once that is written")

        var gone = ConnectionMachine(limits: .init(maxLineLength: 64))
        _ = gone.received(Self.line(1))
        _ = gone.requestFinished(key: 0, line: Array("ok\n".utf8), accepted: true)
        _ = gone.received([UInt8](repeating: 0x20, count: 100))
        #expect(gone.endOfInput(peerGone: true) == [.close(.peerGone)])
    }

    @Test("an evicted connection closes at once: what it asked is cancelled and its unread answers dropped, however little it reads")
    func evicted() {
        var machine = ConnectionMachine()
        _ = machine.received(Self.line(1) + Self.line(2))
        _ = machine.requestFinished(key: 0, line: Array("ok\n".utf8), accepted: true)
        #expect(machine.evict() == [.cancelRequests([1]), .close(.evicted)])
        #expect(machine.isClosed && machine.pendingOutputCount == 0)
        #expect(machine.evict().isEmpty, "closed once")
    }

    @Test("a client that reads none of a closing connection's last output for a whole idle period is closed without it")
    func closingIdle() {
        var machine = ConnectionMachine()
        _ = machine.received(Self.line(1))
        _ = machine.requestFinished(key: 0, line: Array("ok\n".utf8), accepted: true)
        _ = machine.idleTick()
        #expect(machine.idleTick() == [], "the answer is waiting to be written: closing after it")
        #expect(machine.idleTick() == [.close(.idle)], "nothing of it read for a period")

        var reading = ConnectionMachine()
        _ = reading.received(Self.line(1))
        _ = reading.requestFinished(key: 0, line: Array("answer\n".utf8), accepted: true)
        _ = reading.idleTick()
        _ = reading.idleTick()
        _ = reading.wrote(2)
        #expect(reading.idleTick().isEmpty, "it read some: it gets another period")
    }

    @Test("closing when answered: no further line is taken, the request in flight is answered and written, then the connection closes")
    func closeWhenAnswered() {
        var machine = ConnectionMachine()
        _ = machine.received(Self.line(1))
        #expect(machine.closeWhenAnswered() == [.pauseReading])
        #expect(Self.dispatched(machine.received(Self.line(2))).isEmpty, "a line after it is not taken")
        #expect(machine.enqueue(Data("note\n".utf8)) == [.flush], "a notification still goes out")
        _ = machine.wrote(5)
        #expect(machine.requestFinished(key: 0, line: Array("ok\n".utf8), accepted: true) == [.flush])
        #expect(machine.wrote(3) == [.close(.finished)])
        var idle = ConnectionMachine()
        #expect(idle.closeWhenAnswered() == [.pauseReading, .close(.finished)], "with nothing in flight it closes at once")
    }

    @Test("a stream starts only after its request's response, and not at all when the request failed")
    func streamsFollowResponses() {
        var machine = ConnectionMachine()
        _ = machine.received(Self.line(1) + Self.line(2))
        guard case .success(let accepted) = machine.openStream(for: 0), case .success(let refused) = machine.openStream(for: 1) else {
            Issue.record("no stream"); return
        }
        #expect(machine.requestFinished(key: 0, line: Array("ok\n".utf8), accepted: true) == [.flush, .startStreams([accepted])])
        #expect(machine.requestFinished(key: 1, line: Array("no\n".utf8), accepted: false) == [.flush, .dropStreams([refused])])
        #expect(machine.cancelStream(accepted) == (true, [.cancelStreams([accepted])]))
        #expect(machine.cancelStream(accepted).found == false)
    }

    @Test("idle: closed at the first tick after a quiet period, never with a request in flight or a stream; half a line is not activity")
    func idle() {
        var quiet = ConnectionMachine()
        #expect(quiet.idleTick() == [.close(.idle)], "a client that never sent anything")

        var trickling = ConnectionMachine()
        _ = trickling.received(Array(#"{"jsonrpc":"#.utf8))
        #expect(trickling.idleTick() == [.close(.idle)], "bytes of an unfinished line do not keep it open")

        var busy = ConnectionMachine()
        _ = busy.received(Self.line(1))
        #expect(busy.idleTick().isEmpty, "a request arrived since the last tick")
        #expect(busy.idleTick().isEmpty, "the request (a prompt, say) is still in flight")
        _ = busy.requestFinished(key: 0, line: Array("ok\n".utf8), accepted: true)
        _ = busy.wrote(3)
        #expect(busy.idleTick().isEmpty, "it finished since the last tick")
        #expect(busy.idleTick() == [.close(.idle)])

        var subscribed = ConnectionMachine()
        _ = subscribed.received(Self.line(1))
        guard case .success(let stream) = subscribed.openStream(for: 0) else { Issue.record("no stream"); return }
        _ = subscribed.requestFinished(key: 0, line: nil, accepted: true)
        for _ in 0..<3 { #expect(subscribed.idleTick().isEmpty, "a subscription is not idle") }
        _ = subscribed.streamEnded(stream)
        #expect(subscribed.idleTick().isEmpty)
        #expect(subscribed.idleTick() == [.close(.idle)])

        var unread = ConnectionMachine()
        _ = unread.received(Self.line(1))
        _ = unread.requestFinished(key: 0, line: Array("answer\n".utf8), accepted: true)
        _ = unread.idleTick()
        #expect(unread.idleTick().isEmpty, "output still queued is written before the close")
        #expect(unread.wrote(7) == [.close(.idle)])
    }

    @Test("at most maxStreams streams per connection")
    func streamLimit() {
        var machine = ConnectionMachine(limits: .init(maxStreams: 2))
        _ = machine.received(Self.line(1))
        #expect((try? machine.openStream(for: 0).get()) != nil)
        #expect((try? machine.openStream(for: 0).get()) != nil)
        #expect(machine.openStream(for: 0) == .failure(.limit))
    }

    @Test("draining ends streams, refuses new requests with server.shutting_down, and lets requests in flight finish")
    func draining() {
        var machine = ConnectionMachine()
        _ = machine.received(Self.line(1))
        guard case .success(let stream) = machine.openStream(for: 0) else { Issue.record("no stream"); return }
        #expect(machine.drain() == [.dropStreams([stream])])
        let actions = machine.received(Self.line(2))
        #expect(Self.dispatched(actions).isEmpty)
        #expect(Self.output(machine).contains("server.shutting_down"))
        #expect(machine.openStream(for: 0) == .failure(.shuttingDown))
        #expect(machine.cancelInFlight() == [.cancelRequests([0])])
        #expect(machine.requestFinished(key: 0, line: Array("ok\n".utf8), accepted: true) == [.flush])
    }
}
