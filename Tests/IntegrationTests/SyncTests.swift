import Foundation
import Glibc
import Protocol
import Synchronization
import Testing

/// The account's event log and each machine's stream of it: on a standalone authd, and across a
/// real hub and devices over TLS (see HubRig).
@Suite("Sync between machines")
struct SyncTests {
    /// The next `sync.event` (or `sync.gap`) notification on `client`, as its params.
    static func next(_ client: LineClient) throws -> JSONValue {
        while true {
            guard let line = try client.readJSON() else { throw HarnessError("the stream closed") }
            if line["method"] == "sync.event" || line["method"] == "sync.gap" { return line }
        }
    }

    /// One account on two machines of a hub: registered on A, signed in on B.
    struct Pair {
        let rig: HubRig
        let a: DaemonHarness, b: DaemonHarness
        let clientA: LineClient, clientB: LineClient
        let onA: JSONValue, onB: JSONValue

        init(hubConfig: String = "") throws {
            rig = try HubRig(hubConfig: hubConfig)
            (a, b) = (try rig.startDevice(), try rig.startDevice())
            (clientA, clientB) = (try a.connect(), try b.connect())
            onA = try #require(try rig.register(on: a)["session"]?["token"])
            onB = try #require(try clientB.result("auth.login", ["login": "+37251234567", "password": "a long enough passphrase"])["session"]?["token"])
        }

        var parts: (HubRig, DaemonHarness, DaemonHarness, LineClient, LineClient, JSONValue, JSONValue) { (rig, a, b, clientA, clientB, onA, onB) }
    }

    static func subscribe(_ daemon: DaemonHarness, session: JSONValue, _ extra: [String: JSONValue] = [:]) throws -> (LineClient, JSONValue) {
        let client = try daemon.connect()
        var params: [String: JSONValue] = ["session": session]
        params.merge(extra) { $1 }
        return (client, try client.result("sync.subscribe", .object(params)))
    }

    @Test("standalone: a message reaches every subscriber once, in order; the same idempotency key is one event; read markers only move forward; unread is counted from them; a notification is dismissed once")
    func standalone() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        let session = try #require(try LoginTests.register(daemon, client, phone: "+37251234567", password: "a long enough passphrase")["session"]?["token"])
        let (first, opened) = try Self.subscribe(daemon, session: session)
        // The registration's own event opens the log: this machine linked to the account.
        #expect(opened["head"] == 1)
        let linked = try #require(try client.result("sync.events", ["session": session, "after": 0])["events"]?.arrayValue?.first)
        #expect(linked["kind"] == "device.linked" && linked["sender"]?["machine"] == "authd" && linked["body"]?["device"]?.stringValue != nil, "\(linked)")
        let (onlyChat, _) = try Self.subscribe(daemon, session: session, ["conversation": "chat", "kinds": ["message"]])

        let sent = try client.result("sync.send", ["session": session, "kind": "message", "conversation": "chat", "body": ["text": "hello"],
                                                   "idempotency_key": "m-1"])
        #expect(sent["position"] == 2 && sent["duplicate"] == false)
        let again = try client.result("sync.send", ["session": session, "kind": "message", "conversation": "chat", "body": ["text": "hello"],
                                                    "idempotency_key": "m-1"])
        #expect(again["position"] == 2 && again["duplicate"] == true, "the same key is the same event")
        _ = try client.result("sync.send", ["session": session, "kind": "notification", "conversation": "alerts", "body": ["title": "ping"]])
        _ = try client.result("sync.send", ["session": session, "kind": "message", "conversation": "chat", "body": ["text": "second"]])

        let seen = try (0..<3).map { _ in try Self.next(first)["params"]?["event"] }
        #expect(seen.map { $0?["position"] } == [2, 3, 4], "every event once, in order: \(seen)")
        #expect(seen[0]?["body"]?["text"] == "hello" && seen[0]?["sender"]?["device_id"] != nil)
        let chat = try (0..<2).map { _ in try Self.next(onlyChat)["params"]?["event"]?["position"] }
        #expect(chat == [2, 4], "the filtered stream sees only chat messages")

        #expect(try client.result("sync.unread", ["session": session])["conversations"] == [["conversation": "chat", "unread": 2, "read_up_to": 0]])
        let read = try client.result("sync.read", ["session": session, "conversation": "chat", "up_to": 2])
        #expect(read["moved"] == true && read["up_to"] == 2 && read["position"] == 5)
        let backwards = try client.result("sync.read", ["session": session, "conversation": "chat", "up_to": 1])
        #expect(backwards["moved"] == false && backwards["up_to"] == 2, "a marker never moves back or twice")
        #expect(try client.result("sync.unread", ["session": session])["conversations"]?.arrayValue?.first?["unread"] == 1)
        #expect(try Self.next(first)["params"]?["event"]?["kind"] == "read")

        #expect(try client.result("sync.dismiss", ["session": session, "position": 3])["dismissed"] == true)
        #expect(try client.result("sync.dismiss", ["session": session, "position": 3])["dismissed"] == false)
        #expect(try client.call("sync.dismiss", ["session": session, "position": 2]).errorReason == "sync.unknown_event", "a message is not a notification")
        #expect(try Self.next(first)["params"]?["event"]?["body"]?["position"] == 3)

        let history = try client.result("sync.history", ["session": session, "conversation": "chat", "limit": 10])["events"]?.arrayValue ?? []
        #expect(history.compactMap { $0["position"]?.integerValue } == [5, 4, 2], "newest first")
        let big = JSONValue.string(String(repeating: "x", count: 70_000))
        #expect(try client.call("sync.send", ["session": session, "kind": "message", "body": big]).errorReason == "sync.too_large")
        #expect(try client.call("sync.send", ["session": session, "kind": "read", "body": [:]]).errorReason == "rpc.invalid_params")
        #expect(try client.call("sync.send", ["session": "as1.nope", "kind": "message", "body": [:]]).errorReason == "session.invalid")
        #expect(try client.result("sync.events", ["session": session, "after": 0])["head"] == 6, "refusals stored nothing")
    }

    @Test("across machines: A sends, B's subscriber and A's own get it at once; B marks it read and A sees the marker; C is refused by the device limit; both send into one conversation at once and every machine sees the same gap-free order")
    func acrossMachines() throws {
        let rig = try HubRig()
        let (a, b, c) = (try rig.startDevice(), try rig.startDevice(), try rig.startDevice())
        let clientA = try a.connect(), clientB = try b.connect()
        let onA = try #require(try rig.register(on: a)["session"]?["token"])
        let onB = try #require(try clientB.result("auth.login", ["login": "+37251234567", "password": "a long enough passphrase"])["session"]?["token"])
        let (watchA, _) = try Self.subscribe(a, session: onA)
        let (watchB, _) = try Self.subscribe(b, session: onB)

        let started = ContinuousClock.now
        let sent = try clientA.result("sync.send", ["session": onA, "kind": "message", "conversation": "family", "body": ["text": "dinner at 7"]])
        let onBSide = try Self.next(watchB)["params"]?["event"]
        #expect(ContinuousClock.now - started < .seconds(2), "within the product's 2 s")
        #expect(onBSide?["position"] == sent["position"] && onBSide?["body"]?["text"] == "dinner at 7")
        #expect(onBSide?["sender"]?["device_id"] == (try clientA.result("device.id")["device_id"]), "B sees which machine sent it")
        #expect(try Self.next(watchA)["params"]?["event"]?["position"] == sent["position"], "the sender's other apps get it too")

        _ = try clientB.result("sync.read", ["session": onB, "conversation": "family", "up_to": sent["position"]!])
        let marker = try Self.next(watchA)["params"]?["event"]
        #expect(marker?["kind"] == "read" && marker?["body"]?["up_to"] == sent["position"], "A sees B's read marker")
        _ = try Self.next(watchB)
        #expect(try clientA.result("sync.unread", ["session": onA])["conversations"]?.arrayValue?.first?["unread"] == 0)
        let third = try c.connect().call("auth.login", ["login": "+37251234567", "password": "a long enough passphrase"])
        #expect(third.errorReason == "device.limit_reached", "a third machine is refused: \(third)")

        // Both machines send 40 each at once.
        let senders = [(a.socketPath, onA), (b.socketPath, onB)].map { socket, session in
            Thread {
                guard let client = try? LineClient(socketPath: socket) else { return }
                for i in 0..<40 { _ = try? client.result("sync.send", ["session": session, "kind": "message", "conversation": "family", "body": ["n": .integer(Int64(i))]]) }
            }
        }
        senders.forEach { $0.start() }
        let first = (sent["position"]?.integerValue ?? 0) + 2
        let seenA = try (0..<80).map { _ in try Self.next(watchA)["params"]?["event"]?["position"]?.integerValue ?? -1 }
        let seenB = try (0..<80).map { _ in try Self.next(watchB)["params"]?["event"]?["position"]?.integerValue ?? -1 }
        #expect(seenA == Array(first..<(first + 80)), "gap-free, in order, once")
        #expect(seenA == seenB, "the same order on every machine")
    }

    @Test("catch-up: a subscriber that comes back with since gets all 1,000 events it missed, in order; after a hub kill -9 and restart the streams resume by themselves; a removed machine gets nothing more")
    func catchUpAndResume() throws {
        let (rig, a, b, clientA, clientB, onA, onB) = try SyncTests.Pair(hubConfig: "[sync]\nwrites_per_minute = 100000").parts

        // B's app is away while A sends 1,000 (more than two pages of catch-up).
        for i in 0..<1000 { _ = try clientA.result("sync.send", ["session": onA, "kind": "message", "body": ["n": .integer(Int64(i))]]) }
        // (1 and 2: A and B linked to the account.)
        let (late, opened) = try Self.subscribe(b, session: onB, ["since": 2])
        #expect(opened["head"] == 1002)
        let caught = try (0..<1000).map { _ in try Self.next(late)["params"]?["event"]?["position"]?.integerValue ?? -1 }
        #expect(caught == Array(3...1002))

        // The hub dies and comes back: the stream resumes by itself, with nothing lost or doubled.
        try rig.hub.kill9()
        try HubRig.waitForLink(b, state: "unreachable")
        _ = try rig.startHub(port: rig.port, harness: rig.hub)
        try HubRig.waitForLink(a, state: "connected", seconds: 40)
        try HubRig.waitForLink(b, state: "connected", seconds: 40)
        let after = try clientA.result("sync.send", ["session": onA, "kind": "message", "body": ["text": "after the restart"]])
        let resumed = try Self.next(late)["params"]?["event"]
        #expect(resumed?["position"] == after["position"] && after["position"] == 1003)

        // B removed: A's next event does not reach it.
        let machineB = try #require(try clientB.result("device.list", ["session": onB])["devices"]?.arrayValue?.first { $0["current"] == true }?["id"])
        _ = try clientA.result("device.revoke", ["session": onA, "id": machineB])
        try HubRig.waitForLink(b, state: "connected")
        _ = try clientA.result("sync.send", ["session": onA, "kind": "message", "body": ["text": "not for B"]])
        #expect(try clientB.call("sync.events", ["session": onB, "after": 1003]).errorReason == "device.revoked")
        #expect(try clientB.call("sync.subscribe", ["session": onB]).errorReason == "device.revoked", "a removed machine cannot subscribe")
        // Signed in again, B may read the account's history, as any session of the account may.
        let again = try #require(try clientB.result("auth.login", ["login": "+37251234567", "password": "a long enough passphrase"])["session"]?["token"])
        let since = try clientB.result("sync.events", ["session": again, "after": 1003])["events"]?.arrayValue ?? []
        #expect(since.map { $0["kind"] } == ["session.ended", "device.revoked", "message", "device.linked"],
                "B reads what happened since, authd's own events included: \(since)")
        #expect(since.first?["body"]?["cause"] == "device.revoke" && since[1]["body"]?["device"] == machineB)
    }

    @Test("the outbox: what A sends while the hub is down is kept, survives a kill -9 of A, and reaches B in order and once when the hub is back; A's app hears sync.sent with the position")
    func outbox() throws {
        let (rig, a, b, clientA, clientB, onA, onB) = try SyncTests.Pair().parts
        let (watchB, _) = try Self.subscribe(b, session: onB)
        func send(_ client: LineClient, _ text: String) throws -> JSONValue {
            try client.result("sync.send", ["session": onA, "kind": "message", "conversation": "c", "body": ["text": .string(text)]])
        }
        #expect(try send(clientA, "m1")["position"] == 3)
        #expect(try Self.next(watchB)["params"]?["event"]?["position"] == 3)

        try rig.hub.kill9()
        try HubRig.waitForLink(a, state: "unreachable")
        let queued = try send(clientA, "m2")
        #expect(queued["queued"] == true && queued["outbox_id"]?.integerValue != nil && queued["position"] == nil, "\(queued)")
        _ = try send(clientA, "m3")
        try a.kill9()
        try a.start()
        let restarted = try a.connect()
        #expect(try send(restarted, "m4")["queued"] == true, "behind what is queued, after a restart")

        _ = try rig.startHub(port: rig.port, harness: rig.hub)
        let delivered = try (0..<3).map { _ in try Self.next(watchB)["params"]?["event"] }
        #expect(delivered.map { $0?["position"] } == [4, 5, 6])
        #expect(delivered.map { $0?["body"]?["text"] } == ["m2", "m3", "m4"], "in the order they were sent")
        let log = try clientB.result("sync.events", ["session": onB, "after": 0])
        #expect((log["events"]?.arrayValue ?? []).compactMap { $0["body"]?["text"]?.stringValue } == ["m1", "m2", "m3", "m4"], "once each")

        // The app that queued hears where its event went.
        let (watchA, _) = try Self.subscribe(a, session: onA)
        try rig.hub.kill9()
        try HubRig.waitForLink(a, state: "unreachable")
        let waiting = try #require(try send(restarted, "m5")["outbox_id"])
        _ = try rig.startHub(port: rig.port, harness: rig.hub)
        // m4's own sync.sent may still be on its way when A subscribes: wait for m5's.
        var sent: JSONValue?
        while sent == nil {
            guard let line = try watchA.readJSON() else { break }
            if line["method"] == "sync.sent", line["params"]?["outbox_id"] == waiting { sent = line["params"] }
        }
        #expect(sent?["outbox_id"] == waiting && sent?["position"] == 7, "\(String(describing: sent))")
    }

    @Test("limits: a caller's writes past [sync] writes_per_minute are refused with rate.limited and retry_after, storing nothing")
    func writeLimit() throws {
        let daemon = try DaemonHarness(config: "[sync]\nwrites_per_minute = 5\n")
        try daemon.start()
        let client = try daemon.connect()
        let session = try #require(try LoginTests.register(daemon, client, phone: "+37251234567", password: "a long enough passphrase")["session"]?["token"])
        for i in 0..<5 { _ = try client.result("sync.send", ["session": session, "kind": "message", "body": ["n": .integer(Int64(i))]]) }
        let refused = try client.call("sync.send", ["session": session, "kind": "message", "body": ["n": 5]])
        #expect(refused.errorReason == "rate.limited", "\(refused)")
        #expect((refused["error"]?["data"]?["retry_after"]?.integerValue ?? 0) >= 1)
        #expect(try client.result("sync.events", ["session": session, "after": 0])["head"] == 6, "the refused one stored nothing (1: the registration's device.linked)")
    }

    @Test("desktop notifications: B joining the account, and a notification sent on B, appear on A's desktop (python-dbusmock's notification daemon on a private session bus) with B's name, and B's dismissal closes it there; B, with no session bus, says so once and syncs as ever")
    func desktopNotifications() throws {
        let rig = try HubRig()
        let desktop = try NotificationDesktop()  // A's session bus

        let a = try rig.startDevice(extra: "[sync]\ndesktop_notifications = yes", environment: ["DBUS_SESSION_BUS_ADDRESS": desktop.address])
        let b = try rig.startDevice(extra: "[sync]\ndesktop_notifications = yes", environment: ["DBUS_SESSION_BUS_ADDRESS": "unix:path=\(desktop.bus.directory)/none"])
        let clientA = try a.connect(), clientB = try b.connect()
        _ = try rig.register(on: a)
        let onB = try #require(try clientB.result("auth.login", ["login": "+37251234567", "password": "a long enough passphrase"])["session"]?["token"])

        // B joining the account is said on A's desktop, with B's device id.
        let idB = try #require(try clientB.result("device.id")["device_id"]?.stringValue)
        #expect(desktop.shows(idB), "A said a new device was added: \(desktop.log)")
        #expect(desktop.log.contains("A new device was added to your account"))
        let sent = try clientB.result("sync.send", ["session": onB, "kind": "notification", "conversation": "home",
                                                    "body": ["title": "Door", "text": "someone at the door"]])
        #expect(desktop.shows("Door"), "A showed it")
        let shown = desktop.log
        #expect(shown.contains("Door") && shown.contains("someone at the door") && shown.contains("from "), "title, text and the sending machine: \(shown)")
        _ = try clientB.result("sync.dismiss", ["session": onB, "position": sent["position"]!])
        #expect(desktop.shows("CloseNotification"), "dismissed on B, closed on A: \(desktop.log)")
        _ = try clientB.result("sync.send", ["session": onB, "kind": "notification", "body": ["title": "Again"]])
        #expect(desktop.shows("Again"))
        #expect(b.log.components(separatedBy: "the session bus cannot show them").count == 2, "B said it once:\n\(b.log)")
        #expect(try clientB.result("sync.events", ["session": onB, "after": 0])["head"] == 5, "and B syncs as ever")

        // A goes away once its cursor at the hub has caught up; what B sends meanwhile reaches A's
        // desktop when A is back, from its cursor.
        let onA = try #require(try clientA.result("auth.login", ["login": "+37251234567", "password": "a long enough passphrase"])["session"]?["token"])
        let caughtUp = Date().addingTimeInterval(10)
        while try clientA.result("sync.events", ["session": onA, "after": 0, "limit": 1])["machine_cursor"] != 5 && Date() < caughtUp { usleep(50_000) }
        #expect(try clientA.result("sync.events", ["session": onA, "after": 0, "limit": 1])["machine_cursor"] == 5, "A's cursor is at the head")
        try a.kill9()
        _ = try clientB.result("sync.send", ["session": onB, "kind": "notification", "body": ["title": "While A was away"]])
        try a.start(environment: ["DBUS_SESSION_BUS_ADDRESS": desktop.address])
        #expect(desktop.shows("While A was away"), "shown when A is back")
        let shownOnce = desktop.log
        #expect(shownOnce.components(separatedBy: "\"Door\"").count == 2, "what A had shown is not shown again: \(shownOnce)")
        withExtendedLifetime(desktop) {}
    }

    @Test("mid-stream crashes: while A sends 300 events the hub is killed -9 and restarted, and B is killed -9 and its app comes back with since; every event A's app was told of reaches B's subscribers once, in order")
    func crashesMidStream() throws {
        let (rig, a, b, _, _, onA, onB) = try SyncTests.Pair(hubConfig: "[sync]\nwrites_per_minute = 100000").parts
        var (watchB, _) = try Self.subscribe(b, session: onB)

        // A's app sends 300, one at a time; each is acknowledged with a position or as queued.
        let acknowledged = Mutex<[Int]>([])
        let socket = a.socketPath
        let sender = Thread {
            guard let client = try? LineClient(socketPath: socket) else { return }
            for n in 0..<300 {
                guard let answer = try? client.result("sync.send", ["session": onA, "kind": "message", "body": ["n": .integer(Int64(n))]]),
                      answer["position"] != nil || answer["queued"] == true else { continue }
                acknowledged.withLock { $0.append(n) }
            }
        }
        sender.start()
        var seen: [Int64] = []
        var bodies: [Int] = []
        func take(_ count: Int) throws {
            for _ in 0..<count {
                let event = try Self.next(watchB)["params"]?["event"]
                seen.append(event?["position"]?.integerValue ?? -1)
                bodies.append(Int(event?["body"]?["n"]?.integerValue ?? -1))
            }
        }
        try take(50)
        try rig.hub.kill9()
        _ = try rig.startHub(port: rig.port, harness: rig.hub)
        try take(50)
        try b.kill9()
        try b.start()
        try HubRig.waitForLink(b, state: "connected")
        (watchB, _) = try Self.subscribe(b, session: onB, ["since": .integer(seen.last ?? 0)])
        let done = Date().addingTimeInterval(60)
        while acknowledged.withLock({ $0.count }) < 300 && Date() < done { usleep(50_000) }
        #expect(acknowledged.withLock { $0.count } == 300, "every send acknowledged")
        try take(300 - seen.count)
        #expect(seen == Array(3...302), "once each, in order, across both crashes")
        #expect(Set(bodies) == Set(acknowledged.withLock { $0 }), "everything acknowledged arrived")
    }

    @Test("a subscriber that never reads is cut off at its connection's budget and holds nothing back: the other machine's subscribers get everything, and its own machine keeps syncing")
    func subscriberThatNeverReads() throws {
        let pair = try SyncTests.Pair(hubConfig: "[sync]\nwrites_per_minute = 100000")  // holds the hub
        let (_, a, b, clientA, _, onA, onB) = pair.parts
        let (stuck, _) = try Self.subscribe(a, session: onA)  // never read
        let (readerB, _) = try Self.subscribe(b, session: onB)
        let (otherB, _) = try Self.subscribe(b, session: onB)
        // 400 events of 60 KiB: 24 MB, past the 16 MiB a connection may leave unread.
        let body = JSONValue.string(String(repeating: "x", count: 60_000))
        let socket = b.socketPath
        let sender = Thread {
            guard let client = try? LineClient(socketPath: socket) else { return }
            for _ in 0..<400 { _ = try? client.result("sync.send", ["session": onB, "kind": "message", "body": body]) }
        }
        sender.start()
        var first: [Int64] = [], second: [Int64] = []
        for _ in 0..<400 {
            first.append(try Self.next(readerB)["params"]?["event"]?["position"]?.integerValue ?? -1)
            second.append(try Self.next(otherB)["params"]?["event"]?["position"]?.integerValue ?? -1)
        }
        #expect(first == Array(3...402) && second == Array(3...402), "the readers got everything, in order")
        let cutOff = Date().addingTimeInterval(10)
        while !a.log.contains("closing a connection whose client does not read its responses") && Date() < cutOff { usleep(50_000) }
        #expect(a.log.contains("closing a connection whose client does not read its responses"), "the one that never read was cut off")
        #expect(try clientA.result("sync.events", ["session": onA, "after": 401])["events"]?.arrayValue?.count == 1, "A keeps syncing")
        withExtendedLifetime(stuck) {}
        withExtendedLifetime(pair) {}
    }
}
