import Foundation
import Glibc
import OpenSSLCrypto
import Protocol
import Testing
@testable import authd
@testable import JOSE

/// A device as the tests make them: a key-agreement key and its kid.
private struct Device {
    let kid: String
    let key: P256PrivateKey

    var recipient: JWE.Recipient { get throws { JWE.Recipient(kid: kid, key: try key.publicKey()) } }
}

extension Device {
    init(_ kid: String) throws {
        self.init(kid: kid, key: try P256PrivateKey.generate())
    }
}

/// A JWE's JSON as a value to change, and back to text.
private func members(_ serialization: String) throws -> [String: JSONValue] {
    try #require(try JSONDecoder().decode(JSONValue.self, from: Data(serialization.utf8)).objectValue)
}

private func text(_ members: [String: JSONValue]) throws -> String {
    String(decoding: try WireCodec.encodeJSON(JSONValue.object(members)), as: UTF8.self)
}

/// A base64url value with its first byte's low bit flipped (still canonical).
private func flipped(_ value: JSONValue?) throws -> JSONValue {
    let text = try #require(value?.stringValue)
    var bytes = try #require(Base64URL.decode(text))
    bytes[0] ^= 1
    return .string(Base64URL.encode(bytes))
}

private func b64(_ json: String) -> JSONValue { .string(Base64URL.encode(Array(json.utf8))) }

/// What decrypting gives: the plaintext, or the failure.
private func outcome(_ serialization: String, as device: Device) -> Result<[UInt8], E2EEFailure> {
    Result { () throws(E2EEFailure) in try JWE.decrypt(serialization, kid: device.kid, key: device.key) }
}

private enum EPKPlacement { case protected, unprotected, header }

/// A JWE of our profile built by hand from the primitives, with the headers placed as a test
/// wants them: how another library may lay out the same encryption.
private func handMade(for device: Device, protected: [String: JSONValue], unprotected: [String: JSONValue]? = nil,
                      header: [String: JSONValue], epkIn placement: EPKPlacement = .header, aad: String? = nil, flattened: Bool = false,
                      plaintext: [UInt8]) throws -> String {
    let ephemeral = try P256PrivateKey.generate()
    let (x, y) = try ephemeral.publicKey().coordinates()
    let epk: JSONValue = ["kty": "EC", "crv": "P-256", "x": .string(Base64URL.encode(x)), "y": .string(Base64URL.encode(y))]
    var (protected, unprotected, header) = (protected, unprotected, header)
    switch placement {
    case .protected: protected["epk"] = epk
    case .unprotected: unprotected = (unprotected ?? [:]).merging(["epk": epk]) { $1 }
    case .header: header["epk"] = epk
    }
    let kek = try JWE.deriveKeyEncryptionKey(secret: try ephemeral.sharedSecret(with: device.key.publicKey()), apu: [], apv: [])
    let cek = try OpenSSL.randomSecret(32)
    let iv = try OpenSSL.randomBytes(12)
    let protectedText = Base64URL.encode(try WireCodec.encodeJSON(JSONValue.object(protected)))
    let associatedData = Array(protectedText.utf8) + (aad.map { Array(".\(Base64URL.encode(Array($0.utf8)))".utf8) } ?? [])
    let (ciphertext, tag) = try AESGCM.seal(plaintext, key: cek, iv: iv, associatedData: associatedData)
    var top: [String: JSONValue] = ["protected": .string(protectedText), "iv": .string(Base64URL.encode(iv)),
                                    "ciphertext": .string(Base64URL.encode(ciphertext)), "tag": .string(Base64URL.encode(tag))]
    top["unprotected"] = unprotected.map(JSONValue.object)
    top["aad"] = aad.map { .string(Base64URL.encode(Array($0.utf8))) }
    let recipient: [String: JSONValue] = ["header": .object(header), "encrypted_key": .string(Base64URL.encode(try AESKeyWrap.wrap(cek, kek: kek)))]
    if flattened {
        top.merge(recipient) { $1 }
    } else {
        top["recipients"] = [.object(recipient)]
    }
    return try text(top)
}

@Suite("E2EE: JWE to the account's devices, signed envelopes, published device keys")
struct E2EETests {
    let plaintext = Array(#"{"text":"the meeting moved to 3 pm","to":"conversation-1"}"#.utf8)

    @Test("every recipient decrypts; the kids are listed in order; a non-recipient and a wrong key are refused", arguments: [1, 2, 10])
    func roundTrip(count: Int) throws {
        let devices = try (0..<count).map { try Device("DEV\($0)-AAAA-BBBB") }
        let serialization = try JWE.encrypt(plaintext, to: devices.map { try $0.recipient })
        #expect(JWE.recipientIDs(serialization) == devices.map(\.kid))
        for device in devices {
            #expect(try JWE.decrypt(serialization, kid: device.kid, key: device.key) == plaintext)
        }
        let stranger = try Device("STRANGER")
        #expect(outcome(serialization, as: stranger) == .failure(.notARecipient))
        // The right kid with another key: the key does not unwrap.
        let impostor = Device(kid: devices[0].kid, key: stranger.key)
        #expect(outcome(serialization, as: impostor) == .failure(.tampered))
        // A fresh content key, IV and ephemeral keys every time.
        let again = try JWE.encrypt(plaintext, to: devices.map { try $0.recipient })
        let first = try members(serialization), second = try members(again)
        for part in ["iv", "ciphertext", "tag"] { #expect(first[part] != second[part]) }
    }

    @Test("the serialisation: general JSON, protected {\"enc\":\"A256GCM\"}, per recipient alg, kid, epk and a 40-byte encrypted_key")
    func layout() throws {
        let devices = try [Device("ONE"), Device("TWO")]
        let serialization = try JWE.encrypt(plaintext, to: devices.map { try $0.recipient })
        #expect(!serialization.contains("\n") && !serialization.contains(" "))
        let top = try members(serialization)
        #expect(Set(top.keys) == ["protected", "recipients", "iv", "ciphertext", "tag"])
        #expect(Base64URL.decode(try #require(top["protected"]?.stringValue)) == Array(#"{"enc":"A256GCM"}"#.utf8))
        #expect(Base64URL.decode(try #require(top["iv"]?.stringValue))?.count == 12)
        #expect(Base64URL.decode(try #require(top["tag"]?.stringValue))?.count == 16)
        #expect(Base64URL.decode(try #require(top["ciphertext"]?.stringValue))?.count == plaintext.count)
        let recipients = try #require(top["recipients"]?.arrayValue)
        for (recipient, device) in zip(recipients, devices) {
            let header = try #require(recipient.objectValue?["header"]?.objectValue)
            #expect(Set(header.keys) == ["alg", "kid", "epk"])
            #expect(header["alg"] == "ECDH-ES+A256KW" && header["kid"] == .string(device.kid))
            let epk = try #require(header["epk"]?.objectValue)
            #expect(Set(epk.keys) == ["kty", "crv", "x", "y"] && epk["kty"] == "EC" && epk["crv"] == "P-256")
            #expect(Base64URL.decode(try #require(recipient.objectValue?["encrypted_key"]?.stringValue))?.count == 40)
        }
    }

    @Test("encrypting to nobody, to one kid twice, or more than the size limit is refused")
    func encryptRefusals() throws {
        let device = try Device("ONE")
        #expect(throws: E2EEFailure.malformed) { try JWE.encrypt(self.plaintext, to: []) }
        #expect(throws: E2EEFailure.malformed) { try JWE.encrypt(self.plaintext, to: [try device.recipient, try device.recipient]) }
        #expect(throws: E2EEFailure.tooLarge(limit: JWE.maximumSerializationBytes)) {
            try JWE.encrypt([UInt8](repeating: 0x41, count: JWE.maximumSerializationBytes), to: [try device.recipient])
        }
        // Empty plaintexts are fine.
        let empty = try JWE.encrypt([], to: [try device.recipient])
        #expect(try JWE.decrypt(empty, kid: "ONE", key: device.key) == [])
    }

    /// Each part of a JWE changed, for the first recipient (the other's parts changed too): no
    /// change ever yields plaintext.
    @Test("a change to any part is refused as tampered or malformed, never decrypted",
          arguments: ["protected", "protected-removed", "iv", "ciphertext", "tag", "encrypted_key", "other-encrypted_key", "epk-other-point",
                      "epk-off-curve", "kid", "alg", "enc-in-header", "iv-short", "tag-short", "encrypted_key-short", "recipients-empty",
                      "aad-added", "unprotected-added", "zip", "crit", "epk-private", "epk-curve", "padding"])
    func tampering(change: String) throws {
        let devices = try [Device("ONE"), Device("TWO")]
        let serialization = try JWE.encrypt(plaintext, to: devices.map { try $0.recipient })
        var top = try members(serialization)
        let list = try #require(top["recipients"]?.arrayValue)
        var recipients = list.compactMap(\.objectValue)
        var header = try #require(recipients[0]["header"]?.objectValue)
        var epk = try #require(header["epk"]?.objectValue)
        switch change {
        case "protected": top["protected"] = b64(#"{"enc":"A256GCM","typ":"x"}"#)
        case "protected-removed": top["protected"] = nil; header["enc"] = "A256GCM"
        case "iv", "ciphertext", "tag": top[change] = try flipped(top[change])
        case "encrypted_key": recipients[0]["encrypted_key"] = try flipped(recipients[0]["encrypted_key"])
        case "other-encrypted_key": recipients[0]["encrypted_key"] = recipients[1]["encrypted_key"]
        case "epk-other-point":
            let (x, y) = try P256PrivateKey.generate().publicKey().coordinates()
            epk["x"] = .string(Base64URL.encode(x))
            epk["y"] = .string(Base64URL.encode(y))
        case "epk-off-curve": epk["y"] = try flipped(epk["y"])
        case "kid": header["kid"] = "TWO"
        case "alg": header["alg"] = "ECDH-ES+A128KW"
        case "enc-in-header": header["enc"] = "A256GCM"  // also in the protected header: a duplicate
        case "iv-short": top["iv"] = .string(Base64URL.encode([UInt8](repeating: 1, count: 8)))
        case "tag-short": top["tag"] = .string(Base64URL.encode([UInt8](repeating: 1, count: 12)))
        case "encrypted_key-short": recipients[0]["encrypted_key"] = .string(Base64URL.encode([UInt8](repeating: 1, count: 32)))
        case "recipients-empty": recipients = []
        case "aad-added": top["aad"] = b64("context")
        case "unprotected-added": top["unprotected"] = ["enc": "A256GCM"]  // unprotected, so only a duplicate is refused
        case "zip": header["zip"] = "DEF"
        case "crit": header["crit"] = ["exp"]; header["exp"] = 1
        case "epk-private": epk["d"] = .string(Base64URL.encode([UInt8](repeating: 1, count: 32)))
        case "epk-curve": epk["crv"] = "P-384"
        case "padding": top["tag"] = .string(try #require(top["tag"]?.stringValue) + "==")
        default: Issue.record("unknown change \(change)")
        }
        header["epk"] = .object(epk)
        if !recipients.isEmpty { recipients[0]["header"] = .object(header) }
        top["recipients"] = .array(recipients.map(JSONValue.object))
        let changed = try text(top)
        switch outcome(changed, as: devices[0]) {
        case .success: Issue.record("\(change): decrypted")
        case .failure(let failure): #expect([.tampered, .malformed, .notARecipient].contains(failure), "\(change): \(failure)")
        }
        // Changes to shared parts reach the other recipient too; none decrypts wrongly.
        if case .success(let other) = outcome(changed, as: devices[1]) { #expect(other == plaintext, "\(change)") }
    }

    @Test("which failure each change gives", arguments: [
        ("ciphertext", E2EEFailure.tampered), ("tag", .tampered), ("iv", .tampered), ("protected", .tampered),
        ("encrypted_key", .tampered), ("epk-other-point", .tampered), ("epk-off-curve", .malformed), ("alg", .malformed),
    ])
    func tamperingReasons(change: String, expected: E2EEFailure) throws {
        let device = try Device("ONE")
        var top = try members(try JWE.encrypt(plaintext, to: [try device.recipient]))
        var recipient = try #require(top["recipients"]?.arrayValue?.first?.objectValue)
        var header = try #require(recipient["header"]?.objectValue)
        var epk = try #require(header["epk"]?.objectValue)
        switch change {
        case "protected": top["protected"] = b64(#"{"enc":"A256GCM","typ":"x"}"#)
        case "encrypted_key": recipient["encrypted_key"] = try flipped(recipient["encrypted_key"])
        case "epk-other-point":
            let (x, y) = try P256PrivateKey.generate().publicKey().coordinates()
            epk["x"] = .string(Base64URL.encode(x))
            epk["y"] = .string(Base64URL.encode(y))
        case "epk-off-curve": epk["y"] = try flipped(epk["y"])
        case "alg": header["alg"] = "ECDH-ES+A128KW"
        default: top[change] = try flipped(top[change])
        }
        header["epk"] = .object(epk)
        recipient["header"] = .object(header)
        top["recipients"] = [.object(recipient)]
        #expect(outcome(try text(top), as: device) == .failure(expected))
    }

    @Test("headers are merged as RFC 7516 says: alg and enc protected, epk unprotected, aad honoured, the flattened syntax read")
    func headerPlacement() throws {
        let device = try Device("ONE")
        let cases: [String] = [
            try handMade(for: device, protected: ["enc": "A256GCM"], header: ["alg": "ECDH-ES+A256KW", "kid": "ONE"], plaintext: plaintext),
            try handMade(for: device, protected: ["alg": "ECDH-ES+A256KW", "enc": "A256GCM"], header: ["kid": "ONE"], plaintext: plaintext),
            try handMade(for: device, protected: ["enc": "A256GCM"], unprotected: ["alg": "ECDH-ES+A256KW"], header: ["kid": "ONE"], epkIn: .unprotected,
                         plaintext: plaintext),
            try handMade(for: device, protected: ["enc": "A256GCM"], header: ["alg": "ECDH-ES+A256KW", "kid": "ONE"], epkIn: .protected, plaintext: plaintext),
            try handMade(for: device, protected: ["enc": "A256GCM", "kid": "ONE"], header: ["alg": "ECDH-ES+A256KW"], aad: "context", plaintext: plaintext),
            try handMade(for: device, protected: ["enc": "A256GCM"], header: ["alg": "ECDH-ES+A256KW", "kid": "ONE", "typ": "x"], flattened: true,
                         plaintext: plaintext),
        ]
        for serialization in cases {
            #expect(JWE.recipientIDs(serialization) == ["ONE"])
            #expect(outcome(serialization, as: device) == .success(plaintext), "\(serialization)")
        }
        let refused: [String] = [
            // alg twice (protected and per recipient), enc twice (protected and unprotected).
            try handMade(for: device, protected: ["enc": "A256GCM", "alg": "ECDH-ES+A256KW"], header: ["alg": "ECDH-ES+A256KW", "kid": "ONE"],
                         plaintext: plaintext),
            try handMade(for: device, protected: ["enc": "A256GCM"], unprotected: ["enc": "A256GCM"], header: ["alg": "ECDH-ES+A256KW", "kid": "ONE"],
                         plaintext: plaintext),
            // Another content encryption, or none; no kid.
            try handMade(for: device, protected: ["enc": "A128GCM"], header: ["alg": "ECDH-ES+A256KW", "kid": "ONE"], plaintext: plaintext),
            try handMade(for: device, protected: ["typ": "x"], header: ["alg": "ECDH-ES+A256KW", "kid": "ONE"], plaintext: plaintext),
            try handMade(for: device, protected: ["enc": "A256GCM"], header: ["alg": "ECDH-ES+A256KW"], plaintext: plaintext),
        ]
        for serialization in refused {
            #expect(JWE.recipientIDs(serialization) == nil)
            #expect(outcome(serialization, as: device) == .failure(.malformed), "\(serialization)")
        }
    }

    @Test("hostile input — garbage, huge, deeply nested, duplicate members, wrong types — is malformed, and nothing crashes")
    func hostileInput() throws {
        let device = try Device("ONE")
        let valid = try members(try JWE.encrypt(plaintext, to: [try device.recipient]))
        var duplicate = try text(valid)
        duplicate.removeLast()
        duplicate += #","tag":"AAAAAAAAAAAAAAAAAAAAAA"}"#
        var manyRecipients = valid
        manyRecipients["recipients"] = .array(Array(repeating: try #require(valid["recipients"]?.arrayValue?.first), count: 3))
        let inputs: [String] = [
            "", " ", "null", "[]", "{}", "\"text\"", "{\"protected\":", String(repeating: "[", count: 100_000),
            String(repeating: "{\"a\":", count: 50_000) + "1" + String(repeating: "}", count: 50_000),
            "{\"protected\":\"" + String(repeating: "A", count: 2 << 20) + "\"}",
            try text(valid.merging(["extra": .string(String(repeating: "x", count: JWE.maximumSerializationBytes))]) { $1 }),
            "\u{FEFF}" + (try text(valid)),
            try text(valid) + "x",
            duplicate,
            try text(manyRecipients),
            try text(valid.merging(["recipients": "ONE"]) { $1 }),
            try text(valid.merging(["recipients": [1, 2]]) { $1 }),
            try text(valid.merging(["iv": 12]) { $1 }),
            try text(valid.merging(["protected": b64(String(repeating: "[", count: 600) + String(repeating: "]", count: 600))]) { $1 }),
            try text(valid.merging(["protected": b64("[\"enc\",\"A256GCM\"]")]) { $1 }),
            try text(valid.merging(["header": ["kid": "ONE"]]) { $1 }),
            "{\"protected\":\"eyJlbmMiOiJBMjU2R0NNIn0\",\"iv\":\"\u{0}\"}",
        ]
        for input in inputs {
            #expect(JWE.recipientIDs(input) == nil, "\(input.prefix(60))")
            #expect(outcome(input, as: device) == .failure(.malformed), "\(input.prefix(60))")
            #expect(SignedEnvelope.signer(of: input) == nil)
            #expect(throws: E2EEFailure.malformed) { try SignedEnvelope.open(input, signerKey: try device.key.publicKey()) }
        }
    }

    @Test("a signed envelope opens with the sender's key only; its kid is readable before")
    func signedEnvelope() throws {
        let sender = try P256PrivateKey.generate()
        let device = try Device("ONE")
        let jwe = try JWE.encrypt(plaintext, to: [try device.recipient])
        let envelope = try SignedEnvelope.sign(jwe: jwe, kid: "SENDER-1", key: sender)
        let parts = envelope.split(separator: ".", omittingEmptySubsequences: false)
        #expect(parts.count == 3)
        let header = try members(String(decoding: try #require(Base64URL.decode(parts[0])), as: UTF8.self))
        #expect(header == ["alg": "ES256", "kid": "SENDER-1", "cty": "jose+json"])
        #expect(Base64URL.decode(parts[1]) == Array(jwe.utf8))
        #expect(SignedEnvelope.signer(of: envelope) == "SENDER-1")
        #expect(try SignedEnvelope.open(envelope, signerKey: try sender.publicKey()) == jwe)
        #expect(try JWE.decrypt(try SignedEnvelope.open(envelope, signerKey: try sender.publicKey()), kid: "ONE", key: device.key) == plaintext)

        #expect(throws: E2EEFailure.badSignature) { try SignedEnvelope.open(envelope, signerKey: try P256PrivateKey.generate().publicKey()) }
        // Another JWE under the same signature, or another kid in the header.
        let other = try JWE.encrypt(plaintext, to: [try device.recipient])
        let swapped = "\(parts[0]).\(Base64URL.encode(Array(other.utf8))).\(parts[2])"
        #expect(throws: E2EEFailure.badSignature) { try SignedEnvelope.open(swapped, signerKey: try sender.publicKey()) }
        let renamed = Base64URL.encode(try WireCodec.encodeJSON(["alg": "ES256", "kid": "SENDER-2", "cty": "jose+json"] as JSONValue))
        #expect(throws: E2EEFailure.badSignature) { try SignedEnvelope.open("\(renamed).\(parts[1]).\(parts[2])", signerKey: try sender.publicKey()) }
        // Not our profile: another alg, a crit, no cty, four parts, a short signature.
        for header: JSONValue in [["alg": "ES384", "kid": "S", "cty": "jose+json"], ["alg": "ES256", "kid": "S", "cty": "jose+json", "crit": ["b64"], "b64": false],
                                  ["alg": "ES256", "kid": "S"], ["alg": "ES256", "kid": "", "cty": "jose+json"]] {
            let other = Base64URL.encode(try WireCodec.encodeJSON(header)) + ".\(parts[1]).\(parts[2])"
            #expect(SignedEnvelope.signer(of: other) == nil)
            #expect(throws: E2EEFailure.malformed) { try SignedEnvelope.open(other, signerKey: try sender.publicKey()) }
        }
        #expect(SignedEnvelope.signer(of: envelope + ".x") == nil)
        #expect(SignedEnvelope.signer(of: "\(parts[0]).\(parts[1]).\(parts[2].prefix(40))") == nil)
    }

    @Test("a published device key verifies against its device id; a substituted key, SPKI, id or signature is refused")
    func publishedDeviceKey() throws {
        let signing = try P256PrivateKey.generate()
        let agreement = try P256PrivateKey.generate().publicKey()
        let spki = try signing.publicKey().spki
        let deviceID = DeviceID(keySHA256: OpenSSL.sha256(spki)).description
        let published = try PublishedDeviceKey.make(deviceID: deviceID, signingKey: signing, agreementKey: agreement)
        #expect(published.deviceID == deviceID && published.signingKeySPKI == spki)
        let (signingKey, agreementKey) = try published.verified()
        #expect(signingKey.spki == spki && agreementKey.spki == agreement.spki)

        let parts = published.statement.split(separator: ".").map(String.init)
        #expect(try members(String(decoding: try #require(Base64URL.decode(parts[0])), as: UTF8.self))
                    == ["alg": "ES256", "kid": .string(deviceID), "typ": "authd-e2ee-key"])
        let payload = try members(String(decoding: try #require(Base64URL.decode(parts[1])), as: UTF8.self))
        #expect(payload["device_id"] == .string(deviceID))
        let jwk = try #require(payload["jwk"]?.objectValue)
        #expect(jwk["use"] == "enc" && jwk["alg"] == "ECDH-ES+A256KW" && jwk["kid"] == .string(deviceID) && jwk["kty"] == "EC" && jwk["crv"] == "P-256")

        let refused = E2EEFailure.badDeviceKey(deviceID: deviceID)
        // The hub swaps the agreement key in the payload, keeping the signature.
        var swappedJWK = jwk
        let (x, y) = try P256PrivateKey.generate().publicKey().coordinates()
        swappedJWK["x"] = .string(Base64URL.encode(x))
        swappedJWK["y"] = .string(Base64URL.encode(y))
        let swappedPayload = Base64URL.encode(try WireCodec.encodeJSON(JSONValue.object(["device_id": .string(deviceID), "jwk": .object(swappedJWK)])))
        let swapped = PublishedDeviceKey(deviceID: deviceID, signingKeySPKI: spki, statement: "\(parts[0]).\(swappedPayload).\(parts[2])")
        #expect(throws: refused) { try swapped.verified() }
        // The hub signs its own agreement key with its own key, under the device's id and SPKI …
        let hub = try P256PrivateKey.generate()
        let hubStatement = try CompactJWS.sign(header: ["alg": "ES256", "kid": .string(deviceID), "typ": "authd-e2ee-key"],
                                               payload: Array(try WireCodec.encodeJSON(JSONValue.object(["device_id": .string(deviceID), "jwk": .object(swappedJWK)]))),
                                               key: hub)
        #expect(throws: refused) { try PublishedDeviceKey(deviceID: deviceID, signingKeySPKI: spki, statement: hubStatement).verified() }
        // … or with its own SPKI: the id is not its hash.
        let hubSPKI = try hub.publicKey().spki
        #expect(throws: refused) { try PublishedDeviceKey(deviceID: deviceID, signingKeySPKI: hubSPKI, statement: hubStatement).verified() }
        #expect(throws: refused) { try PublishedDeviceKey(deviceID: deviceID, signingKeySPKI: hubSPKI, statement: published.statement).verified() }
        let forged = try PublishedDeviceKey.make(deviceID: DeviceID(keySHA256: OpenSSL.sha256(hubSPKI)).description,
                                                 signingKey: hub, agreementKey: try P256PrivateKey.generate().publicKey())
        #expect(try forged.verified().signing.spki == hubSPKI)
        // A statement moved to another device's id.
        let otherID = forged.deviceID
        #expect(throws: E2EEFailure.badDeviceKey(deviceID: otherID)) {
            try PublishedDeviceKey(deviceID: otherID, signingKeySPKI: forged.signingKeySPKI, statement: published.statement).verified()
        }
        #expect(throws: refused) { try PublishedDeviceKey(deviceID: deviceID, signingKeySPKI: spki + [0], statement: published.statement).verified() }
        #expect(throws: refused) { try PublishedDeviceKey(deviceID: deviceID, signingKeySPKI: spki, statement: "garbage").verified() }
        // Made for an id that is not the signing key's.
        #expect(throws: E2EEFailure.badDeviceKey(deviceID: otherID)) {
            try PublishedDeviceKey.make(deviceID: otherID, signingKey: signing, agreementKey: agreement)
        }
    }

    @Test("each failure has its stable reason, and messages carry no key material")
    func reasons() {
        let table: [(E2EEFailure, String)] = [
            (.malformed, "e2ee.malformed"), (.notARecipient, "e2ee.not_a_recipient"), (.tampered, "e2ee.tampered"),
            (.badSignature, "e2ee.bad_signature"), (.unknownSender, "e2ee.unknown_sender"), (.badDeviceKey(deviceID: "AAAA-BBBB"), "e2ee.bad_device_key"),
            (.tooLarge(limit: 10), "e2ee.too_large"),
        ]
        for (failure, reason) in table {
            #expect(failure.reason.rawValue == reason)
            #expect(wireError(failure).reason.rawValue == reason)
            #expect(wireError(failure).code == .applicationError)
            #expect(!failure.message.isEmpty)
        }
        #expect(E2EEFailure.badDeviceKey(deviceID: "AAAA-BBBB").rpcError.details["device_id"] == "AAAA-BBBB")
    }
}

extension E2EETests {
    /// authd against Debian's python3-jwcrypto (Tests/IntegrationTests/Python/jose_peer.py),
    /// which shares no code with it: each reads what the other writes, for this one profile.
    @Suite("E2EE interop with python3-jwcrypto")
    struct JWCrypto {
        static let peer = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("IntegrationTests/Python/jose_peer.py").path

        let directory = TemporaryDirectory()
        let plaintext = Array(#"{"text":"naïve café ☕","to":"conversation-1"}"#.utf8)

        /// Runs the peer with `input` on stdin; its output goes to files (never a full pipe), and
        /// it is killed if it has not finished within 20 s.
        func peer(_ arguments: [String], input: [UInt8]) async throws -> ChildProcess.Run {
            let run = try await ChildProcess("/usr/bin/python3", [Self.peer] + arguments, input: input, directory: directory.path).finish(within: 20)
            if !run.ended { Issue.record("jose_peer.py \(arguments.first ?? "") did not finish within 20 s") }
            return run
        }

        /// A key written for the peer: the private key as DER (RFC 5915), the public as SPKI.
        func write(_ key: P256PrivateKey, name: String) throws -> (privatePath: String, publicPath: String) {
            let privatePath = directory.path + "/\(name).key.der", publicPath = directory.path + "/\(name).pub.der"
            _ = FileManager.default.createFile(atPath: privatePath, contents: Data(try key.derRepresentation().withUnsafeBytes { Array($0) }),
                                               attributes: [.posixPermissions: 0o600])
            _ = FileManager.default.createFile(atPath: publicPath, contents: Data(try key.publicKey().spki))
            return (privatePath, publicPath)
        }

        @Test("jwcrypto decrypts authd's JWE as each of three recipients, and verifies the sender's envelope", arguments: 0..<3)
        func jwcryptoReadsAuthd(index: Int) async throws {
            let devices = try (0..<3).map { try Device("DEVICE-\($0)") }
            let sender = try P256PrivateKey.generate()
            let jwe = try JWE.encrypt(plaintext, to: devices.map { try $0.recipient })
            let envelope = try SignedEnvelope.sign(jwe: jwe, kid: "SENDER", key: sender)
            let files = try write(devices[index].key, name: devices[index].kid)
            let signer = try write(sender, name: "sender")

            let bare = try await peer(["decrypt", "--key", files.privatePath, "--kid", devices[index].kid], input: Array(jwe.utf8))
            #expect(bare.status == 0, "\(bare.errors)")
            #expect(bare.bytes == plaintext)
            let signed = try await peer(["decrypt", "--key", files.privatePath, "--kid", devices[index].kid, "--signer", signer.publicPath],
                                  input: Array(envelope.utf8))
            #expect(signed.status == 0, "\(signed.errors)")
            #expect(signed.bytes == plaintext)
            if index == 0 {
                // Another signer's key, and a tampered JWE, are refused there too.
                let stranger = try write(try P256PrivateKey.generate(), name: "stranger")
                let wrongSigner = try await peer(["decrypt", "--key", files.privatePath, "--kid", devices[0].kid, "--signer", stranger.publicPath],
                                           input: Array(envelope.utf8))
                #expect(wrongSigner.status == 1 && wrongSigner.bytes.isEmpty)
                var top = try members(jwe)
                top["ciphertext"] = try flipped(top["ciphertext"])
                let tampered = try await peer(["decrypt", "--key", files.privatePath, "--kid", devices[0].kid], input: Array(try text(top).utf8))
                #expect(tampered.status == 1 && tampered.bytes.isEmpty)
            }
        }

        @Test("authd decrypts jwcrypto's JWE, flattened (one recipient) and general (two), and refuses it tampered", arguments: [1, 2])
        func authdReadsJWCrypto(count: Int) async throws {
            let devices = try (0..<count).map { try Device("DEVICE-\($0)") }
            var arguments = ["encrypt"]
            for device in devices {
                arguments += ["--to", try write(device.key, name: device.kid).publicPath, "--kid", device.kid]
            }
            let run = try await peer(arguments, input: plaintext)
            #expect(run.status == 0, "\(run.errors)")
            let serialization = run.output
            let top = try members(serialization)
            #expect(count == 1 ? top["recipients"] == nil && top["header"] != nil : top["recipients"]?.arrayValue?.count == count)
            #expect(JWE.recipientIDs(serialization) == devices.map(\.kid))
            for device in devices {
                #expect(outcome(serialization, as: device) == .success(plaintext))
            }
            #expect(outcome(serialization, as: try Device("STRANGER")) == .failure(.notARecipient))
            for part in ["ciphertext", "tag", "iv"] {
                var changed = top
                changed[part] = try flipped(top[part])
                #expect(outcome(try text(changed), as: devices[0]) == .failure(.tampered), "\(part)")
            }
        }
    }
}
