import OpenSSLCrypto
import Protocol
import Testing

private func bytes(_ secret: SecretBytes) -> [UInt8] { secret.withUnsafeBytes { Array($0) } }
private func hex(_ text: String) -> [UInt8] { Hex.decode(text)! }
private func b64(_ text: String) -> [UInt8] { Base64URL.decode(text)! }

/// The primitives of JOSE's ECDH-ES+A256KW with A256GCM, against their specifications' vectors.
@Suite("OpenSSLCrypto: ECDH, Concat KDF, AES key wrap, AES-GCM with an explicit IV")
struct KeyAgreementTests {
    @Test("AES key wrap matches RFC 3394 §4.1 (128-bit KEK, 128-bit key) and §4.6 (256-bit KEK, 256-bit key)",
          arguments: [
              ("000102030405060708090A0B0C0D0E0F", "00112233445566778899AABBCCDDEEFF", "1FA68B0A8112B447AEF34BD8FB5A7B829D3E862371D2CFE5"),
              ("000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F",
               "00112233445566778899AABBCCDDEEFF000102030405060708090A0B0C0D0E0F",
               "28C9F404C4B810F4CBCCB35CFB87F8263F5786E2D80ED326CBC7F0E71A99F43BFB988B9B7A02DD21"),
          ])
    func keyWrapVectors(kek: String, key: String, wrapped: String) throws {
        let kek = SecretBytes(hex(kek))
        #expect(try AESKeyWrap.wrap(SecretBytes(hex(key)), kek: kek) == hex(wrapped))
        #expect(try AESKeyWrap.unwrap(hex(wrapped), kek: kek).map(bytes) == hex(key))
    }

    @Test("AES key unwrap returns nil for a changed wrapping, another KEK or a wrong length")
    func keyWrapIntegrity() throws {
        let kek = try OpenSSL.randomSecret(32)
        let key = try OpenSSL.randomSecret(32)
        let wrapped = try AESKeyWrap.wrap(key, kek: kek)
        #expect(wrapped.count == 40)
        for position in [0, 7, 8, 39] {
            var changed = wrapped
            changed[position] ^= 0x01
            #expect(try AESKeyWrap.unwrap(changed, kek: kek) == nil, "flip at \(position)")
        }
        #expect(try AESKeyWrap.unwrap(wrapped, kek: try OpenSSL.randomSecret(32)) == nil)
        #expect(try AESKeyWrap.unwrap(Array(wrapped.prefix(32)), kek: kek) == nil)
        #expect(try AESKeyWrap.unwrap(Array(wrapped.prefix(39)), kek: kek) == nil)
        #expect(try AESKeyWrap.unwrap([], kek: kek) == nil)
        #expect(throws: CryptoError.self) { try AESKeyWrap.wrap(SecretBytes([1, 2, 3]), kek: kek) }
        #expect(throws: CryptoError.self) { try AESKeyWrap.wrap(key, kek: SecretBytes([1, 2, 3])) }
    }

    /// The GCM specification's test cases 4 (AES-128) and 16 (AES-256): 60 bytes of plaintext,
    /// 20 of associated data, a 96-bit IV.
    @Test("AES-GCM with an explicit IV matches the GCM specification's test cases 4 and 16",
          arguments: [
              ("feffe9928665731c6d6a8f9467308308",
               "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091",
               "5bc94fbc3221a5db94fae95ae7121a47"),
              ("feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308",
               "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662",
               "76fc6ece0f4e1768cddf8853bb2d551b"),
          ])
    func gcmVectors(key: String, ciphertext: String, tag: String) throws {
        let plaintext = hex("d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39")
        let aad = hex("feedfacedeadbeeffeedfacedeadbeefabaddad2")
        let iv = hex("cafebabefacedbaddecaf888")
        let key = SecretBytes(hex(key))
        let sealed = try AESGCM.seal(plaintext, key: key, iv: iv, associatedData: aad)
        #expect(sealed.ciphertext == hex(ciphertext))
        #expect(sealed.tag == hex(tag))
        #expect(try AESGCM.open(ciphertext: hex(ciphertext), tag: hex(tag), key: key, iv: iv, associatedData: aad).map(bytes) == plaintext)
    }

    @Test("AES-GCM with an explicit IV refuses any change, and takes empty texts")
    func gcmIntegrity() throws {
        let key = try OpenSSL.randomSecret(32)
        let iv = try OpenSSL.randomBytes(12)
        let (ciphertext, tag) = try AESGCM.seal(Array("attack at dawn".utf8), key: key, iv: iv, associatedData: [1, 2])
        var changedCiphertext = ciphertext
        changedCiphertext[0] ^= 1
        var changedTag = tag
        changedTag[15] ^= 1
        var changedIV = iv
        changedIV[11] ^= 1
        #expect(try AESGCM.open(ciphertext: changedCiphertext, tag: tag, key: key, iv: iv, associatedData: [1, 2]) == nil)
        #expect(try AESGCM.open(ciphertext: ciphertext, tag: changedTag, key: key, iv: iv, associatedData: [1, 2]) == nil)
        #expect(try AESGCM.open(ciphertext: ciphertext, tag: tag, key: key, iv: changedIV, associatedData: [1, 2]) == nil)
        #expect(try AESGCM.open(ciphertext: ciphertext, tag: tag, key: key, iv: iv, associatedData: [1, 3]) == nil)
        #expect(try AESGCM.open(ciphertext: ciphertext, tag: Array(tag.prefix(12)), key: key, iv: iv, associatedData: [1, 2]) == nil)
        #expect(try AESGCM.open(ciphertext: ciphertext, tag: tag, key: try OpenSSL.randomSecret(32), iv: iv, associatedData: [1, 2]) == nil)
        #expect(try AESGCM.open(ciphertext: ciphertext, tag: tag, key: key, iv: iv, associatedData: [1, 2]).map(bytes) == Array("attack at dawn".utf8))
        let empty = try AESGCM.seal([UInt8](), key: key, iv: iv, associatedData: [])
        #expect(empty.ciphertext.isEmpty && empty.tag.count == 16)
        #expect(try AESGCM.open(ciphertext: [], tag: empty.tag, key: key, iv: iv, associatedData: []).map(bytes) == [])
        #expect(throws: CryptoError.self) { try AESGCM.seal([1], key: key, iv: [1, 2, 3], associatedData: []) }
    }

    /// RFC 7518 Appendix C: ECDH-ES between Alice's ephemeral key and Bob's, then the Concat KDF
    /// for A128GCM with PartyUInfo "Alice" and PartyVInfo "Bob".
    @Test("ECDH and the Concat KDF match RFC 7518 Appendix C")
    func rfc7518AppendixC() throws {
        let alice = try P256PrivateKey(d: b64("0_NxaRPUMQoAJt50Gz8YiTr8gRTwyEaCumd-MToTmIo"))
        let bob = try P256PrivateKey(d: b64("VEmDZpDXXK8p8N0Cndsxs924q6nS1RXFASRl6BfUqdw"))
        let alicePublic = try P256PublicKey(x: b64("gI0GAILBdu7T53akrFmMyGcsF3n5dO7MmwNBHKW5SV0"), y: b64("SLW_xSffzlPWrHEVI30DHM_4egVwt3NQqeUD7nMFpps"))
        let bobPublic = try P256PublicKey(x: b64("weNJy2HscCSM6AEDTDg04biOvhFhyyWvOHQfeF_PxMQ"), y: b64("e8lnCO-AlStT-NJVX-crhB7QRYhiix03illJOVAOyck"))
        // The scalar's computed public point is the published one.
        #expect(try alice.publicKey().spki == alicePublic.spki)
        #expect(try bob.publicKey().spki == bobPublic.spki)

        let z: [UInt8] = [158, 86, 217, 29, 129, 113, 53, 211, 114, 131, 66, 131, 191, 132, 38, 156,
                          251, 49, 110, 163, 218, 128, 106, 72, 246, 218, 167, 121, 140, 254, 144, 196]
        #expect(bytes(try alice.sharedSecret(with: bobPublic)) == z)
        #expect(bytes(try bob.sharedSecret(with: alicePublic)) == z)

        func lengthPrefixed(_ text: String) -> [UInt8] { [0, 0, 0, UInt8(text.utf8.count)] + Array(text.utf8) }
        let otherInfo = lengthPrefixed("A128GCM") + lengthPrefixed("Alice") + lengthPrefixed("Bob") + [0, 0, 0, 128]
        let derived = try ConcatKDF.sha256(secret: SecretBytes(z), otherInfo: otherInfo, length: 16)
        #expect(Base64URL.encode(bytes(derived)) == "VqqN6vgjbSBcIijNcacQGg")
    }

    @Test("ECDH agrees between fresh keys, and the Concat KDF gives longer outputs than one digest")
    func freshAgreement() throws {
        let first = try P256PrivateKey.generate()
        let second = try P256PrivateKey.generate()
        let secret = try first.sharedSecret(with: second.publicKey())
        #expect(bytes(secret) == bytes(try second.sharedSecret(with: first.publicKey())))
        let long = try ConcatKDF.sha256(secret: secret, otherInfo: [1, 2, 3], length: 48)
        let short = try ConcatKDF.sha256(secret: secret, otherInfo: [1, 2, 3], length: 32)
        #expect(long.count == 48 && Array(bytes(long).prefix(32)) == bytes(short))
    }

    @Test("a public key from coordinates: off-curve points and wrong lengths are refused; a scalar out of range too")
    func pointChecks() throws {
        let key = try P256PrivateKey.generate().publicKey()
        let (x, y) = try key.coordinates()
        #expect(try P256PublicKey(x: x, y: y).spki == key.spki)
        var offCurve = y
        offCurve[31] ^= 1
        #expect(throws: CryptoError.self) { try P256PublicKey(x: x, y: offCurve) }
        #expect(throws: CryptoError.self) { try P256PublicKey(x: Array(x.prefix(31)), y: y) }
        #expect(throws: CryptoError.self) { try P256PublicKey(x: [UInt8](repeating: 0, count: 32), y: [UInt8](repeating: 0, count: 32)) }
        #expect(throws: CryptoError.self) { try P256PrivateKey(d: [UInt8](repeating: 0, count: 32)) }
        #expect(throws: CryptoError.self) { try P256PrivateKey(d: [UInt8](repeating: 0xFF, count: 32)) }
        #expect(throws: CryptoError.self) { try P256PrivateKey(d: [1]) }
        // A key made from a scalar signs as any other.
        let restored = try P256PrivateKey(d: b64("VEmDZpDXXK8p8N0Cndsxs924q6nS1RXFASRl6BfUqdw"))
        let signature = try restored.signES256([1, 2, 3])
        #expect(try restored.publicKey().verifyES256(signature: signature, message: [1, 2, 3]))
    }
}
