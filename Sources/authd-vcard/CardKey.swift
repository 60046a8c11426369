import COpenSSL
import Foundation

/// A P-384 key pair held by the virtual card or the test CA (libcrypto).
final class CardKey {
    let key: OpaquePointer

    init(pem: String) throws {
        let bio = pem.withCString { BIO_new_mem_buf($0, -1) }
        defer { BIO_free(bio) }
        guard let key = PEM_read_bio_PrivateKey(bio, nil, nil, nil) else { throw ProfileError("a private key in the profile does not parse") }
        self.key = key
    }

    /// A fresh P-384 key.
    init() throws {
        guard let key = authd_ec_generate("P-384") else { throw ProfileError("cannot generate a P-384 key") }
        self.key = key
    }

    deinit { EVP_PKEY_free(key) }

    var pem: String {
        let bio = BIO_new(BIO_s_mem())
        defer { BIO_free(bio) }
        PEM_write_bio_PrivateKey(bio, key, nil, nil, 0, nil, nil)
        return Self.drain(bio)
    }

    /// ECDSA over a digest, as the card answers: raw r‖s, 48 bytes each.
    func sign(digest: [UInt8]) throws -> [UInt8] {
        guard let context = EVP_PKEY_CTX_new(key, nil) else { throw ProfileError("signing context") }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_sign_init(context) == 1 else { throw ProfileError("signing init") }
        var length = 0
        guard EVP_PKEY_sign(context, nil, &length, digest, digest.count) == 1 else { throw ProfileError("signing size") }
        var der = [UInt8](repeating: 0, count: length)
        guard EVP_PKEY_sign(context, &der, &length, digest, digest.count) == 1 else { throw ProfileError("signing") }
        var cursor: UnsafePointer<UInt8>? = der.withUnsafeBufferPointer { $0.baseAddress }
        let signature = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            cursor = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, length)
        }
        guard let signature else { throw ProfileError("signature encoding") }
        defer { ECDSA_SIG_free(signature) }
        var raw = [UInt8](repeating: 0, count: 96)
        guard BN_bn2binpad(ECDSA_SIG_get0_r(signature), &raw, 48) == 48,
              raw.withUnsafeMutableBufferPointer({ BN_bn2binpad(ECDSA_SIG_get0_s(signature), $0.baseAddress! + 48, 48) }) == 48 else {
            throw ProfileError("signature size")
        }
        return raw
    }

    static func drain(_ bio: OpaquePointer?) -> String {
        var pointer: UnsafeMutablePointer<CChar>?
        let length = BIO_ctrl(bio, BIO_CTRL_INFO, 0, &pointer)
        guard length > 0, let pointer else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: pointer, count: Int(length)), as: UTF8.self)
    }
}

/// Issues the test CA and the card's certificates (X.509 v3, ECDSA with SHA-384), shaped like
/// the ID card's: subject C, CN "SURNAME,GIVEN,CODE", SN, GN, serialNumber "PNOEE-CODE".
enum Certificates {
    struct Subject {
        var entries: [(String, String)]
    }

    /// A certificate as DER. `issuer` nil makes it self-signed by `key`.
    static func issue(subject: Subject, key: CardKey, issuer: (certificate: [UInt8], key: CardKey)?, serial: Int,
                      days: Int, extensions: [(Int32, String)]) throws -> [UInt8] {
        guard let certificate = X509_new() else { throw ProfileError("X509_new") }
        defer { X509_free(certificate) }
        X509_set_version(certificate, 2)
        ASN1_INTEGER_set(X509_get_serialNumber(certificate), serial)
        X509_gmtime_adj(X509_getm_notBefore(certificate), -86_400)
        X509_gmtime_adj(X509_getm_notAfter(certificate), days * 86_400)
        let name = X509_get_subject_name(certificate)
        for (field, value) in subject.entries {
            guard X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8, value, -1, -1, 0) == 1 else { throw ProfileError("name \(field)") }
        }
        X509_set_pubkey(certificate, key.key)
        var issuerCertificate: OpaquePointer?
        defer { if let issuerCertificate { X509_free(issuerCertificate) } }
        if let issuer {
            issuerCertificate = issuer.certificate.withUnsafeBufferPointer { buffer in
                var cursor = buffer.baseAddress
                return d2i_X509(nil, &cursor, buffer.count)
            }
            guard let issuerCertificate else { throw ProfileError("issuer certificate") }
            X509_set_issuer_name(certificate, X509_get_subject_name(issuerCertificate))
        } else {
            X509_set_issuer_name(certificate, name)
        }
        var context = X509V3_CTX()
        X509V3_set_ctx(&context, issuerCertificate ?? certificate, certificate, nil, nil, 0)
        for (nid, value) in extensions {
            guard let ext = X509V3_EXT_conf_nid(nil, &context, nid, value) else { throw ProfileError("extension \(value)") }
            X509_add_ext(certificate, ext, -1)
            X509_EXTENSION_free(ext)
        }
        guard X509_sign(certificate, (issuer?.key ?? key).key, EVP_sha384()) > 0 else { throw ProfileError("X509_sign") }
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_X509(certificate, &out)
        guard length > 0, let out else { throw ProfileError("i2d_X509") }
        defer { authd_openssl_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }

    static func pem(_ der: [UInt8]) -> String {
        let body = Data(der).base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
        return "-----BEGIN CERTIFICATE-----\n\(body)\n-----END CERTIFICATE-----\n"
    }
}

enum Base64 {
    static func decode(_ text: String) -> [UInt8]? { Data(base64Encoded: text).map(Array.init) }
    static func encode(_ bytes: [UInt8]) -> String { Data(bytes).base64EncodedString() }
}
