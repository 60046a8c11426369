internal import COpenSSL
import FoundationEssentials

// The primitives of JOSE's ECDH-ES+A256KW with A256GCM (RFC 7518 §4.6, §4.4, §5.3), each one
// libcrypto call: ECDH on P-256 (`EVP_PKEY_derive`), the Concat KDF (OpenSSL's SSKDF), AES key
// wrap (RFC 3394, `EVP_aes_*_wrap`) and AES-GCM with the caller's IV. The JOSE layer that puts
// them together lives in authd (E2EE/); nothing here knows JSON.

extension P256PublicKey {
    /// A key from its affine coordinates (a JWK's `x` and `y`, 32 bytes each), checked to be a
    /// point on P-256 (`EVP_PKEY_public_check`): ECDH with a point off the curve gives away
    /// bits of the private key (the invalid-curve attack).
    public convenience init(x: [UInt8], y: [UInt8]) throws {
        guard x.count == 32, y.count == 32 else { throw CryptoError(operation: "load EC key", detail: "P-256 coordinates must be 32 bytes") }
        try self.init(point: [0x04] + x + y, checked: true)
    }
}

extension P256PrivateKey {
    /// A key from its private scalar `d` (32 bytes big-endian, 0 < d < n), for known-answer
    /// tests and keys a specification publishes; the public point is computed (`EC_POINT_mul`).
    public convenience init(d: [UInt8]) throws {
        guard d.count == 32 else { throw CryptoError(operation: "load EC key", detail: "a P-256 scalar is 32 bytes") }
        guard let group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1) else { throw CryptoError.drain("EC_GROUP_new_by_curve_name") }
        defer { EC_GROUP_free(group) }
        guard let scalar = BN_secure_new() else { throw CryptoError.drain("BN_secure_new") }
        defer { BN_clear_free(scalar) }
        guard BN_bin2bn(d, Int32(d.count), scalar) != nil else { throw CryptoError.drain("BN_bin2bn") }
        guard BN_is_zero(scalar) == 0, BN_cmp(scalar, EC_GROUP_get0_order(group)) < 0 else {
            throw CryptoError(operation: "load EC key", detail: "the scalar is not in 1 … n − 1")
        }
        guard let point = EC_POINT_new(group) else { throw CryptoError.drain("EC_POINT_new") }
        defer { EC_POINT_free(point) }
        // The builder keeps a pointer to the encoded point until OSSL_PARAM_BLD_to_param.
        let encoded = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: 65)
        defer { encoded.deallocate() }
        guard EC_POINT_mul(group, point, scalar, nil, nil, nil) == 1,
              EC_POINT_point2oct(group, point, POINT_CONVERSION_UNCOMPRESSED, encoded.baseAddress, encoded.count, nil) == 65
        else { throw CryptoError.drain("EC_POINT_mul") }
        let key = try JWKPublicKey.fromData(type: "EC", selection: authd_evp_pkey_keypair_selection()) {
            authd_param_push_p256_private($0, scalar, encoded.baseAddress, encoded.count) == 1
        }
        try self.init(key: key)
    }

    /// ECDH on P-256 with `peer` (`EVP_PKEY_derive`, the peer checked on the curve): the
    /// x-coordinate of the shared point, 32 bytes, which the caller feeds to a KDF.
    public func sharedSecret(with peer: P256PublicKey) throws -> SecretBytes {
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else { throw CryptoError.drain("EVP_PKEY_CTX_new_from_pkey") }
        defer { EVP_PKEY_CTX_free(context) }
        var length = 0
        // Not validated again here: every P256PublicKey's point was checked on the curve when it
        // was made (from coordinates, or decoded from DER, which refuses a point off it), and
        // the full check multiplies by the group order, the cost of the derivation itself.
        guard EVP_PKEY_derive_init(context) == 1,
              EVP_PKEY_derive_set_peer_ex(context, peer.key, 0) == 1,
              EVP_PKEY_derive(context, nil, &length) == 1, length == 32
        else { throw CryptoError.drain("ECDH setup") }
        return try SecretBytes(count: 32) { out in
            var written = out.count
            guard EVP_PKEY_derive(context, out.baseAddress?.assumingMemoryBound(to: UInt8.self), &written) == 1, written == 32 else {
                throw CryptoError.drain("ECDH")
            }
        }
    }
}

/// The Concat KDF of NIST SP 800-56A §5.8.1 (RFC 7518 §4.6.2), OpenSSL's single-step KDF.
public enum ConcatKDF {
    /// SSKDF, looked up among the providers once (a fetch takes their locks); an `EVP_KDF` is
    /// shared by the contexts made from it, on any thread.
    private final class Fetched: @unchecked Sendable {
        let kdf = EVP_KDF_fetch(nil, "SSKDF", nil)
    }
    private static let fetched = Fetched()

    /// `length` bytes from the shared secret and the `otherInfo` the caller assembled
    /// (AlgorithmID ‖ PartyUInfo ‖ PartyVInfo ‖ SuppPubInfo ‖ SuppPrivInfo), with SHA-256.
    public static func sha256(secret: SecretBytes, otherInfo: [UInt8], length: Int) throws -> SecretBytes {
        guard length > 0, secret.count > 0 else { throw CryptoError(operation: "Concat KDF", detail: "an empty secret or output") }
        guard let kdf = fetched.kdf else { throw CryptoError.drain("EVP_KDF_fetch(SSKDF)") }
        // The context copies the secret and wipes its copy when freed.
        guard let context = EVP_KDF_CTX_new(kdf) else { throw CryptoError.drain("EVP_KDF_CTX_new") }
        defer { EVP_KDF_CTX_free(context) }
        return try SecretBytes(count: length) { out in
            let derived = secret.withUnsafeBytes { z in
                otherInfo.withUnsafeBufferPointer { info in
                    var params = [OSSL_PARAM](repeating: OSSL_PARAM(), count: 4)
                    authd_sskdf_sha256_params(&params, z.baseAddress?.assumingMemoryBound(to: UInt8.self), z.count, info.baseAddress, info.count)
                    return EVP_KDF_derive(context, out.baseAddress?.assumingMemoryBound(to: UInt8.self), out.count, params)
                }
            }
            guard derived == 1 else { throw CryptoError.drain("Concat KDF") }
        }
    }
}

/// AES key wrap (RFC 3394) with its default IV, as JOSE's `A*KW` use it (`EVP_aes_*_wrap`).
public enum AESKeyWrap {
    /// Wraps `key` (a multiple of 8 bytes, at least 16) under a 16-, 24- or 32-byte `kek`: 8
    /// bytes longer than the key.
    public static func wrap(_ key: SecretBytes, kek: SecretBytes) throws -> [UInt8] {
        guard key.count >= 16, key.count % 8 == 0 else { throw CryptoError(operation: "AES key wrap", detail: "the key must be a multiple of 8 bytes, at least 16") }
        let context = try makeContext(kek: kek, encrypting: true)
        defer { EVP_CIPHER_CTX_free(context) }
        var out = [UInt8](repeating: 0, count: key.count + 8)
        var length: Int32 = 0
        var finalLength: Int32 = 0
        let ok = key.withUnsafeBytes { input in
            out.withUnsafeMutableBufferPointer { output in
                EVP_EncryptUpdate(context, output.baseAddress, &length, input.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(input.count)) == 1
                    && EVP_EncryptFinal_ex(context, output.baseAddress! + Int(length), &finalLength) == 1
            }
        }
        guard ok, Int(length + finalLength) == out.count else { throw CryptoError.drain("AES key wrap") }
        return out
    }

    /// Unwraps and checks the integrity value; nil when `wrapped` was not made under `kek`
    /// (or was changed), or is not a wrapped key's length.
    public static func unwrap(_ wrapped: [UInt8], kek: SecretBytes) throws -> SecretBytes? {
        guard wrapped.count >= 24, wrapped.count % 8 == 0 else { return nil }
        let context = try makeContext(kek: kek, encrypting: false)
        defer { EVP_CIPHER_CTX_free(context) }
        var intact = false
        let key = SecretBytes(count: wrapped.count - 8) { out in
            var length: Int32 = 0
            var finalLength: Int32 = 0
            let output = out.baseAddress!.assumingMemoryBound(to: UInt8.self)
            // libcrypto wipes what it wrote when the integrity check fails; so does SecretBytes.
            intact = EVP_DecryptUpdate(context, output, &length, wrapped, Int32(wrapped.count)) == 1
                && EVP_DecryptFinal_ex(context, output + Int(length), &finalLength) == 1
                && Int(length + finalLength) == out.count
            ERR_clear_error()
        }
        return intact ? key : nil
    }

    private static func makeContext(kek: SecretBytes, encrypting: Bool) throws -> OpaquePointer {
        let cipher = switch kek.count {
        case 16: EVP_aes_128_wrap()
        case 24: EVP_aes_192_wrap()
        case 32: EVP_aes_256_wrap()
        default: throw CryptoError(operation: "AES key wrap", detail: "a key-encryption key is 16, 24 or 32 bytes")
        }
        guard let context = EVP_CIPHER_CTX_new() else { throw CryptoError.drain("EVP_CIPHER_CTX_new") }
        // The wrap modes are refused unless the caller says it knows they are not a stream cipher.
        EVP_CIPHER_CTX_set_flags(context, EVP_CIPHER_CTX_FLAG_WRAP_ALLOW)
        let ok = kek.withUnsafeBytes { kekBytes in
            EVP_CipherInit_ex(context, cipher, nil, kekBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), nil, encrypting ? 1 : 0) == 1
        }
        guard ok else {
            EVP_CIPHER_CTX_free(context)
            throw CryptoError.drain("AES key wrap init")
        }
        return context
    }
}

extension AESGCM {
    /// Encrypts with the caller's 96-bit `iv` under a 16- or 32-byte `key` (JWE's `A128GCM`,
    /// `A256GCM`), binding `associatedData`; the ciphertext and the 128-bit tag apart, as a
    /// JWE carries them. The IV must never repeat under one key: callers draw a fresh key or IV
    /// from ``OpenSSL/randomBytes(_:)`` for every message.
    public static func seal(_ plaintext: some ContiguousBytes, key: SecretBytes, iv: [UInt8], associatedData: [UInt8]) throws -> (ciphertext: [UInt8], tag: [UInt8]) {
        guard iv.count == nonceLength else { throw CryptoError(operation: "AES-GCM", detail: "the IV must be 12 bytes") }
        let context = try makeContext(key: key, iv: iv, encrypting: true)
        defer { EVP_CIPHER_CTX_free(context) }
        var length: Int32 = 0
        guard EVP_EncryptUpdate(context, nil, &length, associatedData, Int32(associatedData.count)) == 1 else { throw CryptoError.drain("AES-GCM AAD") }
        return try plaintext.withUnsafeBytes { input in
            guard input.count <= Int32.max - 16 else { throw CryptoError(operation: "AES-GCM", detail: "the plaintext is too long") }
            var ciphertext = [UInt8](repeating: 0, count: input.count)
            var tag = [UInt8](repeating: 0, count: tagLength)
            var finalLength: Int32 = 0
            try ciphertext.withUnsafeMutableBufferPointer { out in
                length = 0
                if input.count > 0 {
                    guard EVP_EncryptUpdate(context, out.baseAddress, &length, input.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(input.count)) == 1
                    else { throw CryptoError.drain("AES-GCM encrypt") }
                }
                // GCM writes nothing at the end; a scratch block stands in when the text is empty.
                var scratch = [UInt8](repeating: 0, count: 16)
                let ok = scratch.withUnsafeMutableBufferPointer { scratch in
                    EVP_EncryptFinal_ex(context, out.baseAddress.map { $0 + Int(length) } ?? scratch.baseAddress, &finalLength) == 1
                }
                guard ok, EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, Int32(tagLength), &tag) == 1
                else { throw CryptoError.drain("AES-GCM finish") }
            }
            return (ciphertext, tag)
        }
    }

    /// Decrypts and authenticates what ``seal(_:key:iv:associatedData:)`` made; nil when the
    /// tag does not verify (any change to the ciphertext, IV, tag or associated data, or
    /// another key) or is not 16 bytes.
    public static func open(ciphertext: [UInt8], tag: [UInt8], key: SecretBytes, iv: [UInt8], associatedData: [UInt8]) throws -> SecretBytes? {
        guard iv.count == nonceLength, tag.count == tagLength else { return nil }
        let context = try makeContext(key: key, iv: iv, encrypting: false)
        defer { EVP_CIPHER_CTX_free(context) }
        var length: Int32 = 0
        guard EVP_DecryptUpdate(context, nil, &length, associatedData, Int32(associatedData.count)) == 1 else { throw CryptoError.drain("AES-GCM AAD") }
        var authentic = false
        let plaintext = try SecretBytes(count: ciphertext.count) { out in
            let plain = out.baseAddress?.assumingMemoryBound(to: UInt8.self)
            length = 0
            if ciphertext.count > 0 {
                guard EVP_DecryptUpdate(context, plain, &length, ciphertext, Int32(ciphertext.count)) == 1
                else { throw CryptoError.drain("AES-GCM decrypt") }
            }
            var expected = tag
            guard EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, Int32(tagLength), &expected) == 1 else { throw CryptoError.drain("AES-GCM tag") }
            var finalLength: Int32 = 0
            var scratch = [UInt8](repeating: 0, count: 16)
            authentic = scratch.withUnsafeMutableBufferPointer { scratch in
                EVP_DecryptFinal_ex(context, plain.map { $0 + Int(length) } ?? scratch.baseAddress, &finalLength) == 1
            }
            ERR_clear_error()
        }
        return authentic ? plaintext : nil
    }

    private static func makeContext(key: SecretBytes, iv: [UInt8], encrypting: Bool) throws -> OpaquePointer {
        let cipher = switch key.count {
        case 16: EVP_aes_128_gcm()
        case 32: EVP_aes_256_gcm()
        default: throw CryptoError(operation: "AES-GCM", detail: "the key must be 16 or 32 bytes")
        }
        guard let context = EVP_CIPHER_CTX_new() else { throw CryptoError.drain("EVP_CIPHER_CTX_new") }
        let ok = key.withUnsafeBytes { keyBytes in
            EVP_CipherInit_ex(context, cipher, nil, keyBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), iv, encrypting ? 1 : 0) == 1
        }
        guard ok else {
            EVP_CIPHER_CTX_free(context)
            throw CryptoError.drain("AES-GCM init")
        }
        return context
    }
}
