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
        let (stamp, issuer) = try begin(aud: params.aud, nonce: params.nonce, azp: caller.exe)
        return try sign(Claims(
            iss: issuer, sub: "unix:\(caller.uid)", aud: params.aud, iat: stamp.issuedAt, nbf: stamp.issuedAt, exp: stamp.expires,
            jti: stamp.jti, preferredUsername: caller.username, azp: stamp.azp, nonce: params.nonce), stamp)
    }

    /// `auth.token`: the daemon asserts that the caller holds a session of `accountID`.
    func issueAccount(accountID: String, amr: [String], azp: String?, aud: String, nonce: String?) throws -> IssuedToken {
        let (stamp, issuer) = try begin(aud: aud, nonce: nonce, azp: azp)
        return try sign(Claims(iss: issuer, sub: accountID, aud: aud, iat: stamp.issuedAt, nbf: stamp.issuedAt, exp: stamp.expires,
                               jti: stamp.jti, amr: amr, phoneNumberVerified: true, azp: stamp.azp, nonce: nonce), stamp)
    }

    /// Checks what the caller put in the claims, then stamps the token.
    private func begin(aud: String, nonce: String?, azp: String?) throws -> (TokenStamp, issuer: String) {
        try TokenStamp.checkText(aud, field: "aud")
        if let nonce { try TokenStamp.checkText(nonce, field: "nonce") }
        let config = config.current
        return (try TokenStamp.issue(now: now(), lifetime: config.tokenLifetimeSeconds, azp: azp), config.tokenIssuer)
    }

    private func sign(_ claims: some Encodable, _ stamp: TokenStamp) throws -> IssuedToken {
        let key = keys.current
        return IssuedToken(token: try JWS.sign(claims: claims, kid: key.kid, key: key.key), kid: key.kid, jti: stamp.jti, expiresAt: stamp.expiresAt)
    }

    /// The claims of the daemon's tokens: `auth.local` (with `preferred_username`) and
    /// `auth.token` (with `amr` and `phone_number_verified`). A struct, not a dictionary:
    /// encoding it is the hot path of token issuance, so it writes its own members
    /// (`CompactJSON.Writable`); the claims a token lacks are left out.
    struct Claims: CompactJSON.Writable {
        let iss, sub, aud: String
        let iat, nbf, exp: Int64
        let jti: String
        var preferredUsername: String?
        var amr: [String]?
        var phoneNumberVerified: Bool?
        let azp: String?
        let nonce: String?

        /// In the order of the keys' bytes, as the claims are written.
        enum CodingKeys: String, CodingKey {
            case amr, aud, azp, exp, iat, iss, jti, nbf, nonce
            case phoneNumberVerified = "phone_number_verified", preferredUsername = "preferred_username", sub
        }

        func write(to object: inout CompactJSON.Object) {
            object.member(CodingKeys.amr, amr)
            object.member(CodingKeys.aud, aud)
            object.member(CodingKeys.azp, azp)
            object.member(CodingKeys.exp, exp)
            object.member(CodingKeys.iat, iat)
            object.member(CodingKeys.iss, iss)
            object.member(CodingKeys.jti, jti)
            object.member(CodingKeys.nbf, nbf)
            object.member(CodingKeys.nonce, nonce)
            object.member(CodingKeys.phoneNumberVerified, phoneNumberVerified)
            object.member(CodingKeys.preferredUsername, preferredUsername)
            object.member(CodingKeys.sub, sub)
        }
    }

    /// `token.verify`: structure, key, signature, issuer, validity window, audience — in that
    /// order, so the first failing check is the reason given.
    func verify(_ params: TokenVerify.Params) throws(TokenFailure) -> TokenVerify.Result {
        let moment = now()
        return try verify(params, issuer: config.current.tokenIssuer, at: moment) { kid in
            keys.publishedKey(kid: kid, now: moment).map { key in { key.publicKey.verifyES256(signature: $0, message: $1) } }
        }
    }

    /// `token.verify` on a device, for an account token of its hub: the same checks (low-S only) against the
    /// hub's published keys and issuer, as last fetched over the link.
    func verify(_ params: TokenVerify.Params, hub: HubKeys.Published) throws(TokenFailure) -> TokenVerify.Result {
        try verify(params, issuer: hub.issuer, at: now()) { kid in
            hub.keys.candidates(kid: kid, algorithm: "ES256").first.map { key in { ECDSASignature.P256.isLowS($0) && key.verify(signature: $0, message: $1) } }
        }
    }

    /// The checks, with the signer's key found by `kid` (a signature check) and its issuer.
    private func verify(_ params: TokenVerify.Params, issuer: String, at moment: Date,
                        key: (String) -> (([UInt8], [UInt8]) -> Bool)?) throws(TokenFailure) -> TokenVerify.Result {
        guard let parsed = JWS.parse(params.token) else { throw .notCompactJWS }
        guard parsed.header["alg"] == "ES256" else { throw parsed.header["x5c"] != nil ? .cardToken : .notES256 }
        guard case .string(let kid)? = parsed.header["kid"] else { throw .noKeyID }
        guard let verifies = key(kid) else { throw .unknownKey(kid: kid) }
        guard verifies(parsed.signature, parsed.signingInput) else { throw .badSignature }
        let claims = parsed.claims
        guard claims["iss"] == .string(issuer) else { throw .wrongIssuer }
        guard let expires = claims["exp"]?.integerValue else { throw .noExpiry }
        let seconds = Int64(moment.timeIntervalSince1970)
        guard seconds < expires else { throw .expired(at: expires) }
        if let notBefore = claims["nbf"]?.integerValue, notBefore > seconds + Self.notBeforeLeewaySeconds { throw .notYetValid(until: notBefore) }
        if let audience = params.aud {
            let matches: Bool = switch claims["aud"] {
            case .string(let value)?: value == audience
            case .array(let values)?: values.contains(.string(audience))
            default: false
            }
            guard matches else { throw .wrongAudience }
        }
        return TokenVerify.Result(header: parsed.header, claims: claims)
    }
}
