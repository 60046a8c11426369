import Foundation
import Protocol
import Testing

/// Prompts that nobody answers, and many at once: a request never waits forever, and a
/// connection full of questions still reads their answers and serves its other requests.
@Suite("Prompts")
struct PromptTests {
    static let password = "a long enough passphrase"

    /// A daemon with a locked user, so that `unlock` without a password asks for one.
    private static func lockedDaemon(config: String) throws -> (DaemonHarness, LineClient) {
        let daemon = try DaemonHarness(config: config)
        try daemon.start()
        let client = try daemon.connect()
        _ = try LoginTests.register(daemon, client, phone: "+37251234567", password: password)
        #expect(try client.result("lock")["locked"] == true)
        return (daemon, client)
    }

    /// Reads lines until `count` have arrived: the prompts' ids and the responses by id.
    private static func read(_ client: LineClient, lines count: Int) throws -> (prompts: [String], responses: [JSONValue: JSONValue]) {
        var prompts: [String] = []
        var responses: [JSONValue: JSONValue] = [:]
        for _ in 0..<count {
            let line = try #require(try client.readJSON(), "the daemon answers every line")
            if line["method"] == "prompt" {
                prompts.append(try #require(line["params"]?["prompt_id"]?.stringValue))
            } else {
                responses[line["id"] ?? .null] = line
            }
        }
        return (prompts, responses)
    }

    @Test("a prompt nobody answers fails with prompt.timeout after [server] prompt_timeout")
    func unansweredPrompt() throws {
        let (daemon, client) = try Self.lockedDaemon(config: "[server]\nprompt_timeout = 1s\n")
        defer { withExtendedLifetime(daemon) {} }
        try client.send(#"{"jsonrpc":"2.0","id":7,"method":"unlock"}"# + "\n")
        let started = Date()
        let (prompts, responses) = try Self.read(client, lines: 2)
        #expect(prompts.count == 1)
        #expect(responses[7]?.errorReason == "prompt.timeout")
        #expect(responses[7]?["error"]?["data"]?["timeout_s"] == 1)
        #expect(Date().timeIntervalSince(started) < 10)
        #expect(try client.result("lock.status")["locked"] == true, "a timed-out unlock opens nothing")
        let late = try client.call("prompt.answer", ["prompt_id": .string(prompts[0]), "value": .string(Self.password)])
        #expect(late.errorReason == "prompt.unknown", "an answer after the deadline finds no prompt")
    }

    @Test("requests waiting on prompts hold no in-flight slot: 70 questions at once, 16 asked, the rest refused, and the connection keeps serving")
    func manyPrompts() throws {
        let (daemon, client) = try Self.lockedDaemon(config: "[server]\nprompt_timeout = 60s\n")
        defer { withExtendedLifetime(daemon) {} }
        let burst = (1...70).map { #"{"jsonrpc":"2.0","id":\#($0),"method":"unlock"}"# + "\n" }.joined()
        try client.send(burst)
        let (prompts, responses) = try Self.read(client, lines: 70)
        #expect(prompts.count == 16, "at most 16 questions wait on one connection")
        #expect(responses.count == 54)
        #expect(responses.values.allSatisfy { $0.errorReason == "server.busy" })
        // Every slot is taken by a question, yet the connection reads and answers.
        #expect(try client.result("hello")["protocol_version"] == 1)
        try client.send(#"{"jsonrpc":"2.0","id":100,"method":"prompt.answer","params":{"prompt_id":"\#(prompts[0])","value":"\#(Self.password)"}}"# + "\n")
        for prompt in prompts.dropFirst() {
            try client.send(#"{"jsonrpc":"2.0","id":"c-\#(prompt)","method":"prompt.cancel","params":{"prompt_id":"\#(prompt)"}}"# + "\n")
        }
        // One unlock succeeds, 15 are cancelled, and each answer and cancel is acknowledged.
        let (_, finished) = try Self.read(client, lines: 1 + 16 + 15)
        let unlocks = finished.filter { $0.key.integerValue != nil && $0.key != 100 }.map(\.value)
        #expect(unlocks.filter { $0["result"]?["locked"] == false }.count == 1)
        #expect(unlocks.filter { $0.errorReason == "user.cancelled" }.count == 15)
        #expect(finished[100]?["result"] != nil)
        #expect(try client.result("lock.status")["locked"] == false)
    }
}
