internal import COpenSSL
import FoundationEssentials
import Synchronization

// The OpenSSLCrypto module is the only code that calls libcrypto (PACE aside, which hands libeac
// the BUF_MEM buffers its API takes): authd, the virtual card and SmartCard use these types.
// Every function turns OpenSSL's return codes into a typed `CryptoError`; no OpenSSL handle or
// constant crosses the module's public API.

/// A libcrypto failure. The message is OpenSSL's error string, which never contains key material.
public struct CryptoError: Error, CustomStringConvertible {
    public let operation: String
    public let detail: String
    public var description: String { "\(operation) failed: \(detail)" }

    /// A failure found by our own checks (wrong curve, wrong length), not by libcrypto.
    public init(operation: String, detail: String) {
        self.operation = operation
        self.detail = detail
    }

    /// Drains OpenSSL's thread-local error queue into an error for `operation`.
    static func drain(_ operation: String) -> CryptoError {
        var detail = ""
        while case let code = ERR_get_error(), code != 0 {
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            if detail.isEmpty { detail = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        }
        return CryptoError(operation: operation, detail: detail.isEmpty ? "unknown error" : detail)
    }
}

/// Bytes that hold a secret. The buffer is owned here and wiped with `OPENSSL_cleanse` when the
/// last reference goes, so secrets do not linger in freed memory.
public final class SecretBytes: @unchecked Sendable {
    // Sendable because the buffer is written only in `init` and read-only afterwards.
    private let buffer: UnsafeMutableRawBufferPointer

    /// A buffer of `count` bytes that `initializer` fills; wiped if it throws.
    public init(count: Int, initializer: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows {
        buffer = .allocate(byteCount: max(count, 1), alignment: 16)
        do {
            try initializer(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count]))
        } catch {
            OPENSSL_cleanse(buffer.baseAddress, buffer.count)
            buffer.deallocate()
            throw error
        }
        self.count = count
    }

    /// Copies `bytes` in; the caller remains responsible for wiping its own copy.
    public convenience init(_ bytes: some Collection<UInt8>) {
        self.init(count: bytes.count) { _ = $0.initializeMemory(as: UInt8.self, from: bytes) }
    }

    public let count: Int

    /// Reads the secret; `body` must not let the pointer escape.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
    }

    deinit {
        OPENSSL_cleanse(buffer.baseAddress, buffer.count)
        buffer.deallocate()
    }
}

/// Random bytes, hashes, MACs and key derivation from libcrypto.
public enum OpenSSL {
    /// Cryptographically secure random bytes (`RAND_bytes`).
    public static func randomBytes(_ count: Int) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        guard RAND_bytes(&out, Int32(count)) == 1 else { throw CryptoError.drain("RAND_bytes") }
        return out
    }

    /// Random bytes for a key, in a buffer that is wiped after use.
    public static func randomSecret(_ count: Int) throws -> SecretBytes {
        try SecretBytes(count: count) { buffer in
            guard RAND_bytes(buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(count)) == 1 else {
                throw CryptoError.drain("RAND_bytes")
            }
        }
    }

    /// SHA-256 (`EVP_Digest`).
    public static func sha256(_ data: some ContiguousBytes) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let ok = data.withUnsafeBytes { input in
            EVP_Digest(input.baseAddress, input.count, &out, &length, EVP_sha256(), nil)
        }
        precondition(ok == 1 && length == 32, "EVP_Digest(SHA-256) cannot fail on valid input")
        return out
    }

    /// HMAC-SHA-256 (`EVP_Q_mac`).
    public static func hmacSHA256(key: SecretBytes, data: some ContiguousBytes) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length = 0
        let result = key.withUnsafeBytes { keyBytes in
            data.withUnsafeBytes { input in
                EVP_Q_mac(nil, "HMAC", nil, "SHA256", nil, keyBytes.baseAddress, keyBytes.count,
                          input.baseAddress?.assumingMemoryBound(to: UInt8.self), input.count, &out, out.count, &length)
            }
        }
        guard result != nil, length == 32 else { throw CryptoError.drain("HMAC-SHA256") }
        return out
    }

    /// HKDF-SHA-256 (RFC 5869) through the `EVP_PKEY_HKDF` derivation.
    public static func hkdfSHA256(key: SecretBytes, salt: [UInt8], info: [UInt8], length: Int) throws -> SecretBytes {
        guard let context = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nil) else { throw CryptoError.drain("EVP_PKEY_CTX_new_id(HKDF)") }
        defer { EVP_PKEY_CTX_free(context) }
        let configured = key.withUnsafeBytes { keyBytes in
            EVP_PKEY_derive_init(context) == 1
                && EVP_PKEY_CTX_set_hkdf_md(context, EVP_sha256()) == 1
                && EVP_PKEY_CTX_set1_hkdf_salt(context, salt, Int32(salt.count)) == 1
                && EVP_PKEY_CTX_set1_hkdf_key(context, keyBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(keyBytes.count)) == 1
                && EVP_PKEY_CTX_add1_hkdf_info(context, info, Int32(info.count)) == 1
        }
        guard configured else { throw CryptoError.drain("HKDF setup") }
        return try SecretBytes(count: length) { out in
            var outLength = length
            guard EVP_PKEY_derive(context, out.baseAddress?.assumingMemoryBound(to: UInt8.self), &outLength) == 1, outLength == length else {
                throw CryptoError.drain("HKDF")
            }
        }
    }

    /// Constant-time equality (`CRYPTO_memcmp`); lengths are not secret.
    public static func constantTimeEquals(_ lhs: some ContiguousBytes, _ rhs: some ContiguousBytes) -> Bool {
        lhs.withUnsafeBytes { a in
            rhs.withUnsafeBytes { b in
                a.count == b.count && (a.count == 0 || CRYPTO_memcmp(a.baseAddress, b.baseAddress, a.count) == 0)
            }
        }
    }

    /// Overwrites a buffer we own (`OPENSSL_cleanse`, which the compiler may not elide).
    public static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { OPENSSL_cleanse($0.baseAddress, $0.count) }
    }

    /// The same for the first `count` bytes, before they are dropped (a line read and handled).
    public static func wipe(_ bytes: inout [UInt8], first count: Int) {
        bytes.withUnsafeMutableBytes { OPENSSL_cleanse($0.baseAddress, min(count, $0.count)) }
    }
}

/// AES-256-GCM with a random 96-bit nonce. Output layout: nonce ‖ ciphertext ‖ 16-byte tag.
public enum AESGCM {
    public static let nonceLength = 12
    public static let tagLength = 16

    /// Encrypts `plaintext` under a 32-byte `key`, binding `associatedData`, with a fresh random
    /// nonce (``seal(_:key:iv:associatedData:)``, laid out as one box).
    public static func seal(_ plaintext: some ContiguousBytes, key: SecretBytes, associatedData: [UInt8]) throws -> [UInt8] {
        precondition(key.count == 32)
        let nonce = try OpenSSL.randomBytes(nonceLength)
        let (ciphertext, tag) = try seal(plaintext, key: key, iv: nonce, associatedData: associatedData)
        return nonce + ciphertext + tag
    }

    /// Decrypts and authenticates; `nil` when the box was tampered with, moved to another row
    /// (different associated data) or sealed under another key.
    public static func open(_ box: [UInt8], key: SecretBytes, associatedData: [UInt8]) throws -> SecretBytes? {
        guard box.count >= nonceLength + tagLength else { return nil }
        return try open(ciphertext: Array(box[nonceLength..<(box.count - tagLength)]), tag: Array(box.suffix(tagLength)), key: key,
                        iv: Array(box.prefix(nonceLength)), associatedData: associatedData)
    }
}

/// A P-256 key pair (`EVP_PKEY`). Immutable after creation; OpenSSL allows concurrent signing
/// with one `EVP_PKEY` from several threads (each call has its own `EVP_MD_CTX`), which is why
/// this type is Sendable.
public final class P256PrivateKey: @unchecked Sendable {
    let key: OpaquePointer
    /// A signing context set up at the first signature (`EVP_DigestSignInit` with SHA-256 and
    /// this key), which each signature copies: setting one up looks up the algorithms in
    /// OpenSSL's provider tables every time and cost about a fifth of a signature. A key that
    /// never signs (an ephemeral ECDH key) never makes one. Made and copied under the lock, so no
    /// two threads touch it at once.
    private let signingTemplate = Mutex(SigningTemplate())

    /// The template's `EVP_MD_CTX`, touched only under the lock.
    private struct SigningTemplate: @unchecked Sendable {
        var context: OpaquePointer?
    }

    /// Takes ownership of `key`, an EC key on P-256.
    init(key: OpaquePointer) throws {
        self.key = key
    }

    deinit {
        signingTemplate.withLock { template in if let context = template.context { EVP_MD_CTX_free(context) } }
        EVP_PKEY_free(key)
    }

    /// A fresh key from the system's random source.
    public static func generate() throws -> P256PrivateKey {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { throw CryptoError.drain("EVP_PKEY_CTX_new_from_name") }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(context) == 1,
              EVP_PKEY_CTX_set_group_name(context, "P-256") == 1,
              EVP_PKEY_keygen(context, &key) == 1, let key
        else { throw CryptoError.drain("EC key generation") }
        return try P256PrivateKey(key: key)
    }

    /// Parses a DER private key (RFC 5915 / PKCS#8) and checks it is on P-256.
    public convenience init(der: SecretBytes) throws {
        let parsed: OpaquePointer? = der.withUnsafeBytes { bytes in
            var pointer: UnsafePointer<UInt8>? = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)
            return d2i_AutoPrivateKey(nil, &pointer, bytes.count)
        }
        guard let parsed else { throw CryptoError.drain("d2i_AutoPrivateKey") }
        guard P256PublicKey.isP256(parsed) else {
            EVP_PKEY_free(parsed)
            throw CryptoError(operation: "load private key", detail: "not a P-256 key")
        }
        try self.init(key: parsed)
    }

    /// The private key as DER, in a buffer that is wiped after use.
    public func derRepresentation() throws -> SecretBytes {
        let length = i2d_PrivateKey(key, nil)
        guard length > 0 else { throw CryptoError.drain("i2d_PrivateKey") }
        return try SecretBytes(count: Int(length)) { buffer in
            var pointer: UnsafeMutablePointer<UInt8>? = buffer.baseAddress?.assumingMemoryBound(to: UInt8.self)
            guard i2d_PrivateKey(key, &pointer) == length else { throw CryptoError.drain("i2d_PrivateKey") }
        }
    }

    /// The public half: the key's own point in a key of its own (no DER encoder or decoder,
    /// which OpenSSL 3 looks up among all its providers each time).
    public func publicKey() throws -> P256PublicKey {
        let point = try P256PublicKey.encodedPoint(of: key)
        return try P256PublicKey(point: point, checked: false)
    }

    /// ECDSA-SHA-256 over `message`, as the 64-byte `r ‖ s` that JWS (RFC 7518 §3.4) requires.
    public func signES256(_ message: some ContiguousBytes) throws -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw CryptoError.drain("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        let copied = signingTemplate.withLock { template -> Int32 in
            if template.context == nil {
                guard let made = EVP_MD_CTX_new() else { return 0 }
                guard EVP_DigestSignInit(made, nil, EVP_sha256(), nil, key) == 1 else {
                    EVP_MD_CTX_free(made)
                    return 0
                }
                template.context = made
            }
            return EVP_MD_CTX_copy_ex(context, template.context)
        }
        guard copied == 1 else { throw CryptoError.drain("EVP_DigestSignInit") }
        // This copy signs once and is freed: without the flag, OpenSSL would sign with a copy of
        // its key context, so that the copy could take more data after the signature.
        EVP_MD_CTX_set_flags(context, EVP_MD_CTX_FLAG_FINALISE)
        var der = [UInt8](repeating: 0, count: 80)
        var length = der.count
        let ok = message.withUnsafeBytes { input in
            EVP_DigestSign(context, &der, &length, input.baseAddress?.assumingMemoryBound(to: UInt8.self), input.count)
        }
        guard ok == 1 else { throw CryptoError.drain("EVP_DigestSign") }
        return try ECDSASignature.P256.lowS(ECDSASignature.rawFromDER(Array(der.prefix(length)), coordinateLength: 32))
    }
}

/// A P-256 public key (`EVP_PKEY` holding only the public point).
public final class P256PublicKey: @unchecked Sendable {
    // Sendable: immutable after init; verification and key agreement use a fresh context per call.
    let key: OpaquePointer
    /// The SubjectPublicKeyInfo DER, as stored.
    public let spki: [UInt8]

    /// Parses a SubjectPublicKeyInfo and checks it is on P-256.
    public init(spki: [UInt8]) throws {
        let parsed: OpaquePointer? = spki.withUnsafeBufferPointer { bytes in
            var pointer: UnsafePointer<UInt8>? = bytes.baseAddress
            return d2i_PUBKEY(nil, &pointer, bytes.count)
        }
        guard let parsed else { throw CryptoError.drain("d2i_PUBKEY") }
        key = parsed
        self.spki = spki
        guard P256PublicKey.isP256(parsed) else {
            throw CryptoError(operation: "load public key", detail: "not a P-256 key")
        }
    }

    /// Takes ownership of `key`, a P-256 public key whose SubjectPublicKeyInfo is `spki`.
    private init(owning key: OpaquePointer, spki: [UInt8]) {
        self.key = key
        self.spki = spki
    }

    /// The key of an uncompressed P-256 point (`04 ‖ x ‖ y`). `checked`: refuse a point that is
    /// not on the curve (`EVP_PKEY_public_check_quick`: P-256 has cofactor 1, so on the curve
    /// is in the group) — for points from outside. Its SubjectPublicKeyInfo is the fixed
    /// P-256 prefix and the point (RFC 5480), written here rather than by OpenSSL's encoder.
    convenience init(point: [UInt8], checked: Bool) throws {
        guard point.count == 65, point[0] == 0x04 else { throw CryptoError(operation: "load EC key", detail: "not an uncompressed P-256 point") }
        // The builder keeps a pointer to the point until OSSL_PARAM_BLD_to_param, inside fromData.
        let buffer = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: 65)
        defer { buffer.deallocate() }
        _ = buffer.initialize(from: point)
        let key = try JWKPublicKey.fromData(type: "EC") { authd_param_push_p256_public($0, buffer.baseAddress, buffer.count) == 1 }
        if checked {
            guard let check = EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else {
                EVP_PKEY_free(key)
                throw CryptoError.drain("EVP_PKEY_CTX_new_from_pkey")
            }
            defer { EVP_PKEY_CTX_free(check) }
            guard EVP_PKEY_public_check_quick(check) == 1 else {
                ERR_clear_error()
                EVP_PKEY_free(key)
                throw CryptoError(operation: "load EC key", detail: "the point is not on P-256")
            }
        }
        self.init(owning: key, spki: Self.spkiPrefix + point)
    }

    /// SEQUENCE { SEQUENCE { id-ecPublicKey, prime256v1 }, BIT STRING (65 bytes) }, up to the point.
    static let spkiPrefix: [UInt8] = [
        0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01, 0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07,
        0x03, 0x42, 0x00,
    ]

    /// The uncompressed public point of an EC key.
    static func encodedPoint(of key: OpaquePointer) throws -> [UInt8] {
        var point = [UInt8](repeating: 0, count: 65)
        var length = 0
        guard EVP_PKEY_get_octet_string_param(key, "encoded-pub-key", &point, point.count, &length) == 1,
              length == 65, point[0] == 0x04
        else { throw CryptoError.drain("read EC public point") }
        return point
    }

    deinit { EVP_PKEY_free(key) }

    static func isP256(_ key: OpaquePointer) -> Bool {
        let group = curveName(key)
        return group == "prime256v1" || group == "P-256"
    }

    /// The affine coordinates (32 bytes each), for a JWK.
    public func coordinates() throws -> (x: [UInt8], y: [UInt8]) {
        let point = try Self.encodedPoint(of: key)
        return (Array(point[1...32]), Array(point[33...64]))
    }

    /// Verifies a 64-byte `r ‖ s` ES256 signature over `message`, in its low-S form only: for
    /// every signature (r, s) the pair (r, n − s) verifies too, and accepting both would give one
    /// token two encodings. ``P256PrivateKey/signES256(_:)`` signs low-S, so nothing valid is lost.
    public func verifyES256(signature: [UInt8], message: some ContiguousBytes) -> Bool {
        guard signature.count == 64, ECDSASignature.P256.isLowS(signature),
              let der = try? ECDSASignature.derFromRaw(signature) else { return false }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer {
            EVP_MD_CTX_free(context)
            ERR_clear_error()
        }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1 else { return false }
        return message.withUnsafeBytes { input in
            EVP_DigestVerify(context, der, der.count, input.baseAddress?.assumingMemoryBound(to: UInt8.self), input.count) == 1
        }
    }
}

/// A P-384 key pair, as the ID card holds them: the virtual card's keys and its test CA's. Its
/// signatures are over a digest the caller computed, as a card's are; PEM (unencrypted PKCS #8)
/// is how the simulator's profiles keep these test keys.
public final class P384PrivateKey: @unchecked Sendable {
    // Sendable: immutable after init; each signature uses a fresh EVP_PKEY_CTX.
    let key: OpaquePointer

    private init(key: OpaquePointer) { self.key = key }
    deinit { EVP_PKEY_free(key) }

    /// A fresh key from the system's random source.
    public static func generate() throws -> P384PrivateKey {
        guard let key = authd_ec_generate("P-384") else { throw CryptoError.drain("EC key generation") }
        return P384PrivateKey(key: key)
    }

    /// Parses a PEM private key and checks it is on P-384. An encrypted key is refused rather
    /// than prompting for its passphrase on the terminal.
    public convenience init(pem: String) throws {
        let bio = pem.withCString { BIO_new_mem_buf($0, -1) }
        defer { BIO_free(bio) }
        guard let parsed = PEM_read_bio_PrivateKey(bio, nil, { _, _, _, _ in 0 }, nil) else { throw CryptoError.drain("PEM_read_bio_PrivateKey") }
        self.init(key: parsed)
        guard curveName(parsed) == "secp384r1" else { throw CryptoError(operation: "load private key", detail: "not a P-384 key") }
    }

    /// The key as unencrypted PKCS #8 PEM.
    public func pemRepresentation() throws -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw CryptoError.drain("BIO_new") }
        defer { BIO_free(bio) }
        guard PEM_write_bio_PrivateKey(bio, key, nil, nil, 0, nil, nil) == 1 else { throw CryptoError.drain("PEM_write_bio_PrivateKey") }
        var pointer: UnsafeMutablePointer<CChar>?
        // BIO_get_mem_data, a macro over BIO_ctrl.
        let length = BIO_ctrl(bio, BIO_CTRL_INFO, 0, &pointer)
        guard length > 0, let pointer else { throw CryptoError(operation: "PEM_write_bio_PrivateKey", detail: "no output") }
        return String(decoding: UnsafeRawBufferPointer(start: pointer, count: Int(length)), as: UTF8.self)
    }

    /// ECDSA over `digest` as the card answers: raw `r ‖ s`, 48 bytes each.
    public func sign(digest: [UInt8]) throws -> [UInt8] {
        guard let context = EVP_PKEY_CTX_new(key, nil) else { throw CryptoError.drain("EVP_PKEY_CTX_new") }
        defer { EVP_PKEY_CTX_free(context) }
        var length = 0
        guard EVP_PKEY_sign_init(context) == 1, EVP_PKEY_sign(context, nil, &length, digest, digest.count) == 1 else {
            throw CryptoError.drain("EVP_PKEY_sign")
        }
        var der = [UInt8](repeating: 0, count: length)
        guard EVP_PKEY_sign(context, &der, &length, digest, digest.count) == 1 else { throw CryptoError.drain("EVP_PKEY_sign") }
        return try ECDSASignature.rawFromDER(Array(der.prefix(length)), coordinateLength: 48)
    }
}

/// A public key published as a JWK (RFC 7518 §6): RSA (`n`, `e`, at least 2048 bits) or EC
/// P-256 (`x`, `y`), for verifying an OpenID provider's ID tokens with RS256 or ES256.
public final class JWKPublicKey: @unchecked Sendable {
    // Sendable: immutable after init; verification uses a fresh EVP_MD_CTX per call.
    private let key: OpaquePointer
    /// The JWS `alg` this key verifies: RS256 or ES256.
    public let algorithm: String

    /// An RSA key from its big-endian modulus and exponent.
    public init(rsaModulus modulus: [UInt8], exponent: [UInt8]) throws {
        let bits = (modulus.drop { $0 == 0 }.count) * 8
        guard bits >= 2048, bits <= 8192, !exponent.isEmpty, exponent.count <= 8 else {
            throw CryptoError(operation: "load RSA key", detail: "modulus of \(bits) bits (2048–8192 accepted)")
        }
        guard let n = BN_bin2bn(modulus, Int32(modulus.count), nil) else { throw CryptoError.drain("BN_bin2bn") }
        defer { BN_free(n) }
        guard let e = BN_bin2bn(exponent, Int32(exponent.count), nil) else { throw CryptoError.drain("BN_bin2bn") }
        defer { BN_free(e) }
        // The builder keeps pointers to n and e until OSSL_PARAM_BLD_to_param, inside fromData.
        key = try JWKPublicKey.fromData(type: "RSA") { authd_param_push_rsa_public($0, n, e) == 1 }
        algorithm = "RS256"
    }

    /// An EC key from its P-256 affine coordinates, checked to be on the curve.
    public init(p256X x: [UInt8], y: [UInt8]) throws {
        guard x.count == 32, y.count == 32 else { throw CryptoError(operation: "load EC key", detail: "P-256 coordinates must be 32 bytes") }
        // The builder keeps a pointer to the point until OSSL_PARAM_BLD_to_param, inside fromData.
        let point = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: 65)
        defer { point.deallocate() }
        _ = point.initialize(from: [0x04] + x + y)
        key = try JWKPublicKey.fromData(type: "EC") { authd_param_push_p256_public($0, point.baseAddress, point.count) == 1 }
        algorithm = "ES256"
        // EVP_PKEY_fromdata does not check that the point is on the curve.
        guard let check = EVP_PKEY_CTX_new_from_pkey(nil, key, nil) else { throw CryptoError.drain("EVP_PKEY_CTX_new_from_pkey") }
        defer { EVP_PKEY_CTX_free(check) }
        guard EVP_PKEY_public_check(check) == 1 else {
            ERR_clear_error()
            throw CryptoError(operation: "load EC key", detail: "the point is not on P-256")
        }
    }

    deinit { EVP_PKEY_free(key) }

    /// A key of `type` from the parameters `build` pushes; `selection` is what they hold (the
    /// public key by default, or the key pair).
    static func fromData(type: String, selection: Int32 = authd_evp_pkey_public_key_selection(),
                         _ build: (OpaquePointer) -> Bool) throws -> OpaquePointer {
        guard let builder = OSSL_PARAM_BLD_new() else { throw CryptoError.drain("OSSL_PARAM_BLD_new") }
        defer { OSSL_PARAM_BLD_free(builder) }
        guard build(builder), let params = OSSL_PARAM_BLD_to_param(builder) else { throw CryptoError.drain("OSSL_PARAM_BLD_to_param") }
        defer { OSSL_PARAM_free(params) }
        guard let context = EVP_PKEY_CTX_new_from_name(nil, type, nil) else { throw CryptoError.drain("EVP_PKEY_CTX_new_from_name") }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        guard EVP_PKEY_fromdata_init(context) == 1,
              EVP_PKEY_fromdata(context, &key, selection, params) == 1, let key
        else { throw CryptoError.drain("EVP_PKEY_fromdata(\(type))") }
        return key
    }

    /// Verifies a JWS signature (RS256: PKCS #1 v1.5 with SHA-256; ES256: 64-byte `r ‖ s`).
    public func verify(signature: [UInt8], message: [UInt8]) -> Bool {
        var signature = signature
        if algorithm == "ES256" {
            guard signature.count == 64, let der = try? ECDSASignature.derFromRaw(signature) else { return false }
            signature = der
        }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer {
            EVP_MD_CTX_free(context)
            ERR_clear_error()
        }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1 else { return false }
        return EVP_DigestVerify(context, signature, signature.count, message, message.count) == 1
    }
}

/// The SubjectPublicKeyInfo DER of a key's public half (`i2d_PUBKEY`).
func subjectPublicKeyInfo(_ key: OpaquePointer) throws -> [UInt8] {
    var pointer: UnsafeMutablePointer<UInt8>?
    let length = i2d_PUBKEY(key, &pointer)
    guard length > 0, let pointer else { throw CryptoError.drain("i2d_PUBKEY") }
    defer { authd_openssl_free(pointer) }
    return Array(UnsafeBufferPointer(start: pointer, count: Int(length)))
}

/// The curve of an EC key as OpenSSL names it (`prime256v1`, `secp384r1`); nil for other keys.
func curveName(_ key: OpaquePointer) -> String? {
    var name = [CChar](repeating: 0, count: 64)
    var length = 0
    guard EVP_PKEY_get_group_name(key, &name, name.count, &length) == 1 else { return nil }
    return String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// Conversions between DER `ECDSA-Sig-Value` and the fixed-width `r ‖ s` of JWS.
public enum ECDSASignature {
    /// The low-S rule on P-256 (as Bitcoin's BIP 62 and libsecp256k1 apply it): of the twins
    /// (r, s) and (r, n − s), only the one with s ≤ n/2 is accepted.
    public enum P256 {
        /// The group order n, big-endian, as OpenSSL knows it.
        static let order: [UInt8] = {
            guard let group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1) else { fatalError("OpenSSL has no P-256") }
            defer { EC_GROUP_free(group) }
            var bytes = [UInt8](repeating: 0, count: 32)
            guard BN_bn2binpad(EC_GROUP_get0_order(group), &bytes, 32) == 32 else { fatalError("P-256's order does not fit 32 bytes") }
            return bytes
        }()

        /// ⌊n/2⌋, big-endian: the largest low s.
        static let halfOrder: [UInt8] = {
            var half = [UInt8](repeating: 0, count: 32)
            var carry: UInt8 = 0
            for (index, byte) in order.enumerated() {
                half[index] = (byte >> 1) | carry
                carry = (byte & 1) << 7
            }
            return half
        }()

        /// Whether the `s` half of a 64-byte `r ‖ s` is at most n/2 (equal-length big-endian
        /// bytes compare as the numbers do; both are public values).
        public static func isLowS(_ signature: [UInt8]) -> Bool {
            signature.count == 64 && !halfOrder[...].lexicographicallyPrecedes(signature[32...])
        }

        /// The low-S form of a 64-byte `r ‖ s`: itself when s ≤ n/2, else its twin.
        public static func lowS(_ signature: [UInt8]) throws -> [UInt8] {
            isLowS(signature) ? signature : try twin(signature)
        }

        /// (r, n − s) for a 64-byte `r ‖ s` with 0 < s < n: the other signature that verifies
        /// wherever this one does.
        public static func twin(_ signature: [UInt8]) throws -> [UInt8] {
            precondition(signature.count == 64, "an r ‖ s signature on P-256 is 64 bytes")
            guard let n = BN_bin2bn(order, 32, nil) else { throw CryptoError.drain("BN_bin2bn") }
            defer { BN_free(n) }
            guard let s = signature.withUnsafeBufferPointer({ BN_bin2bn($0.baseAddress! + 32, 32, nil) }) else { throw CryptoError.drain("BN_bin2bn") }
            defer { BN_free(s) }
            guard BN_sub(s, n, s) == 1 else { throw CryptoError.drain("BN_sub") }
            var twin = Array(signature.prefix(32)) + [UInt8](repeating: 0, count: 32)
            guard twin.withUnsafeMutableBufferPointer({ BN_bn2binpad(s, $0.baseAddress! + 32, 32) }) == 32 else { throw CryptoError.drain("BN_bn2binpad") }
            return twin
        }
    }

    /// DER to `r ‖ s`, each coordinate left-padded to `coordinateLength` bytes.
    public static func rawFromDER(_ der: [UInt8], coordinateLength: Int) throws -> [UInt8] {
        let signature: OpaquePointer? = der.withUnsafeBufferPointer { bytes in
            var pointer: UnsafePointer<UInt8>? = bytes.baseAddress
            return d2i_ECDSA_SIG(nil, &pointer, bytes.count)
        }
        guard let signature else { throw CryptoError.drain("d2i_ECDSA_SIG") }
        defer { ECDSA_SIG_free(signature) }
        var out = [UInt8](repeating: 0, count: 2 * coordinateLength)
        guard BN_bn2binpad(ECDSA_SIG_get0_r(signature), &out, Int32(coordinateLength)) == Int32(coordinateLength),
              out.withUnsafeMutableBufferPointer({ BN_bn2binpad(ECDSA_SIG_get0_s(signature), $0.baseAddress! + coordinateLength, Int32(coordinateLength)) }) == Int32(coordinateLength)
        else { throw CryptoError.drain("BN_bn2binpad") }
        return out
    }

    /// `r ‖ s` (two halves of equal length) to DER.
    public static func derFromRaw(_ raw: [UInt8]) throws -> [UInt8] {
        let half = raw.count / 2
        guard let signature = ECDSA_SIG_new() else { throw CryptoError.drain("ECDSA_SIG_new") }
        defer { ECDSA_SIG_free(signature) }
        let r = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, Int32(half), nil) }
        let s = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress! + half, Int32(half), nil) }
        guard let r, let s, ECDSA_SIG_set0(signature, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            throw CryptoError.drain("ECDSA_SIG_set0")
        }
        var pointer: UnsafeMutablePointer<UInt8>?
        let length = i2d_ECDSA_SIG(signature, &pointer)
        guard length > 0, let pointer else { throw CryptoError.drain("i2d_ECDSA_SIG") }
        defer { authd_openssl_free(pointer) }
        return Array(UnsafeBufferPointer(start: pointer, count: Int(length)))
    }
}

/// The SHA-2 digests a card signature or a document hash may use, named as on the wire.
public enum Digest: String, Sendable, CaseIterable {
    case sha256 = "SHA-256", sha384 = "SHA-384", sha512 = "SHA-512"

    /// The digest's length in bytes.
    public var length: Int {
        switch self { case .sha256: 32; case .sha384: 48; case .sha512: 64 }
    }

    public func hash(_ data: some ContiguousBytes) -> [UInt8] {
        let md = switch self { case .sha256: EVP_sha256(); case .sha384: EVP_sha384(); case .sha512: EVP_sha512() }
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        data.withUnsafeBytes { _ = EVP_Digest($0.baseAddress, $0.count, &out, &length, md, nil) }
        return Array(out.prefix(Int(length)))
    }
}
