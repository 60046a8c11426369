import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// A JWE signed by the sending device: compact JWS (RFC 7515), ES256, header {"alg":"ES256","kid":deviceID,"cty":"jose+json"}, payload = the JWE serialisation's UTF-8 bytes.
///
/// The signature is what tells a device which of the account's devices wrote an event: the
/// JWE alone says only that someone who knew the recipients' public keys did.
public enum SignedEnvelope {
    /// The JWS content type of a JWE in JSON serialisation (RFC 7515 §4.1.10, RFC 7516 §9).
    static let contentType = "jose+json"
    /// The header members of the profile, and no others (`crit` least of all).
    private static let headerMembers: Set<String> = ["alg", "kid", "cty"]
    /// The largest envelope read: a JWE of the largest size, base64url-encoded, and room for
    /// the header and signature.
    static let maximumBytes = (JWE.maximumSerializationBytes / 3 + 1) * 4 + 4096

    public static func sign(jwe: String, kid: String, key: P256PrivateKey) throws -> String {
        try CompactJWS.sign(header: ["alg": "ES256", "kid": .string(kid), "cty": .string(contentType)], payload: Array(jwe.utf8), key: key)
    }

    /// The kid, unverified (to find the sender's key). nil when not a compact JWS of this profile.
    public static func signer(of compact: String) -> String? {
        // The header and the signature's shape: the payload (the whole JWE) is read once, by `open`.
        let parts = JOSEParts.parts(compact, maxParts: 4)
        guard compact.utf8.count <= maximumBytes, parts.count == 3, JOSEParts.bytes(parts[2], count: 64) != nil,
              let bytes = JOSEParts.bytes(parts[0]), let header = JOSEParts.object(bytes),
              header["alg"] == "ES256", Set(header.keys).isSubset(of: headerMembers), header["cty"] == .string(contentType),
              case .string(let kid)? = header["kid"], !kid.isEmpty
        else { return nil }
        return kid
    }

    /// Verifies with the sender's device key and returns the JWE serialisation.
    public static func open(_ compact: String, signerKey: P256PublicKey) throws(E2EEFailure) -> String {
        guard let (jws, _) = parse(compact) else { throw .malformed }
        guard jws.verifies(with: signerKey) else { throw .badSignature }
        guard let jwe = String(validating: jws.payload, as: UTF8.self) else { throw .malformed }
        return jwe
    }

    private static func parse(_ compact: String) -> (jws: CompactJWS, kid: String)? {
        guard let jws = CompactJWS(compact, limit: maximumBytes, allowedHeader: headerMembers),
              jws.header["cty"] == .string(contentType),
              case .string(let kid)? = jws.header["kid"], !kid.isEmpty
        else { return nil }
        return (jws, kid)
    }
}
