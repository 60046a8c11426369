internal import COpenSSL

/// An X.509 certificate: read from a card (untrusted DER, parsed by libcrypto), or issued for
/// the virtual card and its test CA.
public final class X509Certificate: @unchecked Sendable {
    // Sendable: the handle is only read after init.
    let handle: OpaquePointer
    public let der: [UInt8]

    /// Parses exactly one DER certificate; trailing bytes are refused.
    public init(der: [UInt8]) throws {
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { bytes in
            var pointer: UnsafePointer<UInt8>? = bytes.baseAddress
            let certificate = d2i_X509(nil, &pointer, bytes.count)
            // Trailing bytes after the certificate are not part of it: refuse them.
            return pointer == bytes.baseAddress.map({ $0 + bytes.count }) ? certificate : { X509_free(certificate); return nil }()
        }
        guard let parsed else {
            ERR_clear_error()
            throw CryptoError(operation: "d2i_X509", detail: "not one DER certificate")
        }
        handle = parsed
        self.der = der
    }

    deinit { X509_free(handle) }

    /// The subject attributes authd reads from a card certificate or writes into a test one
    /// (X.520 names; ETSI EN 319 412-1 puts the personal code in `serialNumber`).
    public enum Attribute: Sendable {
        case country, organization, commonName, surname, givenName, serialNumber

        var nid: Int32 {
            switch self {
            case .country: NID_countryName
            case .organization: NID_organizationName
            case .commonName: NID_commonName
            case .surname: NID_surname
            case .givenName: NID_givenName
            case .serialNumber: NID_serialNumber
            }
        }
    }

    /// The first subject attribute of this kind, as UTF-8.
    public func subjectAttribute(_ attribute: Attribute) -> String? {
        guard let name = X509_get_subject_name(handle) else { return nil }
        let index = X509_NAME_get_index_by_NID(name, attribute.nid, -1)
        guard index >= 0, let entry = X509_NAME_get_entry(name, index), let data = X509_NAME_ENTRY_get_data(entry) else { return nil }
        var utf8: UnsafeMutablePointer<UInt8>?
        let length = ASN1_STRING_to_UTF8(&utf8, data)
        guard length >= 0, let utf8 else { return nil }
        defer { authd_openssl_free(utf8) }
        return String(decoding: UnsafeBufferPointer(start: utf8, count: Int(length)), as: UTF8.self)
    }

    /// True when the key is EC over P-384 (what ES384 needs).
    public var hasP384Key: Bool {
        guard let key = X509_get0_pubkey(handle) else { return false }
        return curveName(key) == "secp384r1"
    }

    /// Checks a raw r‖s ECDSA signature over `digest` with the certificate's key.
    public func verifies(rawSignature: [UInt8], digest: [UInt8]) -> Bool {
        guard let key = X509_get0_pubkey(handle), let der = try? ECDSASignature.derFromRaw(rawSignature),
              let context = EVP_PKEY_CTX_new(key, nil) else { return false }
        defer {
            EVP_PKEY_CTX_free(context)
            ERR_clear_error()
        }
        guard EVP_PKEY_verify_init(context) == 1 else { return false }
        return EVP_PKEY_verify(context, der, der.count, digest, digest.count) == 1
    }
}

extension X509Certificate {
    /// Every certificate of a PEM text, in order (a CA file): at least one, or an error.
    /// The corresponding C functions are `PEM_read_bio_X509` and `i2d_X509`.
    public static func certificates(pem: String) throws -> [X509Certificate] {
        guard let bio = pem.withCString({ BIO_new_mem_buf($0, -1) }) else { throw CryptoError.drain("BIO_new_mem_buf") }
        defer { BIO_free(bio) }
        var certificates: [X509Certificate] = []
        while let certificate = PEM_read_bio_X509(bio, nil, nil, nil) {
            defer { X509_free(certificate) }
            var out: UnsafeMutablePointer<UInt8>?
            let length = i2d_X509(certificate, &out)
            guard length > 0, let out else { throw CryptoError.drain("i2d_X509") }
            defer { authd_openssl_free(out) }
            certificates.append(try X509Certificate(der: Array(UnsafeBufferPointer(start: out, count: Int(length)))))
        }
        // The loop ends on the end of the text, which OpenSSL reports as an error: not one.
        ERR_clear_error()
        guard !certificates.isEmpty else { throw CryptoError(operation: "PEM_read_bio_X509", detail: "no certificate in the text") }
        return certificates
    }

    /// Whether this certificate chains to `anchors` (each trusted as it is: roots and the
    /// intermediates that issue cards), valid now, with every signature on the way checked.
    /// The corresponding C function is `X509_verify_cert`.
    public func isIssued(byAnyOf anchors: [X509Certificate]) -> Bool {
        guard let store = X509_STORE_new() else { return false }
        defer { X509_STORE_free(store) }
        for anchor in anchors where X509_STORE_add_cert(store, anchor.handle) != 1 { ERR_clear_error() }
        // An intermediate in the file is an anchor too, not only a step towards a root there.
        X509_STORE_set_flags(store, UInt(X509_V_FLAG_PARTIAL_CHAIN))
        guard let context = X509_STORE_CTX_new() else { return false }
        defer {
            X509_STORE_CTX_free(context)
            ERR_clear_error()
        }
        guard X509_STORE_CTX_init(context, store, handle, nil) == 1 else { return false }
        return X509_verify_cert(context) == 1
    }
}

extension X509Certificate {
    /// The extensions of the test CA's and the virtual card's certificates.
    public enum Extension: Sendable {
        /// basicConstraints, critical: a CA.
        case certificateAuthority
        /// keyUsage, critical.
        case keyUsage([KeyUsage])
        /// extKeyUsage: TLS client authentication, as on the ID card's authentication certificate.
        case clientAuthentication
        /// subjectKeyIdentifier: the hash of the certificate's public key.
        case subjectKeyIdentifier
        /// authorityKeyIdentifier: the issuer's key identifier.
        case authorityKeyIdentifier

        /// The NID and value in OpenSSL's configuration syntax (x509v3_config(5)).
        var configuration: (nid: Int32, value: String) {
            switch self {
            case .certificateAuthority: (NID_basic_constraints, "critical,CA:TRUE")
            case .keyUsage(let usages): (NID_key_usage, (["critical"] + usages.map(\.rawValue)).joined(separator: ","))
            case .clientAuthentication: (NID_ext_key_usage, "clientAuth")
            case .subjectKeyIdentifier: (NID_subject_key_identifier, "hash")
            case .authorityKeyIdentifier: (NID_authority_key_identifier, "keyid")
            }
        }
    }

    /// Key usage bits, spelled as in x509v3_config(5).
    public enum KeyUsage: String, Sendable {
        case digitalSignature, nonRepudiation, keyAgreement, keyCertSign, cRLSign
    }

    /// Issues an X.509 v3 certificate for `subjectKey`, signed with ECDSA-SHA-384 by the issuer's
    /// key (self-signed by `subjectKey` when `issuer` is nil), valid from a day ago for `days`.
    public static func issue(subject: [(Attribute, String)], subjectKey: P384PrivateKey,
                             issuer: (certificate: X509Certificate, key: P384PrivateKey)?,
                             serial: Int, days: Int, extensions: [Extension]) throws -> X509Certificate {
        try issue(subject: subject, subjectKey: subjectKey.key, issuer: issuer.map { ($0.certificate, $0.key.key) },
                  digest: EVP_sha384(), serial: serial, days: days, extensions: extensions)
    }

    /// A self-signed certificate for a P-256 key (ECDSA-SHA-256), as a TLS client presents its
    /// key with: `commonName` for people, the key itself for the peer.
    public static func selfSigned(commonName: String, key: P256PrivateKey, serial: Int, days: Int) throws -> X509Certificate {
        try issue(subject: [(.commonName, commonName)], subjectKey: key.key, issuer: nil, digest: EVP_sha256(),
                  serial: serial, days: days, extensions: [.keyUsage([.digitalSignature]), .clientAuthentication])
    }

    private static func issue(subject: [(Attribute, String)], subjectKey: OpaquePointer, issuer: (certificate: X509Certificate, key: OpaquePointer)?,
                              digest: OpaquePointer?, serial: Int, days: Int, extensions: [Extension]) throws -> X509Certificate {
        guard let certificate = X509_new() else { throw CryptoError.drain("X509_new") }
        defer { X509_free(certificate) }
        guard X509_set_version(certificate, 2) == 1,
              ASN1_INTEGER_set(X509_get_serialNumber(certificate), serial) == 1,
              X509_gmtime_adj(X509_getm_notBefore(certificate), -86_400) != nil,
              X509_gmtime_adj(X509_getm_notAfter(certificate), days * 86_400) != nil,
              X509_set_pubkey(certificate, subjectKey) == 1
        else { throw CryptoError.drain("certificate fields") }
        let name = X509_get_subject_name(certificate)
        for (attribute, value) in subject {
            let bytes = Array(value.utf8)
            guard X509_NAME_add_entry_by_NID(name, attribute.nid, MBSTRING_UTF8, bytes, Int32(bytes.count), -1, 0) == 1 else {
                throw CryptoError.drain("subject \(attribute)")
            }
        }
        guard X509_set_issuer_name(certificate, issuer.map { X509_get_subject_name($0.certificate.handle) } ?? name) == 1 else {
            throw CryptoError.drain("X509_set_issuer_name")
        }
        // The issuer's certificate is where authorityKeyIdentifier finds the issuer's key id.
        var context = X509V3_CTX()
        X509V3_set_ctx(&context, issuer?.certificate.handle ?? certificate, certificate, nil, nil, 0)
        for fields in extensions.map(\.configuration) {
            guard let ext = X509V3_EXT_conf_nid(nil, &context, fields.nid, fields.value) else { throw CryptoError.drain("extension \(fields.value)") }
            defer { X509_EXTENSION_free(ext) }
            guard X509_add_ext(certificate, ext, -1) == 1 else { throw CryptoError.drain("X509_add_ext") }
        }
        guard X509_sign(certificate, issuer?.key ?? subjectKey, digest) > 0 else { throw CryptoError.drain("X509_sign") }
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_X509(certificate, &out)
        guard length > 0, let out else { throw CryptoError.drain("i2d_X509") }
        defer { authd_openssl_free(out) }
        return try X509Certificate(der: Array(UnsafeBufferPointer(start: out, count: Int(length))))
    }

    /// The certificate's SubjectPublicKeyInfo, DER.
    public var publicKeyInfo: [UInt8] {
        get throws {
            guard let spki = Self.publicKeyInfo(of: handle) else { throw CryptoError.drain("i2d_X509_PUBKEY") }
            return spki
        }
    }

    static func publicKeyInfo(of certificate: OpaquePointer) -> [UInt8]? {
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_X509_PUBKEY(X509_get_X509_PUBKEY(certificate), &out)
        guard length > 0, let out else { return nil }
        defer { authd_openssl_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }
}
