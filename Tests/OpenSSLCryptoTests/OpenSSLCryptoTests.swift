import OpenSSLCrypto
import Protocol
import Testing

private func bytes(_ secret: SecretBytes) -> [UInt8] { secret.withUnsafeBytes { Array($0) } }

/// Test vectors are written in hex.
private func hex(_ text: String) -> [UInt8] { Hex.decode(text)! }

@Suite("OpenSSLCrypto: the libcrypto wrapper")
struct OpenSSLCryptoTests {
    @Test("HKDF-SHA-256 matches RFC 5869 test case 1")
    func hkdfKnownAnswer() throws {
        let okm = try OpenSSL.hkdfSHA256(
            key: SecretBytes(hex("0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b")),
            salt: hex("000102030405060708090a0b0c"), info: hex("f0f1f2f3f4f5f6f7f8f9"), length: 42)
        #expect(bytes(okm) == hex("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"))
    }

    @Test("SHA-256 and HMAC-SHA-256 match their standard vectors")
    func digests() throws {
        #expect(OpenSSL.sha256(Array("abc".utf8)) == hex("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"))
        // RFC 4231 test case 2.
        let mac = try OpenSSL.hmacSHA256(key: SecretBytes(Array("Jefe".utf8)), data: Array("what do ya want for nothing?".utf8))
        #expect(mac == hex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"))
    }

    @Test("AES-256-GCM round-trips and rejects any change")
    func aesGCM() throws {
        let key = try OpenSSL.randomSecret(32)
        let plaintext = Array("attack at dawn".utf8)
        let box = try AESGCM.seal(plaintext, key: key, associatedData: [1, 2, 3])
        #expect(box.count == 12 + plaintext.count + 16)
        #expect(try AESGCM.open(box, key: key, associatedData: [1, 2, 3]).map(bytes) == plaintext)
        #expect(try AESGCM.open(box, key: key, associatedData: [1, 2, 4]) == nil)
        for position in [0, 12, box.count - 1] {
            var tampered = box
            tampered[position] ^= 0x01
            #expect(try AESGCM.open(tampered, key: key, associatedData: [1, 2, 3]) == nil, "flip at \(position)")
        }
        #expect(try AESGCM.open(box, key: try OpenSSL.randomSecret(32), associatedData: [1, 2, 3]) == nil)
        #expect(try AESGCM.open(Array(box.prefix(20)), key: key, associatedData: [1, 2, 3]) == nil)
        // Empty plaintexts are valid too.
        let empty = try AESGCM.seal([UInt8](), key: key, associatedData: [])
        #expect(try AESGCM.open(empty, key: key, associatedData: []).map(bytes) == [])
    }

    @Test("ES256: sign, verify, reject tampering, survive DER round trips")
    func es256() throws {
        let key = try P256PrivateKey.generate()
        let message = Array("header.payload".utf8)
        let signature = try key.signES256(message)
        #expect(signature.count == 64)
        let publicKey = try key.publicKey()
        #expect(publicKey.verifyES256(signature: signature, message: message))
        #expect(!publicKey.verifyES256(signature: signature, message: Array("header.payloae".utf8)))
        var flipped = signature
        flipped[10] ^= 0x80
        #expect(!publicKey.verifyES256(signature: flipped, message: message))
        #expect(!publicKey.verifyES256(signature: Array(signature.prefix(63)), message: message))
        #expect(!publicKey.verifyES256(signature: [UInt8](repeating: 0, count: 64), message: message))
        let restored = try P256PrivateKey(der: key.derRepresentation())
        #expect(try restored.publicKey().spki == publicKey.spki)
        #expect(try restored.publicKey().verifyES256(signature: try restored.signES256(message), message: message))
        let (x, y) = try publicKey.coordinates()
        #expect(x.count == 32 && y.count == 32)
        #expect(throws: CryptoError.self) { try P256PublicKey(spki: [0x30, 0x03, 0x02, 0x01, 0x00]) }
    }

    @Test("ES256 signs in the low-S form only, and refuses a signature's high-S twin")
    func es256LowS() throws {
        let key = try P256PrivateKey.generate()
        let publicKey = try key.publicKey()
        let (x, y) = try publicKey.coordinates()
        let anyForm = try JWKPublicKey(p256X: x, y: y)
        for index in 0..<64 {
            let message = Array("header.payload-\(index)".utf8)
            let signature = try key.signES256(message)
            #expect(ECDSASignature.P256.isLowS(signature))
            let twin = try ECDSASignature.P256.twin(signature)
            #expect(twin.prefix(32) == signature.prefix(32) && twin != signature)
            // The twin is a real signature (a verifier without the rule accepts it) …
            #expect(anyForm.verify(signature: twin, message: message))
            // … which authd's own tokens refuse, so that a token has one encoding.
            #expect(!ECDSASignature.P256.isLowS(twin))
            #expect(!publicKey.verifyES256(signature: twin, message: message))
            #expect(try ECDSASignature.P256.lowS(twin) == signature)
        }
    }

    @Test("constant-time comparison")
    func constantTime() {
        #expect(OpenSSL.constantTimeEquals([1, 2, 3], [1, 2, 3]))
        #expect(!OpenSSL.constantTimeEquals([1, 2, 3], [1, 2, 4]))
        #expect(!OpenSSL.constantTimeEquals([1, 2, 3], [1, 2]))
        #expect(OpenSSL.constantTimeEquals([UInt8](), [UInt8]()))
    }

    /// A test CA and a card-shaped certificate issued by it, as the virtual card makes them.
    private static func issueCardCertificate(key: P384PrivateKey) throws -> (ca: X509Certificate, card: X509Certificate) {
        let caKey = try P384PrivateKey.generate()
        let ca = try X509Certificate.issue(
            subject: [(.country, "EE"), (.organization, "authd test"), (.commonName, "authd TEST of ESTEID2018")],
            subjectKey: caKey, issuer: nil, serial: 1, days: 30,
            extensions: [.certificateAuthority, .keyUsage([.keyCertSign, .cRLSign]), .subjectKeyIdentifier])
        let card = try X509Certificate.issue(
            subject: [(.country, "EE"), (.commonName, "JÕEORG,JAAK-KRISTJAN,38001085718"), (.surname, "JÕEORG"),
                      (.givenName, "JAAK-KRISTJAN"), (.serialNumber, "PNOEE-38001085718")],
            subjectKey: key, issuer: (ca, caKey), serial: 2, days: 30,
            extensions: [.keyUsage([.digitalSignature, .keyAgreement]), .clientAuthentication, .authorityKeyIdentifier])
        return (ca, card)
    }

    @Test("an issued certificate's subject attributes read back typed, in UTF-8")
    func subjectAttributes() throws {
        let (ca, card) = try Self.issueCardCertificate(key: P384PrivateKey.generate())
        #expect(card.subjectAttribute(.serialNumber) == "PNOEE-38001085718")
        #expect(card.subjectAttribute(.givenName) == "JAAK-KRISTJAN")
        #expect(card.subjectAttribute(.surname) == "JÕEORG")
        #expect(card.subjectAttribute(.commonName) == "JÕEORG,JAAK-KRISTJAN,38001085718")
        #expect(card.subjectAttribute(.country) == "EE")
        #expect(card.subjectAttribute(.organization) == nil)
        #expect(ca.subjectAttribute(.organization) == "authd test" && ca.subjectAttribute(.givenName) == nil)
        #expect(card.hasP384Key && ca.hasP384Key)
        #expect(try X509Certificate(der: card.der).subjectAttribute(.surname) == "JÕEORG")
        #expect(throws: CryptoError.self, "trailing bytes") { try X509Certificate(der: card.der + [0]) }
        #expect(throws: CryptoError.self) { try X509Certificate(der: Array(card.der.dropLast())) }
    }

    @Test("P-384: PEM round trip; raw r ‖ s signatures over a digest that the certificate verifies")
    func p384() throws {
        let key = try P384PrivateKey.generate()
        let pem = try key.pemRepresentation()
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----\n"))
        let restored = try P384PrivateKey(pem: pem)
        #expect(try restored.pemRepresentation() == pem)
        let (ca, card) = try Self.issueCardCertificate(key: key)
        let digest = Digest.sha384.hash(Array("signed data".utf8))
        let signature = try restored.sign(digest: digest)
        #expect(signature.count == 96)
        #expect(card.verifies(rawSignature: signature, digest: digest))
        #expect(!ca.verifies(rawSignature: signature, digest: digest), "another key")
        var flipped = signature
        flipped[5] ^= 0x01
        #expect(!card.verifies(rawSignature: flipped, digest: digest))
        #expect(!card.verifies(rawSignature: signature, digest: Digest.sha384.hash(Array("other data".utf8))))
        #expect(throws: CryptoError.self) { try P384PrivateKey(pem: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n") }
    }
}
