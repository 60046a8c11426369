import Foundation
import Protocol
import Testing

// authd's passkeys against a WebAuthn peer that shares none of authd's code:
// `Python/passkey_peer.py` (Debian's python3-fido2 0.9.1 as relying party, a software
// authenticator built on python3-cryptography and python3-cbor2 as the outside authenticator).

/// `Python/passkey_peer.py`, one subcommand per call (JSON on stdin, JSON on stdout).
enum PasskeyPeer {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Python/passkey_peer.py").path

    /// The peer's answer, `ok` true or false (a verifier's refusal is `ok: false` with `error`).
    static func call(_ command: String, _ request: JSONValue) throws -> JSONValue {
        let input = String(decoding: try WireCodec.encodeJSON(request), as: UTF8.self)
        let run = try DaemonHarness.run(["/usr/bin/python3", script, command], stdin: input)
        guard let answer = try? WireCodec.decode(JSONValue.self, from: Data(run.stdout.utf8)), answer["ok"] != nil else {
            throw HarnessError("passkey_peer.py \(command) exited \(run.status): \(run.stdout) \(run.stderr)")
        }
        return answer
    }

    /// The peer's answer, which must be `ok`.
    static func ok(_ command: String, _ request: JSONValue) throws -> JSONValue {
        let answer = try call(command, request)
        guard answer["ok"] == true else { throw HarnessError("passkey_peer.py \(command) refused: \(answer["error"] ?? .null)") }
        return answer
    }
}

/// A fresh challenge, base64url (32 random bytes).
private func newChallenge() -> String { Base64URL.encode((0..<32).map { _ in UInt8.random(in: 0...255) }) }

/// `base` with `extra`'s members added (an object).
private func merging(_ base: JSONValue, _ extra: [String: JSONValue]) -> JSONValue {
    .object((base.objectValue ?? [:]).merging(extra) { _, new in new })
}

/// The response is `passkey.invalid` naming `check` in `error.data.check`.
private func expectInvalid(_ response: JSONValue, check: String, _ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(response.errorReason == "passkey.invalid", "\(comment.map { "\($0): " } ?? "")\(response)", sourceLocation: sourceLocation)
    #expect(response["error"]?["data"]?["check"] == .string(check), "\(comment.map { "\($0): " } ?? "")\(response)", sourceLocation: sourceLocation)
}

/// authd as relying party for example.com (two origins), one account signed in, and the
/// Python authenticator playing the user's security key.
final class InteropRelyingParty {
    static let config = "[passkeys]\nrp_id = example.com\nrp_name = Example\norigins = https://example.com https://login.example.com\n"
    static let phone = "+37251234567"

    let fixture: PasskeyFixture
    var client: LineClient { fixture.client }
    var token: JSONValue { fixture.token }

    init() throws { fixture = try PasskeyFixture(config: Self.config, pin: false) }

    /// A second account (its own phone and email), signed in on this daemon: its registration result.
    func secondAccount(phone: String = "+37251234568") throws -> JSONValue {
        let flow = try #require(try RegistrationTests.start(client, phone)["result"]?["flow"])
        let code = try RegistrationTests.spooledCode(fixture.daemon, to: phone)
        return try client.result("account.register.verify", [
            "flow": flow, "code": .string(code), "email": "second@example.org", "password": .string(FingerprintFixture.password),
            "device": ["key": "device-2"],
        ])
    }

    /// `auth.passkey.register.begin` → the peer's `register` (with `knobs`, and `key` to reuse a
    /// credential) → `auth.passkey.register.finish`. The finish response, the peer's key and
    /// what was sent.
    func register(_ knobs: [String: JSONValue] = [:], key: JSONValue? = nil, session: JSONValue? = nil) throws
        -> (finish: JSONValue, key: JSONValue, credential: JSONValue, flow: JSONValue) {
        let session = session ?? token
        let begun = try client.result("auth.passkey.register.begin", ["session": session])
        var request = knobs
        request["options"] = begun["options"]
        request["origin"] = begun["origin"]
        if let key { request["key"] = key }
        let made = try PasskeyPeer.ok("register", .object(request))
        let credential = try #require(made["credential"])
        let finish = try client.call("auth.passkey.register.finish", ["session": session, "flow": begun["flow"]!, "credential": credential])
        return (finish, try #require(made["key"]), credential, begun["flow"]!)
    }

    /// `register` that must succeed; the peer's key.
    func registered(_ knobs: [String: JSONValue] = [:], session: JSONValue? = nil) throws -> JSONValue {
        let made = try register(knobs, session: session)
        guard made.finish["result"]?["id"] == made.key["credentialId"] else { throw HarnessError("registration failed: \(made.finish)") }
        return made.key
    }

    /// `auth.passkey.login.begin` (with `login`, or usernameless) → the peer's `assert` with
    /// `key` → `auth.passkey.login.finish`. The finish response, the key with its new counter
    /// and what was sent.
    func login(_ key: JSONValue, login: String? = nil, origin: String? = nil, _ knobs: [String: JSONValue] = [:]) throws
        -> (finish: JSONValue, key: JSONValue, credential: JSONValue, flow: JSONValue) {
        let begun = try client.result("auth.passkey.login.begin", login.map { ["login": .string($0)] } ?? [:])
        var request = knobs
        request["options"] = begun["options"]
        request["origin"] = origin.map { .string($0) } ?? begun["origin"]
        request["key"] = key
        let made = try PasskeyPeer.ok("assert", .object(request))
        let credential = try #require(made["credential"])
        let finish = try client.call("auth.passkey.login.finish", ["flow": begun["flow"]!, "credential": credential, "device": ["key": "device-1"]])
        return (finish, try #require(made["key"]), credential, begun["flow"]!)
    }

    /// The account's passkeys (`auth.passkey.list`).
    func passkeys(session: JSONValue? = nil) throws -> [JSONValue] {
        try client.result("auth.passkey.list", ["session": session ?? token])["passkeys"]?.arrayValue ?? []
    }

    /// The sign count authd keeps for the credential of `key`.
    func signCount(of key: JSONValue, session: JSONValue? = nil) throws -> JSONValue? {
        try passkeys(session: session).first { $0["id"] == key["credentialId"] }?["sign_count"]
    }

    /// The account's live sessions made by a passkey sign-in.
    func passkeySessions(session: JSONValue? = nil) throws -> Int {
        let sessions = try client.result("session.list", ["session": session ?? token])["sessions"]?.arrayValue ?? []
        return sessions.filter { $0["amr"] == ["pop", "mfa"] }.count
    }
}

@Suite("Passkeys against an independent WebAuthn peer (python3-fido2, a software authenticator)")
struct PasskeyInteropTests {
    // MARK: authd as authenticator, fido2 as relying party

    @Test("passkey.create and passkey.get verify with fido2's Fido2Server: fmt none, UV, the SPKI copy is the COSE key, counter 1 then 2",
          arguments: ["https://example.com", "https://login.example.com"])
    func authdAuthenticatorVerifiesWithFido2(origin: String) throws {
        let fixture = try PasskeyFixture()
        let rp: [String: JSONValue] = ["rpId": "example.com", "rpName": "Example"]
        let userHandle = Base64URL.encode(Array("interop-user-1".utf8))
        let challenge = newChallenge()
        let created = try fixture.client.exchange("passkey.create", [
            "origin": .string(origin), "rp": ["id": "example.com", "name": "Example"],
            "user": ["id": .string(userHandle), "name": "alice@example.com", "displayName": "Alice"],
            "challenge": .string(challenge), "pubKeyCredParams": [["type": "public-key", "alg": -7]],
            "authenticatorSelection": ["residentKey": "required", "userVerification": "required"], "attestation": "none",
        ], answers: ["pin": PasskeyFixture.pin])
        #expect(created.kinds == ["pin"], "the user was verified by the account's PIN")
        let registration = try #require(created.result, "\(created.response)")

        let verified = try PasskeyPeer.ok("verify-registration", .object(rp.merging(["challenge": .string(challenge), "credential": registration]) { $1 }))
        #expect(verified["credentialId"] == registration["id"])
        #expect(verified["fmt"] == "none")
        #expect(verified["attStmtEmpty"] == true)
        #expect(verified["userPresent"] == true)
        #expect(verified["userVerified"] == true)
        #expect(verified["backupEligible"] == false)
        #expect(verified["backupState"] == false)
        #expect(verified["signCount"] == 0)
        #expect(verified["publicKeyAlgorithm"] == -7)
        #expect(verified["clientData"]?["origin"] == .string(origin))
        #expect(verified["clientData"]?["crossOrigin"] == false)
        // The convenience copies (§5.2.1.1) match what fido2 parsed from the attestation object.
        #expect(verified["publicKeySpki"] == registration["response"]?["publicKey"], "response.publicKey is the SPKI of the attested COSE key")
        #expect(verified["authenticatorData"] == registration["response"]?["authenticatorData"])
        #expect(registration["response"]?["publicKeyAlgorithm"] == -7)
        let credentialData = try #require(verified["credentialData"])

        for expectedCount in [1, 2] {
            let challenge = newChallenge()
            let asserted = try fixture.client.exchange("passkey.get", [
                "origin": .string(origin), "rpId": "example.com", "challenge": .string(challenge), "userVerification": "required",
                "allowCredentials": [["type": "public-key", "id": registration["id"]!]],
            ], answers: ["pin": PasskeyFixture.pin])
            let assertion = try #require(asserted.result, "\(asserted.response)")
            let request = JSONValue.object(rp.merging(["challenge": .string(challenge), "credentialData": credentialData, "credential": assertion]) { $1 })
            let checked = try PasskeyPeer.ok("verify-assertion", request)
            #expect(checked["credentialId"] == registration["id"])
            #expect(checked["signCount"] == .integer(Int64(expectedCount)))
            #expect(checked["userVerified"] == true)
            #expect(checked["userPresent"] == true)
            #expect(checked["userHandle"] == .string(userHandle))
            #expect(checked["clientData"]?["origin"] == .string(origin))
            // The verifier is not a rubber stamp: the same assertion under another challenge is refused.
            let replayed = try PasskeyPeer.call("verify-assertion", merging(request, ["challenge": .string(newChallenge())]))
            #expect(replayed["ok"] == false, "\(replayed)")
        }
    }

    // MARK: an outside authenticator, authd as relying party

    @Test("an outside authenticator registers with authd's RP and signs in, usernameless and by phone: a session for the account, amr pop+mfa")
    func outsideAuthenticatorSignsIn() throws {
        let rp = try InteropRelyingParty()
        let begun = try rp.client.result("auth.passkey.register.begin", ["session": rp.token])
        #expect(begun["origin"] == "https://example.com", "the first configured origin")
        #expect(begun["options"]?["rp"]?["id"] == "example.com")
        #expect(begun["options"]?["rp"]?["name"] == "Example")
        #expect(begun["options"]?["authenticatorSelection"]?["userVerification"] == "required")

        let made = try rp.register()
        #expect(made.finish["result"]?["id"] == made.key["credentialId"], "\(made.finish)")
        #expect(try rp.signCount(of: made.key) == 0)

        // Usernameless: the user handle names the account.
        let usernameless = try rp.login(made.key)
        #expect(usernameless.finish["result"]?["account"]?["id"] == rp.fixture.accountID, "\(usernameless.finish)")
        let first = try #require(usernameless.finish["result"]?["session"]?["token"])
        #expect(try rp.client.result("session.get", ["session": first])["amr"] == ["pop", "mfa"])
        #expect(try rp.signCount(of: made.key) == 1)

        // By phone, from the second configured origin; the allow list names the credential.
        let begunLogin = try rp.client.result("auth.passkey.login.begin", ["login": .string(InteropRelyingParty.phone)])
        #expect(begunLogin["options"]?["allowCredentials"]?.arrayValue?.map { $0["id"] } == [made.key["credentialId"]])
        #expect(begunLogin["options"]?["rpId"] == "example.com")
        let byPhone = try rp.login(usernameless.key, login: InteropRelyingParty.phone, origin: "https://login.example.com")
        #expect(byPhone.finish["result"]?["account"]?["id"] == rp.fixture.accountID, "\(byPhone.finish)")
        let second = try #require(byPhone.finish["result"]?["session"]?["token"])
        #expect(try rp.client.result("session.get", ["session": second])["amr"] == ["pop", "mfa"])
        #expect(try rp.signCount(of: made.key) == 2)
        #expect(try rp.passkeySessions() == 2)
    }

    // MARK: tampered registrations

    struct RegistrationTamper: Sendable, CustomTestStringConvertible {
        let name: String
        let knobs: [String: JSONValue]
        let check: String
        var testDescription: String { "\(name) → \(check)" }
    }

    static let registrationTampers: [RegistrationTamper] = [
        // clientDataJSON.origin of another site.
        .init(name: "wrong origin", knobs: ["clientOrigin": "https://evil.example.net"], check: "origin"),
        // A subdomain of the RP ID (a browser would allow it) that is not in `origins`.
        .init(name: "origin valid for the RP but not configured", knobs: ["clientOrigin": "https://other.example.com"], check: "origin"),
        // authenticatorData.rpIdHash is SHA-256 of another RP ID.
        .init(name: "rpIdHash of another RP", knobs: ["rpIdHash": "evil.example.net"], check: "rp_id"),
        // A challenge authd never issued.
        .init(name: "another challenge", knobs: ["challenge": .string(newChallenge())], check: "challenge"),
        // UV off although authd requires user verification.
        .init(name: "UV flag off", knobs: ["uv": false], check: "user_verified"),
        // UP off: no test of user presence.
        .init(name: "UP flag off", knobs: ["up": false], check: "user_present"),
        // BS (backed up) without BE (backup eligible), which §6.1.3 forbids.
        .init(name: "BS without BE", knobs: ["bs": true], check: "backup_state"),
        // The client data of an assertion offered as a registration.
        .init(name: "type webauthn.get", knobs: ["type": "webauthn.get"], check: "type"),
        // A ceremony in an iframe; authd expects none.
        .init(name: "crossOrigin true", knobs: ["crossOrigin": true], check: "cross_origin"),
        // A top-level origin (an embedded ceremony) although crossOrigin is false.
        .init(name: "topOrigin present", knobs: ["topOrigin": "https://example.com"], check: "cross_origin"),
        // Any attestation format but "none" is refused.
        .init(name: "fmt packed", knobs: ["fmt": "packed"], check: "attestation_format"),
        // "none" with a statement is not "none".
        .init(name: "fmt none with a statement", knobs: ["attStmt": ["alg": -7]], check: "attestation_format"),
    ]

    @Test("a tampered registration is refused with the failed check, and no passkey is added", arguments: registrationTampers)
    func tamperedRegistration(_ tamper: RegistrationTamper) throws {
        let rp = try InteropRelyingParty()
        let made = try rp.register(tamper.knobs)
        expectInvalid(made.finish, check: tamper.check)
        #expect(try rp.passkeys().isEmpty)
    }

    // MARK: tampered assertions

    struct AssertionTamper: Sendable, CustomTestStringConvertible {
        let name: String
        /// Knobs of the (honest) registration before.
        var registration: [String: JSONValue] = [:]
        let knobs: [String: JSONValue]
        /// Sign in by phone rather than usernameless.
        var byPhone = false
        let check: String
        var testDescription: String { "\(name) → \(check)" }
    }

    static let assertionTampers: [AssertionTamper] = [
        // clientDataJSON.origin of another site.
        .init(name: "wrong origin", knobs: ["clientOrigin": "https://evil.example.net"], check: "origin"),
        // A subdomain of the RP ID that is not in `origins`.
        .init(name: "origin valid for the RP but not configured", knobs: ["clientOrigin": "https://other.example.com"], check: "origin"),
        // authenticatorData.rpIdHash of another RP ID (signed that way).
        .init(name: "rpIdHash of another RP", knobs: ["rpIdHash": "evil.example.net"], check: "rp_id"),
        // A challenge authd never issued.
        .init(name: "another challenge", knobs: ["challenge": .string(newChallenge())], check: "challenge"),
        // UV off although authd requires user verification.
        .init(name: "UV flag off", knobs: ["uv": false], check: "user_verified"),
        // UP off.
        .init(name: "UP flag off", knobs: ["up": false], check: "user_present"),
        // BS without BE.
        .init(name: "BS without BE", knobs: ["bs": true], check: "backup_state"),
        // Registered device-bound (BE 0), now claims to be backup eligible.
        .init(name: "BE set after a registration without it", knobs: ["be": true], check: "backup_eligible"),
        // Registered backup eligible (BE 1), now claims not to be.
        .init(name: "BE cleared after a registration with it", registration: ["be": true], knobs: ["be": false], check: "backup_eligible"),
        // Registered at 5, asserts 3: the counter went back (a clone).
        .init(name: "counter lower than stored", registration: ["signCount": 5], knobs: ["signCount": 3], check: "sign_count"),
        // Registered at 5, asserts 5: the counter did not grow.
        .init(name: "counter equal to stored", registration: ["signCount": 5], knobs: ["signCount": 5], check: "sign_count"),
        // The signature is over other bytes than authenticatorData ‖ SHA-256(clientDataJSON).
        .init(name: "bad signature", knobs: ["corruptSignature": true], check: "signature"),
        // The client data of a registration offered as an assertion.
        .init(name: "type webauthn.create", knobs: ["type": "webauthn.create"], check: "type"),
        // A ceremony in an iframe.
        .init(name: "crossOrigin true", knobs: ["crossOrigin": true], check: "cross_origin"),
        // A top-level origin (an embedded ceremony) although crossOrigin is false.
        .init(name: "topOrigin present", knobs: ["topOrigin": "https://example.com"], check: "cross_origin"),
        // A credential id authd never registered (signed by a key it does not know).
        .init(name: "unknown credential", knobs: ["credentialId": .string(newChallenge())], check: "credential"),
        // Usernameless sign-in without a user handle: nothing names the account.
        .init(name: "usernameless without userHandle", knobs: ["userHandle": nil], check: "user_handle"),
        // A user handle that is not the account's.
        .init(name: "userHandle not the account's", knobs: ["userHandle": .string(Base64URL.encode(Array("someone else".utf8)))], check: "user_handle"),
        // By phone, an unknown credential: not one the account holds.
        .init(name: "unknown credential, by phone", knobs: ["credentialId": .string(newChallenge())], byPhone: true, check: "credential"),
    ]

    @Test("a tampered assertion is refused with the failed check; no session, the counter unchanged", arguments: assertionTampers)
    func tamperedAssertion(_ tamper: AssertionTamper) throws {
        let rp = try InteropRelyingParty()
        let key = try rp.registered(tamper.registration)
        let stored = try rp.signCount(of: key)
        let signIn = try rp.login(key, login: tamper.byPhone ? InteropRelyingParty.phone : nil, tamper.knobs)
        expectInvalid(signIn.finish, check: tamper.check)
        #expect(try rp.signCount(of: key) == stored, "the counter did not move")
        #expect(try rp.passkeySessions() == 0, "no session was made")
        // The same registered key, honest this time, still signs in.
        #expect(try rp.login(key).finish["result"]?["account"]?["id"] == rp.fixture.accountID)
    }

    // MARK: replay and single use

    @Test("a sign-in cannot be replayed: the same flow again is passkey.flow_invalid, the same response in a new flow fails the challenge")
    func replayedAssertion() throws {
        let rp = try InteropRelyingParty()
        let key = try rp.registered()
        let signIn = try rp.login(key)
        #expect(signIn.finish["result"]?["session"] != nil, "\(signIn.finish)")
        let again = try rp.client.call("auth.passkey.login.finish", ["flow": signIn.flow, "credential": signIn.credential, "device": ["key": "device-1"]])
        #expect(again.errorReason == "passkey.flow_invalid", "\(again)")
        let newFlow = try rp.client.result("auth.passkey.login.begin")["flow"]!
        let replayed = try rp.client.call("auth.passkey.login.finish", ["flow": newFlow, "credential": signIn.credential, "device": ["key": "device-1"]])
        expectInvalid(replayed, check: "challenge")
        #expect(try rp.signCount(of: key) == 1)
        #expect(try rp.passkeySessions() == 1, "only the first finish made a session")
    }

    @Test("a registration cannot be replayed: the same flow again is passkey.flow_invalid, the same response in a new flow fails the challenge")
    func replayedRegistration() throws {
        let rp = try InteropRelyingParty()
        let made = try rp.register()
        #expect(made.finish["result"]?["id"] == made.key["credentialId"], "\(made.finish)")
        let again = try rp.client.call("auth.passkey.register.finish", ["session": rp.token, "flow": made.flow, "credential": made.credential])
        #expect(again.errorReason == "passkey.flow_invalid", "\(again)")
        let newFlow = try rp.client.result("auth.passkey.register.begin", ["session": rp.token])["flow"]!
        let replayed = try rp.client.call("auth.passkey.register.finish", ["session": rp.token, "flow": newFlow, "credential": made.credential])
        expectInvalid(replayed, check: "challenge")
        #expect(try rp.passkeys().count == 1)
    }

    @Test("a flow is used up by a failed finish: a correct response for it afterwards is passkey.flow_invalid")
    func failedFinishUsesUpTheFlow() throws {
        let rp = try InteropRelyingParty()

        // Registration: UV off fails, then an honest response for the same flow and challenge.
        let begun = try rp.client.result("auth.passkey.register.begin", ["session": rp.token])
        let base: [String: JSONValue] = ["options": begun["options"]!, "origin": begun["origin"]!]
        let bad = try PasskeyPeer.ok("register", .object(base.merging(["uv": false]) { $1 }))["credential"]!
        let good = try PasskeyPeer.ok("register", .object(base))["credential"]!
        expectInvalid(try rp.client.call("auth.passkey.register.finish", ["session": rp.token, "flow": begun["flow"]!, "credential": bad]), check: "user_verified")
        let late = try rp.client.call("auth.passkey.register.finish", ["session": rp.token, "flow": begun["flow"]!, "credential": good])
        #expect(late.errorReason == "passkey.flow_invalid", "\(late)")
        #expect(try rp.passkeys().isEmpty)

        // Sign-in: a bad signature fails, then an honest assertion for the same flow.
        let key = try rp.registered()
        let login = try rp.client.result("auth.passkey.login.begin")
        let request: [String: JSONValue] = ["options": login["options"]!, "origin": login["origin"]!, "key": key]
        let forged = try PasskeyPeer.ok("assert", .object(request.merging(["corruptSignature": true]) { $1 }))["credential"]!
        let honest = try PasskeyPeer.ok("assert", .object(request))["credential"]!
        expectInvalid(try rp.client.call("auth.passkey.login.finish", ["flow": login["flow"]!, "credential": forged]), check: "signature")
        let lateLogin = try rp.client.call("auth.passkey.login.finish", ["flow": login["flow"]!, "credential": honest])
        #expect(lateLogin.errorReason == "passkey.flow_invalid", "\(lateLogin)")
        #expect(try rp.signCount(of: key) == 0)
        #expect(try rp.passkeySessions() == 0)
    }

    // MARK: credentials and accounts

    @Test("the same credential cannot be registered twice, to the same account or another: passkey.excluded")
    func duplicateRegistration() throws {
        let rp = try InteropRelyingParty()
        let key = try rp.registered()
        let begun = try rp.client.result("auth.passkey.register.begin", ["session": rp.token])
        #expect(begun["options"]?["excludeCredentials"]?.arrayValue?.map { $0["id"] } == [key["credentialId"]], "begin lists the registered credential")
        let twice = try rp.register(key: key)
        #expect(twice.finish.errorReason == "passkey.excluded", "\(twice.finish)")
        #expect(try rp.passkeys().count == 1)

        let other = try rp.secondAccount()
        let otherToken = other["session"]!["token"]!
        let elsewhere = try rp.register(key: key, session: otherToken)
        #expect(elsewhere.finish.errorReason == "passkey.excluded", "\(elsewhere.finish)")
        #expect(try rp.passkeys(session: otherToken).isEmpty)
    }

    @Test("account B's user handle or login with account A's passkey is refused (user_handle, credential), and nobody signs in")
    func anotherAccountsPasskey() throws {
        let rp = try InteropRelyingParty()
        let keyA = try rp.registered()
        let other = try rp.secondAccount(phone: "+37251234568")
        let tokenB = other["session"]!["token"]!
        let keyB = try rp.registered(session: tokenB)
        #expect(keyA["userHandle"] != keyB["userHandle"])

        // Usernameless, A's credential with B's user handle.
        let handleOfB = try rp.login(keyA, ["userHandle": keyB["userHandle"]!])
        expectInvalid(handleOfB.finish, check: "user_handle")
        // B's login, A's credential (with A's own user handle).
        let loginOfB = try rp.login(keyA, login: "+37251234568")
        expectInvalid(loginOfB.finish, check: "credential")
        // B's login, A's credential with B's user handle.
        let bothOfB = try rp.login(keyA, login: "+37251234568", ["userHandle": keyB["userHandle"]!])
        expectInvalid(bothOfB.finish, check: "credential")

        #expect(try rp.signCount(of: keyA) == 0)
        #expect(try rp.passkeySessions() == 0)
        #expect(try rp.passkeySessions(session: tokenB) == 0)
        // B's own passkey still signs B in.
        #expect(try rp.login(keyB, login: "+37251234568").finish["result"]?["account"]?["id"] == other["account"]?["id"])
    }
}
