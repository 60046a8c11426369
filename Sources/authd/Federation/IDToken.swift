import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// The claims authd takes from a validated ID token.
struct IDTokenClaims: Equatable, Sendable {
    let subject: String
    let email: String?
    let emailVerified: Bool
    let name: String?
    /// `exp`: after it (and the tolerated skew) the token is refused anyway, so its use need
    /// not be remembered longer.
    let expiresAt: Int64
}

/// Which check an ID token failed (OpenID Connect Core 1.0 §3.1.3.7); `check` is the
/// `data.check` of `federation.id_token_invalid`.
struct IDTokenFailure: Error, Equatable, CustomStringConvertible {
    let check: String
    let description: String
}

/// ID token validation as OpenID Connect Core 1.0 §3.1.3.7 (code flow) asks: a pure function of
/// the token, the provider's keys, what authd sent, and the clock.
enum IDTokenValidator {
    /// Tolerated clock difference with the provider.
    static let skewSeconds: Int64 = 60

    struct Expectation: Sendable {
        let issuer: String
        let clientID: String
        /// nil for the device grant, which sends no nonce.
        let nonce: String?
        /// The provider's `id_token_signing_alg_values_supported`; empty = RS256 only (the default).
        let algorithms: [String]
    }

    /// The keys by `kid`, and the keys without one.
    struct KeySet: Sendable {
        var byID: [String: JWKPublicKey] = [:]
        var unnamed: [JWKPublicKey] = []

        /// The usable signing keys of a JWKS document (RSA and P-256; `use` absent or `sig`).
        static func parse(_ document: JSONValue) -> KeySet {
            var set = KeySet()
            guard case .object(let root) = document, case .array(let keys)? = root["keys"] else { return set }
            for case .object(let jwk) in keys.prefix(64) {
                if let use = jwk["use"]?.stringValue, use != "sig" { continue }
                let key: JWKPublicKey?
                switch jwk["kty"]?.stringValue {
                case "RSA":
                    key = (jwk["n"]?.stringValue).flatMap(Base64URL.decode).flatMap { n in
                        (jwk["e"]?.stringValue).flatMap(Base64URL.decode).flatMap { e in try? JWKPublicKey(rsaModulus: n, exponent: e) }
                    }
                case "EC" where jwk["crv"]?.stringValue == "P-256":
                    key = (jwk["x"]?.stringValue).flatMap(coordinate).flatMap { x in
                        (jwk["y"]?.stringValue).flatMap(coordinate).flatMap { y in try? JWKPublicKey(p256X: x, y: y) }
                    }
                default:
                    key = nil
                }
                guard let key else { continue }
                if let alg = jwk["alg"]?.stringValue, alg != key.algorithm { continue }
                if let kid = jwk["kid"]?.stringValue { set.byID[kid] = key } else { set.unnamed.append(key) }
            }
            return set
        }

        /// A P-256 coordinate as 32 bytes. RFC 7518 §6.2.1.2 wants the full 32, but some
        /// providers write the integer without its leading zero bytes (Authlib does, for about
        /// one key in a hundred); the value is the same, so it is padded rather than refused.
        private static func coordinate(_ text: String) -> [UInt8]? {
            guard let bytes = Base64URL.decode(text), (1...32).contains(bytes.count) else { return nil }
            return [UInt8](repeating: 0, count: 32 - bytes.count) + bytes
        }

        func candidates(kid: String?, algorithm: String) -> [JWKPublicKey] {
            if let kid { return byID[kid].map { [$0] } ?? [] }
            return (unnamed + byID.values).filter { $0.algorithm == algorithm }
        }
    }

    /// Whether the token's `kid` is one `keys` lacks (then the provider may have rotated: fetch
    /// the JWKS again once).
    static func namesUnknownKey(_ token: String, in keys: KeySet) -> Bool {
        guard let parsed = JWS.parse(token), let kid = parsed.header["kid"]?.stringValue else { return false }
        return keys.byID[kid] == nil
    }

    static func validate(_ token: String, keys: KeySet, expecting expected: Expectation, now: Int64) throws(IDTokenFailure) -> IDTokenClaims {
        guard let parsed = JWS.parse(token) else { throw IDTokenFailure(check: "malformed", description: "the ID token is not a compact JWS") }
        // Only asymmetric algorithms the provider announced: never `none`, never HS256 keyed
        // with a public key.
        let allowed = Set(expected.algorithms.isEmpty ? ["RS256"] : expected.algorithms).intersection(["RS256", "ES256"])
        guard let alg = parsed.header["alg"]?.stringValue, allowed.contains(alg) else {
            throw IDTokenFailure(check: "alg", description: "the ID token's algorithm is not one authd accepts from this provider")
        }
        // RFC 7515 §4.1.11: extensions authd does not understand must not be ignored.
        guard parsed.header["crit"] == nil else {
            throw IDTokenFailure(check: "crit", description: "the ID token names critical extensions authd does not implement")
        }
        let candidates = keys.candidates(kid: parsed.header["kid"]?.stringValue, algorithm: alg)
        guard !candidates.isEmpty else { throw IDTokenFailure(check: "kid", description: "the ID token names a key the provider does not publish") }
        guard candidates.contains(where: { $0.algorithm == alg && $0.verify(signature: parsed.signature, message: parsed.signingInput) }) else {
            throw IDTokenFailure(check: "signature", description: "the ID token's signature does not verify with the provider's key")
        }
        let claims = parsed.claims
        guard claims["iss"]?.stringValue == expected.issuer else {
            throw IDTokenFailure(check: "iss", description: "the ID token was issued by another issuer")
        }
        let audiences: [String]
        switch claims["aud"] {
        case .string(let single)?: audiences = [single]
        case .array(let list)?: audiences = list.compactMap(\.stringValue)
        default: audiences = []
        }
        guard audiences.contains(expected.clientID) else {
            throw IDTokenFailure(check: "aud", description: "the ID token is not meant for this client")
        }
        if audiences.count > 1 || claims["azp"] != nil {
            guard claims["azp"]?.stringValue == expected.clientID else {
                throw IDTokenFailure(check: "azp", description: "the ID token's authorized party is another client")
            }
        }
        guard let exp = claims["exp"]?.integerValue, exp + skewSeconds > now else {
            throw IDTokenFailure(check: "exp", description: "the ID token has expired")
        }
        guard let iat = claims["iat"]?.integerValue, iat - skewSeconds <= now else {
            throw IDTokenFailure(check: "iat", description: "the ID token is issued in the future")
        }
        if let expectedNonce = expected.nonce {
            guard let nonce = claims["nonce"]?.stringValue, OpenSSL.constantTimeEquals(Array(nonce.utf8), Array(expectedNonce.utf8)) else {
                throw IDTokenFailure(check: "nonce", description: "the ID token's nonce is not the one of this sign-in")
            }
        }
        guard let subject = claims["sub"]?.stringValue, (1...255).contains(subject.utf8.count),
              !subject.containsControlCharacter
        else { throw IDTokenFailure(check: "sub", description: "the ID token has no usable subject") }
        let email = claims["email"]?.stringValue.flatMap { $0.utf8.count <= 254 ? $0 : nil }
        let name = claims["name"]?.stringValue.flatMap { $0.utf8.count <= 256 ? $0 : nil }
        return IDTokenClaims(subject: subject, email: email, emailVerified: claims["email_verified"] == .bool(true), name: name, expiresAt: exp)
    }
}
