import FoundationEssentials
@testable import authd
import Protocol

/// A compact JWS and a JWKS document, newline between: the JWKS read as the provider's answer
/// (strict JSON, then `KeySet.parse`), the token split by `JWS.parse` and validated as an ID
/// token against those keys. Seeds carry a token that validates, so the fuzzer starts past the
/// signature check.
enum JOSEFuzz {
    static let expectation = IDTokenValidator.Expectation(issuer: "https://op.example", clientID: "authd", nonce: "n-0S6_WzA2Mj",
                                                          algorithms: ["RS256", "ES256"])
    /// Seeds are issued at 2026-01-01T00:00:00Z for an hour; "now" is within it.
    static let now: Int64 = 1_767_225_600 + 60

    static func run(_ input: [UInt8]) {
        let (tokenBytes, jwks) = input.splitOnce(at: UInt8(ascii: "\n"))
        let token = String(decoding: tokenBytes, as: UTF8.self)
        var keys = IDTokenValidator.KeySet()
        if let document = try? WireCodec.decode(JSONValue.self, from: Data(jwks)) {
            keys = IDTokenValidator.KeySet.parse(document)
        }
        if let parsed = JWS.parse(token) {
            precondition(parsed.signingInput.count < token.utf8.count, "the signing input is the whole token")
        }
        _ = IDTokenValidator.namesUnknownKey(token, in: keys)
        _ = try? IDTokenValidator.validate(token, keys: keys, expecting: expectation, now: now)
    }
}
