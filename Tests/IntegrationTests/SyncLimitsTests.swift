import Foundation
import Glibc
import Protocol
import Testing

/// What one user, one body or one large log must not do to the others:
/// answers paged by size as well as count, bodies limited in depth, an outbox that no entry
/// can wedge and that keeps each user's entries apart, and a write limit per user and per
/// machine that says which it was.
@Suite("Sync: sizes, depths, outbox and write limits")
struct SyncLimitsTests {
    /// A `sync.send` line whose body is `depth` arrays deep, written as text (no encoder's own
    /// limit comes between it and the daemon).
    static func deepSend(session: JSONValue, depth: Int, id: Int = 90) -> String {
        let token = session.stringValue ?? ""
        let body = String(repeating: "[", count: depth) + "1" + String(repeating: "]", count: depth)
        return #"{"jsonrpc":"2.0","id":\#(id),"method":"sync.send","params":{"session":"\#(token)","kind":"message","body":\#(body)}}"# + "\n"
    }

    /// The answer to `line`, sent on `client`.
    static func answer(_ client: LineClient, _ line: String) throws -> JSONValue {
        try client.send(line)
        while true {
            guard let answer = try client.readJSON() else { throw HarnessError("the connection closed") }
            if answer["id"] != nil { return answer }
        }
    }

    /// Runs request lines on `socket` as the user nobody (python3 under setpriv), each answer a
    /// line of its output.
    static func asNobody(_ socket: String, _ requests: [JSONValue]) throws -> [JSONValue] {
        let script = """
            import socket, sys
            s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile('rwb')
            for line in sys.stdin:
                f.write(line.encode()); f.flush()
                while True:
                    answer = f.readline()
                    if not answer or b'"id"' in answer: break
                sys.stdout.write(answer.decode()); sys.stdout.flush()
            """
        let lines = try requests.enumerated().map { index, request in
            var envelope: [String: JSONValue] = ["jsonrpc": "2.0", "id": .integer(Int64(index + 1))]
            envelope.merge(request.objectValue ?? [:]) { $1 }
            return String(decoding: try WireCodec.encodeJSON(JSONValue.object(envelope)), as: UTF8.self)
        }
        let result = try DaemonHarness.run(["/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "/usr/bin/python3", "-c", script, socket],
                                           stdin: lines.joined(separator: "\n") + "\n")
        guard result.status == 0 else { throw HarnessError("python as nobody failed: \(result.stderr)") }
        return try result.stdout.split(separator: "\n").map { try WireCodec.decode(JSONValue.self, from: Data($0.utf8)) }
    }

    static let login: JSONValue = ["method": "auth.login", "params": ["login": "+37251234567", "password": "a long enough passphrase"]]

    @Test("on a device, sync.history, sync.events and the catch-up of a log over 1 MiB come in pages under the line limit (more: true, go on from the last position) and the link stays up")
    func pagesBySize() throws {
        let (rig, a, b, clientA, clientB, onA, onB) = try SyncTests.Pair().parts
        // 24 messages of 60 KiB: 1.4 MB, over the 1 MiB line.
        let body = JSONValue.string(String(repeating: "x", count: 60_000))
        let positions = try (0..<24).map { _ in try clientA.result("sync.send", ["session": onA, "kind": "message", "conversation": "big", "body": body])["position"] }
        let all = positions.compactMap { $0?.integerValue }
        #expect(all.count == 24)

        // History, newest first, page by page.
        var history: [Int64] = []
        var before: JSONValue = .null
        for _ in 0..<10 {
            var params: [String: JSONValue] = ["session": onB, "conversation": "big", "limit": 500]
            if before != .null { params["before"] = before }
            let page = try clientB.result("sync.history", .object(params))
            let events = page["events"]?.arrayValue ?? []
            #expect(!events.isEmpty && events.count < 24, "a page of some, not all: \(events.count)")
            history += events.compactMap { $0["position"]?.integerValue }
            guard page["more"] == true, let last = events.last?["position"] else { break }
            before = last
        }
        #expect(history == all.reversed(), "every event once, newest first")

        // The log, oldest first, page by page.
        var log: [Int64] = []
        var after: Int64 = 0
        for _ in 0..<10 {
            let page = try clientB.result("sync.events", ["session": onB, "after": .integer(after), "limit": 1000])
            let events = page["events"]?.arrayValue ?? []
            log += events.compactMap { $0["position"]?.integerValue }
            guard page["more"] == true, let last = events.last?["position"]?.integerValue else { break }
            after = last
        }
        #expect(log == Array(1...(all.last ?? 0)), "the whole log once, oldest first")

        // B away while A sends 24 more: its catch-up when it is back is over 1 MiB too.
        let head = try clientB.result("sync.events", ["session": onB, "after": 0, "limit": 1])["head"]
        let caught = Date().addingTimeInterval(15)
        while try clientB.result("sync.events", ["session": onB, "after": 0, "limit": 1])["machine_cursor"] != head && Date() < caught { usleep(50_000) }
        try b.kill9()
        for _ in 0..<24 { _ = try clientA.result("sync.send", ["session": onA, "kind": "message", "conversation": "big", "body": body]) }
        let newHead = try #require(try clientA.result("sync.events", ["session": onA, "after": 0, "limit": 1])["head"])
        try b.start()
        try HubRig.waitForLink(b, state: "connected")
        let client = try b.connect()
        let resumed = Date().addingTimeInterval(20)
        while try client.result("sync.events", ["session": onB, "after": 0, "limit": 1])["machine_cursor"] != newHead && Date() < resumed { usleep(100_000) }
        #expect(try client.result("sync.events", ["session": onB, "after": 0, "limit": 1])["machine_cursor"] == newHead, "B took all it missed")
        #expect(!b.log.contains("over 1 MiB"), "no line over the limit reached B:\n\(b.log)")
        #expect(try client.result("hub.status")["link"]?["state"] == "connected")
        withExtendedLifetime(rig) {}
        withExtendedLifetime(a) {}
    }

    @Test("a body nested deeper than 64 levels is refused with sync.too_deep (64 is taken); one at the line's own limit never reaches the log, and the history stays readable")
    func depthLimit() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        let session = try #require(try LoginTests.register(daemon, client, phone: "+37251234567", password: "a long enough passphrase")["session"]?["token"])
        #expect(try Self.answer(client, Self.deepSend(session: session, depth: 64))["result"]?["position"] == 2, "64 levels are taken")
        let deeper = try Self.answer(client, Self.deepSend(session: session, depth: 65))
        #expect(deeper.errorReason == "sync.too_deep" && deeper["error"]?["data"]?["limit"] == 64, "\(deeper)")
        let deepest = try Self.answer(client, Self.deepSend(session: session, depth: 508))
        #expect(deepest.errorReason == "sync.too_deep", "\(deepest)")
        let history = try client.call("sync.history", ["session": session])
        #expect(history["result"]?["events"]?.arrayValue?.count == 2, "\(history)")
        #expect(try client.result("sync.events", ["session": session, "after": 0])["head"] == 2, "nothing refused was stored")
    }

    @Test("writes are limited per local user and per machine, and said which; on a device whose hub is away a body that could never travel is refused, not queued; back, the hub slows one user and the other user's queued event goes by at once")
    func outboxAndLimits() throws {
        try #require(getuid() == 0, "needs root to run a client as another user")
        let rig = try HubRig(hubConfig: "[sync]\nwrites_per_minute = 3\nmachine_writes_per_minute = 5")
        // A serves every local user (system mode), root and nobody here.
        let (a, b) = (try rig.startDevice(arguments: ["--system"]), try rig.startDevice())
        chmod(a.directory + "/run", 0o755)
        chmod(a.socketPath, 0o666)
        let clientA = try a.connect(), clientB = try b.connect()
        let onA = try #require(try rig.register(on: a)["session"]?["token"])
        let onB = try #require(try clientB.result("auth.login", ["login": "+37251234567", "password": "a long enough passphrase"])["session"]?["token"])
        let (watchB, _) = try SyncTests.subscribe(b, session: onB)
        let nobody = try #require(try Self.asNobody(a.socketPath, [Self.login]).first?["result"]?["session"]?["token"])
        func send(_ session: JSONValue, _ text: String) -> JSONValue {
            ["method": "sync.send", "params": ["session": session, "kind": "message", "conversation": "c", "body": ["text": .string(text)]]]
        }
        func byRoot(_ text: String) throws -> JSONValue { try clientA.call("sync.send", send(onA, text)["params"]) }

        // Write limits: root's fourth write is refused as root's; nobody, on the same machine, still writes
        // until the machine's five are used, and that refusal names the machine.
        for n in 1...3 { #expect(try byRoot("root \(n)")["result"]?["position"] != nil) }
        let user = try byRoot("root 4")
        #expect(user.errorReason == "rate.limited" && user["error"]?["data"]?["scope"] == "user", "\(user)")
        #expect(user["error"]?["message"]?.stringValue?.contains("your user") == true)
        let others = try Self.asNobody(a.socketPath, [send(nobody, "nobody 1"), send(nobody, "nobody 2"), send(nobody, "nobody 3")])
        #expect(others.prefix(2).allSatisfy { $0["result"]?["position"] != nil }, "another user is not refused for root's writes: \(others)")
        #expect(others.last?.errorReason == "rate.limited" && others.last?["error"]?["data"]?["scope"] == "machine", "\(others)")
        #expect(others.last?["error"]?["message"]?.stringValue?.contains("this machine") == true)

        // The outbox: the hub away, a body that no link could carry is refused before it is queued.
        try rig.hub.kill9()
        try HubRig.waitForLink(a, state: "unreachable")
        let deep = try Self.answer(clientA, Self.deepSend(session: onA, depth: 510))
        #expect(deep.errorReason == "sync.too_deep", "refused, not queued: \(deep)")
        // root queues five, then nobody one: the hub (its limits fresh after the restart) takes
        // three of root's, then slows root for 20 s; nobody's goes by meanwhile.
        for n in 1...5 { #expect(try byRoot("queued root \(n)")["result"]?["queued"] == true) }
        #expect(try Self.asNobody(a.socketPath, [send(nobody, "queued nobody")]).first?["result"]?["queued"] == true)
        _ = try rig.startHub(port: rig.port, harness: rig.hub)
        var seen: [String] = []
        let deadline = Date().addingTimeInterval(15)
        while !seen.contains("queued nobody") && Date() < deadline {
            guard let text = try SyncTests.next(watchB)["params"]?["event"]?["body"]?["text"]?.stringValue else { continue }
            seen.append(text)
        }
        #expect(seen.contains("queued nobody"), "nobody's event was not held behind root's: \(seen)")
        #expect(!seen.contains("queued root 4"), "root's fourth waits for root's limit: \(seen)")
        #expect(seen.filter { $0.hasPrefix("queued root") } == seen.filter { $0.hasPrefix("queued root") }.sorted(), "each user's in order: \(seen)")
        // The hub is back, and root's next send goes behind root's own queued events: queued
        // while they rest, or, when a slow run let root's rest end first, stored after them all.
        let later = try byRoot("root later")
        if later["result"]?["queued"] != true {
            let position = try #require(later["result"]?["position"]?.integerValue, "\(later)")
            let log = try clientB.result("sync.events", ["session": onB, "after": 0])
            let queued = (log["events"]?.arrayValue ?? []).filter { $0["body"]?["text"]?.stringValue?.hasPrefix("queued root") == true }
            #expect(queued.count == 5 && queued.allSatisfy { ($0["position"]?.integerValue ?? .max) < position },
                    "root's send went past root's queued events: \(later), \(queued)")
        }
    }
}
