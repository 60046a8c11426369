import AuthdClient
import Foundation
import Glibc
import Synchronization

/// A private PostgreSQL cluster for the bench (Debian's `postgresql`): initdb into a temporary
/// directory, a Unix socket in it only, as `nobody` when the bench runs as root (PostgreSQL
/// refuses root). Durable as a real one (fsync on): the figures include PostgreSQL's commits.
private final class BenchCluster {
    let directory: String
    private let bin: String
    private var databases = 0

    init() throws {
        let root = "/usr/lib/postgresql"
        guard let version = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).max() else {
            throw BenchError(description: "PostgreSQL is not installed (apt-get install postgresql)")
        }
        bin = "\(root)/\(version)/bin"
        var template = Array("/tmp/authd-bench-pg-XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template)!)
        if geteuid() == 0 { chown(directory, 65534, 65534) }
        try run(["\(bin)/initdb", "-D", directory + "/data", "-U", "authd", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C.UTF-8"])
        try run(["\(bin)/pg_ctl", "-D", directory + "/data", "-l", directory + "/server.log", "-w", "-t", "30",
                 "-o", "-c listen_addresses= -k \(directory) -c max_connections=200", "start"])
    }

    /// Runs a PostgreSQL program as the cluster's owner, its output in the cluster's directory
    /// (posix_spawn and waitpid: Foundation's Process did not reap pg_ctl beside the server it starts).
    private func run(_ command: [String]) throws {
        let log = directory + "/commands.log"
        let pid = try CardStack.spawn((geteuid() == 0 ? ["/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] : []) + command,
                                      log: log, environment: ["LC_ALL=C.UTF-8"])
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        guard status == 0 else {
            throw BenchError(description: "\(command[0]) failed: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        }
    }

    func createDatabase() throws -> String {
        databases += 1
        try run(["\(bin)/createdb", "-h", directory, "-U", "authd", "bench\(databases)"])
        return "host=\(directory) user=authd dbname=bench\(databases)"
    }

    func stop() {
        try? run(["\(bin)/pg_ctl", "-D", directory + "/data", "-m", "fast", "-w", "stop"])
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// `authd-bench BIN postgresql`: one hub on SQLite, one hub on PostgreSQL, and two hub replicas
/// on one PostgreSQL database, measured the same way in one run: sign-ins/s, sync events/s from
/// 16 senders, commit → delivery (sent through one replica, read at a subscriber of the other),
/// and how long a machine linked to a replica that is killed takes to receive again.
func postgresqlFigures() throws {
    let cluster = try BenchCluster()
    defer { cluster.stop() }
    let pki = try BenchPKI()
    defer { try? FileManager.default.removeItem(atPath: pki.directory) }
    // One master key for every replica, as a systemd credential.
    let credentials = pki.directory + "/credentials"
    try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: true)
    let key = (0..<32).map { _ in UInt8.random(in: 0...255) }
    guard FileManager.default.createFile(atPath: credentials + "/authd.key", contents: Data(key), attributes: [.posixPermissions: 0o600]) else {
        throw BenchError(description: "cannot write the replicas' master key in \(credentials)")
    }
    let environment = ["CREDENTIALS_DIRECTORY": credentials]

    func hub(database: String?, connections: Int? = nil) throws -> Daemon {
        var extra = database.map { "database = \($0)\n" } ?? ""
        if let connections { extra += "database_connections = \(connections)\n" }
        return try Daemon(config: benchHubConfig(pki, extra: extra), environment: environment)
    }

    let single = try hub(database: nil)
    try measure("SQLite hub", [single])
    single.stop()
    let alone = try hub(database: try cluster.createDatabase())
    try measure("PostgreSQL hub", [alone])
    alone.stop()
    // The control: the same hub with one connection, as each replica had before its pool.
    let narrow = try hub(database: try cluster.createDatabase(), connections: 1)
    try measure("PostgreSQL, 1 connection", [narrow])
    narrow.stop()
    let shared = try cluster.createDatabase()
    let (first, second) = (try hub(database: shared), try hub(database: shared))
    defer { first.stop(); second.stop() }
    try measure("2 replicas", [first, second])
    // 1,000 light devices of 500 accounts: each account's A linked to the first replica, its B to
    // the second, so every event crosses from one replica to the other.
    try syncFiguresAtScale(hub: first, hubClient: try Client(first.socket), port: try hubPort(first), pki: pki, receivers: second,
                           label: "2 replicas, 1,000 devices")
    try failover(from: first, to: second, pki: pki)
}

/// The loopback port a bench hub listens on, as `hub.status` says.
func hubPort(_ hub: Daemon) throws -> UInt16 {
    let status = String(decoding: try Client(hub.socket).call("hub.status"), as: UTF8.self)
    guard let port = status.firstMatch(of: /"listen":"127\.0\.0\.1:([0-9]+)"/).flatMap({ UInt16($0.output.1) }) else {
        throw BenchError(description: "the hub reports no port: \(status)")
    }
    return port
}

private let benchPhone = "+37250007777"
private let benchPassword = "bench passphrase long enough"

/// An account registered at `hub` by one of its own apps, end-to-end encryption off (the hub's
/// own apps send in the clear then); its session token.
private func benchAccount(at hub: Daemon) throws -> String {
    let client = try Client(hub.socket)
    let started = String(decoding: try client.call("account.register.start", #"{"phone":"\#(benchPhone)"}"#), as: UTF8.self)
    guard let flow = started.firstMatch(of: /"flow":"([^"]+)"/)?.output.1 else { throw BenchError(description: started) }
    let code = try hub.spooledCode(to: benchPhone, after: 0)
    let verified = String(decoding: try client.call("account.register.verify", #"{"flow":"\#(flow)","code":"\#(code)","password":"\#(benchPassword)"}"#),
                          as: UTF8.self)
    guard let token = verified.firstMatch(of: /"token":"(as1\.[^"]+)"/)?.output.1 else { throw BenchError(description: verified) }
    try client.call("admin.accounts.e2ee", #"{"account":"\#(benchPhone)","e2ee":"off"}"#)
    return String(token)
}

private func measure(_ setup: String, _ hubs: [Daemon]) throws {
    let token = try benchAccount(at: hubs[0])
    let sockets = hubs.map(\.socket)

    // Sign-ins: 8 clients at once over the hubs for 5 s (Argon2id on each hub's own cores).
    let signIns = Atomic<Int>(0)
    let deadline = ContinuousClock.now + .seconds(5)
    let loginStarted = ContinuousClock.now
    concurrently(8) { index in
        guard let client = try? Client(sockets[index % sockets.count]) else { return }
        while ContinuousClock.now < deadline {
            if (try? client.call("auth.login", #"{"login":"\#(benchPhone)","password":"\#(benchPassword)"}"#))?.contains(Array(#""token""#.utf8)) == true {
                signIns.add(1, ordering: .relaxed)
            }
        }
    }
    row("\(setup): sign-ins/s (8 clients)", String(format: "%.1f/s", Double(signIns.load(ordering: .relaxed)) / ((ContinuousClock.now - loginStarted).milliseconds / 1000)))

    // Events: 16 senders over the hubs, 200 each.
    let each = 200
    let sendStarted = ContinuousClock.now
    let sent = Atomic<Int>(0)
    concurrently(16) { index in
        guard let client = try? Client(sockets[index % sockets.count]) else { return }
        for n in 0..<each where (try? client.call("sync.send", #"{"session":"\#(token)","kind":"message","conversation":"s\#(index)","body":{"n":\#(n)}}"#))?
            .contains(Array(#""position""#.utf8)) == true {
            sent.add(1, ordering: .relaxed)
        }
    }
    row("\(setup): sync events/s, 16 senders", String(format: "%.0f/s (%d of %d stored)", Double(sent.load(ordering: .relaxed)) / ((ContinuousClock.now - sendStarted).milliseconds / 1000),
                                                      sent.load(ordering: .relaxed), 16 * each))

    // Commit → delivery: sent by an app of the first hub, read by a subscriber at the last.
    let sender = try Client(sockets[0])
    let watcher = try Client(sockets[sockets.count - 1])
    try watcher.call("sync.subscribe", #"{"session":"\#(token)","kinds":["message"]}"#)
    func received() throws {
        while let line = try watcher.connection.readLine() {
            if String(decoding: line, as: UTF8.self).contains(#""method":"sync.event""#) { return }
        }
        throw BenchError(description: "the subscriber's stream closed")
    }
    var latencies: [Double] = []
    for n in 0..<600 {
        let started = ContinuousClock.now
        try sender.call("sync.send", #"{"session":"\#(token)","kind":"message","conversation":"latency","body":{"n":\#(n)}}"#)
        try received()
        if n >= 100 { latencies.append((ContinuousClock.now - started).milliseconds) }
    }
    latencies.sort()
    row("\(setup): sent → subscriber" + (hubs.count > 1 ? " at the other" : ""),
        String(format: "p50 %.2f ms, p99 %.2f ms (send's round trip included; target p99 ≤ 50 ms)", percentile(latencies, 0.5), percentile(latencies, 0.99)))
}

/// A machine linked to the first replica (the second listed after it) subscribes; the first
/// replica is killed; how long until an event sent through the second reaches the machine's
/// subscriber.
private func failover(from first: Daemon, to second: Daemon, pki: BenchPKI) throws {
    func address(_ hub: Daemon) throws -> String { "127.0.0.1:\(try hubPort(hub))" }
    let device = try Daemon(config: "[hub]\nurl = \(try address(first)), \(try address(second))\nca_file = \(pki.directory)/ca.pem\n")
    defer { device.stop() }
    let client = try Client(device.socket)
    for _ in 0..<200 where !String(decoding: try client.call("hub.status"), as: UTF8.self).contains(#""state":"connected""#) { usleep(20_000) }
    let login = String(decoding: try client.call("auth.login", #"{"login":"\#(benchPhone)","password":"\#(benchPassword)"}"#), as: UTF8.self)
    guard let token = login.firstMatch(of: /"token":"(as1\.[^"]+)"/)?.output.1 else { throw BenchError(description: login) }
    let watcher = try Client(device.socket)
    try watcher.call("sync.subscribe", #"{"session":"\#(token)","kinds":["message"]}"#)
    let hubToken = try benchSession(at: second)
    let secondSocket = second.socket

    kill(first.process.processIdentifier, SIGKILL)
    let killed = ContinuousClock.now
    let received = Atomic<Bool>(false)
    let sender = Thread {
        guard let atSecond = try? Client(secondSocket) else { return }
        var n = 0
        while !received.load(ordering: .acquiring), ContinuousClock.now - killed < .seconds(30) {
            _ = try? atSecond.call("sync.send", #"{"session":"\#(hubToken)","kind":"message","conversation":"failover","body":{"n":\#(n)}}"#)
            n += 1
            usleep(20_000)
        }
    }
    sender.start()
    while let line = try watcher.connection.readLine() {
        if String(decoding: line, as: UTF8.self).contains(#""method":"sync.event""#) { break }
    }
    let elapsed = ContinuousClock.now - killed
    received.store(true, ordering: .releasing)
    row("2 replicas: one killed → its machine receives", String(format: "%.0f ms (first event through the other replica; target ≤ 3 s)", elapsed.milliseconds))
    first.process.waitUntilExit()
}

/// Runs `body` on `count` threads at once and waits for all.
private func concurrently(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let done = DispatchGroup()
    for index in 0..<count {
        done.enter()
        Thread {
            body(index)
            done.leave()
        }.start()
    }
    done.wait()
}

/// A session of the bench account for an app of `hub` (sign-in by password).
private func benchSession(at hub: Daemon) throws -> String {
    let login = String(decoding: try Client(hub.socket).call("auth.login", #"{"login":"\#(benchPhone)","password":"\#(benchPassword)"}"#), as: UTF8.self)
    guard let token = login.firstMatch(of: /"token":"(as1\.[^"]+)"/)?.output.1 else { throw BenchError(description: login) }
    return String(token)
}
