import AuthdClient
import Foundation
import Glibc
import Protocol
import Synchronization
import Testing

/// A client and the daemon's end of a socketpair. The tests play the daemon by writing its lines
/// into the socket before the client reads (the socket buffer holds them), so no thread and no
/// timing is involved: what the client sends waits unread on the daemon's end.
private struct Pair {
    let client: LineConnection
    let daemon: LineConnection

    init(maxLineLength: Int = LineFramer.defaultMaxLineLength, receiveTimeout: Duration? = nil) throws {
        var fds: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0 else {
            throw AuthdTestFailure("socketpair: \(String(cString: strerror(errno)))")
        }
        client = try LineConnection(adopting: fds[0], maxLineLength: maxLineLength, receiveTimeout: receiveTimeout)
        daemon = try LineConnection(adopting: fds[1], receiveTimeout: .seconds(5))
    }

    /// The daemon sends `lines`, each with its `\n`.
    func daemonSends(_ lines: String...) throws {
        try daemon.send(lines.map { $0 + "\n" }.joined().utf8)
    }

    /// The next line the client sent, as JSON.
    func clientSent() throws -> JSONValue? {
        try daemon.readLine().map { try WireCodec.decode(JSONValue.self, from: Data($0)) }
    }
}

/// The code of the client error `body` threw; nil when it threw none (or another error).
private func failure(_ body: () throws -> Any?) -> AuthdClientError.Code? {
    do {
        _ = try body()
        return nil
    } catch {
        return (error as? AuthdClientError)?.code
    }
}

private struct AuthdTestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A method for the typed calls.
private enum Echo: RPCMethod {
    static let name = "test.echo"
    struct Params: Codable, Sendable { var text: String }
    struct Result: Codable, Sendable, Equatable { var text: String }
}

@Suite("Line connection")
struct LineConnectionTests {
    @Test("a line split across reads is returned whole, once complete; a timeout keeps the part received")
    func framingAcrossReads() throws {
        let pair = try Pair(receiveTimeout: .milliseconds(20))
        try pair.daemon.send(#"{"jsonrpc":"2.0","#.utf8)
        #expect(failure { try pair.client.readLine() } == .timedOut)
        try pair.daemon.send("\"id\":1}\r\nsecond\n\nthird".utf8)
        #expect(try pair.client.readLine() == Array(#"{"jsonrpc":"2.0","id":1}"#.utf8))
        #expect(try pair.client.readLine() == Array("second".utf8), "two lines from one read, the blank one skipped")
        pair.daemon.finishWriting()
        #expect(try pair.client.readLine() == nil, "an unterminated tail is not a line")
    }

    @Test("the receive timeout ends a wait with .timedOut, in about the time set")
    func receiveTimeout() throws {
        let pair = try Pair(receiveTimeout: .milliseconds(100))
        let started = ContinuousClock.now
        let error = #expect(throws: AuthdClientError.self) { try pair.client.readLine() }
        let waited = ContinuousClock.now - started
        #expect(error?.code == .timedOut)
        #expect(waited >= .milliseconds(90) && waited < .seconds(3), "waited \(waited)")
    }

    @Test("a receive timeout too long to add to the clock waits as none does")
    func endlessReceiveTimeout() throws {
        let pair = try Pair(receiveTimeout: .seconds(Int64.max))
        try pair.daemonSends("answer")
        #expect(try pair.client.readLine() == Array("answer".utf8))
    }

    @Test("the receive timeout bounds the whole wait for a line: a daemon that sends a byte now and then does not stretch it")
    func tricklingDaemonTimesOut() throws {
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0)
        let client = try LineConnection(adopting: fds[0], receiveTimeout: .milliseconds(300))
        let daemon = fds[1]
        final class Stop: Sendable { let flag = Mutex(false) }
        let stop = Stop()
        // The daemon trickles a line that never ends: a byte each 50 ms, for up to 5 s.
        let trickle = Thread {
            for _ in 0..<100 where !stop.flag.withLock({ $0 }) {
                _ = Glibc.send(daemon, "x", 1, Int32(MSG_NOSIGNAL))
                usleep(50_000)
            }
            close(daemon)
        }
        trickle.start()
        defer { stop.flag.withLock { $0 = true } }
        let started = ContinuousClock.now
        #expect(failure { try client.readLine() } == .timedOut)
        let waited = ContinuousClock.now - started
        #expect(waited >= .milliseconds(290) && waited < .seconds(3), "waited \(waited): each byte must not start the wait again")
    }

    @Test("a daemon that accepts nothing, its listen queue full: connecting fails within the send timeout, never waits for ever")
    func connectIntoAFullQueue() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("authd-client-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/s.sock"
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { field in
            path.utf8CString.withUnsafeBytes { bytes in _ = memcpy(field.baseAddress!, bytes.baseAddress!, bytes.count) }
        }
        #expect(withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } } == 0)
        #expect(listen(listener, 0) == 0)
        // A queue of none: the first connection waits in it, the next would wait for an accept.
        let first = try LineConnection(socketPath: path)
        final class Outcome: Sendable {
            /// nil while the connect runs; then its error's code (nil: it connected).
            let code = Mutex<AuthdClientError.Code??>(nil)
        }
        let outcome = Outcome()
        let started = ContinuousClock.now
        Thread {
            let code = failure { try LineConnection(socketPath: path, sendTimeout: .milliseconds(300)) }
            outcome.code.withLock { $0 = .some(code) }
        }.start()
        let deadline = ContinuousClock.now + .seconds(10)
        while outcome.code.withLock({ $0 }) == nil && ContinuousClock.now < deadline { usleep(10_000) }
        close(listener)  // a connect still waiting fails now, and its thread ends
        #expect(outcome.code.withLock { $0 } == .some(.connectFailed), "the second connect was refused within its timeout")
        #expect(ContinuousClock.now - started < .seconds(5))
        withExtendedLifetime(first) {}
    }

    @Test("a peer that closes: its last lines are read, then nil; sending fails with EPIPE, not SIGPIPE")
    func closedPeer() throws {
        let pair = try Pair()
        try pair.daemonSends("last")
        pair.daemon.close()
        #expect(try pair.client.readLine() == Array("last".utf8))
        #expect(try pair.client.readLine() == nil)
        let error = #expect(throws: AuthdClientError.self) { try pair.client.send("hello\n".utf8) }
        #expect(error?.code == .sendFailed)
        #expect(error?.errno == EPIPE)
    }

    @Test("a line over the maximum fails, and keeps failing")
    func lineTooLong() throws {
        let pair = try Pair(maxLineLength: 16)
        try pair.daemonSends(String(repeating: "x", count: 40), "short")
        #expect(failure { try pair.client.readLine() } == .lineTooLong)
        #expect(failure { try pair.client.readLine() } == .lineTooLong)
    }

    @Test("half-closing still receives; sending and reading after close fail")
    func halfCloseAndClose() throws {
        // A bound, so that a read that waited on the closed socket would fail the test, not hang it.
        let pair = try Pair(receiveTimeout: .seconds(5))
        try pair.client.send("request\n".utf8)
        pair.client.finishWriting()
        #expect(try pair.daemon.readLine() == Array("request".utf8))
        #expect(try pair.daemon.readLine() == nil, "the daemon sees the end of the stream")
        try pair.daemonSends("answer")
        #expect(try pair.client.readLine() == Array("answer".utf8))
        pair.client.close()
        pair.client.close()
        #expect(failure { try pair.client.send("x\n".utf8) } == .sendFailed)
        #expect(failure { try pair.client.readLine() } == .receiveFailed, "a read after close fails at once, it does not wait")
    }

    @Test("a socket that is not there: connectFailed with the path and errno")
    func connectFailure() throws {
        let error = #expect(throws: AuthdClientError.self) { try LineConnection(socketPath: "/nonexistent-authd-dir/authd.sock") }
        #expect(error?.code == .connectFailed)
        #expect(error?.socketPath == "/nonexistent-authd-dir/authd.sock")
        #expect(error?.errno == ENOENT)
        #expect(error?.description == "cannot connect to authd at /nonexistent-authd-dir/authd.sock: No such file or directory")
        let long = "/tmp/" + String(repeating: "d", count: 200) + "/authd.sock"
        #expect(failure { try LineConnection(socketPath: long) } == .connectFailed)
    }
}

@Suite("JSON-RPC client")
struct RPCClientTests {
    @Test("a typed call: the request on the wire, notifications before the response handed over in order")
    func notificationBeforeResponse() throws {
        let pair = try Pair()
        let client = RPCClient(connection: pair.client)
        try pair.daemonSends(
            #"{"jsonrpc":"2.0","method":"prompt","params":{"kind":"card"}}"#,
            #"{"jsonrpc":"2.0","id":99,"result":{"text":"not ours"}}"#,
            #"{"jsonrpc":"2.0","method":"progress"}"#,
            #"{"jsonrpc":"2.0","id":1,"result":{"text":"hi"}}"#)
        var seen: [String] = []
        let result = try client.call(Echo.self, .init(text: "hi")) { method, params in
            seen.append(method + (params?["kind"]?.stringValue.map { ":" + $0 } ?? ""))
        }
        #expect(result == Echo.Result(text: "hi"))
        #expect(seen == ["prompt:card", "progress"])
        #expect(try pair.clientSent() == ["jsonrpc": "2.0", "id": 1, "method": "test.echo", "params": ["text": "hi"]])
    }

    @Test("ids count up; a refusal is thrown with the daemon's error, or returned as a value by request")
    func refusals() throws {
        let pair = try Pair()
        let client = RPCClient(connection: pair.client)
        try pair.daemonSends(
            #"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"Wrong PIN.","data":{"reason":"pin.wrong","retries_left":2}}}"#,
            #"{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"Unknown method.","data":{"reason":"rpc.unknown_method"}}}"#)
        let error = #expect(throws: AuthdClientError.self) { try client.callRaw(method: "card.login", params: ["aud": "x"] as JSONValue) }
        #expect(error?.code == .requestRefused)
        #expect(error?.method == "card.login")
        #expect(error?.daemonError?.reason == Reason("pin.wrong"))
        #expect(error?.daemonError?.details["retries_left"] == 2)
        let outcome = try client.request(method: "no.such", params: NoParams())
        #expect(outcome == .error(RPCError(code: .methodNotFound, reason: .unknownMethod, message: "")))
        #expect(try pair.clientSent()?["id"] == 1)
        #expect(try pair.clientSent()?["id"] == 2)
    }

    @Test("an error with a null id is about the connection: connectionRefused, also when the daemon closed after it (the send fails, the refusal is read)",
          arguments: [false, true])
    func nullIDError(daemonCloses: Bool) throws {
        let pair = try Pair()
        let client = RPCClient(connection: pair.client)
        try pair.daemonSends(#"{"jsonrpc":"2.0","id":null,"error":{"code":-32002,"message":"Busy.","data":{"reason":"server.busy"}}}"#)
        if daemonCloses { pair.daemon.close() }
        let error = #expect(throws: AuthdClientError.self) { try client.call(Echo.self, .init(text: "x")) }
        #expect(error?.code == .connectionRefused)
        #expect(error?.daemonError?.reason == .serverBusy)
    }

    @Test("a daemon that closes while a call waits: .closed; nextNotification ends with nil")
    func closedWhileWaiting() throws {
        let pair = try Pair()
        let client = RPCClient(connection: pair.client)
        pair.daemon.finishWriting()
        #expect(failure { try client.call(Echo.self, .init(text: "x")) } == .closed)
        #expect(try client.nextNotification() == nil)
    }

    @Test("a request posted from the callback: its refusal is consumed and reported while the call waits")
    func postFromCallback() throws {
        let pair = try Pair()
        var refusals: [Reason] = []
        let client = RPCClient(connection: pair.client) { refusals.append($0.reason) }
        try pair.daemonSends(
            #"{"jsonrpc":"2.0","method":"prompt","params":{"prompt_id":"p1"}}"#,
            #"{"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"No such prompt.","data":{"reason":"prompt.unknown"}}}"#,
            #"{"jsonrpc":"2.0","method":"prompt","params":{"prompt_id":"p2"}}"#,
            #"{"jsonrpc":"2.0","id":3,"result":{}}"#,
            #"{"jsonrpc":"2.0","id":1,"result":{"text":"done"}}"#)
        let result = try client.call(Echo.self, .init(text: "x")) { _, params in
            let id = params?["prompt_id"]?.stringValue ?? ""
            try client.post(Echo.self, .init(text: id))
        }
        #expect(result.text == "done")
        #expect(refusals == [Reason("prompt.unknown")])
        #expect(try (0..<3).map { _ in try pair.clientSent()?["id"] } == [1, 2, 3])
    }

    @Test("a notification sent has no id and gets no answer; a handler's own error ends the call")
    func notifyAndHandlerFailure() throws {
        let pair = try Pair()
        let client = RPCClient(connection: pair.client)
        try pair.daemonSends(#"{"jsonrpc":"2.0","method":"prompt","params":{"prompt_id":"p1"}}"#)
        let error = #expect(throws: AuthdClientError.self) {
            try client.call(Echo.self, .init(text: "x")) { _, _ in
                try client.notify(method: "prompt.cancel", params: ["prompt_id": "p1"] as JSONValue)
                throw AuthdTestFailure("the user gave up")
            }
        }
        #expect(error?.code == .notificationHandlerFailed)
        #expect((error?.underlying as? AuthdTestFailure)?.description == "the user gave up")
        #expect(try pair.clientSent()?["id"] == 1)
        #expect(try pair.clientSent() == ["jsonrpc": "2.0", "method": "prompt.cancel", "params": ["prompt_id": "p1"]])
    }

    @Test("streams: nextNotification skips responses and returns notifications in order")
    func stream() throws {
        let pair = try Pair()
        let client = RPCClient(connection: pair.client)
        try pair.daemonSends(
            #"{"jsonrpc":"2.0","id":1,"result":{"subscription":"s1"}}"#,
            #"{"jsonrpc":"2.0","method":"event","params":{"n":1}}"#,
            #"{"jsonrpc":"2.0","id":7,"result":{}}"#,
            #"{"jsonrpc":"2.0","method":"event","params":{"n":2}}"#)
        _ = try client.callRaw(method: "events.subscribe", params: NoParams())
        #expect(try client.nextNotification()?.params?["n"] == 1)
        #expect(try client.nextNotification()?.params?["n"] == 2)
    }

    @Test("lines that are not the protocol, and results of the wrong shape, are client errors")
    func badAnswers() throws {
        let pair = try Pair()
        let client = RPCClient(connection: pair.client)
        try pair.daemonSends(#"{"id":1,"result":{}}"#, #"{"jsonrpc":"2.0","id":2,"result":{"other":1}}"#)
        let malformed = #expect(throws: AuthdClientError.self) { try client.call(Echo.self, .init(text: "x")) }
        #expect(malformed?.code == .malformedMessage)
        #expect(malformed?.detail == "The daemon sent a line that is not a JSON-RPC 2.0 message.")
        let unreadable = #expect(throws: AuthdClientError.self) { try client.call(Echo.self, .init(text: "secret-pin")) }
        #expect(unreadable?.code == .unreadableResult)
        #expect(unreadable?.description == "authd's answer to test.echo cannot be read")
        #expect(unreadable?.description.contains("secret-pin") == false)
    }

    @Test("errors compare by code only")
    func equality() throws {
        let first = #expect(throws: AuthdClientError.self) { try LineConnection(socketPath: "/nonexistent-a/s") }
        let second = #expect(throws: AuthdClientError.self) { try LineConnection(socketPath: "/nonexistent-b/s") }
        #expect(first == second)
        #expect(Set([first, second]).count == 1)
    }
}
