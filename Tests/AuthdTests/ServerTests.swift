import AuthdClient
import Foundation
import Glibc
import OpenSSLCrypto
import Protocol
import Synchronization
import Testing
@testable import authd

/// A method that waits until cancelled, to observe what the server does with in-flight work.
private enum WaitMethod: RPCMethod {
    static let name = "test.wait"
    typealias Params = NoParams
    struct Result: Codable, Sendable {}
}

private final class Observations: Sendable {
    let started = Atomic<Int>(0)
    let cancelled = Atomic<Int>(0)
    let dropped = Atomic<Int>(0)
    /// `test.stream_when_released`: its stream is registered; the test lets it answer; its
    /// stream's body ran.
    let streamOpened = Atomic<Int>(0)
    let release = Atomic<Bool>(false)
    let streamRan = Atomic<Int>(0)
}

/// A method that fails as a hub's database does: `sqlstate` is the error's code.
private enum FailingStoreMethod: RPCMethod {
    static let name = "test.failing_store"
    struct Params: Codable, Sendable { let sqlstate: String }
    struct Result: Codable, Sendable {}
}

/// A method that opens a stream and then fails: the stream must never start, and its source
/// must be told (no follower left registered forever).
private enum FailingStreamMethod: RPCMethod {
    static let name = "test.failing_stream"
    typealias Params = NoParams
    struct Result: Codable, Sendable {}
}

/// A method that opens a stream, then answers once the test releases it: its answer can be
/// written after its client has gone, before the server has read that the client closed.
private enum StreamWhenReleasedMethod: RPCMethod {
    static let name = "test.stream_when_released"
    typealias Params = NoParams
    struct Result: Codable, Sendable {}
}

/// The server in-process (real socket, real connections, a test dispatch table), like
/// hummingbird's in-process test harness.
private struct InProcessServer {
    let directory = TemporaryDirectory()
    let listener: Listener
    let services: Services
    let observations = Observations()
    let logs = MemorySink()
    var socketPath: String { directory.path + "/s.sock" }

    init() async throws {
        let fixture = try await TestKeys()
        let options = DaemonOptions(mode: .user, socketPath: directory.path + "/s.sock", stateDirectory: directory.path, configPath: directory.path + "/c.conf")
        let holder = ConfigHolder(Config())
        let logger = Logger(sink: logs, level: .debug)
        let directory = SQLAccountDirectory(store: fixture.store, config: holder, logger: logger, now: fixture.clock.closure)
        let events = EventBus()
        let presence = MachinePresence(home: LocalPresenceHome(book: PresenceBook(store: fixture.store, config: holder, now: fixture.clock.closure), directory: directory),
                                       watcher: PresenceMonitor(options: .init(bssidAbsenceSeconds: 60), logger: logger), events: events, config: holder, logger: logger)
        services = Services(
            options: options, config: holder, reloader: ConfigReloader(path: options.configPath, holder: holder, logger: logger),
            logger: logger, store: fixture.store, accountStore: fixture.store, machineAccounts: directory, accountHome: directory, keys: fixture.keys, audit: AuditLog(store: fixture.store, now: fixture.clock.closure),
            connections: ConnectionRegistry(), masterKeySource: .keyFile(path: "/x"), sealer: fixture.sealer, codeKey: try OpenSSL.randomSecret(32),
            localLock: LocalLock(store: fixture.store, directory: directory, config: holder, now: fixture.clock.closure), events: events, sync: SyncBus(),
            syncService: SyncService(log: SyncLog(store: fixture.store, now: fixture.clock.closure), directory: directory, bus: SyncBus(),
                                     limiter: SyncWriteLimiter(config: holder, now: fixture.clock.closure), thisMachine: DeviceID(description: "test"), keyBook: nil) { _ in },
            outbox: nil, cipher: nil, presence: presence,
            vault: TokenVault(store: fixture.store, sealer: fixture.sealer, directory: directory),
            http: HTTPClient(helperPath: "/nonexistent/authd-http"),
            hub: HubState(role: .standalone, identity: try await MachineIdentity.open(store: fixture.store, sealer: fixture.sealer, now: Date()), link: nil),
            desktop: DesktopPrompts(desk: DeskRouter(agents: AgentDesk(), local: nil), consents: ConsentBook(store: fixture.store, now: fixture.clock.closure),
                                    config: holder),
            startedAt: Date(), now: fixture.clock.closure)
        var table = DispatchTable.make(services)
        let observations = self.observations
        table.register(WaitMethod.self, home: .machine, access: .anyone) { _, _ in
            observations.started.add(1, ordering: .relaxed)
            do {
                try await Task.sleep(for: .seconds(60))
            } catch {
                observations.cancelled.add(1, ordering: .relaxed)
                throw error
            }
            return WaitMethod.Result()
        }
        table.register(FailingStoreMethod.self, home: .machine, access: .anyone) { params, _ in
            throw PostgreSQLError(sqlstate: params.sqlstate, message: "duplicate key value violates unique constraint \"sessions_pkey\"",
                                  sql: "INSERT INTO sessions (id) VALUES ($1)")
        }
        table.register(FailingStreamMethod.self, home: .machine, access: .anyone) { _, context in
            _ = try context.streams.open(onDrop: { observations.dropped.add(1, ordering: .relaxed) }) { _ in
                Issue.record("the stream of a failed request started")
            }
            throw RPCError.failure(Reason("test.failed"), "fails after opening a stream")
        }
        table.register(StreamWhenReleasedMethod.self, home: .machine, access: .anyone) { _, context in
            _ = try context.streams.open(onDrop: { observations.dropped.add(1, ordering: .relaxed) }) { _ in
                observations.streamRan.add(1, ordering: .relaxed)
            }
            observations.streamOpened.add(1, ordering: .relaxed)
            _ = await eventually { observations.release.load(ordering: .relaxed) }
            return StreamWhenReleasedMethod.Result()
        }
        let fd = try Syscalls.listenUnix(path: options.socketPath, mode: 0o600)
        listener = Listener(fd: fd, socketPath: options.socketPath, dispatcher: Dispatcher(table: table, services: services))
        listener.start()
        _ = fixture  // the store and keys live on in `services`
    }

    /// A client whose reads give up after a moment, so that `receive` can poll (see there).
    func connect() throws -> LineConnection {
        try LineConnection(socketPath: socketPath, receiveTimeout: .milliseconds(1))
    }
}

/// The next line the server sent, without holding a cooperative thread (the server under test
/// runs its handlers on the same small pool): reads that time out at once, sleeping between
/// tries, until a line arrived, the server closed, or 30 s passed.
private func receive(_ connection: LineConnection) async -> String {
    let deadline = ContinuousClock.now + .seconds(30)
    while ContinuousClock.now < deadline {
        do {
            return String(decoding: try connection.readLine() ?? [], as: UTF8.self)
        } catch where error.code == .timedOut {
            try? await Task.sleep(for: .milliseconds(10))
        } catch {
            return ""
        }
    }
    return ""
}

@Suite("Server in-process")
struct ServerTests {
    @Test("a client that disconnects cancels its in-flight requests")
    func disconnectCancels() async throws {
        let server = try await InProcessServer()
        let client = try server.connect()
        try client.send((#"{"jsonrpc":"2.0","id":1,"method":"test.wait"}"# + "\n" + #"{"jsonrpc":"2.0","id":2,"method":"test.wait"}"# + "\n").utf8)
        _ = await eventually { server.observations.started.load(ordering: .relaxed) == 2 }
        #expect(server.observations.started.load(ordering: .relaxed) == 2)
        #expect(server.observations.cancelled.load(ordering: .relaxed) == 0)
        client.close()
        _ = await eventually { server.observations.cancelled.load(ordering: .relaxed) == 2 }
        #expect(server.observations.cancelled.load(ordering: .relaxed) == 2)
        _ = await eventually { server.services.connections.count == 0 }
        #expect(server.services.connections.count == 0)
        server.listener.stop()
    }

    @Test("a client that half-closes and then leaves altogether is seen to leave: what it asked is cancelled and its connection closes")
    func halfCloseThenGone() async throws {
        let server = try await InProcessServer()
        defer { server.listener.stop() }
        let fd = try Syscalls.connectUnix(path: server.socketPath)
        let line = Array((#"{"jsonrpc":"2.0","id":1,"method":"test.wait"}"# + "\n").utf8)
        #expect(write(fd, line, line.count) == line.count)
        _ = await eventually { server.observations.started.load(ordering: .relaxed) == 1 }
        #expect(shutdown(fd, Int32(SHUT_WR)) == 0, "as socat does after its input")
        // The marker: two turns of the connection's own, one after the other. The end of input
        // was readable before the first was queued, and the loop looks at its descriptors
        // between the two rounds they run in, so the second comes after it was taken in.
        let connection = try #require(server.services.connections.all.first)
        _ = await connection.requestsInFlight()
        #expect(await connection.requestsInFlight() == 1)
        #expect(server.observations.cancelled.load(ordering: .relaxed) == 0, "half-closed, it still waits for its answer")
        #expect(server.services.connections.count == 1)
        close(fd)
        _ = await eventually(seconds: 10) { server.observations.cancelled.load(ordering: .relaxed) == 1 && server.services.connections.count == 0 }
        #expect(server.observations.cancelled.load(ordering: .relaxed) == 1)
        #expect(server.services.connections.count == 0)
    }

    @Test("more than 64 requests in flight on one connection pause reading from it, not other clients")
    func backPressure() async throws {
        let server = try await InProcessServer()
        let client = try server.connect()
        defer { client.close() }
        let requests = (1...100).map { #"{"jsonrpc":"2.0","id":\#($0),"method":"test.wait"}"# + "\n" }.joined()
        try client.send(requests.utf8)
        _ = await eventually { server.observations.started.load(ordering: .relaxed) >= 64 }
        #expect(server.observations.started.load(ordering: .relaxed) == ConnectionMachine.Limits().maxInFlight)
        // The ordering marker: a turn of the connection's own, queued after every turn that took
        // the first 64, finds no 65th taken (nothing frees a place: each waits for 60 s).
        let connection = try #require(server.services.connections.all.first)
        #expect(await connection.requestsInFlight() == ConnectionMachine.Limits().maxInFlight)
        #expect(server.observations.started.load(ordering: .relaxed) == ConnectionMachine.Limits().maxInFlight)
        // Another client is unaffected.
        let other = try server.connect()
        defer { other.close() }
        try other.send((#"{"jsonrpc":"2.0","id":1,"method":"hello"}"# + "\n").utf8)
        #expect(await receive(other).contains("protocol_version"))
        server.listener.stop()
    }

    @Test("a stream whose request fails never starts, and its source is told to let go")
    func droppedStream() async throws {
        let server = try await InProcessServer()
        let client = try server.connect()
        defer { client.close() }
        try client.send((#"{"jsonrpc":"2.0","id":1,"method":"test.failing_stream"}"# + "\n").utf8)
        #expect(await receive(client).contains("test.failed"))
        _ = await eventually { server.observations.dropped.load(ordering: .relaxed) == 1 }
        #expect(server.observations.dropped.load(ordering: .relaxed) == 1)
        server.listener.stop()
    }

    @Test("a stream whose answer cannot be written, the client gone, never starts: its source is told to let go")
    func streamOfAnUnwrittenAnswer() async throws {
        let server = try await InProcessServer()
        let client = try server.connect()
        // The stream's request, then waits up to the in-flight limit: the server stops reading,
        // so it writes the answer before it could read that the client closed.
        let limit = ConnectionMachine.Limits().maxInFlight
        let waits = (2...limit).map { #"{"jsonrpc":"2.0","id":\#($0),"method":"test.wait"}"# + "\n" }.joined()
        try client.send((#"{"jsonrpc":"2.0","id":1,"method":"test.stream_when_released"}"# + "\n" + waits).utf8)
        let observations = server.observations
        _ = await eventually { observations.streamOpened.load(ordering: .relaxed) == 1 && observations.started.load(ordering: .relaxed) == limit - 1 }
        #expect(observations.streamOpened.load(ordering: .relaxed) == 1)
        client.close()
        observations.release.store(true, ordering: .relaxed)
        _ = await eventually { server.services.connections.count == 0 && observations.dropped.load(ordering: .relaxed) == 1 }
        #expect(server.services.connections.count == 0)
        #expect(observations.dropped.load(ordering: .relaxed) == 1)
        #expect(observations.streamRan.load(ordering: .relaxed) == 0)
        server.listener.stop()
    }

    @Test("a newcomer machine that leaves with half a line gives it back to the newcomers' and the machines' pools")
    func remoteHeldGivenBack() async throws {
        let server = try await InProcessServer()
        defer { server.listener.stop() }
        let registry = server.services.connections
        var ends: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0)
        let connection = Connection(id: registry.makeID(), channel: UnixSocketChannel(fd: ends[0]), caller: .device(DeviceID(description: "stranger")),
                                    newcomer: true, dispatcher: Dispatcher(table: DispatchTable.make(server.services), services: server.services),
                                    timeouts: (idle: 300, prompt: 60), registry: registry)
        registry.add(connection, standing: .newcomer)
        connection.start()
        let unfinished = [UInt8](repeating: 0x20, count: 1000)
        #expect(write(ends[1], unfinished, unfinished.count) == unfinished.count)
        _ = await eventually { registry.heldRemote.newcomers == unfinished.count }
        #expect(registry.heldRemote == (all: unfinished.count, newcomers: unfinished.count), "it holds its unfinished line")
        close(ends[1])
        _ = await eventually { registry.count == 0 }
        #expect(registry.count == 0)
        #expect(registry.heldRemote == (all: 0, newcomers: 0), "closed, it holds nothing in either pool")
        #expect(registry.held == .init())
    }

    @Test("a newcomer that signs in past [hub] max_devices is not made a member: its connection closes, the members stay at the limit")
    func promotionPastTheLimit() async throws {
        let server = try await InProcessServer()
        defer { server.listener.stop() }
        let registry = server.services.connections
        let dispatcher = Dispatcher(table: DispatchTable.make(server.services), services: server.services)
        var peers: [Int32] = []
        defer { for fd in peers { close(fd) } }
        func connect(_ machine: String, _ standing: Standing) -> Connection {
            var ends: [Int32] = [0, 0]
            _ = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends)
            peers.append(ends[1])
            let connection = Connection(id: registry.makeID(), channel: UnixSocketChannel(fd: ends[0]), caller: .device(DeviceID(description: machine)),
                                        newcomer: standing == .newcomer, dispatcher: dispatcher, timeouts: (idle: 300, prompt: 60), registry: registry)
            registry.add(connection, standing: standing)
            connection.start()
            return connection
        }
        _ = connect("member", .member)
        let newcomer = connect("newcomer", .newcomer)
        #expect(registry.promote(.device(DeviceID(description: "newcomer")), limit: 1).isEmpty)
        _ = await eventually { registry.standing(of: newcomer.id) == nil }
        #expect(registry.standing(of: newcomer.id) == nil, "closed")
        #expect(registry.memberMachineCount == 1)
        // Within the limit, it is.
        let second = connect("second", .newcomer)
        #expect(registry.promote(.device(DeviceID(description: "second")), limit: 2).map(\.id) == [second.id])
        #expect(registry.memberMachineCount == 2)
    }

    @Test("followers that leave, before or after their stream starts, are unregistered")
    func followersLeave() async throws {
        let server = try await InProcessServer()
        var started = 0
        for index in 0..<20 {
            let client = try server.connect()
            try client.send((#"{"jsonrpc":"2.0","id":1,"method":"admin.audit.tail","params":{"follow":true,"limit":0}}"# + "\n").utf8)
            if index % 2 == 0 {
                // Wait for the response: the follower is registered and its stream running.
                if await receive(client).contains(#""subscription":"s1""#) { started += 1 }
            }
            client.close()  // odd ones leave at once, racing the handler
        }
        #expect(started == 10)
        let audit = server.services.audit
        let deadline = ContinuousClock.now + .seconds(30)
        while await audit.followerCount != 0 || server.services.connections.count != 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(await audit.followerCount == 0)
        server.listener.stop()
    }

    @Test("a database error answered as internal is logged with its code; one with a wire form of its own is not logged as an error")
    func databaseErrorsInTheLog() async throws {
        let server = try await InProcessServer()
        defer { server.listener.stop() }
        let client = try server.connect()
        defer { client.close() }
        try client.send((#"{"jsonrpc":"2.0","id":1,"method":"test.failing_store","params":{"sqlstate":"23505"}}"# + "\n").utf8)
        #expect(await receive(client).contains(#""reason":"internal""#))
        let logged = server.logs.all.filter { $0.level == .error }.map(\.message)
        #expect(logged.contains { $0.contains("test.failing_store failed: PostgreSQL error 23505") }, "\(logged)")
        // A timeout has its own answer (hub.unavailable): nothing is left for the log to explain.
        try client.send((#"{"jsonrpc":"2.0","id":2,"method":"test.failing_store","params":{"sqlstate":"57014"}}"# + "\n").utf8)
        #expect(await receive(client).contains(#""reason":"hub.unavailable""#))
        #expect(server.logs.all.filter { $0.level == .error }.count == logged.count)
    }

    @Test("admin methods are refused and audited for non-admins; invalid params are not audited")
    func authorizationAndAudit() async throws {
        let server = try await InProcessServer()
        let dispatcher = Dispatcher(table: DispatchTable.make(server.services), services: server.services)
        let client = try server.connect()
        defer { client.close() }
        _ = await eventually { server.services.connections.count == 1 }
        let connection = try #require(server.services.connections.all.first)
        let stranger = CallerIdentity(uid: 4242, gid: 4242, pid: 1, exe: "/x", username: nil, groups: [])
        let context = RequestEnvironment(caller: .local(stranger), prompts: connection.prompts,
                                         streams: RequestStreams(connection: connection, requestKey: 99))
        let denied = await dispatcher.respond(to: Request(id: 1, method: "admin.status", params: nil), environment: context)
        #expect(!denied.succeeded)
        #expect(String(decoding: denied.line ?? [], as: UTF8.self).contains("auth.forbidden"))
        // What a call without params decodes to is kept per method: the refusal repeats itself.
        for params: JSONValue? in [[:], nil] {
            let invalid = await dispatcher.respond(to: Request(id: 2, method: "auth.local", params: params), environment: context)
            #expect(!invalid.succeeded)
            #expect(String(decoding: invalid.line ?? [], as: UTF8.self).contains(#""field":"aud""#))
        }
        let issued = await dispatcher.respond(to: Request(id: 3, method: "auth.local", params: ["aud": "x"]), environment: context)
        #expect(issued.succeeded)
        let notification = await dispatcher.respond(to: Request(id: nil, method: "hello", params: nil), environment: context)
        #expect(notification.line == nil)
        let records = try await server.services.audit.tail(limit: 10)
        #expect(records.map(\.method) == ["admin.status", "auth.local"])
        #expect(records.map(\.outcome) == ["denied", "ok"])
        #expect(records[1].detail["aud"] == "x")
        #expect(records[1].detail.keys.sorted() == ["aud", "expires_at", "jti", "kid"], "the token itself is never recorded")
        server.listener.stop()
    }
}

@Suite("Store")
struct StoreTests {
    @Test("migrations apply once, atomically, and a newer schema is refused")
    func migrations() throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/m.db"
        let database = try Database(path: path)
        try Migrations.apply(to: database)
        try Migrations.apply(to: database)
        #expect(try database.queryOne("PRAGMA user_version") { $0.int(0) } == Migrations.latestVersion)
        #expect(try database.queryOne("PRAGMA journal_mode") { $0.text(0) } == "wal")
        try database.execute("PRAGMA user_version = 999")
        #expect(throws: Migrations.TooNew.self) { try Migrations.apply(to: database) }
    }

    @Test("migration 8 rebuilds accounts with an optional phone, keeping every row and reference, and foreign keys stay on")
    func accountsRebuild() throws {
        let directory = TemporaryDirectory()
        let database = try Self.database(at: 7, in: directory) {
            try $0.execute("INSERT INTO accounts (id, phone, phone_verified_at, created_at, pin_failures, device_limit) VALUES ('acc_1', '+37251234567', 1, 1, 2, 3)")
            try $0.execute("INSERT INTO devices (id, account_id, device_key, name, first_seen, last_seen) VALUES ('dev_1', 'acc_1', 'k', 'n', 1, 1)")
            try $0.execute("INSERT INTO sessions (id, account_id, device_id, token_hash, amr, created_at, last_used_at, expires_at) VALUES ('ses_1', 'acc_1', 'dev_1', x'01', '[]', 1, 1, 9)")
        }
        try Migrations.apply(to: database)
        #expect(try database.queryOne("SELECT phone, pin_failures, device_limit FROM accounts WHERE id = 'acc_1'") { "\($0.text(0)) \($0.int(1)) \($0.int(2))" } == "+37251234567 2 3")
        #expect(try database.queryOne("SELECT count(*) FROM sessions s JOIN accounts a ON a.id = s.account_id") { $0.int(0) } == 1)
        try database.execute("INSERT INTO accounts (id, created_at) VALUES ('acc_2', 1)")
        #expect(throws: SQLiteError.self) {
            try database.execute("INSERT INTO devices (id, account_id, device_key, name, first_seen, last_seen) VALUES ('dev_2', 'acc_missing', 'k', 'n', 1, 1)")
        }
        #expect(try database.queryOne("PRAGMA foreign_keys") { $0.int(0) } == 1)
    }

    @Test("migration 10 draws the machine/account line: machine tables keep their rows without foreign keys into account tables, and the fingerprint step leaves the account row")
    func machineAccountLine() throws {
        let directory = TemporaryDirectory()
        let database = try Self.database(at: 9, in: directory) {
            try $0.execute("INSERT INTO accounts (id, phone, phone_verified_at, created_at, fingerprint_user) VALUES ('acc_1', '+37251234567', 1, 1, 'mari')")
            try $0.execute("INSERT INTO devices (id, account_id, device_key, name, first_seen, last_seen) VALUES ('dev_1', 'acc_1', 'k', 'n', 1, 1)")
            try $0.execute("INSERT INTO local_users (uid, account_id, device_id, credential_check, locked, biometric_enabled) VALUES (1000, 'acc_1', 'dev_1', x'01', 1, 1)")
            try $0.execute("INSERT INTO remote_tokens (uid, provider, issuer, account_id, subject, state, updated_at) VALUES (1000, 'work', 'https://id', 'acc_1', 's', 'signed_in', 5)")
        }
        try Migrations.apply(to: database)
        #expect(try database.queryOne("SELECT account_id, device_id, locked, biometric_enabled FROM local_users WHERE uid = 1000") {
            "\($0.text(0)) \($0.text(1)) \($0.int(2)) \($0.int(3))"
        } == "acc_1 dev_1 1 1")
        #expect(try database.queryOne("SELECT account_id, state FROM remote_tokens") { "\($0.text(0)) \($0.text(1))" } == "acc_1 signed_in")
        #expect(try database.queryOne("SELECT account_id, user FROM fingerprint_steps") { "\($0.text(0)) \($0.text(1))" } == "acc_1 mari")
        #expect(try database.query("PRAGMA table_info(accounts)") { $0.text(1) }.contains("fingerprint_user") == false)
        // A machine keeps the ids it was told, whether or not the account is here.
        try database.execute("INSERT INTO local_users (uid, account_id, device_id) VALUES (1001, 'acc_elsewhere', 'dev_elsewhere')")
        try database.execute("INSERT INTO remote_tokens (uid, provider, issuer, account_id, state, updated_at) VALUES (1001, 'work', 'https://id', 'acc_gone', 'logged_out', 5)")
        for table in ["local_users", "remote_tokens", "pending_logouts", "fingerprint_steps", "card_secrets", "passkey_keys"] {
            #expect(try database.query("PRAGMA foreign_key_list(\(table))") { $0.text(2) }.isEmpty, "\(table) references an account table")
        }
        #expect(try database.queryOne("PRAGMA foreign_keys") { $0.int(0) } == 1)
    }

    @Test("migration 22 rebuilds the audit log without AUTOINCREMENT: every record is kept, and ids go on after the newest")
    func auditRebuild() throws {
        let directory = TemporaryDirectory()
        let database = try Self.database(at: 21, in: directory) {
            for id in [7, 8, 9] {
                try $0.execute("INSERT INTO audit (id, at_ms, uid, pid, exe, method, outcome, reason, detail) VALUES (?, 5, 1000, 42, NULL, 'auth.local', 'ok', NULL, '{}')",
                               [.integer(Int64(id))])
            }
        }
        try Migrations.apply(to: database)
        #expect(try database.query("SELECT id, method FROM audit ORDER BY id") { "\($0.int64(0)) \($0.text(1))" } == ["7 auth.local", "8 auth.local", "9 auth.local"])
        #expect(try database.queryOne("SELECT sql FROM sqlite_master WHERE name = 'audit'") { $0.text(0) }?.contains("AUTOINCREMENT") == false)
        #expect(try database.queryOne("SELECT count(*) FROM sqlite_sequence WHERE name = 'audit'") { $0.int(0) } == 0)
        let caller = Caller.local(CallerIdentity(uid: 1000, gid: 1000, pid: 42, exe: nil, username: nil, groups: []))
        let next = try database.transaction {
            try AuditLog.insert(AuditLog.Entry(caller: caller, method: "hello", outcome: .ok, reason: nil, detail: [:]), at: Date(), into: database)
        }
        #expect(next.id == 10)
    }

    @Test("migration 24 keys consents by purpose as well: a consent of before, which could have been for any purpose, is dropped, and a purpose authd does not know is refused")
    func consentsByPurpose() throws {
        let directory = TemporaryDirectory()
        let database = try Self.database(at: 23, in: directory) {
            try $0.execute("INSERT INTO desktop_consents (uid, program, audience, granted_at) VALUES (1000, 'exe:/usr/bin/app', 'https://rp.example', 5)")
        }
        try Migrations.apply(to: database)
        #expect(try database.queryOne("SELECT count(*) FROM desktop_consents") { $0.int(0) } == 0)
        #expect(try database.query("PRAGMA table_info(desktop_consents)") { $0.text(1) } == ["uid", "program", "purpose", "audience", "granted_at"])
        try database.execute("INSERT INTO desktop_consents (uid, program, purpose, audience, granted_at) VALUES (1000, 'exe:/usr/bin/app', 'card_sign', 'https://rp.example', 5)")
        try database.execute("INSERT INTO desktop_consents (uid, program, purpose, audience, granted_at) VALUES (1000, 'exe:/usr/bin/app', 'account_token', 'https://rp.example', 5)")
        #expect(throws: SQLiteError.self) {
            try database.execute("INSERT INTO desktop_consents (uid, program, purpose, audience, granted_at) VALUES (1000, 'exe:/usr/bin/app', 'anything', 'https://rp.example', 5)")
        }
    }

    /// A store at schema `version`, with the rows `seed` puts in, ready for the later migrations.
    private static func database(at version: Int, in directory: TemporaryDirectory, seed: (Database) throws -> Void) throws -> Database {
        let database = try Database(path: directory.path + "/v\(version).db")
        try database.transaction {
            for migration in Migrations.all where migration.version <= version {
                for statement in migration.sql { try database.execute(statement) }
            }
            try database.execute("PRAGMA user_version = \(version)")
            try seed(database)
        }
        return database
    }

    @Test("a statement is prepared once and reused; a nested use of the same SQL gets its own; a half-read query holds no read transaction")
    func statementCache() throws {
        let directory = TemporaryDirectory()
        let database = try Database(path: directory.path + "/c.db")
        try database.execute("CREATE TABLE t (k TEXT)")
        for key in ["a", "b", "c"] { try database.execute("INSERT INTO t (k) VALUES (?)", [.text(key)]) }
        let before = database.cachedStatementCount
        for key in ["d", "e"] { try database.execute("INSERT INTO t (k) VALUES (?)", [.text(key)]) }
        #expect(database.cachedStatementCount == before, "the INSERT was prepared again")

        // The inner query runs the outer one's SQL while the outer is between rows.
        let sql = "SELECT k FROM t ORDER BY k"
        let pairs = try database.query(sql) { row in "\(row.text(0))\(try database.queryOne(sql) { $0.text(0) } ?? "-")" }
        #expect(pairs == ["aa", "ba", "ca", "da", "ea"])

        // queryOne stops after the first of five rows. Were the statement left mid-read, its
        // read transaction would keep another connection from truncating the WAL.
        #expect(try database.queryOne(sql) { $0.text(0) } == "a")
        let other = try Database(path: directory.path + "/c.db")
        #expect(try other.queryOne("PRAGMA wal_checkpoint(TRUNCATE)") { $0.int(0) } == 0, "a reader still holds the WAL")
    }

    /// `PRAGMA synchronous` reads 2 for FULL, 1 for NORMAL.
    @Test("each transaction commits at the durability it asks for, a read at full durability, whatever ran before")
    func durability() async throws {
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.path + "/d.db")
        let level = "PRAGMA synchronous"
        let sequence: [Store.Durability?] = [.relaxed, .relaxed, nil, .relaxed, .full, .full, .relaxed, nil]
        for durability in sequence {
            let seen = if let durability {
                try await store.transaction(durability: durability) { try $0.queryOne(level) { $0.int(0) } }
            } else {
                try await store.read { try $0.queryOne(level) { $0.int(0) } }
            }
            #expect(seen == (durability == .relaxed ? 1 : 2), "\(String(describing: durability))")
        }
    }

    @Test("a full WAL is copied into the database file by the checkpoint connection, not by the commit that fills it; shutdown empties it")
    func checkpointBeside() async throws {
        let directory = TemporaryDirectory()
        func size(_ file: String) throws -> Int {
            try FileManager.default.attributesOfItem(atPath: directory.path + "/" + file)[.size] as? Int ?? -1
        }
        func fill(_ store: Store, transactions: Int, from first: Int = 0) async throws {
            for index in first..<first + transactions {
                try await store.transaction(durability: .relaxed) {
                    try $0.execute("INSERT INTO meta (key, value) VALUES (?, randomblob(4000))", [.text("k\(index)")])
                }
            }
        }

        // Never asked for: a commit past SQLite's own limit of 1,000 pages leaves the WAL to grow
        // and the database file as it was.
        let unasked = try Store(path: directory.path + "/u.db", checkpointAfter: 1_000_000)
        let unaskedBefore = try size("u.db")
        try await unasked.transaction(durability: .relaxed) {
            try $0.execute("""
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1100)
                INSERT INTO meta (key, value) SELECT 'bulk' || i, randomblob(4000) FROM n
                """)
        }
        #expect(try size("u.db") == unaskedBefore, "a commit checkpointed")
        #expect(try size("u.db-wal") > 1000 * 4096)
        #expect(unasked.checkpointer?.checkpoints == 0)

        // Asked for at 16 pages (the commit itself would step in only at 64).
        let store = try Store(path: directory.path + "/a.db", checkpointAfter: 16)
        let before = try size("a.db")
        try await fill(store, transactions: 10)
        let deadline = ContinuousClock.now + .seconds(5)
        while store.checkpointer?.checkpoints == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect((store.checkpointer?.checkpoints ?? 0) > 0)
        // Only the checkpoint connection copies below the hard limit: any growth is its copy.
        #expect(try size("a.db") > before, "nothing reached the database file")
        #expect(try await store.read { try $0.queryOne("SELECT count(*) FROM meta") { $0.int(0) } } == 10)

        await store.checkpoint()
        #expect(try size("a.db-wal") == 0)
        let checkpoints = store.checkpointer?.checkpoints
        try await fill(store, transactions: 10, from: 10)
        #expect(store.checkpointer?.checkpoints == checkpoints, "the stopped checkpoint connection ran again")
    }

    @Test("at the WAL's hard limit no loop borrows the store's connection: the next commit runs on the store's queue, which checkpoints")
    func hardLimitOffTheLoops() async throws {
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.path + "/h.db", checkpointAfter: 2)  // the hard limit: 8 pages
        let loop = EventLoops.shared.nextLoop()
        let lendsToLoop: @Sendable () -> Bool = { loop.sync { store.performHere { _ in } } }
        #expect(await eventually { lendsToLoop() })
        try await store.transaction(durability: .relaxed) {
            try $0.execute("""
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 12)
                INSERT INTO meta (key, value) SELECT 'h' || i, randomblob(4000) FROM n
                """)
        }
        #expect(store.checkpointer?.holdsCommits == true)
        // Not lent, for as long as the store's queue, idle again within these 40 ms, is asked.
        #expect(!(0..<20).contains { _ in
            Syscalls.sleep(milliseconds: 2)
            return lendsToLoop()
        })
        // The queue's commit checkpointed every frame: the next commit starts the WAL over.
        try await store.transaction(durability: .relaxed) { try $0.execute("INSERT INTO meta (key, value) VALUES ('after', x'01')") }
        #expect(store.checkpointer?.holdsCommits == false)
        #expect(await eventually { lendsToLoop() })
    }

    @Test("a reader sees the last commit before its read began, writes nothing, and no more than its limit are lent at once")
    func readers() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/r.db"
        let store = try Store(path: path)
        try await store.transaction { try $0.execute("INSERT INTO meta (key, value) VALUES ('a', x'01')") }
        let readers = SQLiteReaders(path: path, limit: 1)
        // Another connection commits while the read runs.
        let writer = try Database(path: path)
        let counted = "SELECT count(*) FROM meta WHERE key IN ('a', 'b')"
        let seen = try #require(try readers.read { database in
            let before = try database.queryOne(counted) { $0.int(0) }
            try writer.execute("INSERT INTO meta (key, value) VALUES ('b', x'02')")
            let after = try database.queryOne(counted) { $0.int(0) }
            // Its one reader is lent: a read now is told so, to go elsewhere.
            #expect(try readers.read { _ in true } == nil)
            return [before, after]
        })
        #expect(seen == [1, 1])
        #expect(try readers.read { try $0.queryOne(counted) { $0.int(0) } } == 2)
        #expect(throws: SQLiteError.self) { try readers.read { try $0.execute("DELETE FROM meta") } }
        #expect(try readers.read { try $0.queryOne(counted) { $0.int(0) } } == 2)
        #expect(readers.openCount == 1)
    }

    @Test("a failed transaction changes nothing")
    func rollback() async throws {
        let directory = TemporaryDirectory()
        let store = try Store(path: directory.path + "/t.db")
        struct Boom: Error {}
        await #expect(throws: Boom.self) {
            try await store.transaction { database in
                try database.execute("INSERT INTO meta (key, value) VALUES ('a', x'01')")
                throw Boom()
            }
        }
        #expect(try await store.read { try $0.queryOne("SELECT count(*) FROM meta") { $0.int(0) } } == 0)
        // Constraint violations surface as typed errors.
        try await store.transaction { try $0.execute("INSERT INTO meta (key, value) VALUES ('a', x'01')") }
        do {
            try await store.transaction { try $0.execute("INSERT INTO meta (key, value) VALUES ('a', x'02')") }
            Issue.record("duplicate accepted")
        } catch let error as SQLiteError {
            #expect(error.isConstraintViolation)
        }
    }

    @Test("the log level filters and the memory sink captures structured fields")
    func logging() {
        let sink = MemorySink()
        let logger = Logger(sink: sink, level: .notice)
        logger.info("hidden")
        logger.warning("shown", [("AUTHD_METHOD", "x")])
        logger.level = .debug
        logger.debug("now shown")
        #expect(sink.all.map(\.message) == ["shown", "now shown"])
        #expect(sink.all.first?.fields.first?.0 == "AUTHD_METHOD")
        #expect(LogLevel.debug < LogLevel.error)
    }
}
