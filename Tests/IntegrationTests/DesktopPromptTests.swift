import Foundation
import Glibc
import Protocol
import Synchronization
import Testing

/// `prompt: desktop` (DESIGN §12) at the protocol level: authd asks the person through the
/// desktop agent registered for the caller's user, never on the asking connection, and asks for
/// consent before it hands a program a token. The agent here is a plain client speaking the agent
/// protocol, so that each answer is the test's to choose; PinentryPromptTests drives the real
/// agent with pinentry.
@Suite("Desktop prompts: the agent protocol", .serialized)
struct DesktopPromptTests {
    static let password = "a long enough passphrase"

    /// This test process's executable: the program authd names in its dialogs.
    static var ownExecutable: String { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? "?" }

    /// A registered agent connection: the desktop.ask notifications it receives, answered by the test.
    final class FakeAgent {
        let client: LineClient
        /// What names it in `desktop.forward`.
        let token: String

        init(_ daemon: DaemonHarness) throws {
            client = try LineClient(socketPath: daemon.socketPath)
            let registered = try client.call("desktop.register")
            guard registered["result"]?["subscription"]?.stringValue != nil, let token = registered["result"]?["agent_token"]?.stringValue else {
                throw HarnessError("desktop.register failed: \(registered)")
            }
            self.token = token
        }

        /// The next question authd asks (bounded by the client's receive timeout).
        func nextAsk() throws -> JSONValue { try next("desktop.ask") }

        /// Notifications that arrived while a call of the agent's waited for its answer (authd
        /// may ask its next question before it answers the agent's reply), oldest first.
        private var early: [(method: String, params: JSONValue?)] = []

        /// The params of the next `method` notification.
        func next(_ method: String) throws -> JSONValue {
            while !early.isEmpty {
                let notification = early.removeFirst()
                if notification.method == method, let params = notification.params { return params }
            }
            while let message = try client.readJSON() {
                if message["method"] == .string(method), let params = message["params"] { return params }
            }
            throw HarnessError("the agent's connection closed before a \(method)")
        }

        /// A call of the agent's; the notifications before its answer are kept for `next`.
        @discardableResult
        func call(_ method: String, _ params: JSONValue) throws -> JSONValue {
            try client.call(method, params) { [self] method, params in early.append((method, params)) }
        }

        func reply(_ ask: JSONValue, _ answer: String, value: String? = nil) throws -> JSONValue {
            var params: [String: JSONValue] = ["ask_id": ask["ask_id"]!, "answer": .string(answer)]
            if let value { params["value"] = .string(value) }
            return try call("desktop.reply", .object(params))
        }
    }

    /// Two blocking bodies handed to two threads; each runs on one only.
    private struct Bodies<T>: @unchecked Sendable {
        let asking: () throws -> T
        let agent: () throws -> Void
    }

    /// Runs `asking` (a blocking client call) on one thread and `agent` on another; both must finish.
    static func alongside<T: Sendable>(_ asking: @escaping () throws -> T, agent: @escaping () throws -> Void) throws -> T {
        let outcome = Mutex<T?>(nil)
        let bodies = Bodies(asking: asking, agent: agent)
        let errors = onThreads(2) { index in
            if index == 0 { let value = try bodies.asking(); outcome.withLock { $0 = value } } else { try bodies.agent() }
        }
        if let error = errors.first { throw error }
        return try #require(outcome.withLock { $0 })
    }

    /// A system authd with a session signed in, an agent, and a connection that asks for an
    /// account token on the desktop (the params it asks with).
    private func tokenOnDesktop() throws -> (daemon: DaemonHarness, agent: FakeAgent, asker: LineClient, params: JSONValue) {
        let daemon = try DaemonHarness()
        try daemon.start(arguments: ["--system"])
        let session = try signedIn(daemon)
        return (daemon, try FakeAgent(daemon), try daemon.connect(), ["session": .string(session), "aud": "https://rp.example", "prompt": "desktop"])
    }

    private func signedIn(_ daemon: DaemonHarness) throws -> String {
        let client = try daemon.connect()
        let registered = try LoginTests.register(daemon, client, phone: "+37251234567", password: Self.password)
        return try #require(registered["session"]?["token"]?.stringValue)
    }

    @Test("no agent registered: prompt: desktop fails at once with prompt.no_desktop, saying how to start one; client prompts still work")
    func noDesktop() throws {
        let daemon = try DaemonHarness()
        try daemon.start(arguments: ["--system"])
        let client = try daemon.connect()
        let started = Date()
        let refused = try client.call("card.login", ["aud": "https://rp.example", "prompt": "desktop"])
        #expect(Date().timeIntervalSince(started) < 1, "prompt.no_desktop must not wait")
        #expect(refused["error"]?["data"]?["reason"] == "prompt.no_desktop", "\(refused)")
        #expect(refused["error"]?["message"]?.stringValue?.contains("authd --desktop") == true)
        let badRoute = try client.call("card.login", ["aud": "https://rp.example", "prompt": "screen"])
        #expect(badRoute["error"]?["data"]?["reason"] == "rpc.invalid_params")

        // A user-mode authd runs pinentry itself: none to run is the same answer.
        let user = try DaemonHarness(config: "[prompts]\npinentry = /nonexistent/pinentry\n")
        try user.start()
        let answer = try user.connect().call("card.read", ["prompt": "desktop"])
        #expect(answer["error"]?["data"]?["reason"] == "prompt.no_desktop", "\(answer)")
        #expect(answer["error"]?["message"]?.stringValue?.contains("[prompts] pinentry") == true)
    }

    @Test("consent: asked on the agent naming the program and audience, answered only on the agent's connection; always-allow is remembered, listed, revoked; deny is consent.denied")
    func consent() throws {
        let (daemon, agent, asker, params) = try tokenOnDesktop()

        let asked = Mutex<JSONValue?>(nil)
        let first = try Self.alongside({ try asker.call("auth.token", params) }) {
            let ask = try agent.nextAsk()
            asked.withLock { $0 = ask }
            // Another connection of the same user cannot answer it, even knowing the id.
            let stranger = try daemon.connect().call("desktop.reply", ["ask_id": ask["ask_id"]!, "answer": "ok"])
            #expect(stranger["error"]?["data"]?["reason"] == "prompt.unknown", "\(stranger)")
            #expect(try agent.reply(ask, "ok")["result"] != nil)
        }
        #expect(first["result"]?["token"]?.stringValue != nil, "\(first)")
        let dialog = try #require(asked.withLock { $0 }?["dialog"])
        #expect(dialog["question"] == "confirm")
        let description = dialog["description"]?.stringValue ?? ""
        #expect(description.contains("https://rp.example") && description.contains(Self.ownExecutable), "\(description)")
        #expect(dialog["ok"] == "_Always allow" && dialog["not_ok"] == "Allow _once" && dialog["cancel"] == "_Deny")

        // Remembered: the same program and audience get their token without a question (the
        // agent answers nothing now, so a question would fail this call).
        #expect(try asker.call("auth.token", params)["result"]?["token"]?.stringValue != nil)
        let listed = try asker.result("consents.list")["consents"]?.arrayValue ?? []
        #expect(listed.count == 1, "\(listed)")
        #expect(listed.first?["program"]?.stringValue == "exe:" + Self.ownExecutable && listed.first?["audience"] == "https://rp.example")

        // Revoked: asked again, and "Deny" refuses it.
        #expect(try asker.result("consents.revoke", ["program": .string("exe:" + Self.ownExecutable)])["revoked"] == 1)
        #expect(try asker.call("consents.revoke", ["program": .string("exe:" + Self.ownExecutable)])["error"]?["data"]?["reason"] == "consent.unknown")
        let denied = try Self.alongside({ try asker.call("auth.token", params) }) {
            _ = try agent.reply(try agent.nextAsk(), "cancelled")
        }
        #expect(denied["error"]?["data"]?["reason"] == "consent.denied", "\(denied)")
        #expect(try asker.result("consents.list")["consents"]?.arrayValue?.isEmpty == true)

        // "Allow once" hands out this token and remembers nothing.
        let once = try Self.alongside({ try asker.call("auth.token", params) }) {
            _ = try agent.reply(try agent.nextAsk(), "not_ok")
        }
        #expect(once["result"]?["token"]?.stringValue != nil, "\(once)")
        #expect(try asker.result("consents.list")["consents"]?.arrayValue?.isEmpty == true)
    }

    @Test("a consent is for one purpose: \"Always allow\" for a signature does not answer an account token's question for the same program and audience; each is listed and revoked by its purpose")
    func consentPerPurpose() throws {
        let (daemon, agent, asker, tokenParams) = try tokenOnDesktop()
        let program = "exe:" + Self.ownExecutable

        // "Always allow" for a signature; its PIN2 question is then cancelled, and the consent stays.
        let signature: JSONValue = ["aud": "https://rp.example", "data": "AAAA", "description": "contract.pdf", "prompt": "desktop"]
        let signed = try Self.alongside({ try asker.call("card.sign", signature) }) {
            let consent = try agent.nextAsk()
            #expect(consent["dialog"]?["description"]?.stringValue?.contains("ask for your signature for https://rp.example") == true, "\(consent)")
            _ = try agent.reply(consent, "ok")
            _ = try agent.reply(try agent.nextAsk(), "cancelled")
        }
        #expect(signed["error"]?["data"]?["reason"] == "prompt.cancelled", "\(signed)")

        // An account token for the same program and audience is another purpose: asked for, in
        // its own words, and "Deny" refuses it.
        let denied = try Self.alongside({ try asker.call("auth.token", tokenParams) }) {
            guard let ask = try? agent.nextAsk() else {
                Issue.record("no question for the account token: the signature's consent answered it")
                return
            }
            #expect(ask["dialog"]?["description"]?.stringValue?.contains("sign you in to https://rp.example with your account") == true, "\(ask)")
            _ = try agent.reply(ask, "cancelled")
        }
        #expect(denied["error"]?["data"]?["reason"] == "consent.denied", "\(denied)")

        // "Always allow" for it too: then it is remembered beside the signature's, each by its purpose.
        let allowed = try Self.alongside({ try asker.call("auth.token", tokenParams) }) {
            _ = try agent.reply(try agent.nextAsk(), "ok")
        }
        #expect(allowed["result"]?["token"]?.stringValue != nil, "\(allowed)")
        #expect(try asker.call("auth.token", tokenParams)["result"]?["token"]?.stringValue != nil, "remembered: no question")
        let listed = try asker.result("consents.list")["consents"]?.arrayValue ?? []
        #expect(Set(listed.compactMap { $0["purpose"]?.stringValue }) == ["card_sign", "account_token"], "\(listed)")
        #expect(listed.allSatisfy { $0["program"] == .string(program) && $0["audience"] == "https://rp.example" }, "\(listed)")
        let text = try daemon.authctl(["consents", "list"])
        #expect(text.stdout.contains("\(program)\tcard_sign\thttps://rp.example\t"), "\(text.stdout)")

        // Revoking one purpose leaves the other.
        let revoked = try daemon.authctl(["consents", "revoke", program, "--purpose", "account_token"])
        #expect(revoked.status == 0 && revoked.stdout == "forgot 1 consent\n", "\(revoked.stdout) \(revoked.stderr)")
        let left = try asker.result("consents.list")["consents"]?.arrayValue ?? []
        #expect(left.map { $0["purpose"] } == ["card_sign"], "\(left)")
        #expect(try asker.call("consents.revoke", ["program": .string(program), "purpose": "account_token"])["error"]?["data"]?["reason"] == "consent.unknown")
        #expect(try asker.call("consents.revoke", ["program": .string(program), "purpose": "everything"])["error"]?["data"]?["reason"] == "rpc.invalid_params")
        #expect(try daemon.authctl(["consents", "revoke", program, "--purpose", "everything"]).status == 2, "a usage error")
    }

    @Test("card login on the desktop: the PIN goes from the agent to the card, the asking connection sees only that the desktop asks, and cannot answer it")
    func cardLoginThroughAgent() throws {
        let rig = try CardRig()
        try rig.insertCard()
        let daemon = try DaemonHarness(config: "[prompts]\nconsent = never\n")
        try daemon.start(arguments: ["--system"], environment: rig.environment)
        let agent = try FakeAgent(daemon)
        let asker = try daemon.connect()

        let seen = Mutex<[[UInt8]]>([])
        let onDesktopAnswer = Mutex<JSONValue?>(nil)
        // The agent answers only once the asking program's own answer was refused, while the
        // desktop's question still stands.
        let refused = DispatchSemaphore(value: 0)
        let response = try Self.alongside({ () throws -> JSONValue in
            try asker.send(#"{"jsonrpc":"2.0","id":1,"method":"card.login","params":{"aud":"https://rp.example","prompt":"desktop"}}"# + "\n")
            while let line = try asker.readLine() {
                seen.withLock { $0.append(line) }
                let message = try WireCodec.decode(JSONValue.self, from: Data(line))
                if message["id"] == 1 { return message }
                if message["id"] == 2 {
                    onDesktopAnswer.withLock { $0 = message }
                    refused.signal()
                }
                if message["method"] == "prompt", message["params"]?["kind"] == "pin1", let id = message["params"]?["prompt_id"] {
                    #expect(message["params"]?["expects_answer"] == false)
                    // The asking program may not answer the desktop's question.
                    let answer = try WireCodec.requestLine(id: .integer(2), method: "prompt.answer", params: ["prompt_id": id, "value": "0000"] as JSONValue)
                    try asker.send(answer)
                }
            }
            throw HarnessError("the asking connection closed")
        }) {
            let ask = try agent.nextAsk()
            #expect(ask["dialog"]?["question"] == "secret" && ask["dialog"]?["prompt"] == "PIN1:")
            #expect(ask["dialog"]?["description"]?.stringValue?.contains("sign you in to https://rp.example") == true)
            #expect(refused.wait(timeout: .now() + 15) == .success, "the asking connection's prompt.answer was never answered")
            _ = try agent.reply(ask, "secret", value: "1234")
        }
        #expect(response["result"]?["token"]?.stringValue != nil, "\(response)")
        #expect(onDesktopAnswer.withLock { $0 }?["error"]?["data"]?["reason"] == "prompt.on_desktop")
        let bytes = seen.withLock { $0 }.map { String(decoding: $0, as: UTF8.self) }.joined(separator: "\n")
        #expect(!bytes.contains("1234"), "the PIN crossed the asking connection")
    }

    @Test("a system authd that may not read the asker's /proc has the user's agent say who asks; desktop.forward needs the agent's token")
    func agentIdentifiesForASystemAuthd() throws {
        // authd as another user (as the shipped unit runs it), so the kernel keeps this
        // process's /proc/PID/exe and root from it. It needs no account, card or phone library
        // here: who asks, and the consent, come before the handler (which then finds no pcscd).
        let daemon = try DaemonHarness()
        _ = try DaemonHarness.run(["/usr/bin/chown", "-R", "daemon:daemon", daemon.directory])
        try daemon.start(arguments: ["--reuid=daemon", "--regid=daemon", "--clear-groups", DaemonHarness.authdPath, "--system"],
                         environment: ["PCSCLITE_CSOCK_NAME": daemon.directory + "/no-pcscd.comm"], executable: "/usr/bin/setpriv")
        let agent = try FakeAgent(daemon)
        let asker = try daemon.connect()
        let params: JSONValue = ["aud": "https://rp.example", "prompt": "desktop", "timeout_s": 1]
        let vouched: JSONValue = ["kind": "flatpak", "name": "org.example.Vouched", "executable": "/app/bin/vouched"]

        let asked = Mutex<JSONValue?>(nil)
        let login = try Self.alongside({ try asker.call("card.login", params) }) {
            let identify = try agent.next("desktop.identify")
            #expect(identify["pid"]?.integerValue == Int64(getpid()), "\(identify)")
            #expect(try agent.call("desktop.identified", ["ask_id": identify["ask_id"]!, "program": vouched])["result"] != nil)
            let ask = try agent.nextAsk()
            asked.withLock { $0 = ask }
            _ = try agent.reply(ask, "ok")
            _ = try agent.reply(try agent.nextAsk(), "secret", value: "1234")
        }
        #expect(login["error"]?["data"]?["reason"] == "card.service_unavailable", "past the desktop, the card: \(login)")
        #expect(asked.withLock { $0 }?["dialog"]?["description"]?.stringValue?.contains("org.example.Vouched") == true)
        let listed = try asker.result("consents.list")["consents"]?.arrayValue ?? []
        #expect(listed.first?["program"] == "flatpak:org.example.Vouched", "\(listed)")

        // Not the agent's token: refused before anything runs.
        let forged = try asker.call("desktop.forward", ["agent_token": .string(String(repeating: "0", count: 64)), "pid": .integer(Int64(getpid())),
                                                        "method": "card.login", "params": params])
        #expect(forged["error"]?["data"]?["reason"] == "auth.forbidden", "\(forged)")
        // The agent's token, on a connection of its own as the agent passes a bus call on: run
        // as the program the agent names, whose consent is remembered (no question), up to the card.
        let forwarder = try daemon.connect()
        let forwarded = try Self.alongside({
            try forwarder.call("desktop.forward", ["agent_token": .string(agent.token), "pid": .integer(Int64(getpid())), "method": "card.login", "params": params])
        }) {
            let identify = try agent.next("desktop.identify")
            _ = try agent.call("desktop.identified", ["ask_id": identify["ask_id"]!, "program": vouched])
            let pin = try agent.nextAsk()
            #expect(pin["dialog"]?["prompt"] == "PIN1:", "no consent question: it is remembered")
            _ = try agent.reply(pin, "secret", value: "1234")
        }
        #expect(forwarded["error"]?["data"]?["reason"] == "card.service_unavailable", "\(forwarded)")
    }

    @Test("a lock that comes while the consent dialog waits holds for that call: the person's allow gets no token")
    func lockDuringConsent() throws {
        let (daemon, agent, asker, params) = try tokenOnDesktop()
        let answer = try Self.alongside({ try asker.call("auth.token", params) }) {
            let ask = try agent.nextAsk()
            #expect(try daemon.connect().result("lock")["locked"] == true)
            _ = try agent.reply(ask, "not_ok")
        }
        #expect(answer["error"]?["data"]?["reason"] == "session.locked", "\(answer)")
        // Unlocked, the same call is asked again and served.
        #expect(try asker.result("unlock", ["password": .string(Self.password)])["locked"] == false)
        let served = try Self.alongside({ try asker.call("auth.token", params) }) {
            _ = try agent.reply(try agent.nextAsk(), "not_ok")
        }
        #expect(served["result"]?["token"]?.stringValue != nil, "\(served)")
    }

    @Test("consent = always offers no \"Allow once\": a NOT_CONFIRMED from the dialog is a refusal")
    func notConfirmedIsNoConsent() throws {
        let daemon = try DaemonHarness(config: "[prompts]\nconsent = always\n")
        try daemon.start(arguments: ["--system"])
        let session = try signedIn(daemon)
        let agent = try FakeAgent(daemon)
        let asker = try daemon.connect()
        let refused = try Self.alongside({ try asker.call("auth.token", ["session": .string(session), "aud": "https://rp.example", "prompt": "desktop"]) }) {
            let ask = try agent.nextAsk()
            #expect(ask["dialog"]?["not_ok"] == nil)
            _ = try agent.reply(ask, "not_ok")
        }
        #expect(refused["error"]?["data"]?["reason"] == "consent.denied", "\(refused)")
    }
}
