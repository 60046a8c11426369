internal import COpenSSL

/// An X.509 certificate read from a card: untrusted DER, parsed by libcrypto.
public final class X509Certificate: @unchecked Sendable {
    // Sendable: the handle is only read after init.
    private let handle: OpaquePointer
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
