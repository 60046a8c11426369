import Foundation
import Protocol
import Testing

/// Secret checks started at once, on many connections: the lockout must hold as it does for the
/// same attempts made one by one (at most five checked before the lock, a lock no longer than
/// five failures give).
@Suite("The lockout under concurrent attempts")
struct LockoutRaceTests {
    static let attempts = 40
    static let phone = "+37251234567"
    static let password = "a long enough passphrase"
    /// Sign-ins are rate-limited per user; these tests are about the lockout alone.
    static let config = "[accounts]\nlogins_per_minute = 10000\n"

    /// Sends `params` to `method` from `attempts` connections at once; returns the reasons.
    static func burst(_ daemon: DaemonHarness, _ method: String, _ params: JSONValue) throws -> [String] {
        let reasons = Tally()
        let socket = daemon.socketPath
        let errors = onThreads(attempts) { _ in
            let client = try LineClient(socketPath: socket)
            reasons.append(try client.call(method, params).errorReason ?? "none")
        }
        #expect(errors.isEmpty, "\(errors)")
        return reasons.all
    }

    /// Seconds from now until the account's lock (password or PIN) lifts, as an admin sees it.
    static func lockSeconds(_ client: LineClient) throws -> Double {
        let shown = try client.result("admin.accounts.show", ["account": .string(phone)])
        let until = try #require(shown["locked_until"]?.stringValue, "the account is locked")
        let date = try #require(ISO8601DateFormatter().date(from: until))
        return date.timeIntervalSinceNow
    }

    /// Five failures one by one lock for 60 s; a burst may lock no longer (a little slack for
    /// the time the burst itself takes).
    /// Those refused while the fifth check still ran are told `account.busy`, the rest `account.locked`.
    static func expectLockOfFiveFailures(_ client: LineClient, _ reasons: [String]) throws {
        #expect(reasons.allSatisfy { ["auth.failed", "account.locked", "account.busy"].contains($0) }, "\(reasons)")
        #expect(reasons.contains("account.locked"), "the check that locks says so: \(reasons)")
        #expect(reasons.filter { $0 == "auth.failed" }.count <= 4, "at most the threshold checked: \(reasons)")
        let seconds = try lockSeconds(client)
        #expect(seconds > 30 && seconds <= 75, "locked for \(seconds) s, as five failures one by one lock")
    }

    @Test("40 wrong passwords at once: at most five are checked, the lock is that of five, the right one is refused")
    func passwords() throws {
        let daemon = try DaemonHarness(config: Self.config)
        try daemon.start()
        let client = try daemon.connect()
        _ = try LoginTests.register(daemon, client, phone: Self.phone, password: Self.password)
        let reasons = try Self.burst(daemon, "auth.login", ["login": .string(Self.phone), "password": "wrong guess 123"])
        try Self.expectLockOfFiveFailures(client, reasons)
        #expect(try client.call("auth.login", ["login": .string(Self.phone), "password": .string(Self.password)]).errorReason == "account.locked")
    }

    @Test("40 wrong confirmations of account.profile.set at once count like five one by one")
    func profileConfirmations() throws {
        let daemon = try DaemonHarness(config: Self.config)
        try daemon.start()
        let client = try daemon.connect()
        let token = try #require(try LoginTests.register(daemon, client, phone: Self.phone, password: Self.password)["session"]?["token"])
        let reasons = try Self.burst(daemon, "account.profile.set",
                                     ["session": token, "password": "another long passphrase", "current_password": "guess guess"])
        try Self.expectLockOfFiveFailures(client, reasons)
        #expect(try client.call("auth.login", ["login": .string(Self.phone), "password": .string(Self.password)]).errorReason == "account.locked")
    }

    @Test("40 wrong PINs at once in the second step: at most five are checked, the right PIN is refused after")
    func pins() throws {
        let daemon = try DaemonHarness(config: Self.config)
        try daemon.start()
        let client = try daemon.connect()
        let token = try #require(try LoginTests.register(daemon, client, phone: Self.phone, password: Self.password)["session"]?["token"])
        #expect(try client.result("twofactor.pin.enable", ["session": token, "pin": "480913", "confirm": "480913"])["enabled"] == true)
        let flow = try #require(try client.result("auth.login", ["login": .string(Self.phone), "password": .string(Self.password),
                                                                 "device": ["key": "device-1"]])["flow"])
        let reasons = try Self.burst(daemon, "auth.login.pin", ["flow": flow, "pin": "111112"])
        try Self.expectLockOfFiveFailures(client, reasons)
        #expect(try client.call("auth.login.pin", ["flow": flow, "pin": "480913"]).errorReason == "account.locked")
    }

    @Test("10 right passwords at once: none is told locked; those the checks in flight hold back are told busy, and sign in on retry")
    func rightPasswordsAtOnce() throws {
        let daemon = try DaemonHarness(config: Self.config)
        try daemon.start()
        let client = try daemon.connect()
        _ = try LoginTests.register(daemon, client, phone: Self.phone, password: Self.password)
        let firstAnswers = Tally(), signedIn = Tally(), waits = Tally()
        let socket = daemon.socketPath
        let errors = onThreads(10) { _ in
            let client = try LineClient(socketPath: socket)
            let params: JSONValue = ["login": .string(Self.phone), "password": .string(Self.password), "device": ["key": "device-1"]]
            var response = try client.call("auth.login", params)
            firstAnswers.append(response.errorReason ?? "signed in")
            // A busy refusal says when to retry; a bounded number of retries all sign in.
            for _ in 0..<20 where response.errorReason == "account.busy" {
                let wait = response["error"]?["data"]?["retry_after"]?.integerValue ?? 0
                waits.append(String(wait))
                Thread.sleep(forTimeInterval: Double(min(max(wait, 1), 5)))
                response = try client.call("auth.login", params)
            }
            if response["result"]?["session"] != nil { signedIn.append("ok") } else { signedIn.append(response.errorReason ?? "?") }
        }
        #expect(errors.isEmpty, "\(errors)")
        let first = firstAnswers.all
        #expect(!first.contains("account.locked"), "a right password is never told locked: \(first)")
        #expect(first.allSatisfy { $0 == "signed in" || $0 == "account.busy" }, "\(first)")
        #expect(signedIn.all == Array(repeating: "ok", count: 10), "\(signedIn.all)")
        #expect(waits.all.allSatisfy { $0 == "1" }, "a busy refusal says to retry in 1 s: \(waits.all)")
        // Nothing is left counted or locked: a wrong password now is the first failure.
        #expect(try client.call("auth.login", ["login": .string(Self.phone), "password": "wrong guess 123"]).errorReason == "auth.failed")
        #expect(try client.result("admin.accounts.show", ["account": .string(Self.phone)])["locked_until"]?.stringValue == nil)
    }

    @Test("attempts refused during a lock do not lengthen it")
    func refusedAttemptsDoNotCount() throws {
        let daemon = try DaemonHarness(config: Self.config)
        try daemon.start()
        let client = try daemon.connect()
        _ = try LoginTests.register(daemon, client, phone: Self.phone, password: Self.password)
        for _ in 0..<5 { _ = try client.call("auth.login", ["login": .string(Self.phone), "password": "wrong guess 123"]) }
        let before = try Self.lockSeconds(client)
        for _ in 0..<5 {
            #expect(try client.call("auth.login", ["login": .string(Self.phone), "password": "wrong guess 123"]).errorReason == "account.locked")
        }
        #expect(try Self.lockSeconds(client) <= before)
    }
}
