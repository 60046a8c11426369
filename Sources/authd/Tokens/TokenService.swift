import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// Issues and verifies the daemon's own ES256 JWTs (DESIGN §6).
struct TokenService: Sendable {
    let keys: KeyRing
    let config: ConfigHolder
    let now: @Sendable () -> Date

    /// Tokens whose `nbf` is at most this far ahead are accepted (clock skew between hosts).
    static let notBeforeLeewaySeconds: Int64 = 60

    /// `auth.local`: the caller's Unix identity, asserted by the daemon.
    func issueLocal(for caller: CallerIdentity, params: AuthLocal.Params) throws -> IssuedToken {
        try Self.validateText(params.aud, field: "aud", maxLength: 256)
        if let nonce = params.nonce { try Self.validateText(nonce, field: "nonce", maxLength: 256) }
        let config = config.current
        let issuedAt = Int64(now().timeIntervalSince1970)
        let expires = issuedAt + Int64(config.tokenLifetimeSeconds)
        let jti = Base64URL.encode(try OpenSSL.randomBytes(16))
        let claims = LocalClaims(
            iss: config.tokenIssuer, sub: "unix:\(caller.uid)", aud: params.aud, iat: issuedAt, nbf: issuedAt, exp: expires,
            jti: jti, preferredUsername: caller.username, azp: caller.exe, nonce: params.nonce)
        let key = keys.current
        let token = try JWS.sign(claims: claims, kid: key.kid, key: key.key)
        return IssuedToken(token: token, kid: key.kid, jti: jti, expiresAt: Timestamp.rfc3339(epochSeconds: expires))
    }

    /// `auth.token`: the daemon asserts that the caller holds a session of `accountID`.
    func issueAccount(accountID: String, amr: [String], caller: CallerIdentity, aud: String, nonce: String?) throws -> IssuedToken {
        try Self.validateText(aud, field: "aud", maxLength: 256)
        if let nonce { try Self.validateText(nonce, field: "nonce", maxLength: 256) }
        let config = config.current
        let issuedAt = Int64(now().timeIntervalSince1970)
        let expires = issuedAt + Int64(config.tokenLifetimeSeconds)
        let jti = Base64URL.encode(try OpenSSL.randomBytes(16))
        let claims = AccountClaims(iss: config.tokenIssuer, sub: accountID, aud: aud, iat: issuedAt, nbf: issuedAt, exp: expires, jti: jti,
                                   amr: amr, phoneNumberVerified: true, azp: caller.exe, nonce: nonce)
        let key = keys.current
        return IssuedToken(token: try JWS.sign(claims: claims, kid: key.kid, key: key.key), kid: key.kid, jti: jti,
                           expiresAt: Timestamp.rfc3339(epochSeconds: expires))
    }

    struct AccountClaims: Encodable {
        let iss, sub, aud: String
        let iat, nbf, exp: Int64
        let jti: String
        let amr: [String]
        let phoneNumberVerified: Bool
        let azp: String?
        let nonce: String?

        enum CodingKeys: String, CodingKey {
            case iss, sub, aud, iat, nbf, exp, jti, amr, phoneNumberVerified = "phone_number_verified", azp, nonce
        }
    }

    /// The claims of an `auth.local` token (a struct, not a dictionary: encoding it is the
    /// hot path of token issuance).
    struct LocalClaims: Encodable {
        let iss: String
        let sub: String
        let aud: String
        let iat: Int64
        let nbf: Int64
        let exp: Int64
        let jti: String
        let preferredUsername: String?
        let azp: String?
        let nonce: String?

        enum CodingKeys: String, CodingKey {
            case iss, sub, aud, iat, nbf, exp, jti, preferredUsername = "preferred_username", azp, nonce
        }
    }

    /// `token.verify`: structure, key, signature, issuer, validity window, audience — in that
    /// order, so the first failing check is the reason given.
    func verify(_ params: TokenVerify.Params) throws(RPCError) -> TokenVerify.Result {
        guard let parsed = JWS.parse(params.token) else {
            throw .failure(.tokenMalformed, "The token is not a compact JWS with a JSON header and claims.")
        }
        guard parsed.header["alg"] == "ES256" else {
            throw .failure(.tokenMalformed, "The token's algorithm is not ES256.")
        }
        guard case .string(let kid)? = parsed.header["kid"] else {
            throw .failure(.tokenMalformed, "The token's header has no key id (kid).")
        }
        let moment = now()
        guard let key = keys.publishedKey(kid: kid, now: moment) else {
            throw .failure(.tokenUnknownKey, "The token was signed with a key this daemon does not publish.", details: ["kid": .string(kid)])
        }
        guard key.publicKey.verifyES256(signature: parsed.signature, message: parsed.signingInput) else {
            throw .failure(.tokenBadSignature, "The token's signature does not verify.")
        }
        let claims = parsed.claims
        guard claims["iss"] == .string(config.current.tokenIssuer) else {
            throw .failure(.tokenWrongIssuer, "The token was not issued by this daemon.")
        }
        guard let expires = claims["exp"]?.integerValue else {
            throw .failure(.tokenMalformed, "The token has no numeric exp claim.")
        }
        let seconds = Int64(moment.timeIntervalSince1970)
        guard seconds < expires else {
            throw .failure(.tokenExpired, "The token expired at \(Timestamp.rfc3339(epochSeconds: expires)).", details: ["exp": .integer(expires)])
        }
        if let notBefore = claims["nbf"]?.integerValue, notBefore > seconds + Self.notBeforeLeewaySeconds {
            throw .failure(.tokenNotYetValid, "The token is not valid before \(Timestamp.rfc3339(epochSeconds: notBefore)).")
        }
        if let audience = params.aud {
            let matches: Bool = switch claims["aud"] {
            case .string(let value)?: value == audience
            case .array(let values)?: values.contains(.string(audience))
            default: false
            }
            guard matches else { throw .failure(.tokenWrongAudience, "The token is not meant for this audience.") }
        }
        return TokenVerify.Result(header: parsed.header, claims: claims)
    }

    /// Audiences and nonces end up in tokens and logs: printable, bounded, non-empty.
    static func validateText(_ value: String, field: String, maxLength: Int) throws(RPCError) {
        guard !value.isEmpty, value.unicodeScalars.count <= maxLength,
              !value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else {
            throw .invalidParams("Parameter '\(field)' must be 1–\(maxLength) printable characters.", field: field)
        }
    }
}
