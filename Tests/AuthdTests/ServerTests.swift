import CLinux
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
}

/// A method that opens a stream and then fails: the stream must never start, and its source
/// must be told (no follower left registered forever).
private enum FailingStreamMethod: RPCMethod {
    static let name = "test.failing_stream"
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
        services = Services(
            options: options, config: holder, reloader: ConfigReloader(path: options.configPath, holder: holder, logger: logger),
            logger: logger, store: fixture.store, keys: fixture.keys, audit: AuditLog(store: fixture.store, now: fixture.clock.closure),
            connections: ConnectionRegistry(), masterKeySource: .keyFile(path: "/x"), sealer: fixture.sealer, codeKey: try OpenSSL.randomSecret(32),
            localLock: LocalLock(store: fixture.store, config: holder, now: fixture.clock.closure), events: EventBus(), http: HTTPClient(helperPath: "/nonexistent/authd-http"), startedAt: Date(), now: fixture.clock.closure)
        var table = DispatchTable.make(services)
        let observations = self.observations
        table.register(WaitMethod.self, access: .anyone) { _, _ in
            observations.started.add(1, ordering: .relaxed)
            do {
                try await Task.sleep(for: .seconds(60))
            } catch {
                observations.cancelled.add(1, ordering: .relaxed)
                throw error
            }
            return WaitMethod.Result()
        }
        table.register(FailingStreamMethod.self, access: .anyone) { _, context in
            _ = try context.openSubscription(onDrop: { observations.dropped.add(1, ordering: .relaxed) }) { _ in
                Issue.record("the stream of a failed request started")
            }
            throw RPCError.failure(Reason("test.failed"), "fails after opening a stream")
        }
        let fd = try Syscalls.listenUnix(path: options.socketPath, mode: 0o600)
        listener = Listener(fd: fd, socketPath: options.socketPath, dispatcher: Dispatcher(table: table, services: services))
        listener.start()
        _ = fixture  // the store and keys live on in `services`
    }

    func connect() throws -> Int32 {
        let fd = authd_connect_unix(socketPath)
        guard fd >= 0 else { throw SystemError(call: "connect", errno: errno) }
        return fd
    }

    /// Polls without blocking a cooperative thread: the handlers under test need them.
    static func waitUntil(_ condition: () -> Bool) async {
        for _ in 0..<500 where !condition() { try? await Task.sleep(for: .milliseconds(10)) }
    }
}

/// Reads what the server sent, without blocking a cooperative thread (the server under test
/// runs its handlers on the same small pool): non-blocking reads, sleeping between tries, until
/// a full line arrived or 5 s passed.
private func receive(_ fd: Int32) async -> String {
    var received: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    for _ in 0..<500 {
        let count = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
        if count > 0 { received += buffer.prefix(count) }
        if received.last == UInt8(ascii: "\n") || count == 0 { break }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return String(decoding: received, as: UTF8.self)
}

private func send(_ fd: Int32, _ text: String) {
    _ = text.withCString { Glibc.send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
}

@Suite("Server in-process")
struct ServerTests {
    @Test("a client that disconnects cancels its in-flight requests")
    func disconnectCancels() async throws {
        let server = try await InProcessServer()
        let fd = try server.connect()
        send(fd, #"{"jsonrpc":"2.0","id":1,"method":"test.wait"}"# + "\n" + #"{"jsonrpc":"2.0","id":2,"method":"test.wait"}"# + "\n")
        await InProcessServer.waitUntil { server.observations.started.load(ordering: .relaxed) == 2 }
        #expect(server.observations.started.load(ordering: .relaxed) == 2)
        #expect(server.observations.cancelled.load(ordering: .relaxed) == 0)
        close(fd)
        await InProcessServer.waitUntil { server.observations.cancelled.load(ordering: .relaxed) == 2 }
        #expect(server.observations.cancelled.load(ordering: .relaxed) == 2)
        await InProcessServer.waitUntil { server.services.connections.count == 0 }
        #expect(server.services.connections.count == 0)
        server.listener.stop()
    }

    @Test("more than 64 requests in flight on one connection pause reading from it, not other clients")
    func backPressure() async throws {
        let server = try await InProcessServer()
        let fd = try server.connect()
        defer { close(fd) }
        let requests = (1...100).map { #"{"jsonrpc":"2.0","id":\#($0),"method":"test.wait"}"# + "\n" }.joined()
        send(fd, requests)
        await InProcessServer.waitUntil { server.observations.started.load(ordering: .relaxed) >= 64 }
        try await Task.sleep(for: .milliseconds(200))
        #expect(server.observations.started.load(ordering: .relaxed) == Connection.maxInFlightPerConnection)
        // Another client is unaffected.
        let other = try server.connect()
        defer { close(other) }
        send(other, #"{"jsonrpc":"2.0","id":1,"method":"hello"}"# + "\n")
        #expect(await receive(other).contains("protocol_version"))
        server.listener.stop()
    }

    @Test("a stream whose request fails never starts, and its source is told to let go")
    func droppedStream() async throws {
        let server = try await InProcessServer()
        let fd = try server.connect()
        defer { close(fd) }
        send(fd, #"{"jsonrpc":"2.0","id":1,"method":"test.failing_stream"}"# + "\n")
        #expect(await receive(fd).contains("test.failed"))
        await InProcessServer.waitUntil { server.observations.dropped.load(ordering: .relaxed) == 1 }
        #expect(server.observations.dropped.load(ordering: .relaxed) == 1)
        server.listener.stop()
    }

    @Test("followers that leave, before or after their stream starts, are unregistered")
    func followersLeave() async throws {
        let server = try await InProcessServer()
        var started = 0
        for index in 0..<20 {
            let fd = try server.connect()
            send(fd, #"{"jsonrpc":"2.0","id":1,"method":"admin.audit.tail","params":{"follow":true,"limit":0}}"# + "\n")
            if index % 2 == 0 {
                // Wait for the response: the follower is registered and its stream running.
                if await receive(fd).contains(#""subscription":"s1""#) { started += 1 }
            }
            close(fd)  // odd ones leave at once, racing the handler
        }
        #expect(started == 10)
        let audit = server.services.audit
        for _ in 0..<500 {
            if await audit.followerCount == 0 && server.services.connections.count == 0 { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(await audit.followerCount == 0)
        server.listener.stop()
    }

    @Test("admin methods are refused and audited for non-admins; invalid params are not audited")
    func authorizationAndAudit() async throws {
        let server = try await InProcessServer()
        let dispatcher = Dispatcher(table: DispatchTable.make(server.services), services: server.services)
        let fd = try server.connect()
        defer { close(fd) }
        await InProcessServer.waitUntil { server.services.connections.count == 1 }
        let connection = try #require(server.services.connections.all.first)
        let stranger = CallerIdentity(uid: 4242, gid: 4242, pid: 1, exe: "/x", username: nil, groups: [])
        let context = RequestContext(caller: stranger, connection: connection, requestKey: 99)
        let denied = await dispatcher.respond(to: Request(id: 1, method: "admin.status", params: nil), context: context)
        #expect(!denied.succeeded)
        #expect(String(decoding: denied.line ?? Data(), as: UTF8.self).contains("auth.forbidden"))
        let invalid = await dispatcher.respond(to: Request(id: 2, method: "auth.local", params: [:]), context: context)
        #expect(!invalid.succeeded)
        let issued = await dispatcher.respond(to: Request(id: 3, method: "auth.local", params: ["aud": "x"]), context: context)
        #expect(issued.succeeded)
        let notification = await dispatcher.respond(to: Request(id: nil, method: "hello", params: nil), context: context)
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
        let database = try Database(path: directory.path + "/v7.db")
        try database.transaction {
            for migration in Migrations.all where migration.version <= 7 {
                for statement in migration.sql { try database.execute(statement) }
            }
            try database.execute("PRAGMA user_version = 7")
            try database.execute("INSERT INTO accounts (id, phone, phone_verified_at, created_at, pin_failures, device_limit) VALUES ('acc_1', '+37251234567', 1, 1, 2, 3)")
            try database.execute("INSERT INTO devices (id, account_id, device_key, name, first_seen, last_seen) VALUES ('dev_1', 'acc_1', 'k', 'n', 1, 1)")
            try database.execute("INSERT INTO sessions (id, account_id, device_id, token_hash, amr, created_at, last_used_at, expires_at) VALUES ('ses_1', 'acc_1', 'dev_1', x'01', '[]', 1, 1, 9)")
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
