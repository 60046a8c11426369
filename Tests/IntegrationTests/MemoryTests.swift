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

    private static func hashingBytes(_ client: LineClient) throws -> Int64 {
        try #require(try client.result("admin.status")["password_hashing_bytes"]?.integerValue)
    }

    @Test("Argon2id's 19 MiB per hash goes back to the system within seconds after a burst of sign-ins, as admin.status says")
    func argon2MemoryReturned() throws {
        let daemon = try DaemonHarness(config: "[accounts]\nlogins_per_minute = 10000\n")
        try daemon.start()
        let client = try daemon.connect()
        _ = try LoginTests.register(daemon, client, phone: "+37251234567", password: Self.password)
        try Self.signIns(daemon, count: 8)  // warm: sessions table, statement caches, threads
        // Idle: once the warm-up's blocks have been idle long enough to go back (2 s).
        let idle = try Self.settled({ try Self.rss(client) }, below: Int64.max, within: .seconds(4))
        try Self.signIns(daemon, count: 40)
        let afterBurst = try Self.rss(client)
        let hashingAfterBurst = try Self.hashingBytes(client)
        let settled = try Self.settled({ try Self.rss(client) }, below: idle + (5 << 20), within: .seconds(15))
        print("rss idle \(idle >> 10) KiB, right after 40 sign-ins \(afterBurst >> 10) KiB, settled \(settled >> 10) KiB")
        // The burst held at least one 19 MiB block (so the test measures what it claims)...
        #expect(afterBurst - idle > 15 << 20, "RSS grew by only \((afterBurst - idle) >> 10) KiB during the burst")
        // ...and gave it back.
        #expect(settled - idle <= 5 << 20, "RSS stayed \((settled - idle) >> 10) KiB above idle")
        // admin.status names that memory: whole 19 MiB blocks, one to a worker at most, while
        // they are kept, and none once they are given back.
        let block = Int64(19 << 20)
        #expect(hashingAfterBurst > 0 && hashingAfterBurst % block == 0 && hashingAfterBurst <= 4 * block, "password_hashing_bytes \(hashingAfterBurst)")
        let hashing = try Self.settled({ try Self.hashingBytes(client) }, below: 0, within: .seconds(15))
        #expect(hashing == 0, "password_hashing_bytes stayed \(hashing)")
    }

    /// What `read` reads once it is at most `limit`, or after `within` (then as it is); with no
    /// limit, after `within`.
    private static func settled(_ read: () throws -> Int64, below limit: Int64, within: Duration) throws -> Int64 {
        let deadline = ContinuousClock.now + within
        var reading = try read()
        while (limit == Int64.max || reading > limit) && ContinuousClock.now < deadline {
            usleep(100_000)
            reading = try read()
        }
        return reading
    }
}
