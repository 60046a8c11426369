import Foundation
import Glibc
import Protocol
import Testing

/// The ID card against a real pcscd with vsmartcard's vpcd driver and the virtual card.
@Suite("ID card", .serialized)
struct CardTests {
    static let verifier = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Python/verify_card_jwt.py").path

    private func daemon(_ rig: CardRig, config: String? = nil) throws -> DaemonHarness {
        let daemon = try DaemonHarness(config: config)
        try daemon.start(environment: rig.environment)
        return daemon
    }

    private func verifiedClaims(_ token: String, rig: CardRig, aud: String) throws -> JSONValue {
        let verified = try DaemonHarness.run(["/usr/bin/python3", Self.verifier, token, rig.caPath, aud])
        guard verified.status == 0 else { throw HarnessError("independent verification failed: \(verified.stderr)") }
        return try WireCodec.decode(JSONValue.self, from: Data(verified.stdout.utf8))
    }

    @Test("contact login: PIN1 prompt, card prompt, ES384 token verified independently against the test CA")
    func contactLogin() throws {
        let rig = try CardRig()
        try rig.insertCard()
        let daemon = try daemon(rig)
        let client = try daemon.connect()
        let (response, prompts) = try client.callAnswering("card.login", ["aud": "https://rp.example", "nonce": "n-1"], answers: ["pin1": "1234"])
        let token = try #require(response["result"]?["token"]?.stringValue, "\(response)")
        let claims = try verifiedClaims(token, rig: rig, aud: "https://rp.example")
        #expect(claims["sub"] == "38001085718")
        #expect(claims["serial_number"] == "PNOEE-38001085718")
        #expect(claims["family_name"] == "JÕEORG")
        #expect(claims["given_name"] == "JAAK-KRISTJAN")
        #expect(claims["nonce"] == "n-1")
        #expect(claims["azp"]?.stringValue?.isEmpty == false)
        #expect(prompts.first?["kind"] == "pin1")
        // The card is in the reader already: a countdown only if authd looked before it attached.
        #expect(prompts.filter { $0["kind"] == "card" }.allSatisfy { $0["seconds_left"]?.integerValue != nil })
        #expect(!prompts.contains { $0["kind"] == "can" }, "contact readers skip PACE")
        // A tampered token fails the same independent check.
        var parts = token.split(separator: ".").map(String.init)
        parts[1] = base64URL(#"{"aud":"https://rp.example","exp":4102444800,"iat":1,"jti":"x","sub":"someone else"}"#)
        #expect(try DaemonHarness.run(["/usr/bin/python3", Self.verifier, parts.joined(separator: "."), rig.caPath, "https://rp.example"]).status != 0)
        // The login is in the audit log with its caller and outcome.
        let audit = try client.result("admin.audit.tail", ["limit": 20])
        #expect(String(decoding: try WireCodec.encodeJSON(audit), as: UTF8.self).contains("card.login"))
    }

    @Test("a lock that comes while a card login waits for PIN1 holds for it: the token the card signed is not handed out")
    func lockDuringTheCardWait() throws {
        let rig = try CardRig()
        try rig.insertCard()
        let daemon = try daemon(rig)
        let client = try daemon.connect()
        // A sign-in this local user remembers: the lock has something to open it with.
        _ = try LoginTests.register(daemon, client, phone: "+37251234567", password: "a long enough passphrase")
        let locker = try daemon.connect()
        let outcome = try client.rpc.request(method: "card.login", params: ["aud": "https://rp.example"] as JSONValue) { name, prompt in
            guard name == "prompt", let prompt, prompt["expects_answer"] == .bool(true), let promptID = prompt["prompt_id"] else { return }
            #expect(try locker.result("lock")["locked"] == true)
            try client.replyToPrompt(promptID, answer: "1234")
        }
        let response = JSONValue(response: outcome)
        #expect(response["error"]?["data"]?["reason"] == "session.locked", "\(response)")
        #expect(response["result"] == nil, "no token in the answer")
    }

    @Test("contactless login runs PACE with the typed CAN; a saved CAN is used without asking")
    func contactlessLogin() throws {
        let rig = try CardRig(profile: ["--mode", "contactless", "--can", "654321"])
        try rig.insertCard()
        let daemon = try daemon(rig)
        let client = try daemon.connect()
        let first = try client.callAnswering("card.login", ["aud": "app.example"], answers: ["pin1": "1234", "can": "654321"])
        #expect(first.response["result"]?["token"]?.stringValue != nil, "\(first.response)")
        #expect(first.prompts.contains { $0["kind"] == "can" })

        _ = try client.result("card.can.set", ["can": "654321"])
        #expect(try client.result("card.can.get")["can"] == "654321")
        let second = try client.callAnswering("card.login", ["aud": "app.example"], answers: ["pin1": "1234"])
        let token = try #require(second.response["result"]?["token"]?.stringValue, "\(second.response)")
        _ = try verifiedClaims(token, rig: rig, aud: "app.example")
        #expect(!second.prompts.contains { $0["kind"] == "can" })
    }

    @Test("a wrong saved CAN fails PACE with card.can_mismatch and is deleted; a typed wrong CAN too")
    func canMismatch() throws {
        let rig = try CardRig(profile: ["--mode", "contactless", "--can", "654321"])
        try rig.insertCard()
        let daemon = try daemon(rig)
        let client = try daemon.connect()
        _ = try client.result("card.can.set", ["can": "111111"])
        let saved = try client.callAnswering("card.login", ["aud": "app.example"], answers: ["pin1": "1234"])
        #expect(saved.response["error"]?["data"]?["reason"] == "card.can_mismatch", "\(saved.response)")
        #expect(saved.response["error"]?["data"]?["saved_can_deleted"] == .bool(true))
        #expect(try client.result("card.can.get")["can"] == .null || client.result("card.can.get")["can"] == nil)
        let typed = try client.callAnswering("card.read", [:], answers: ["can": "222222"])
        #expect(typed.response["error"]?["data"]?["reason"] == "card.can_mismatch")
        // The right CAN still works afterwards: nothing was burned.
        let right = try client.callAnswering("card.read", [:], answers: ["can": "654321"])
        #expect(right.response["result"]?["personal_code"] == "38001085718", "\(right.response)")
    }

    @Test("card.read returns the personal data with ISO 8601 dates")
    func readPersonalData() throws {
        let rig = try CardRig()
        try rig.insertCard()
        let daemon = try daemon(rig)
        let result = try daemon.connect().result("card.read")
        #expect(result["surname"] == "JÕEORG")
        #expect(result["date_of_birth"] == "1980-01-08")
        #expect(result["place_of_birth"] == "EST")
        #expect(result["citizenship"] == "EST")
        #expect(result["document_number"] == "AS0123456")
        #expect(result["expiry"]?.stringValue?.count == 10)
    }

    @Test("wrong PIN1 counts down to pin.blocked; formats are refused before the card is touched")
    func pinCountdown() throws {
        let rig = try CardRig()
        try rig.insertCard()
        let daemon = try daemon(rig)
        let client = try daemon.connect()
        let short = try client.callAnswering("card.login", ["aud": "a"], answers: ["pin1": "12"])
        #expect(short.response["error"]?["data"]?["reason"] == "pin.invalid_length")
        #expect(!short.prompts.contains { $0["kind"] == "card" }, "checked before waiting for the card")
        var seen: [JSONValue?] = []
        for _ in 0..<2 {
            let wrong = try client.callAnswering("card.login", ["aud": "a"], answers: ["pin1": "9999"])
            #expect(wrong.response["error"]?["data"]?["reason"] == "pin.wrong")
            seen.append(wrong.response["error"]?["data"]?["retries_left"])
        }
        #expect(seen == [.integer(2), .integer(1)])
        let last = try client.callAnswering("card.login", ["aud": "a"], answers: ["pin1": "9999"])
        #expect(last.response["error"]?["data"]?["reason"] == "pin.blocked")
        let after = try client.callAnswering("card.login", ["aud": "a"], answers: ["pin1": "1234"])
        #expect(after.response["error"]?["data"]?["reason"] == "pin.blocked", "blocked stays blocked")
    }

    @Test("no card in the window → card.timeout; a cancelled prompt → user.cancelled")
    func timeoutAndCancel() throws {
        let rig = try CardRig()
        let daemon = try daemon(rig)
        let client = try daemon.connect()
        let timedOut = try client.callAnswering("card.read", ["timeout_s": 1], answers: [:])
        #expect(timedOut.response["error"]?["data"]?["reason"] == "card.timeout")
        let cancelled = try client.callAnswering("card.login", ["aud": "a"], answers: [:])
        #expect(cancelled.response["error"]?["data"]?["reason"] == "user.cancelled")
    }

    @Test("signature: PIN2 prompted, token and raw signature verify; removal mid-signature then a retry without a new CAN")
    func signAndRemoval() throws {
        let rig = try CardRig(profile: ["--mode", "contactless", "--can", "654321"])
        try rig.insertCard(["--remove-on-ins", "2A"])
        let daemon = try daemon(rig)
        let client = try daemon.connect()
        let hash = Base64URL.encode([UInt8](repeating: 7, count: 32))
        let params: JSONValue = ["aud": "https://sign.example", "hash": .string(hash), "hash_alg": "SHA-256", "description": "contract.pdf"]
        let removed = try client.callAnswering("card.sign", params, answers: ["pin2": "12345", "can": "654321"])
        #expect(removed.response["error"]?["data"]?["reason"] == "card.removed", "\(removed.response)")
        let retry = try client.callAnswering("card.sign", params, answers: ["pin2": "12345"])
        let result = try #require(retry.response["result"], "\(retry.response)")
        #expect(!retry.prompts.contains { $0["kind"] == "can" }, "the retry needs no new CAN")
        #expect(retry.prompts.contains { $0["kind"] == "pin2" })
        let claims = try verifiedClaims(try #require(result["token"]?.stringValue), rig: rig, aud: "https://sign.example")
        #expect(claims["hash"] == .string(hash))
        #expect(claims["hash_alg"] == "SHA-256")
        #expect(claims["description"] == "contract.pdf")
        #expect(result["signature"]?.stringValue?.isEmpty == false)
    }

    @Test("a card pulled as the login begins is waited for within the window, not reported removed")
    func cardPulledAsLoginBegins() throws {
        let rig = try CardRig()
        // The card leaves at authd's first command (pcscd still shows it in the reader) and is
        // back 1.2 s later: no command was answered, so this is no card yet, not a removal.
        try rig.insertCard(["--remove-on-ins", "A4"])
        let daemon = try daemon(rig)
        let client = try daemon.connect()
        let login = try client.callAnswering("card.login", ["aud": "https://rp.example", "timeout_s": 30], answers: ["pin1": "1234"])
        let token = try #require(login.response["result"]?["token"]?.stringValue, "\(login.response)")
        #expect(try verifiedClaims(token, rig: rig, aud: "https://rp.example")["sub"] == "38001085718")
        #expect(login.prompts.contains { $0["kind"] == "card" && $0["seconds_left"]?.integerValue != nil },
                "authd asked for the card while it was away")
    }

    @Test("a card that never comes back ends the login with card.timeout at the window's end")
    func cardPulledAndGone() throws {
        let rig = try CardRig()
        try rig.insertCard()
        let daemon = try daemon(rig)
        let client = try daemon.connect()
        #expect(try client.result("card.read")["personal_code"] == "38001085718")
        rig.stopCard()
        let login = try client.callAnswering("card.login", ["aud": "a", "timeout_s": 2], answers: ["pin1": "1234"])
        #expect(login.response["error"]?["data"]?["reason"] == "card.timeout", "\(login.response)")
    }

    @Test("an unanswered PIN1 prompt ends with the card's window, not the longer prompt_timeout")
    func pinPromptBoundedByWindow() throws {
        let rig = try CardRig()
        try rig.insertCard()
        let daemon = try daemon(rig)
        let client = try daemon.connect()
        try client.send(#"{"jsonrpc":"2.0","id":3,"method":"card.login","params":{"aud":"a","timeout_s":1}}"# + "\n")
        var response: JSONValue?
        for _ in 0..<4 where response == nil {
            let line = try #require(try client.readJSON(), "the daemon answers within the card's window")
            if line["id"] == 3 { response = line }
        }
        #expect(response?["error"]?["data"]?["reason"] == "prompt.timeout", "\(String(describing: response))")
        #expect(response?["error"]?["data"]?["timeout_s"] == 1)
    }

    @Test("authd follows pcscd restarting between requests")
    func pcscdRestart() throws {
        let rig = try CardRig()
        try rig.insertCard()
        let daemon = try daemon(rig)
        let client = try daemon.connect()
        #expect(try client.result("card.read")["personal_code"] == "38001085718")
        rig.stopPCSCD()
        try rig.startPCSCD()
        let again = try client.call("card.read", ["timeout_s": 10])
        #expect(again["result"]?["personal_code"] == "38001085718", "\(again)")
    }

    @Test("PINs, the CAN and card tokens never reach the debug log or the audit log")
    func secretsStayOutOfLogs() throws {
        let rig = try CardRig(profile: ["--mode", "contactless", "--can", "864213", "--pin1", "97531", "--pin2", "8642097"])
        try rig.insertCard()
        let daemon = try daemon(rig, config: "[log]\nlevel = debug\n")
        let client = try daemon.connect()
        let login = try client.callAnswering("card.login", ["aud": "app.example"], answers: ["pin1": "97531", "can": "864213"])
        let token = try #require(login.response["result"]?["token"]?.stringValue, "\(login.response)")
        let wrong = try client.callAnswering("card.sign", ["aud": "app.example", "data": "AAAA", "description": "d"], answers: ["pin2": "1357913", "can": "864213"])
        #expect(wrong.response["error"]?["data"]?["reason"] == "pin.wrong")
        _ = try client.result("card.pin1.save", ["pin": "97531"])
        _ = try client.result("card.can.set", ["can": "864213"])
        let audit = String(decoding: try WireCodec.encodeJSON(try client.result("admin.audit.tail", ["limit": 50])), as: UTF8.self)
        #expect(audit.contains("card.login") && audit.contains("card.sign"), "both requests are audited")
        #expect(daemon.log.contains("card.login ok"), "debug logging was on")
        for text in [daemon.log, audit] {
            for secret in ["97531", "8642097", "1357913", "864213"] { #expect(!text.contains(secret), "\(secret) leaked") }
            for part in token.split(separator: ".") { #expect(!text.contains(part)) }
        }
    }

    @Test("a saved PIN1 signs a plain login without a question but never a website's: a web-eid login asks PIN1 as if none were saved")
    func savedPIN1NotForWebsites() throws {
        let rig = try CardRig()
        try rig.insertCard()
        let daemon = try daemon(rig)
        let client = try daemon.connect()
        _ = try client.result("card.pin1.save", ["pin": "1234"])
        let website: JSONValue = ["aud": "https://rp.example", "nonce": .string(String(repeating: "n", count: 44)), "format": "web-eid"]

        // Nobody answers the PIN1 question: no token.
        let unanswered = try client.callAnswering("card.login", website, answers: [:])
        #expect(unanswered.response["error"]?["data"]?["reason"] == "user.cancelled", "\(unanswered.response)")
        #expect(unanswered.prompts.contains { $0["kind"] == "pin1" && $0["expects_answer"] == true }, "\(unanswered.prompts)")
        // Answered, the typed PIN1 signs the site's token.
        let typed = try client.callAnswering("card.login", website, answers: ["pin1": "1234"])
        #expect(typed.response["result"]?["format"] == "web-eid", "\(typed.response)")
        #expect(typed.prompts.contains { $0["kind"] == "pin1" }, "\(typed.prompts)")

        // The saved PIN1 stays, and a plain login uses it without a question.
        let plain = try client.callAnswering("card.login", ["aud": "https://rp.example"], answers: [:])
        #expect(plain.response["result"]?["token"]?.stringValue != nil, "\(plain.response)")
        #expect(!plain.prompts.contains { $0["kind"] == "pin1" }, "\(plain.prompts)")
    }

    @Test("a hostile card never crashes or hangs authd", arguments: ["bad_tlv", "truncated_certificate", "unexpected_status", "oversized"])
    func hostileCard(_ mode: String) throws {
        let rig = try CardRig(profile: ["--hostile", mode])
        try rig.insertCard()
        let daemon = try daemon(rig)
        let client = try daemon.connect()
        let outcome = try client.callAnswering("card.login", ["aud": "a"], answers: ["pin1": "1234"])
        #expect(outcome.response["error"]?["data"]?["reason"] == "card.error", "\(outcome.response)")
        #expect(try client.result("hello")["protocol_version"] == 1)
    }
}
