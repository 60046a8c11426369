import Foundation
import Glibc
import Synchronization

// Presence through a hub: Alice's machine A reads where it is from a GeoClue2 stand-in (the
// tests' python-dbusmock template on a private system bus); each move into or out of the Office
// is timed until every one of her 100 friends' subscribers (sync.subscribe on machine B) has the
// ping. The clock starts before the stand-in is told to move (busctl's own start-up included:
// an upper bound).

func presenceFigures(hub: Daemon, hubClient: Client, port: UInt16, pki: BenchPKI) throws {
    let geoClue = try MockBusStack(template: MockBusStack.template("geoclue_mock.py"), parameters: "{}", owning: "org.freedesktop.GeoClue2")
    defer { geoClue.stop() }
    let link = "[hub]\nurl = 127.0.0.1:\(port)\nca_file = \(pki.directory)/ca.pem\n"
    let a = try Daemon(config: link + "[presence]\nenabled = yes\n", environment: ["DBUS_SYSTEM_BUS_ADDRESS": geoClue.address])
    let b = try Daemon(config: link)
    defer { a.stop(); b.stop() }
    let clientA = try Client(a.socket), clientB = try Client(b.socket)
    for client in [clientA, clientB] {
        for _ in 0..<200 where !String(decoding: try client.call("hub.status"), as: UTF8.self).contains(#""state":"connected""#) { usleep(50_000) }
    }
    var spooled = 0
    func register(_ client: Client, _ index: Int) throws -> String {
        let phone = "+3725007\(String(format: "%04d", index))"
        let started = String(decoding: try client.call("account.register.start", #"{"phone":"\#(phone)"}"#), as: UTF8.self)
        guard let flow = started.firstMatch(of: /"flow":"([^"]+)"/)?.output.1 else { throw BenchError(description: started) }
        let code = try hub.spooledCode(to: phone, after: spooled)
        spooled += 1
        let verified = String(decoding: try client.call("account.register.verify", #"{"flow":"\#(flow)","code":"\#(code)","email":"p\#(index)@bench.example"}"#),
                              as: UTF8.self)
        guard let token = verified.firstMatch(of: /"token":"(as1\.[^"]+)"/)?.output.1 else { throw BenchError(description: verified) }
        return String(token)
    }
    let spool = hub.directory + "/state/sms-spool"
    spooled = ((try? FileManager.default.contentsOfDirectory(atPath: spool)) ?? []).count
    let alice = try register(clientA, 0)
    let friends = 100
    var tokens: [String] = []
    for index in 1...friends {
        tokens.append(try register(clientB, index))
        try clientA.call("friends.add", #"{"session":"\#(alice)","email":"p\#(index)@bench.example"}"#)
    }
    try clientA.call("hotspots.add", #"{"session":"\#(alice)","name":"Office","circle":{"lat":59.437,"lon":24.7536,"radius_m":150}}"#)
    try clientA.call("presence.settings", #"{"session":"\#(alice)","mode":"auto","groups":["friends"]}"#)
    for _ in 0..<200 where !String(decoding: try clientA.call("presence.machine", #"{"session":"\#(alice)"}"#), as: UTF8.self).contains(#""state":"reading""#) {
        usleep(50_000)
    }

    // One reader thread per friend's subscriber: each notes when the ping of the current move arrives.
    let arrivals = Mutex<[ContinuousClock.Instant]>([])
    let arrived = DispatchSemaphore(value: 0)
    let subscribed = DispatchSemaphore(value: 0)
    let socket = b.socket
    for token in tokens {
        // A Client is one thread's: each reader makes its own.
        Thread {
            guard let subscriber = try? Client(socket), (try? subscriber.call("sync.subscribe", #"{"session":"\#(token)","kinds":["presence"]}"#)) != nil else { return }
            subscribed.signal()
            while let line = try? subscriber.connection.readLine() {
                guard String(decoding: line, as: UTF8.self).contains(#""kind":"presence""#) else { continue }
                arrivals.withLock { $0.append(.now) }
                arrived.signal()
            }
        }.start()
    }
    for _ in tokens {
        guard subscribed.wait(timeout: .now() + .seconds(30)) == .success else { throw BenchError(description: "a friend's subscriber did not start") }
    }
    func move(_ latitude: Double, _ longitude: Double) throws {
        try geoClue.busctl(["call", "--", "org.freedesktop.GeoClue2", "/org/freedesktop/GeoClue2/Manager", "org.freedesktop.GeoClue2.Mock", "SetLocation",
                            "ddd", String(latitude), String(longitude), "20"])
    }
    /// Every friend's ping of one move, as latencies (ms) from `started`.
    func pings(since started: ContinuousClock.Instant) throws -> [Double] {
        for _ in 0..<friends {
            guard arrived.wait(timeout: .now() + .seconds(10)) == .success else { throw BenchError(description: "a friend's ping did not arrive within 10 s") }
        }
        return arrivals.withLock { times in
            defer { times.removeAll() }
            return times.map { ($0 - started).milliseconds }
        }
    }
    var entering: [Double] = [], leaving: [Double] = [], first: [Double] = [], moving: [Double] = []
    for round in 0..<21 {
        let inside = ContinuousClock.now
        try move(59.437, 24.7536)
        let moved = (ContinuousClock.now - inside).milliseconds
        let entered = try pings(since: inside)
        try move(59.45, 24.78)  // the first fix outside counts for nothing yet
        let outside = ContinuousClock.now
        try move(59.4501, 24.78)
        let left = try pings(since: outside)
        if round > 0 {  // the first round warms up
            entering += entered
            leaving += left
            first.append(entered.min() ?? 0)
            moving.append(moved)
        }
    }
    entering.sort()
    leaving.sort()
    first.sort()
    moving.sort()
    row("presence: enter a hotspot → 100 friends", String(format: "p50 %.2f ms, p99 %.2f ms (%d pings; first friend p50 %.2f ms, of which the stand-in's move %.2f ms)",
                                                        percentile(entering, 0.5), percentile(entering, 0.99), entering.count, percentile(first, 0.5),
                                                        percentile(moving, 0.5)))
    row("presence: leave it → 100 friends", String(format: "p50 %.2f ms, p99 %.2f ms", percentile(leaving, 0.5), percentile(leaving, 0.99)))
}
