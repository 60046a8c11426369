import Protocol

/// Why `token.verify` refused a token: the first check that failed. Each case is one stable
/// wire reason.
enum TokenFailure: WireErrorConvertible, Equatable {
    case notCompactJWS
    case notES256
    /// An ID card's token (ES384, the card's certificate in `x5c`): the card signed it, not authd.
    case cardToken
    case noKeyID
    case noExpiry
    case unknownKey(kid: String)
    case badSignature
    case wrongIssuer
    case expired(at: Int64)
    case notYetValid(until: Int64)
    case wrongAudience

    var rpcError: RPCError {
        switch self {
        case .notCompactJWS: .failure(.tokenMalformed, "The token is not a compact JWS with a JSON header and claims.")
        case .notES256: .failure(.tokenMalformed, "The token's algorithm is not ES256.")
        case .cardToken:
            .failure(.tokenMalformed,
                     "This is an ID card's token (ES384, the card's certificate in its x5c header): the card signed it, not authd, so authd's keys "
                        + "cannot check it. Check its signature with that certificate and the certificate against the card issuer's chain, "
                        + "as a relying party's Web eID or JOSE library does.")
        case .noKeyID: .failure(.tokenMalformed, "The token's header has no key id (kid).")
        case .noExpiry: .failure(.tokenMalformed, "The token has no numeric exp claim.")
        case .unknownKey(let kid):
            .failure(.tokenUnknownKey, "The token was signed with a key this daemon does not publish.", details: ["kid": .string(kid)])
        case .badSignature: .failure(.tokenBadSignature, "The token's signature does not verify.")
        case .wrongIssuer: .failure(.tokenWrongIssuer, "The token was not issued by this daemon.")
        case .expired(let expires):
            .failure(.tokenExpired, "The token expired at \(Timestamp.rfc3339(epochSeconds: expires)).", details: ["exp": .integer(expires)])
        case .notYetValid(let notBefore): .failure(.tokenNotYetValid, "The token is not valid before \(Timestamp.rfc3339(epochSeconds: notBefore)).")
        case .wrongAudience: .failure(.tokenWrongAudience, "The token is not meant for this audience.")
        }
    }
}
