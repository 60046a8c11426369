import CLinux
import Foundation
import OpenSSLCrypto
import Protocol
import Testing
@testable import authd

private func b64(_ text: String) -> [UInt8] { Base64URL.decode(text)! }

/// WebAuthn L3 §16.2 "ES256 Credential with No Attestation" (packed as toJSON shapes).
private enum W3CVector {
    static let rpID = "example.org"
    static let origin = "https://example.org"
    static let credentialID = b64("-R85HbTJsv3g6nAYnLo_tj9Xm6YSKzOtlP8-wzAIS-Q")
    static let registrationChallenge = b64("AMMPt4UxxGTStncdq417YDwBFi8vpIa-pw8oOuVW4TA")
    static let registrationClientData = b64("eyJ0eXBlIjoid2ViYXV0aG4uY3JlYXRlIiwiY2hhbGxlbmdlIjoiQU1NUHQ0VXh4R1RTdG5jZHE0MTdZRHdCRmk4dnBJYS1wdzhvT3VWVzRUQSIsIm9yaWdpbiI6Imh0dHBzOi8vZXhhbXBsZS5vcmciLCJjcm9zc09yaWdpbiI6ZmFsc2UsImV4dHJhRGF0YSI6ImNsaWVudERhdGFKU09OIG1heSBiZSBleHRlbmRlZCB3aXRoIGFkZGl0aW9uYWwgZmllbGRzIGluIHRoZSBmdXR1cmUsIHN1Y2ggYXMgdGhpczogQmtRZURqZGNUQnJYQmlBd0pUTEU1USJ9")
    static let attestationObject = hex("a363666d74646e6f6e656761747453746d74a068617574684461746158a4bfabc37432958b063360d3ad6461c9c4735ae7f8edd46592a5e0f01452b2e4b559000000008446ccb9ab1db374750b2367ff6f3a1f0020f91f391db4c9b2fde0ea70189cba3fb63f579ba6122b33ad94ff3ec330084be4a5010203262001215820afefa16f97ca9b2d23eb86ccb64098d20db90856062eb249c33a9b672f26df61225820930a56b87a2fca66334b03458abf879717c12cc68ed73290af2e2664796b9220")
    static let authenticationChallenge = b64("OcDnUhQXulTUPo3JUXT0I97pvzzYBP9tZchXyav01Ag")
    static let authenticationClientData = b64("eyJ0eXBlIjoid2ViYXV0aG4uZ2V0IiwiY2hhbGxlbmdlIjoiT2NEblVoUVh1bFRVUG8zSlVYVDBJOTdwdnp6WUJQOXRaY2hYeWF2MDFBZyIsIm9yaWdpbiI6Imh0dHBzOi8vZXhhbXBsZS5vcmciLCJjcm9zc09yaWdpbiI6ZmFsc2V9")
    static let authenticatorData = b64("v6vDdDKViwYzYNOtZGHJxHNa5_jt1GWSpeDwFFKy5LUZAAAAAA")
    static let signature = b64("MEYCIQD1Ck4uRAkknEqFO6NhKC8JhB303UVHoTqHeAIY3v_NOAIhAISArA8Lk1OBdPV1vxGh3V14xuSGAT-TcpXqE2U-Mx6H")
    static let publicKeySPKI = b64("MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEr--hb5fKmy0j64bMtkCY0g25CFYGLrJJwzqbZy8m32GTCla4ei_KZjNLA0WKv4eXF8Esxo7XMpCvLiZkeWuSIA")

    static func expectation(_ challenge: [UInt8], origin: String = origin, rpID: String = rpID, uv: Bool = false) -> RelyingPartyExpectation {
        RelyingPartyExpectation(rpID: rpID, origins: [origin], challenge: challenge, requireUserVerification: uv)
    }
}

@Suite("Passkeys: CBOR through libcbor, strict and canonical")
struct CBORTests {
    /// Found by the webauthn fuzz target (LeakSanitizer): an array whose later element cannot
    /// be encoded (a map with a duplicate key, which `decode`'s canonical check re-encodes from
    /// hostile input) kept the array and its earlier elements, about 100 KB a call here: leaked,
    /// 100 calls hold some 10 MB more of malloc's memory.
    ///
    /// What is measured is malloc's bytes in use, before and after 100 calls, three times. The
    /// tests beside this one allocate in the same process meanwhile; what they hold at the end of
    /// one round counts there, but they cannot grow in every round as a leak does. (The resident
    /// size, which this test first read, also keeps what they allocated and freed.)
    @Test("encoding that fails part-way frees the libcbor items it built")
    func failedEncodingFreesItems() throws {
        func inUse() -> Int { Int(authd_malloc_in_use()) }
        let value = CBORValue.array(Array(repeating: .unsigned(0), count: 2000) + [.map([(.unsigned(1), .null), (.unsigned(1), .null)])])
        #expect(throws: CBORError.self) { try CBOR.encode(value) }
        var grown: [Int] = []
        for _ in 0..<3 {
            let before = inUse()
            for _ in 0..<100 { _ = try? CBOR.encode(value) }
            grown.append(inUse() - before)
        }
        #expect(grown.min()! < 2 << 20, "malloc's memory in use grew by \(grown) bytes in three rounds of 100 failed encodings")
    }

    /// Found by the webauthn fuzz target (a 156-byte input ran past libFuzzer's 10 s limit):
    /// maps used as keys of maps, each key encoded once to sort it and built again to add it,
    /// so the work doubled at every level — with two such keys per level, 4^16 builds at
    /// the 16 levels decoding allows. Each key is now built once.
    @Test("maps nested as keys of maps encode in one pass, however deep decoding allows", .timeLimit(.minutes(1)))
    func nestedMapKeys() throws {
        var value = CBORValue.unsigned(0)
        for level in 0..<CBOR.maxDepth {
            value = .map([(value, .unsigned(UInt64(level))), (.map([(value, .null)]), .null)])
        }
        let bytes = try CBOR.encode(value)
        #expect(bytes.count > 0)
        // Decoding re-encodes to check the canonical form: the fuzzer's input goes through that.
        let found: [UInt8] = Array(Data(base64Encoded: "AKQBYUFVYml0c1VVVVVVVVWcVVVVVVVVVVXaVVXVVVUAggCiAaGhoaGhoaGhoaGhoaGhAWFBVWJpdHNVVVVVVVVVnFVVVdVVVVVVVVVwcmltZdVVVQCCAKKhoaGhoaGhAaGhoaGhoaGhoaGhoaGhOgcAAAAAAACAGRkZoaGhoaGhoToHAAAAAAAAgBkZGRkZKRkZGQEAAAAAABAA")!)
        _ = try? CBOR.decodePrefix(found.dropFirst())
    }

    @Test("the W3C attestation object decodes and re-encodes to the very same bytes; its COSE key is the spec's")
    func roundTrip() throws {
        let value = try CBOR.decode(W3CVector.attestationObject)
        #expect(try CBOR.encode(value) == W3CVector.attestationObject)
        guard case .bytes(let authData)? = value[.text("authData")] else { Issue.record("no authData"); return }
        let data = try AuthenticatorData.parse(authData)
        let key = try #require(data.attested?.publicKey)
        #expect(try key.encoded() == hex("a5010203262001215820afefa16f97ca9b2d23eb86ccb64098d20db90856062eb249c33a9b672f26df61225820930a56b87a2fca66334b03458abf879717c12cc68ed73290af2e2664796b9220"))
        #expect(key.subjectPublicKeyInfo == W3CVector.publicKeySPKI)
    }

    @Test("the encoder writes CTAP2 canonical CBOR: shortest integers, keys by type then length then bytes")
    func canonicalEncoding() throws {
        #expect(try CBOR.encode(.unsigned(5)) == [0x05])
        #expect(try CBOR.encode(.unsigned(24)) == [0x18, 0x18])
        #expect(try CBOR.encode(.unsigned(256)) == [0x19, 0x01, 0x00])
        #expect(try CBOR.encode(.integer(-7)) == [0x26])
        #expect(try CBOR.encode(.map([(.text("authData"), .null), (.text("fmt"), .null), (.integer(-1), .null), (.unsigned(3), .null), (.text("attStmt"), .null)]))
                == hex("a503f620f663666d74f667617474537 46d74f66861757468446174 61f6".replacingOccurrences(of: " ", with: "")))
        #expect(throws: CBORError.self) { try CBOR.encode(.map([(.unsigned(1), .null), (.unsigned(1), .bool(true))])) }
    }

    @Test("the decoder refuses what a canonical encoder never writes", arguments: [
        ("a201020103", "duplicate key"), ("a203010102", "unsorted keys"), ("1805", "a small integer written long"), ("190005", "a 16-bit 5"),
        ("bf0102ff", "an indefinite map"), ("5f4101ff", "an indefinite byte string"), ("c11a514b67b0", "a tag"), ("f93c00", "a half float"),
        ("0102", "a trailing byte"), ("a2", "a truncated map"), ("", "nothing"), ("7f", "a truncated indefinite string"),
        ("62c328", "invalid UTF-8"),
    ])
    func strictDecoding(input: String, what: String) {
        #expect(throws: CBORError.self, "\(what)") { try CBOR.decode(hex(input)) }
    }

    @Test("a header claiming a huge map is refused without allocating it, and large inputs are refused outright")
    func hostileSizes() {
        #expect(throws: CBORError.self) { try CBOR.decode(hex("bb00000000ffffffff")) }
        // Sizes past Int.max, which reach Swift negative.
        #expect(throws: CBORError.self) { try CBOR.decode(hex("bbffffffffffffffff")) }
        #expect(throws: CBORError.self) { try CBOR.decode(hex("9bffffffffffffffff")) }
        #expect(throws: CBORError.self) { try CBOR.decode(hex("bb8000000000000001")) }
        #expect(throws: CBORError.self) { try CBOR.decode([UInt8](repeating: 0x81, count: CBOR.maxInput + 1)) }
        #expect(throws: CBORError.self) { try CBOR.decode([UInt8](repeating: 0x81, count: 4000) + [0x00]) }
        #expect(throws: CBORError.self) { try CBOR.decode([UInt8](repeating: 0x81, count: 100) + [0x00]) }
        #expect((try? CBOR.decode([0x81, 0x81, 0x00])) == .array([.array([.unsigned(0)])]))
    }

    /// Each head alone claims no more than the bytes left, but together they claim thousands of
    /// times that: libcbor would allocate 8 bytes per claimed entry for every open array, some
    /// 980 MiB from 64 KiB, before failing.
    @Test("nested heads that together claim more entries than the data holds are refused before libcbor allocates them")
    func nestedClaims() {
        var arrays: [UInt8] = []
        while arrays.count + 3 <= CBOR.maxInput - 1024 {
            let claim = min(0xFFFF, CBOR.maxInput - arrays.count - 3)
            arrays += [0x99, UInt8(claim >> 8), UInt8(claim & 0xFF)]
        }
        arrays += [UInt8](repeating: 0, count: CBOR.maxInput - arrays.count)
        #expect(throws: CBORError(description: "CBOR heads claim more entries than the data holds")) { try CBOR.decode(arrays) }
        // Two arrays of 30 each, nested, in 33 bytes: 59 entries owed after the second head.
        let nested: [UInt8] = [0x98, 30, 0x98, 30] + [UInt8](repeating: 0, count: 29)
        #expect(throws: CBORError(description: "CBOR heads claim more entries than the data holds")) { try CBOR.decode(nested) }
        // As many entries as bytes follow is fine, however they nest.
        let exact: [UInt8] = [0x82, 0x81, 0x00, 0xA1, 0x01, 0x02]
        #expect((try? CBOR.decode(exact)) == .array([.array([.unsigned(0)]), .map([(.unsigned(1), .unsigned(2))])]))
        // Nesting past maxDepth is refused by the scan, before libcbor builds anything.
        #expect(throws: CBORError(description: "CBOR nested deeper than \(CBOR.maxDepth) levels")) {
            try CBOR.decode([UInt8](repeating: 0x81, count: CBOR.maxDepth + 1) + [0x00])
        }
    }
}

extension CBORTests {
    @Test("every single-byte corruption and truncation of an attestation object decodes or is refused, never crashes")
    func mutations() {
        var generator = SystemRandomNumberGenerator()
        var refused = 0, decoded = 0
        let original = W3CVector.attestationObject
        for index in original.indices {
            for value: UInt8 in [0x00, 0x17, 0x18, 0x1f, 0x5f, 0x7f, 0x9f, 0xbf, 0xf9, 0xfb, 0xff, UInt8.random(in: 0...255, using: &generator)] {
                var bytes = original
                bytes[index] = value
                if (try? CBOR.decode(bytes)) == nil { refused += 1 } else { decoded += 1 }
            }
            if (try? CBOR.decode(Array(original[..<index]))) == nil { refused += 1 } else { decoded += 1 }
        }
        for _ in 0..<20_000 {
            let bytes = (0..<Int.random(in: 1...24, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if (try? CBOR.decode(bytes)) == nil { refused += 1 } else { decoded += 1 }
        }
        #expect(refused > 10_000, "most random bytes are not canonical CBOR")
        #expect(decoded > 0, "changes inside byte strings still decode")
    }
}

@Suite("Passkeys: the relying party's checks (WebAuthn L3 §7) on the W3C test vector")
struct RelyingPartyVerifierTests {
    @Test("the vector's registration and assertion verify (counter 0 and 0 is no counter)")
    func vectorVerifies() throws {
        let credential = try RelyingPartyVerifier.verifyRegistration(
            clientDataJSON: W3CVector.registrationClientData, attestationObject: W3CVector.attestationObject, credentialID: W3CVector.credentialID,
            expected: W3CVector.expectation(W3CVector.registrationChallenge))
        #expect(credential.id == W3CVector.credentialID && credential.backupEligible && credential.backupState && !credential.userVerified)
        let stored = RelyingPartyVerifier.StoredCredential(publicKey: credential.publicKey, signCount: 0, backupEligible: true)
        let assertion = try RelyingPartyVerifier.verifyAssertion(
            clientDataJSON: W3CVector.authenticationClientData, authenticatorData: W3CVector.authenticatorData, signature: W3CVector.signature,
            stored: stored, expected: W3CVector.expectation(W3CVector.authenticationChallenge))
        #expect(assertion == .init(signCount: 0, userVerified: false, backupState: true))
    }

    private func assertionCheck(clientData: [UInt8] = W3CVector.authenticationClientData, authData: [UInt8] = W3CVector.authenticatorData,
                                signature: [UInt8] = W3CVector.signature, storedCount: UInt32 = 0, backupEligible: Bool = true,
                                expected: RelyingPartyExpectation = W3CVector.expectation(W3CVector.authenticationChallenge)) throws -> String? {
        let credential = try RelyingPartyVerifier.verifyRegistration(
            clientDataJSON: W3CVector.registrationClientData, attestationObject: W3CVector.attestationObject, credentialID: W3CVector.credentialID,
            expected: W3CVector.expectation(W3CVector.registrationChallenge))
        do {
            _ = try RelyingPartyVerifier.verifyAssertion(clientDataJSON: clientData, authenticatorData: authData, signature: signature,
                                                         stored: .init(publicKey: credential.publicKey, signCount: storedCount, backupEligible: backupEligible),
                                                         expected: expected)
            return nil
        } catch {
            return error.check
        }
    }

    @Test("each tampering of the assertion is refused by the check that names it")
    func tamperedAssertions() throws {
        var flippedUV = W3CVector.authenticatorData
        flippedUV[32] |= AuthenticatorData.Flag.userVerified
        #expect(try assertionCheck(authData: flippedUV) == "signature")
        #expect(try assertionCheck(expected: W3CVector.expectation(W3CVector.authenticationChallenge, uv: true)) == "user_verified")
        #expect(try assertionCheck(expected: W3CVector.expectation(W3CVector.registrationChallenge)) == "challenge")
        #expect(try assertionCheck(expected: W3CVector.expectation(W3CVector.authenticationChallenge, origin: "https://evil.example")) == "origin")
        #expect(try assertionCheck(expected: W3CVector.expectation(W3CVector.authenticationChallenge, rpID: "evil.example")) == "rp_id")
        #expect(try assertionCheck(clientData: W3CVector.registrationClientData) == "type")
        #expect(try assertionCheck(storedCount: 5) == "sign_count")
        #expect(try assertionCheck(backupEligible: false) == "backup_eligible")
        var noPresence = W3CVector.authenticatorData
        noPresence[32] &= ~AuthenticatorData.Flag.userPresent
        #expect(try assertionCheck(authData: noPresence) == "user_present")
        var backedUpOnly = W3CVector.authenticatorData
        backedUpOnly[32] &= ~AuthenticatorData.Flag.backupEligible
        #expect(try assertionCheck(authData: backedUpOnly, backupEligible: false) == "backup_state")
        let crossOrigin = Array(#"{"type":"webauthn.get","challenge":"OcDnUhQXulTUPo3JUXT0I97pvzzYBP9tZchXyav01Ag","origin":"https://example.org","crossOrigin":true}"#.utf8)
        #expect(try assertionCheck(clientData: crossOrigin) == "cross_origin")
        #expect(try assertionCheck(authData: W3CVector.authenticatorData + [0]) == "authenticator_data")
    }

    @Test("registrations with another format, a mismatched rawId or a replayed challenge are refused")
    func tamperedRegistrations() throws {
        func check(_ object: [UInt8] = W3CVector.attestationObject, id: [UInt8] = W3CVector.credentialID, challenge: [UInt8] = W3CVector.registrationChallenge) -> String? {
            do {
                _ = try RelyingPartyVerifier.verifyRegistration(clientDataJSON: W3CVector.registrationClientData, attestationObject: object, credentialID: id,
                                                                expected: W3CVector.expectation(challenge))
                return nil
            } catch { return error.check }
        }
        #expect(check(id: [1, 2, 3]) == "credential_id")
        #expect(check(challenge: W3CVector.authenticationChallenge) == "challenge")
        let value = try CBOR.decode(W3CVector.attestationObject)
        guard case .map(var pairs) = value else { return }
        pairs[0].1 = .text("packed")
        #expect(check(try CBOR.encode(.map(pairs))) == "attestation_format")
        #expect(check(W3CVector.attestationObject + [0]) == "attestation_object")
    }

    @Test("an authenticator's data and client data, built here, verify; the client data serialises as §5.8.1.1 asks")
    func authenticatorSide() throws {
        let key = try P256PrivateKey.generate()
        let (x, y) = try key.publicKey().coordinates()
        let publicKey = try ES256PublicKey(x: x, y: y)
        let challenge = Array(repeating: UInt8(7), count: 32)
        let clientData = CollectedClientData.serialize(type: "webauthn.get", challenge: challenge, origin: "https://a\"b.example")
        #expect(String(decoding: clientData, as: UTF8.self) == #"{"type":"webauthn.get","challenge":"BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc","origin":"https://a\"b.example","crossOrigin":false}"#)
        let authData = try AuthenticatorData.make(rpID: "a\"b.example", flags: AuthenticatorData.Flag.userPresent | AuthenticatorData.Flag.userVerified,
                                                  signCount: 1, attested: nil)
        let signature = try ECDSASignature.derFromRaw(try key.signES256(authData + OpenSSL.sha256(clientData)))
        let verified = try RelyingPartyVerifier.verifyAssertion(
            clientDataJSON: clientData, authenticatorData: authData, signature: signature,
            stored: .init(publicKey: publicKey, signCount: 0, backupEligible: false),
            expected: RelyingPartyExpectation(rpID: "a\"b.example", origins: ["https://a\"b.example"], challenge: challenge, requireUserVerification: true))
        #expect(verified == .init(signCount: 1, userVerified: true, backupState: false))
    }
}

@Suite("Passkeys: which origins may use which RP IDs")
struct PasskeyScopeTests {
    @Test("RP IDs are lower-case domains, never IP addresses, schemes or ports")
    func domains() {
        for good in ["example.com", "localhost", "a-b.example.co.uk", "xn--bcher-kva.example", "x1.y2"] { #expect(PasskeyScope.isDomain(good), "\(good)") }
        for bad in ["", "Example.com", "example.com.", ".example.com", "127.0.0.1", "exa mple.com", "https://example.com", "example.com:443",
                    "-a.example", "a..b", "bücher.example", String(repeating: "a", count: 64) + ".com"] {
            #expect(!PasskeyScope.isDomain(bad), "\(bad)")
        }
    }

    @Test("origins: https anywhere, http only for localhost, exactly as serialized")
    func origins() {
        for good in ["https://example.com", "https://login.example.com:8443", "http://localhost", "http://localhost:8080", "https://localhost"] {
            #expect(PasskeyScope.Origin(good)?.serialized == good, "\(good)")
        }
        for bad in ["http://example.com", "https://example.com/", "https://example.com/path", "HTTPS://example.com", "https://Example.com",
                    "https://example.com:443", "https://127.0.0.1", "http://127.0.0.1", "https://[::1]", "https://user@example.com",
                    "https://example.com?x", "ftp://example.com", "example.com", "https://example.com#f"] {
            #expect(PasskeyScope.Origin(bad) == nil, "\(bad)")
        }
    }

    @Test("the public suffix list: plain rules, wildcards, exceptions, IDN rules and the implicit *")
    func publicSuffixes() throws {
        // libpsl's newest list: the rules below (com, co.uk, *.ck, !www.ck, github.io, 个人.hk) are in it.
        let list = try #require(PublicSuffixList.latest, "libpsl has a list (its built-in copy at least)")
        for suffix in ["com", "co.uk", "anything.ck", "github.io", "localhost", "example", "xn--ciqpn.hk"] { #expect(list.isPublicSuffix(suffix), "\(suffix)") }
        for registrable in ["example.com", "example.co.uk", "www.ck", "user.github.io", "a.anything.ck"] { #expect(!list.isPublicSuffix(registrable), "\(registrable)") }
    }

    @Test("clientDataJSON: crossOrigin must be a boolean and topOrigin a string when present")
    func clientDataTypes() throws {
        let base = #"{"type":"webauthn.get","challenge":"AAAA","origin":"https://example.com""#
        #expect(try CollectedClientData.parse(Array((base + #","crossOrigin":false}"#).utf8)).crossOrigin == false)
        for bad in [#","crossOrigin":"true"}"#, #","crossOrigin":1}"#, #","topOrigin":1}"#, #","topOrigin":null}"#] {
            #expect(throws: WebAuthnFailure.self, "\(bad)") { try CollectedClientData.parse(Array((base + bad).utf8)) }
        }
    }

    @Test("an RP ID is the origin's host or a parent of it that is not a public suffix; anything else is passkey.bad_origin")
    func rpIDs() throws {
        let list = try #require(PublicSuffixList.latest)
        func allowed(_ rpID: String?, _ origin: String) -> String? {
            (try? PasskeyScope.rpID(rpID, for: origin, suffixes: list))?.1
        }
        #expect(allowed(nil, "https://login.example.com") == "login.example.com")
        #expect(allowed("example.com", "https://login.example.com:8443") == "example.com")
        #expect(allowed("localhost", "http://localhost:8080") == "localhost")
        #expect(allowed("co.uk", "https://co.uk") == "co.uk", "the host itself is always allowed")
        for (rpID, origin) in [("com", "https://example.com"), ("co.uk", "https://shop.example.co.uk"), ("other.com", "https://example.com"),
                               ("sub.example.com", "https://example.com"), ("ample.com", "https://example.com"), ("localhost", "http://app.localhost"),
                               ("example.com", "http://example.com"), ("Example.com", "https://login.example.com")] {
            #expect(throws: RPCError.self, "\(rpID) for \(origin)") { try onTheWire { try PasskeyScope.rpID(rpID, for: origin, suffixes: list) } }
        }
        // Without the list no parent domain is allowed: only the host itself.
        #expect((try? PasskeyScope.rpID("example.com", for: "https://login.example.com", suffixes: nil)) == nil)
        #expect((try? PasskeyScope.rpID("example.com", for: "https://example.com", suffixes: nil))?.1 == "example.com")
    }

    @Test("[passkeys]: rp_id, rp_name, origins within the RP ID, timeout")
    func config() throws {
        let config = try Config.parse("[passkeys]\nrp_id = example.com\nrp_name = Example\norigins = https://example.com https://login.example.com:8443\ntimeout = 2m\n",
                                      file: "t")
        #expect(config.passkeyRPID == "example.com" && config.passkeyRPName == "Example" && config.passkeyTimeoutSeconds == 120)
        #expect(config.passkeyOrigins == ["https://example.com", "https://login.example.com:8443"])
        #expect(Config().passkeyRPID == "localhost" && Config().passkeyOrigins == ["http://localhost"])
        for bad in ["[passkeys]\nrp_id = https://example.com\n", "[passkeys]\norigins = http://example.com\n",
                    "[passkeys]\nrp_id = example.com\norigins = https://example.org\n", "[passkeys]\norigins = https://example.com/\n",
                    "[passkeys]\ntimeout = 5\n"] {
            #expect(throws: ConfigError.self, "\(bad)") { try Config.parse(bad, file: "t") }
        }
    }
}
