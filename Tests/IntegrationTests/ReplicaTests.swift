import Foundation
import Glibc
import Protocol
import Synchronization
import Testing

/// Two hub replicas on one PostgreSQL database (a private cluster, see PostgreSQLCluster): real
/// authd processes over TLS on loopback with one certificate and one master key, devices linked
/// to one replica or the other.
struct Replicas {
    let rig: HubRig
    let cluster: PostgreSQLCluster
    let first: DaemonHarness, second: DaemonHarness
    let firstAddress: String, secondAddress: String

    /// `cluster`: the suite's, or a private one for a test that stops it. `extra`: more
    /// sections of both replicas' configuration.
    init(cluster given: PostgreSQLCluster? = nil, extra: String = "") throws {
        cluster = try given ?? PostgreSQLCluster.shared.get()
        let database = try cluster.createDatabase()
        rig = try HubRig(hubConfig: "database = \(database.connection)\n\(extra)")
        first = rig.hub
        firstAddress = "127.0.0.1:\(rig.port)"
        // The same master key: a one-time code one replica made is checked by the other.
        second = try DaemonHarness()
        try FileManager.default.createDirectory(atPath: second.stateDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try FileManager.default.copyItem(atPath: first.stateDirectory + "/master.key", toPath: second.stateDirectory + "/master.key")
        _ = try rig.startHub(port: 0, extra: "database = \(database.connection)\n\(extra)", harness: second)
        secondAddress = "127.0.0.1:\(rig.port)"
    }

    func device(_ urls: String...) throws -> DaemonHarness {
        let device = try rig.startDevice(url: urls.joined(separator: ", "), waitForLink: false)
        try HubRig.waitForLink(device, state: "connected", url: urls[0])
        return device
    }
}

@Suite("Hub replicas on one PostgreSQL database")
struct ReplicaTests {
    static let password = "a long enough passphrase"

    @Test("a message committed through one replica reaches a machine linked to the other at once; 64 senders through both make one gap-free order on every machine; two machines signing in at once through different replicas get one place; admin status names the database and both replicas")
    func deliveryAcrossReplicas() throws {
        let replicas = try Replicas()
        let a = try replicas.device(replicas.firstAddress)
        let b = try replicas.device(replicas.secondAddress)
        let c = try replicas.device(replicas.firstAddress)
        let onA = try #require(try replicas.rig.register(on: a)["session"]?["token"])

        // B (through the second replica) and C (through the first) sign in at once; the account
        // holds two places and A has one.
        let outcomes = Mutex<[JSONValue?]>([nil, nil])
        let sockets = [b.socketPath, c.socketPath]
        let failures = onThreads(2) { index in
            let answer = try LineClient(socketPath: sockets[index]).call("auth.login", ["login": "+37251234567", "password": .string(Self.password)])
            outcomes.withLock { $0[index] = answer }
        }
        #expect(failures.isEmpty, "\(failures)")
        let answers = outcomes.withLock { $0 }
        let won = answers.filter { $0?["result"]?["session"]?["token"] != nil }.count
        let refused = answers.filter { $0?.errorReason == "device.limit_reached" }.count
        #expect(won == 1 && refused == 1, "one place, two machines at once through two replicas: \(answers)")
        var onB = answers[0]?["result"]?["session"]?["token"]
        if onB == nil {
            // C won: A frees C's place so that B, on the other replica, can sign in.
            let clientA = try a.connect()
            let devices = try clientA.result("device.list", ["session": onA])["devices"]?.arrayValue ?? []
            let rowC = try #require(devices.first { $0["device_id"]?.stringValue == (try? c.connect().result("device.id")["device_id"]?.stringValue) }?["id"])
            _ = try clientA.result("device.revoke", ["session": onA, "id": rowC])
            onB = try b.connect().result("auth.login", ["login": "+37251234567", "password": .string(Self.password)])["session"]?["token"]
        }
        let sessionB = try #require(onB)

        let (watchA, _) = try SyncTests.subscribe(a, session: onA)
        let (watchB, _) = try SyncTests.subscribe(b, session: sessionB)
        let sent = try a.connect().result("sync.send", ["session": onA, "kind": "message", "conversation": "family", "body": ["text": "across"]])
        let onBSide = try SyncTests.next(watchB)["params"]?["event"]
        #expect(onBSide?["position"] == sent["position"] && onBSide?["body"]?["text"] == "across", "\(String(describing: onBSide))")
        _ = try SyncTests.next(watchA)

        // 32 senders on each machine, each through its own replica, two messages each.
        let senders = [(a.socketPath, onA), (b.socketPath, sessionB)]
        let sendFailures = onThreads(64) { n in
            let (socket, session) = senders[n % 2]
            let client = try LineClient(socketPath: socket)
            for i in 0..<2 {
                _ = try client.result("sync.send", ["session": session, "kind": "message", "conversation": "burst", "body": ["n": .integer(Int64(n * 2 + i))]])
            }
        }
        #expect(sendFailures.isEmpty, "\(sendFailures)")
        let firstPosition = (sent["position"]?.integerValue ?? 0) + 1
        let seenA = try (0..<128).map { _ in try SyncTests.next(watchA)["params"]?["event"]?["position"]?.integerValue ?? -1 }
        let seenB = try (0..<128).map { _ in try SyncTests.next(watchB)["params"]?["event"]?["position"]?.integerValue ?? -1 }
        #expect(seenA == Array(firstPosition..<(firstPosition + 128)), "gap-free, in order, once")
        #expect(seenA == seenB, "the same order on both machines")

        // One JWKS: an account token one replica signs verifies at the other, which lists its key.
        let atFirst = try replicas.first.connect()
        let hubSession = try #require(try LoginTests.register(replicas.first, atFirst, phone: "+37251230000", password: Self.password)["session"]?["token"])
        let token = try #require(try atFirst.result("auth.token", ["session": hubSession, "aud": "app.example"])["token"])
        let kid = try #require(try atFirst.result("keys.jwks")["keys"]?.arrayValue?.first?["kid"])
        let atSecond = try replicas.second.connect()
        var verified: JSONValue?
        let published = Date().addingTimeInterval(10)
        while verified == nil, Date() < published {
            verified = try atSecond.call("token.verify", ["token": token])["result"]?["claims"]
            if verified == nil { usleep(50_000) }
        }
        #expect(verified?["aud"] == "app.example", "a token from the first replica verifies at the second")
        #expect(try atSecond.result("keys.jwks")["keys"]?.arrayValue?.contains { $0["kid"] == kid } == true, "the second lists the first's key")

        // Each replica says where its account data is, and sees the other.
        for hub in [replicas.first, replicas.second] {
            let status = try hub.connect().result("admin.status")
            let store = try #require(status["account_store"], "\(status)")
            #expect(store["engine"] == "postgresql" && store["schema_version"]?.integerValue ?? 0 >= 21, "\(store)")
            #expect((store["server_version"]?.stringValue ?? "").hasPrefix("1"), "\(store)")
            #expect(store["replicas"]?.arrayValue?.count == 2, "both replicas are seen: \(store)")
            #expect(store["connections"] == 4 && store["calls_in_flight"]?.integerValue ?? -1 >= 0, "the default pool: \(store)")
        }
    }

    @Test("a session revoked through one replica is told at once to the local user of the machine linked to the other, which keeps its link; removing that machine tells it and closes its link")
    func revocationAcrossReplicas() throws {
        let replicas = try Replicas()
        let a = try replicas.device(replicas.firstAddress)
        let b = try replicas.device(replicas.secondAddress)
        let clientA = try a.connect(), clientB = try b.connect()
        let tokenA = try #require(try replicas.rig.register(on: a)["session"]?["token"])
        let login: JSONValue = ["login": "+37251234567", "password": .string(Self.password)]
        let first = try #require(try clientB.result("auth.login", login)["session"])
        let second = try #require(try clientB.result("auth.login", login)["session"])
        let events = try b.connect()
        _ = try events.result("events.subscribe")

        // One of B's two sessions revoked from A, through the first replica: B hears it through the second.
        _ = try clientA.result("session.revoke", ["session": tokenA, "id": first["id"]!])
        let revoked = try #require(try events.readJSON())
        #expect(revoked["params"]?["type"] == "session.ended", "\(revoked)")
        #expect(revoked["params"]?["ended"]?["cause"] == "session.revoke")
        #expect(revoked["params"]?["ended"]?["session"] == first["id"])
        #expect(revoked["params"]?["ended"]?["machine_unlinked"] == false)
        #expect(try clientB.result("session.get", ["session": second["token"]!])["account"] != nil)
        #expect(!b.log.contains("is down"), "B keeps its link while it holds a session")

        // B removed from A: told at once through the second replica, which closes B's link.
        let machineB = try #require(try clientB.result("device.list", ["session": second["token"]!])["devices"]?.arrayValue?.first { $0["current"] == true }?["id"])
        _ = try clientA.result("device.revoke", ["session": tokenA, "id": machineB])
        let removed = try #require(try events.readJSON())
        #expect(removed["params"]?["ended"]?["cause"] == "device.revoke", "\(removed)")
        #expect(removed["params"]?["ended"]?["session"] == second["id"])
        #expect(removed["params"]?["ended"]?["machine_unlinked"] == true)
        let deadline = Date().addingTimeInterval(10)
        while !b.log.contains("is down: the hub closed the link") && Date() < deadline { usleep(20_000) }
        #expect(b.log.contains("is down: the hub closed the link"), "the second replica closed B's link:\n\(b.log)")
        #expect(try clientB.call("session.get", ["session": second["token"]!]).errorReason == "device.revoked")
    }

    @Test("a replica older than the database's schema refuses to start and says which versions; the schema is made once and kept across restarts")
    func newerSchemaRefused() throws {
        let cluster = try PostgreSQLCluster.shared.get()
        let database = try cluster.createDatabase()
        let hub = try DaemonHarness(config: "[hub]\ndatabase = \(database.connection)\n")
        try hub.start()
        try hub.terminate()
        try hub.start()
        #expect(try cluster.psql("SELECT version FROM schema_version", database: database.name) == ["23"])
        try hub.terminate()
        try cluster.psql("UPDATE schema_version SET version = 99", database: database.name)
        #expect(throws: HarnessError.self) { try hub.start() }
        #expect(hub.log.contains("schema version 99, newer than this authd knows (23)"), "\(hub.log)")
        #expect(try cluster.psql("SELECT version FROM schema_version", database: database.name) == ["99"], "nothing was touched")
    }

    @Test("only a hub on PostgreSQL loads libpq: a daemon on SQLite maps none of it, nor the Kerberos, LDAP and GnuTLS it brings")
    func libpqOnlyWhereUsed() throws {
        /// The file names of the shared objects `daemon` maps now.
        func libraries(_ daemon: DaemonHarness) throws -> Set<String> {
            // Read to its end: a file of /proc has no size to read up to.
            let maps = String(decoding: try FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/\(daemon.pid)/maps")).readToEnd() ?? Data(), as: UTF8.self)
            return Set(maps.split(separator: "\n").compactMap { line in line.split(separator: "/").last.map(String.init) }.filter { $0.contains(".so") })
        }
        let standalone = try DaemonHarness()
        try standalone.start()
        let plain = try libraries(standalone)
        #expect(plain.contains { $0.hasPrefix("libsqlite3.so") }, "the maps were read: \(plain)")
        for brought in ["libpq.so", "libgssapi_krb5.so", "libldap", "libgnutls.so"] {
            #expect(!plain.contains { $0.hasPrefix(brought) }, "\(brought) is mapped: \(plain.sorted())")
        }
        let database = try PostgreSQLCluster.shared.get().createDatabase()
        let hub = try DaemonHarness(config: "[hub]\ndatabase = \(database.connection)\n")
        try hub.start()
        #expect(try libraries(hub).contains { $0.hasPrefix("libpq.so.5") })
    }

    @Test("an authd whose own store holds accounts refuses hub.database, saying how many, rather than leave them behind")
    func accountsBlockTheMove() throws {
        let standalone = try DaemonHarness()
        try standalone.start()
        _ = try LoginTests.register(standalone, standalone.connect(), phone: "+37251234567", password: Self.password)
        try standalone.terminate()
        let database = try PostgreSQLCluster.shared.get().createDatabase()
        try "[hub]\ndatabase = \(database.connection)\n".write(toFile: standalone.configPath, atomically: true, encoding: .utf8)
        #expect(throws: HarnessError.self) { try standalone.start() }
        #expect(standalone.log.contains("holds 1 account(s)") && standalone.log.contains("hub.database"), "\(standalone.log)")
    }

    @Test("40 wrong passwords at once through two replicas: at most five are checked, the lock is that of five, the right one is refused on both")
    func lockoutAcrossReplicas() throws {
        let replicas = try Replicas(extra: LockoutRaceTests.config)
        let client = try replicas.first.connect()
        _ = try LoginTests.register(replicas.first, client, phone: LockoutRaceTests.phone, password: LockoutRaceTests.password)
        let reasons = Tally()
        let sockets = [replicas.first.socketPath, replicas.second.socketPath]
        let errors = onThreads(LockoutRaceTests.attempts) { index in
            let attempt = try LineClient(socketPath: sockets[index % 2])
            reasons.append(try attempt.call("auth.login", ["login": .string(LockoutRaceTests.phone), "password": "wrong guess 123"]).errorReason ?? "none")
        }
        #expect(errors.isEmpty, "\(errors)")
        try LockoutRaceTests.expectLockOfFiveFailures(client, reasons.all)
        for hub in [replicas.first, replicas.second] {
            let right = try hub.connect().call("auth.login", ["login": .string(LockoutRaceTests.phone), "password": .string(LockoutRaceTests.password)])
            #expect(right.errorReason == "account.locked", "\(right)")
        }
    }

    @Test("after PostgreSQL restarts, no connection of a replica's pool fails its next caller: 16 calls at once, all answered")
    func poolAfterRestart() throws {
        let cluster = try PostgreSQLCluster.makePrivate()
        let database = try cluster.createDatabase()
        let hub = try DaemonHarness(config: "[hub]\ndatabase = \(database.connection)\n")
        try hub.start()
        let session = try #require(try LoginTests.register(hub, try hub.connect(), phone: "+37251230001", password: Self.password)["session"]?["token"])
        let socket = hub.socketPath
        /// 16 `session.get` at once, each on a connection of its own: the answers that were not results.
        func together() -> [JSONValue] {
            let failures = Mutex<[JSONValue]>([])
            DispatchQueue.concurrentPerform(iterations: 16) { _ in
                let answer = (try? LineClient(socketPath: socket).call("session.get", ["session": session])) ?? ["error": "no answer"]
                if answer["result"] == nil { failures.withLock { $0.append(answer) } }
            }
            return failures.withLock { $0 }
        }
        #expect(together().isEmpty, "every connection of the pool in use before the restart")
        try cluster.stop(mode: "fast")
        try cluster.start()
        #expect(together().isEmpty, "a connection the server closed is made again before it is used")
    }

    @Test("PostgreSQL restarted while a machine sends through one replica, then that replica killed: every position a sender was told reaches the machine on the other replica once, in order; the first machine fails over and goes on")
    func restartAndFailover() throws {
        let cluster = try PostgreSQLCluster.makePrivate()
        let replicas = try Replicas(cluster: cluster)
        let a = try replicas.device(replicas.firstAddress, replicas.secondAddress)
        let b = try replicas.device(replicas.secondAddress)
        let onA = try #require(try replicas.rig.register(on: a)["session"]?["token"])
        let onB = try #require(try b.connect().result("auth.login", ["login": "+37251234567", "password": .string(Self.password)])["session"]?["token"])
        let (watchB, opened) = try SyncTests.subscribe(b, session: onB)
        var expected: [Int64] = []
        let clientA = try a.connect()
        func send(_ text: String) throws -> JSONValue {
            try clientA.call("sync.send", ["session": onA, "kind": "message", "conversation": "c", "body": ["text": .string(text)]])
        }
        for i in 0..<5 { expected.append(try #require(try send("before \(i)")["result"]?["position"]?.integerValue)) }

        // A fast shutdown of PostgreSQL while A sends: each send gets a position or an error.
        let stopped = DispatchSemaphore(value: 0)
        let stopper = Thread {
            try? cluster.stop(mode: "fast")
            stopped.signal()
        }
        stopper.start()
        var refusals: [JSONValue] = []
        for i in 0..<3000 where refusals.count < 3 {
            let answer = try send("during \(i)")
            if let position = answer["result"]?["position"]?.integerValue { expected.append(position) } else { refusals.append(answer) }
        }
        #expect(!refusals.isEmpty, "the database went away while A was sending")
        #expect(refusals.allSatisfy { $0.errorReason == "hub.unavailable" }, "a clear reason: \(refusals)")
        // The first refusals come as the server starts to shut down; it is started again once it
        // is down (`pg_ctl start` beside a server still stopping fails).
        try #require(stopped.wait(timeout: .now() + 60) == .success, "PostgreSQL stopped within 60 s")
        try cluster.start()
        // Back: the replicas reconnect by themselves.
        let back = Date().addingTimeInterval(20)
        var resumed: Int64?
        while resumed == nil, Date() < back {
            resumed = try send("after restart")["result"]?["position"]?.integerValue
            if resumed == nil { usleep(50_000) }
        }
        expected.append(try #require(resumed, "sends succeed again once PostgreSQL is back"))

        // The first replica dies: A moves to the second and goes on.
        try replicas.first.kill9()
        try HubRig.waitForLink(a, state: "connected", url: replicas.secondAddress, seconds: 20)
        for i in 0..<5 {
            let answer = try send("after failover \(i)")
            expected.append(try #require(answer["result"]?["position"]?.integerValue, "\(answer)"))
        }

        // A refused send may still have committed (its answer lost with the connection): B may
        // see more than A was told, never less, never twice, never out of order.
        let start = opened["head"]?.integerValue ?? 0
        var seen: [Int64] = []
        while seen.last ?? 0 < expected.last! {
            let event = try SyncTests.next(watchB)
            guard let position = event["params"]?["event"]?["position"]?.integerValue, event["params"]?["event"]?["kind"] == "message" else { continue }
            seen.append(position)
        }
        #expect(Set(expected).isSubset(of: Set(seen)), "every position A was told reaches B (from \(start)): missing \(Set(expected).subtracting(seen).sorted())")
        #expect(seen == seen.sorted() && Set(seen).count == seen.count, "once, in order: \(seen)")
    }
}
