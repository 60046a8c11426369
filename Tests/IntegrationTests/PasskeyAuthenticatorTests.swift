import Foundation
import Glibc
import Protocol
import Testing

/// WebAuthn options as a local caller (a browser, an app) hands them to authd's authenticator,
/// and the parts of its answers the tests look at.
enum WebAuthnCall {
    static let origin = "https://example.com"
    static let userName = "alice@example.com"

    /// Authenticator data flags (WebAuthn L3 §6.1).
    static let userPresent: UInt8 = 0x01
    static let userVerified: UInt8 = 0x04
    static let attestedCredential: UInt8 = 0x40

    static func challenge(_ bytes: Int) -> String { Base64URL.encode((0..<bytes).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }) }

    /// `passkey.create` params: `origin` beside the `PublicKeyCredentialCreationOptionsJSON` members.
    static func creation(origin: String = origin, rpID: String? = "example.com", userID: [UInt8] = Array("user-1".utf8),
                         challengeBytes: Int = 32, algorithms: [Int] = [-7], exclude: [String]? = nil) -> JSONValue {
        var rp: [String: JSONValue] = ["name": "Example"]
        if let rpID { rp["id"] = .string(rpID) }
        var params: [String: JSONValue] = [
            "origin": .string(origin),
            "rp": .object(rp),
            "user": ["id": .string(Base64URL.encode(userID)), "name": .string(userName), "displayName": "Alice"],
            "challenge": .string(challenge(challengeBytes)),
            "pubKeyCredParams": .array(algorithms.map { ["type": "public-key", "alg": .integer(Int64($0))] }),
        ]
        if let exclude { params["excludeCredentials"] = .array(exclude.map { ["type": "public-key", "id": .string($0)] }) }
        return .object(params)
    }

    /// `passkey.get` params: `origin` beside the `PublicKeyCredentialRequestOptionsJSON` members.
    static func request(origin: String = origin, rpID: String? = "example.com", allow: [String]? = nil, challengeBytes: Int = 32) -> JSONValue {
        var params: [String: JSONValue] = ["origin": .string(origin), "challenge": .string(challenge(challengeBytes))]
        if let rpID { params["rpId"] = .string(rpID) }
        if let allow { params["allowCredentials"] = .array(allow.map { ["type": "public-key", "id": .string($0)] }) }
        return .object(params)
    }

    /// `response.<member>` of a create or get answer, base64url-decoded.
    static func bytes(_ result: JSONValue?, _ member: String) throws -> [UInt8] {
        let text = try #require(result?["response"]?[member]?.stringValue, "no response.\(member) in \(String(describing: result))")
        return try #require(Base64URL.decode(text), "response.\(member) is not base64url")
    }

    static func clientData(_ result: JSONValue?) throws -> JSONValue {
        try WireCodec.decode(JSONValue.self, from: Data(try bytes(result, "clientDataJSON")))
    }

    static func signCount(_ authenticatorData: [UInt8]) -> UInt32 {
        authenticatorData[33..<37].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    }

    static func sha256(_ text: String) throws -> [UInt8] {
        let result = try DaemonHarness.run(["/usr/bin/python3", "-c", "import hashlib,sys; print(hashlib.sha256(sys.argv[1].encode()).hexdigest())", text])
        return try #require(Hex.decode(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
    }

    /// Checks an ES256 assertion with Python's `cryptography` (not authd's code): the signature
    /// over authenticatorData ‖ SHA-256(clientDataJSON) under the key `passkey.create` returned.
    static func signatureVerifies(publicKey: String, assertion: JSONValue?) throws -> Bool {
        let script = """
            import base64, hashlib, sys
            from cryptography.hazmat.primitives import hashes, serialization
            from cryptography.hazmat.primitives.asymmetric import ec
            d = lambda s: base64.urlsafe_b64decode(s + '=' * (-len(s) % 4))
            key = serialization.load_der_public_key(d(sys.argv[1]))
            key.verify(d(sys.argv[4]), d(sys.argv[2]) + hashlib.sha256(d(sys.argv[3])).digest(), ec.ECDSA(hashes.SHA256()))
            """
        let response = assertion?["response"]
        let arguments = try ["authenticatorData", "clientDataJSON", "signature"].map { member in
            try #require(response?[member]?.stringValue, "no response.\(member)")
        }
        return try DaemonHarness.run(["/usr/bin/python3", "-c", script, publicKey] + arguments).status == 0
    }
}

extension PasskeyFixture {
    /// `passkey.create`, answering a PIN prompt with `pin` (nil: cancelling it).
    func create(_ params: JSONValue, pin: String? = PasskeyFixture.pin) throws -> PromptedCall {
        try client.exchange("passkey.create", params, answers: pin.map { ["pin": $0] } ?? [:])
    }

    /// `passkey.get`, answering a PIN prompt with `pin` (nil: cancelling it).
    func get(_ params: JSONValue, pin: String? = PasskeyFixture.pin) throws -> PromptedCall {
        try client.exchange("passkey.get", params, answers: pin.map { ["pin": $0] } ?? [:])
    }

    /// `passkey.list`: the passkeys authd holds for this local user.
    func held(rpID: String? = nil) throws -> [JSONValue] {
        try client.result("passkey.list", rpID.map { ["rp_id": .string($0)] } ?? [:])["passkeys"]?.arrayValue ?? []
    }

    func storeRows(_ sql: String, readOnly: Bool = true) throws -> [String] { try daemon.storeRows(sql, readOnly: readOnly) }
}

/// authd as this machine's platform authenticator (`passkey.*`): user verification by finger or
/// PIN, the origin rule, parameter checks, the key store, authd's own relying party through it,
/// and `authctl passkey` / `authctl login --passkey`.
@Suite("Passkeys: authd as the platform authenticator")
struct PasskeyAuthenticatorTests {
    typealias Call = WebAuthnCall

    // MARK: - User verification

    /// Serialized like the other fprintd tests: each runs its own bus and mock.
    @Suite("User verification: the finger, else the account's PIN, else nothing is made or signed", .serialized)
    struct Verification {
        @Test("a matching finger verifies create and get: a fingerprint prompt naming the RP ID, no PIN prompt, UP and UV set")
        func fingerMatch() throws {
            let f = try PasskeyFixture(fingerprint: true)
            let rig = try #require(f.rig)
            let enabling = try rig.callCounts()  // biometric.enable scanned once
            try rig.setScript([.match])
            let created = try f.create(Call.creation(), pin: nil)  // a PIN prompt would be cancelled
            let credential = try #require(created.result, "\(created.response)")
            #expect(created.ofKind("pin").isEmpty, "the finger verified the user: \(created.kinds)")
            #expect(created.fingerprintMessages.first?.hasPrefix("Touch the fingerprint reader to create a passkey for example.com as \(Call.userName)") == true,
                    "\(created.fingerprintMessages)")
            let made = try Call.bytes(credential, "authenticatorData")
            #expect(made[32] & Call.userPresent != 0, "UP")
            #expect(made[32] & Call.userVerified != 0, "UV")
            #expect(made[32] & Call.attestedCredential != 0, "AT: the new credential is attested")
            #expect(Call.signCount(made) == 0)

            try rig.setScript([.match])
            let asserted = try f.get(Call.request(), pin: nil)
            let assertion = try #require(asserted.result, "\(asserted.response)")
            #expect(assertion["id"] == credential["id"])
            #expect(asserted.ofKind("pin").isEmpty, "\(asserted.kinds)")
            #expect(asserted.fingerprintMessages.first?.hasPrefix("Touch the fingerprint reader to sign in to example.com as \(Call.userName)") == true,
                    "\(asserted.fingerprintMessages)")
            let signed = try Call.bytes(assertion, "authenticatorData")
            #expect(signed[32] & Call.userPresent != 0, "UP")
            #expect(signed[32] & Call.userVerified != 0, "UV")
            #expect(signed[32] & Call.attestedCredential == 0, "an assertion attests nothing")
            #expect(Call.signCount(signed) == 1)
            let counts = try rig.callCounts()
            #expect(counts["VerifyStart", default: 0] - enabling["VerifyStart", default: 0] == 2, "one scan each: \(counts)")
            #expect(counts["Release", default: 0] == counts["Claim", default: 0], "the reader is given back: \(counts)")
        }

        @Test("no finger matches (all five tries): the PIN prompt says why and the right PIN verifies; the cut-off finger is not tried again")
        func fingerNoMatchFallsBackToPIN() throws {
            let f = try PasskeyFixture(fingerprint: true)
            let rig = try #require(f.rig)
            try rig.setScript(Array(repeating: .noMatch, count: 5))
            let created = try f.create(Call.creation())
            #expect(created.result != nil, "\(created.response)")
            #expect(created.fingerprintMessages.count == 5, "\(created.fingerprintMessages)")
            #expect(created.kinds.last == "pin", "the finger first, then the PIN: \(created.kinds)")
            let prompt = try #require(created.ofKind("pin").first?["message"]?.stringValue)
            #expect(prompt.hasPrefix("Fingerprints are off after 5"), "the prompt says why the finger did not do: \(prompt)")
            #expect(prompt.contains("Enter your account PIN to create a passkey for example.com as \(Call.userName)"), "\(prompt)")
            #expect(try f.held().count == 1)

            let starts = try rig.callCounts()["VerifyStart"]
            let asserted = try f.get(Call.request())
            #expect(asserted.result != nil, "\(asserted.response)")
            #expect(asserted.kinds == ["pin"], "fingerprints are cut off: straight to the PIN")
            #expect(try rig.callCounts()["VerifyStart"] == starts)
        }

        @Test("the finger fails and the account has no PIN: passkey.uv_failed naming the biometric reason; nothing made, the counter does not move")
        func fingerFailsWithoutPIN() throws {
            let f = try PasskeyFixture(pin: false, fingerprint: true)
            let rig = try #require(f.rig)
            try rig.setScript([.match])
            let created = try f.create(Call.creation(), pin: nil)
            let id = try #require(created.result?["id"], "\(created.response)")

            try rig.setScript([.unknownError])
            let failed = try f.get(Call.request(), pin: nil)
            #expect(failed.reason == "passkey.uv_failed", "\(failed.response)")
            #expect(failed.data?["detail"] == "biometric.failed", "\(failed.response)")
            #expect(failed.ofKind("pin").isEmpty, "no account PIN to ask for")
            #expect(try f.held().map { $0["sign_count"] } == [0], "nothing was signed")
            #expect(try f.held().first?["last_used_at"] == nil)

            try rig.setScript(Array(repeating: .noMatch, count: 5))
            let refused = try f.create(Call.creation(origin: "https://shop.example.org", rpID: nil), pin: nil)
            #expect(refused.reason == "passkey.uv_failed", "\(refused.response)")
            #expect(refused.data?["detail"] == "biometric.cut_off", "\(refused.response)")
            #expect(refused.fingerprintMessages.count == 5)
            #expect(try f.held().map { $0["id"] } == [id], "no passkey for shop.example.org was made")

            let starts = try rig.callCounts()["VerifyStart"]
            let cutOff = try f.get(Call.request(), pin: nil)
            #expect(cutOff.reason == "passkey.uv_failed")
            #expect(cutOff.data?["detail"] == "biometric.cut_off")
            #expect(cutOff.prompts.isEmpty, "nothing to ask: \(cutOff.kinds)")
            #expect(try rig.callCounts()["VerifyStart"] == starts)
            #expect(try f.held().map { $0["sign_count"] } == [0])
        }

        @Test("a wrong PIN: passkey.uv_failed with detail auth.failed; nothing made, nothing signed")
        func wrongPIN() throws {
            let f = try PasskeyFixture()
            let wrong = try f.create(Call.creation(), pin: "000000")
            #expect(wrong.reason == "passkey.uv_failed", "\(wrong.response)")
            #expect(wrong.data?["detail"] == "auth.failed")
            let prompt = try #require(wrong.ofKind("pin").first?["message"]?.stringValue)
            #expect(prompt.hasPrefix("Enter your account PIN to create a passkey for example.com as \(Call.userName)"), "\(prompt)")
            #expect(try f.held().isEmpty)

            #expect(try f.create(Call.creation()).result != nil)
            let wrongGet = try f.get(Call.request(), pin: "000000")
            #expect(wrongGet.reason == "passkey.uv_failed", "\(wrongGet.response)")
            #expect(wrongGet.data?["detail"] == "auth.failed")
            #expect(wrongGet.result == nil)
            #expect(try f.held().map { $0["sign_count"] } == [0])
        }

        @Test("a right PIN ends a run of wrong ones (Lockout: a success resets the count): four wrong, one right, one wrong is no lockout")
        func rightPINResetsFailures() throws {
            let f = try PasskeyFixture()
            #expect(try f.create(Call.creation()).result != nil)
            for attempt in 1...4 {
                #expect(try f.get(Call.request(), pin: "000000").data?["detail"] == "auth.failed", "wrong PIN \(attempt)")
            }
            #expect(try f.get(Call.request()).result != nil, "the right PIN, before the lockout threshold of 5")
            let wrong = try f.get(Call.request(), pin: "000000")
            #expect(wrong.data?["detail"] == "auth.failed", "one wrong PIN after a right one: \(wrong.response)")
            let right = try f.get(Call.request())
            #expect(right.result != nil, "the PIN is not locked: \(right.response)")
        }

        @Test("a cancelled PIN prompt: user.cancelled; nothing made, nothing signed")
        func cancelledPIN() throws {
            let f = try PasskeyFixture()
            let cancelled = try f.create(Call.creation(), pin: nil)
            #expect(cancelled.reason == "user.cancelled", "\(cancelled.response)")
            #expect(cancelled.kinds == ["pin"])
            #expect(try f.held().isEmpty)

            #expect(try f.create(Call.creation()).result != nil)
            let cancelledGet = try f.get(Call.request(), pin: nil)
            #expect(cancelledGet.reason == "user.cancelled", "\(cancelledGet.response)")
            #expect(try f.held().map { $0["sign_count"] } == [0])
        }

        @Test("no finger switched on and no PIN: passkey.uv_failed with detail no_method, and nothing is asked")
        func noMethod() throws {
            let f = try PasskeyFixture(pin: false)
            let refused = try f.create(Call.creation())
            #expect(refused.reason == "passkey.uv_failed", "\(refused.response)")
            #expect(refused.data?["detail"] == "no_method")
            #expect(refused.prompts.isEmpty, "\(refused.prompts)")
            #expect(try f.held().isEmpty)
        }
    }

    // MARK: - Origins and RP IDs

    @Suite("The origin rule: https://host[:port] or http://localhost[:port], exactly; rp.id the host or a parent that is not a public suffix")
    struct Origins {
        static let refused: [(origin: String, rpID: String?)] = [
            ("http://example.com", nil),
            ("https://example.com/", nil),
            ("https://example.com/path", nil),
            ("HTTPS://example.com", nil),
            ("https://127.0.0.1", nil),
            ("https://example.com:443", nil),
            ("https://example.com", "com"),
            ("https://shop.example.co.uk", "co.uk"),
            ("https://example.com", "other.com"),
            ("https://example.com", "sub.example.com"),
            ("https://user@example.com", nil),
            ("https://example.com?q=1", nil),
            ("https://example.com.", nil),
        ]

        @Test("refused with passkey.bad_origin before anything is asked or made", arguments: refused)
        func refusedOrigin(origin: String, rpID: String?) throws {
            let f = try PasskeyFixture()
            let created = try f.create(Call.creation(origin: origin, rpID: rpID))
            #expect(created.reason == "passkey.bad_origin", "\(created.response)")
            #expect(created.prompts.isEmpty, "a bad origin asks the user nothing: \(created.kinds)")
            #expect(try f.held().isEmpty)
            let asserted = try f.get(Call.request(origin: origin, rpID: rpID))
            #expect(asserted.reason == "passkey.bad_origin", "\(asserted.response)")
            #expect(asserted.prompts.isEmpty)
        }

        @Test("an internationalised public suffix (个人.hk, listed in Unicode) is refused as an RP ID in its xn-- form")
        func internationalisedPublicSuffix() throws {
            let f = try PasskeyFixture()
            let created = try f.create(Call.creation(origin: "https://shop.xn--ciqpn.hk", rpID: "xn--ciqpn.hk"))
            #expect(created.reason == "passkey.bad_origin", "xn--ciqpn.hk is 个人.hk, a public suffix: \(created.response)")
        }

        @Test("passkey.get applies the rule to a held passkey too: refused without a prompt, its counter unchanged")
        func getRefusedForHeldPasskey() throws {
            let f = try PasskeyFixture()
            #expect(try f.create(Call.creation()).result != nil)
            for (origin, rpID) in [("http://example.com", "example.com"), ("https://example.com:443", "example.com"), ("https://evil.example", "example.com")] {
                let asserted = try f.get(Call.request(origin: origin, rpID: rpID))
                #expect(asserted.reason == "passkey.bad_origin", "\(origin) \(rpID): \(asserted.response)")
                #expect(asserted.prompts.isEmpty, "\(origin)")
            }
            #expect(try f.held().map { $0["sign_count"] } == [0])
        }

        @Test("accepted: a parent RP ID from a subdomain with a port, http://localhost:8080, and rp.id omitted (the origin's host)")
        func accepted() throws {
            let f = try PasskeyFixture()
            let parent = try f.create(Call.creation(origin: "https://login.example.com:8443", rpID: "example.com"))
            let credential = try #require(parent.result, "\(parent.response)")
            #expect(Array(try Call.bytes(credential, "authenticatorData")[0..<32]) == (try Call.sha256("example.com")), "rpIdHash is of the RP ID, not the host")
            let clientData = try Call.clientData(credential)
            #expect(clientData["type"] == "webauthn.create")
            #expect(clientData["origin"] == "https://login.example.com:8443")
            #expect(clientData["challenge"] == .string(Call.challenge(32)))

            let local = try f.create(Call.creation(origin: "http://localhost:8080", rpID: "localhost"))
            #expect(local.result != nil, "\(local.response)")
            let omitted = try f.create(Call.creation(origin: "https://shop.example.co.uk", rpID: nil))
            #expect(omitted.result != nil, "\(omitted.response)")
            #expect(Array(try Call.bytes(omitted.result, "authenticatorData")[0..<32]) == (try Call.sha256("shop.example.co.uk")))
            #expect(Set(try f.held().compactMap { $0["rp_id"]?.stringValue }) == ["example.com", "localhost", "shop.example.co.uk"])

            // The parent's passkey serves its other subdomains.
            let asserted = try f.get(Call.request(origin: "https://www.example.com", rpID: "example.com"))
            #expect(asserted.result?["id"] == credential["id"], "\(asserted.response)")
            #expect(try Call.clientData(asserted.result)["origin"] == "https://www.example.com")
        }
    }

    // MARK: - Parameters

    @Suite("Parameter checks")
    struct Parameters {
        @Test("pubKeyCredParams with only RS256 → passkey.unsupported_algorithm, nothing asked; an empty list means ES256 is fine")
        func algorithms() throws {
            let f = try PasskeyFixture()
            let rsa = try f.create(Call.creation(algorithms: [-257]))
            #expect(rsa.reason == "passkey.unsupported_algorithm", "\(rsa.response)")
            #expect(rsa.prompts.isEmpty)
            #expect(try f.held().isEmpty)
            let empty = try f.create(Call.creation(algorithms: []))
            #expect(empty.result?["response"]?["publicKeyAlgorithm"] == -7, "\(empty.response)")
            let either = try f.create(Call.creation(userID: Array("user-2".utf8), algorithms: [-257, -7]))
            #expect(either.result != nil, "\(either.response)")
        }

        @Test("user.id over 64 bytes and a challenge under 16 bytes → rpc.invalid_params naming the field; the limits themselves pass")
        func sizes() throws {
            let f = try PasskeyFixture()
            let longUser = try f.create(Call.creation(userID: Array(repeating: 0x75, count: 65)))
            #expect(longUser.reason == "rpc.invalid_params", "\(longUser.response)")
            #expect(longUser.data?["field"] == "user.id")
            #expect(longUser.prompts.isEmpty)
            let shortChallenge = try f.create(Call.creation(challengeBytes: 15))
            #expect(shortChallenge.reason == "rpc.invalid_params", "\(shortChallenge.response)")
            #expect(shortChallenge.data?["field"] == "challenge")
            #expect(try f.held().isEmpty)

            let atLimits = try f.create(Call.creation(userID: Array(repeating: 0x75, count: 64), challengeBytes: 16))
            #expect(atLimits.result != nil, "64-byte user handle, 16-byte challenge: \(atLimits.response)")
            let shortGet = try f.get(Call.request(challengeBytes: 15))
            #expect(shortGet.reason == "rpc.invalid_params", "\(shortGet.response)")
            #expect(shortGet.data?["field"] == "challenge")
            #expect(try f.held().map { $0["sign_count"] } == [0])
        }

        @Test("excludeCredentials naming a passkey this user holds for the RP → passkey.excluded without a prompt; held for another RP it does not count")
        func excludeCredentials() throws {
            let f = try PasskeyFixture()
            let first = try #require(try f.create(Call.creation()).result?["id"]?.stringValue)
            let excluded = try f.create(Call.creation(userID: Array("user-2".utf8), exclude: [first]))
            #expect(excluded.reason == "passkey.excluded", "\(excluded.response)")
            #expect(excluded.prompts.isEmpty)
            #expect(try f.held().map { $0["id"] } == [.string(first)])

            let elsewhere = try f.create(Call.creation(origin: "https://example.org", rpID: "example.org", exclude: [first]))
            #expect(elsewhere.result != nil, "the excluded id is this user's passkey for example.com, not example.org: \(elsewhere.response)")
            #expect(try f.held().count == 2)
        }
    }

    // MARK: - The key store

    @Suite("The key store")
    struct KeyStore {
        @Test("the same RP and user handle: the new passkey replaces the old; another user handle adds one; passkey.list filters by rp_id")
        func replaceAndFilter() throws {
            let f = try PasskeyFixture()
            let old = try #require(try f.create(Call.creation()).result?["id"])
            let new = try #require(try f.create(Call.creation()).result?["id"])
            #expect(old != new)
            #expect(try f.held().map { $0["id"] } == [new], "one passkey per RP and user handle")
            let other = try #require(try f.create(Call.creation(userID: Array("user-2".utf8))).result?["id"])
            let elsewhere = try #require(try f.create(Call.creation(origin: "https://example.org", rpID: "example.org")).result?["id"])
            #expect(try f.held().map { $0["id"] } == [elsewhere, other, new], "newest first")
            #expect(try f.held(rpID: "example.com").map { $0["id"] } == [other, new])
            #expect(try f.held(rpID: "example.org").map { $0["id"] } == [elsewhere])
            #expect(try f.held(rpID: "example.net").isEmpty)
            let listed = try #require(try f.held(rpID: "example.org").first)
            #expect(listed["rp_name"] == "Example")
            #expect(listed["user_name"] == .string(Call.userName))
            #expect(listed["display_name"] == "Alice")
            #expect(listed["user_handle"] == .string(Base64URL.encode(Array("user-1".utf8))))
        }

        @Test("passkey.get → passkey.none without a prompt: an allow list naming none of ours, an RP with no passkey, a deleted passkey")
        func none() throws {
            let f = try PasskeyFixture()
            let id = try #require(try f.create(Call.creation()).result?["id"]?.stringValue)
            let stranger = Base64URL.encode([UInt8](repeating: 7, count: 32))
            let notOurs = try f.get(Call.request(allow: [stranger]))
            #expect(notOurs.reason == "passkey.none", "\(notOurs.response)")
            #expect(notOurs.prompts.isEmpty)
            let allowed = try f.get(Call.request(allow: [stranger, id]))
            #expect(allowed.result?["id"] == .string(id), "\(allowed.response)")
            let noneHere = try f.get(Call.request(origin: "https://example.org", rpID: "example.org"))
            #expect(noneHere.reason == "passkey.none", "\(noneHere.response)")
            #expect(noneHere.prompts.isEmpty)

            #expect(try f.client.result("passkey.delete", ["id": .string(id)]) == ["id": .string(id), "deleted": true])
            let deleted = try f.get(Call.request())
            #expect(deleted.reason == "passkey.none", "\(deleted.response)")
            #expect(deleted.prompts.isEmpty)
            #expect(try f.held().isEmpty)
            #expect(try f.client.call("passkey.delete", ["id": .string(id)]).errorReason == "passkey.none", "already gone")
            #expect(try f.client.call("passkey.delete", ["id": .string(stranger)]).errorReason == "passkey.none", "never held")
        }

        @Test("each get counts up (1, 2, 3) in the signed authenticator data and in passkey.list; each signature verifies with the created key")
        func counters() throws {
            let f = try PasskeyFixture()
            let created = try #require(try f.create(Call.creation()).result)
            let publicKey = try #require(created["response"]?["publicKey"]?.stringValue)
            for expected in 1...3 {
                let asserted = try #require(try f.get(Call.request()).result)
                #expect(Call.signCount(try Call.bytes(asserted, "authenticatorData")) == UInt32(expected))
                #expect(try f.held().first?["sign_count"] == .integer(Int64(expected)))
                #expect(try Call.signatureVerifies(publicKey: publicKey, assertion: asserted), "assertion \(expected)")
                #expect(asserted["response"]?["userHandle"] == .string(Base64URL.encode(Array("user-1".utf8))))
            }
            #expect(try f.held().first?["last_used_at"]?.stringValue != nil)
        }

        @Test("private keys are sealed: no DER key or public point in the store, and a sealed key moved to another passkey does not open")
        func sealed() throws {
            let f = try PasskeyFixture()
            let com = try #require(try f.create(Call.creation()).result)
            let org = try #require(try f.create(Call.creation(origin: "https://example.org", rpID: "example.org")).result)
            let rows = try f.storeRows("SELECT rp_id, hex(private_sealed) FROM passkey_keys ORDER BY rp_id")
            #expect(rows.map { $0.split(separator: "|").first.map(String.init) } == ["example.com", "example.org"])
            for (row, credential) in zip(rows, [com, org]) {
                let sealed = String(row.split(separator: "|")[1])
                // The uncompressed point 04 ‖ x ‖ y ends the SubjectPublicKeyInfo, and is inside a DER ECPrivateKey.
                let spki = try Call.bytes(credential, "publicKey")
                let point = Hex.encode(Array(spki.suffix(65))).uppercased()
                #expect(!sealed.contains(point), "the public point, part of a DER private key, is not in the clear")
                #expect(!sealed.contains("020101042"), "no SEC1 ECPrivateKey header (version 1, 32-byte key)")
                #expect(!sealed.contains("2A8648CE3D030107"), "no prime256v1 OID")
                #expect(sealed.count >= 2 * 100, "the key is there, sealed: \(sealed.count / 2) bytes")
            }

            // The seal is bound to its credential id: example.org's sealed key under example.com's row does not open.
            #expect(try f.daemon.terminate() == 0)
            _ = try f.storeRows("UPDATE passkey_keys SET private_sealed = (SELECT private_sealed FROM passkey_keys WHERE rp_id = 'example.org') WHERE rp_id = 'example.com'",
                                readOnly: false)
            try f.daemon.start()
            let client = try f.daemon.connect()
            let swapped = try client.exchange("passkey.get", Call.request(), answers: ["pin": PasskeyFixture.pin])
            #expect(swapped.result == nil, "signed with a key sealed for another passkey: \(swapped.response)")
            #expect(swapped.reason == "internal", "\(swapped.response)")
            let intact = try client.exchange("passkey.get", Call.request(origin: "https://example.org", rpID: "example.org"), answers: ["pin": PasskeyFixture.pin])
            #expect(intact.result?["id"] == org["id"], "\(intact.response)")
            let counts = try client.result("passkey.list")["passkeys"]?.arrayValue?.map { $0["sign_count"] }
            #expect(counts == [1, 0], "the refused get moved no counter")
        }
    }

    // MARK: - authd as relying party, through its own authenticator

    @Suite("authd's relying party with authd's authenticator")
    struct OwnRelyingParty {
        static let config = "[passkeys]\nrp_id = example.com\nrp_name = Example Bank\norigins = https://login.example.com\n"

        @Test("register.begin needs a session; options from [passkeys], resident key and UV required; the second begin excludes the registered passkey")
        func registerOptions() throws {
            let f = try PasskeyFixture(config: Self.config)
            #expect(try f.client.call("auth.passkey.register.begin", ["session": "not-a-session"]).errorReason == "session.invalid")
            let begun = try f.client.result("auth.passkey.register.begin", ["session": f.token])
            #expect(begun["origin"] == "https://login.example.com")
            let options = try #require(begun["options"])
            #expect(options["rp"] == ["id": "example.com", "name": "Example Bank"])
            #expect(options["user"]?["name"] == "owner@example.org")
            #expect(options["authenticatorSelection"]?["residentKey"] == "required")
            #expect(options["authenticatorSelection"]?["userVerification"] == "required")
            #expect(options["pubKeyCredParams"] == [["type": "public-key", "alg": -7]])
            #expect(options["excludeCredentials"]?.arrayValue?.isEmpty == true, "\(options)")

            let (created, finished) = try f.registerPasskey()
            #expect(finished["id"] == created["id"])
            let held = try #require(try f.held().first)
            #expect(held["rp_id"] == "example.com")
            #expect(held["rp_name"] == "Example Bank")

            let again = try f.client.result("auth.passkey.register.begin", ["session": f.token])
            #expect(again["options"]?["excludeCredentials"]?.arrayValue?.map { $0["id"] } == [created["id"]])
            #expect(again["options"]?["user"]?["id"] == options["user"]?["id"], "the account keeps its user handle")
            guard case .object(var params) = again["options"] else { throw HarnessError("no options") }
            params["origin"] = again["origin"]
            let twice = try f.create(.object(params))
            #expect(twice.reason == "passkey.excluded", "authd's authenticator already holds it: \(twice.response)")
            #expect(twice.prompts.isEmpty)

            let signedIn = try f.loginWithPasskey()
            #expect(signedIn["result"]?["account"]?["id"] == f.accountID, "\(signedIn)")
        }

        @Test("login.begin for an unknown login: the same stand-in allowCredentials every time, and passkey.get answers passkey.none")
        func unknownLogin() throws {
            let f = try PasskeyFixture()
            let registered = try f.registerPasskey().created["id"]
            let first = try f.client.result("auth.passkey.login.begin", ["login": "+37255555555"])
            let second = try f.client.result("auth.passkey.login.begin", ["login": "+37255555555"])
            let stand = try #require(first["options"]?["allowCredentials"]?.arrayValue)
            #expect(stand.count == 1)
            #expect(second["options"]?["allowCredentials"]?.arrayValue == stand, "the same every time")
            #expect(first["flow"] != second["flow"])
            #expect(stand.first?["id"] != registered)
            #expect(stand.first?["id"]?.stringValue.flatMap { Base64URL.decode($0) }?.count == 32, "shaped like authd's own credential ids")
            let known = try f.client.result("auth.passkey.login.begin", ["login": "+37251234567"])
            #expect(known["options"]?["allowCredentials"]?.arrayValue?.map { $0["id"] } == [registered])

            guard case .object(var params) = first["options"] else { throw HarnessError("no options") }
            params["origin"] = first["origin"]
            let asserted = try f.get(.object(params))
            #expect(asserted.reason == "passkey.none", "authd holds a passkey for localhost, but not the stand-in: \(asserted.response)")
            #expect(asserted.prompts.isEmpty)
        }

        @Test("a deactivated account cannot sign in with its passkey (passkey.invalid, check credential), and its login gets a stand-in")
        func deactivated() throws {
            let f = try PasskeyFixture()
            let registered = try f.registerPasskey().created["id"]
            let begun = try f.client.result("auth.passkey.login.begin")
            guard case .object(var params) = begun["options"] else { throw HarnessError("no options") }
            params["origin"] = begun["origin"]
            let assertion = try #require(try f.get(.object(params)).result)
            _ = try f.client.result("account.deactivate", ["session": f.token, "password": .string(FingerprintFixture.password)])
            let finished = try f.client.call("auth.passkey.login.finish", ["flow": begun["flow"]!, "credential": assertion, "device": ["key": "device-1"]])
            #expect(finished.errorReason == "passkey.invalid", "\(finished)")
            #expect(finished["error"]?["data"]?["check"] == "credential")
            let again = try f.client.result("auth.passkey.login.begin", ["login": "+37251234567"])
            #expect(again["options"]?["allowCredentials"]?.arrayValue?.map { $0["id"] } != [registered])
        }

        @Test("auth.passkey.remove: the passkey authd still holds no longer signs in (passkey.invalid, check credential)")
        func removed() throws {
            let f = try PasskeyFixture()
            let id = try #require(try f.registerPasskey().created["id"])
            #expect(try f.loginWithPasskey()["result"] != nil, "it signs in before")
            #expect(try f.client.result("auth.passkey.remove", ["session": f.token, "id": id]) == ["id": id, "deleted": true])
            #expect(try f.client.result("auth.passkey.list", ["session": f.token])["passkeys"] == [])
            #expect(try f.held().map { $0["id"] } == [id], "the authenticator still holds the key")
            let refused = try f.loginWithPasskey()
            #expect(refused.errorReason == "passkey.invalid", "\(refused)")
            #expect(refused["error"]?["data"]?["check"] == "credential")
            #expect(try f.client.call("auth.passkey.remove", ["session": f.token, "id": id]).errorReason == "passkey.none")
        }

        @Test("locked: passkey.create and passkey.get verify the user themselves and work; passkey.list and delete answer session.locked; nothing unlocks")
        func locked() throws {
            let f = try PasskeyFixture()
            #expect(try f.client.result("lock")["locked"] == true)
            let created = try f.create(Call.creation())
            let id = try #require(created.result?["id"], "\(created.response)")
            #expect(created.kinds == ["pin"])
            #expect(try f.get(Call.request()).result?["id"] == id)
            #expect(try f.client.call("passkey.list").errorReason == "session.locked")
            #expect(try f.client.call("passkey.delete", ["id": id]).errorReason == "session.locked")
            #expect(try f.client.result("lock.status")["locked"] == true, "a passkey's UV is not an unlock")
            _ = try f.client.result("unlock", ["password": .string(FingerprintFixture.password)])
            #expect(try f.held().map { $0["sign_count"] } == [1])
        }
    }

    // MARK: - authctl

    @Suite("authctl passkey and login --passkey")
    struct CLI {
        @Test("register, list, login --passkey, passkey account, a wrong PIN (exit 5), delete; the PIN from a descriptor and never in authd's log")
        func endToEnd() throws {
            let f = try PasskeyFixture(config: "[log]\nlevel = debug\n")
            let pin = PasskeyFixture.pin + "\n"
            let session = f.daemon.directory + "/session"
            try (f.token.stringValue! + "\n").write(toFile: session, atomically: true, encoding: .utf8)

            let registered = try f.daemon.authctl(["passkey", "register", "--pin-fd", "0", "--session-file", session], stdin: pin)
            #expect(registered.status == 0, "\(registered.stderr)")
            #expect(registered.stdout.hasSuffix(" registered for owner@example.org\n"), "\(registered.stdout)")
            let id = try #require(registered.stdout.split(separator: " ").dropFirst().first.map(String.init), "\(registered.stdout)")
            let listed = try f.daemon.authctl(["passkey", "list"])
            #expect(listed.stdout.hasPrefix("\(id)  localhost  owner@example.org  created "), "\(listed.stdout)")
            #expect(listed.stdout.hasSuffix(", never used\n"))

            let signedIn = f.daemon.directory + "/signed-in"
            let login = try f.daemon.authctl(["login", "--passkey", "--pin-fd", "0", "--session-file", signedIn], stdin: pin)
            #expect(login.status == 0, "\(login.stderr)")
            #expect(login.stdout.hasPrefix("signed in as +37251234567 ("), "\(login.stdout)")
            #expect(try f.daemon.authctl(["whoami", "--session-file", signedIn]).status == 0, "the session was saved")
            let account = try f.daemon.authctl(["passkey", "account", "--session-file", signedIn])
            #expect(account.stdout.hasPrefix("\(id)  created "), "\(account.stdout)")
            #expect(account.stdout.contains(", last used "))

            let wrong = try f.daemon.authctl(["login", "--passkey", "--pin-fd", "0", "--session-file", f.daemon.directory + "/wrong"], stdin: "000000\n")
            #expect(wrong.status == 5, "\(wrong.stderr)")
            #expect(wrong.stderr.contains("(passkey.uv_failed)"), "\(wrong.stderr)")

            let deleted = try f.daemon.authctl(["passkey", "delete", id])
            #expect(deleted.stdout == "passkey \(id) deleted\n", "\(deleted.stderr)")
            #expect(try f.daemon.authctl(["passkey", "list"]).stdout == "no passkeys\n")
            #expect(!f.daemon.log.isEmpty)
            #expect(!f.daemon.log.contains(PasskeyFixture.pin), "the PIN is never logged")
        }

        @Test("login --passkey with no passkey on this device: exit 1, passkey.none, and the password and SMS sign-ins offered")
        func noPasskeyHere() throws {
            let f = try PasskeyFixture()
            let refused = try f.daemon.authctl(["login", "--passkey", "+37251234567", "--session-file", f.daemon.directory + "/s"])
            #expect(refused.status == 1, "\(refused.stderr)")
            #expect(refused.stderr.contains("passkey.none"), "\(refused.stderr)")
            #expect(refused.stderr.contains("authctl login +37251234567"), "\(refused.stderr)")
            #expect(refused.stderr.contains("authctl login --otp +37251234567"), "\(refused.stderr)")
            #expect(refused.stderr.split(separator: "\n").count == 1, "one line")
            #expect(!FileManager.default.fileExists(atPath: f.daemon.directory + "/s"), "no session saved")
        }
    }
}
