import Foundation
import Protocol
import Testing

/// Memory that must come back: what a burst of Argon2id sign-ins takes is returned afterwards.
@Suite("Memory")
struct MemoryTests {
    static let password = "a long enough passphrase"

    /// Sign-ins from four connections at once, so every Argon2id worker hashes.
    private static func signIns(_ daemon: DaemonHarness, count: Int) throws {
        let socket = daemon.socketPath
        let errors = onThreads(4) { _ in
            let client = try LineClient(socketPath: socket, receiveTimeoutSeconds: 60)
            for _ in 0..<(count / 4) {
                let response = try client.call("auth.login", ["login": "+37251234567", "password": .string(password), "device": ["key": "device-1"]])
                guard response["result"]?["session"] != nil else { throw HarnessError("sign-in failed: \(response)") }
            }
        }
        #expect(errors.isEmpty, "\(errors)")
    }

    private static func rss(_ client: LineClient) throws -> Int64 {
        try #require(try client.result("admin.status")["rss_bytes"]?.integerValue)
    }

    @Test("Argon2id's 19 MiB per hash is returned after sign-ins, and more sign-ins do not grow the daemon")
    func argon2MemoryReturned() throws {
        let daemon = try DaemonHarness(config: "[accounts]\nlogins_per_minute = 10000\n")
        try daemon.start()
        let client = try daemon.connect()
        _ = try LoginTests.register(daemon, client, phone: "+37251234567", password: Self.password)
        try Self.signIns(daemon, count: 8)  // warm: sessions table, statement caches, threads
        let idle = try Self.rss(client)
        try Self.signIns(daemon, count: 40)
        let afterFirst = try Self.rss(client)
        try Self.signIns(daemon, count: 40)
        let afterSecond = try Self.rss(client)
        print("rss idle \(idle >> 10) KiB, after 40 sign-ins \(afterFirst >> 10) KiB, after 80 \(afterSecond >> 10) KiB")
        // Each hash maps 19 MiB; what is left over must be less than one such block.
        #expect(afterFirst - idle < 8 << 20, "RSS grew by \((afterFirst - idle) >> 10) KiB over 40 sign-ins")
        #expect(afterSecond - afterFirst < 4 << 20, "RSS grew by \((afterSecond - afterFirst) >> 10) KiB over 40 more")
    }
}
