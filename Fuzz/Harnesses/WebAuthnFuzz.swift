import FoundationEssentials
@testable import authd
import Protocol

/// What a browser or authenticator sends a relying party, by the first byte: CBOR (through
/// libcbor; what decodes must encode and decode to the same value), a COSE key, authenticator
/// data, client data, and whole registration and assertion checks against the W3C example
/// credential (WebAuthn L3 §16.2), whose own bytes are seeds and pass every check.
/// Fields after the selector are length-prefixed (two bytes, big-endian), the last takes the rest.
enum WebAuthnFuzz {
    static let rpID = "example.org"
    static let origins = ["https://example.org"]
    static let registrationChallenge = Base64URL.decode("AMMPt4UxxGTStncdq417YDwBFi8vpIa-pw8oOuVW4TA")!
    static let assertionChallenge = Base64URL.decode("OcDnUhQXulTUPo3JUXT0I97pvzzYBP9tZchXyav01Ag")!
    /// The example credential's COSE key.
    static let storedKey = try! ES256PublicKey(cose: CBOR.decode(Array(hexadecimal:
        "a5010203262001215820afefa16f97ca9b2d23eb86ccb64098d20db90856062eb249c33a9b672f26df61225820930a56b87a2fca66334b03458abf879717c12cc68ed73290af2e2664796b9220")))

    static func run(_ input: [UInt8]) {
        guard let selector = input.first else { return }
        let body = Array(input.dropFirst())
        switch selector % 6 {
        case 0:
            guard let value = try? CBOR.decode(body) else { return }
            guard let encoded = try? CBOR.encode(value) else { return }
            precondition((try? CBOR.decode(encoded)) == value, "CBOR does not read back what it wrote")
        case 1:
            guard let value = try? CBOR.decode(body) else { return }
            _ = try? ES256PublicKey(cose: value)
        case 2:
            _ = try? AuthenticatorData.parse(body)
        case 3:
            _ = try? CollectedClientData.parse(body)
        case 4:
            let parts = fields(body, count: 3)
            _ = try? RelyingPartyVerifier.verifyRegistration(
                clientDataJSON: parts[0], attestationObject: parts[1], credentialID: parts[2],
                expected: RelyingPartyExpectation(rpID: rpID, origins: origins, challenge: registrationChallenge, requireUserVerification: false))
        default:
            let parts = fields(body, count: 3)
            _ = try? RelyingPartyVerifier.verifyAssertion(
                clientDataJSON: parts[0], authenticatorData: parts[1], signature: parts[2],
                stored: .init(publicKey: storedKey, signCount: 0, backupEligible: true),
                expected: RelyingPartyExpectation(rpID: rpID, origins: origins, challenge: assertionChallenge, requireUserVerification: false))
        }
    }

    /// `count` fields: each but the last after a two-byte length, the last the remaining bytes.
    static func fields(_ bytes: [UInt8], count: Int) -> [[UInt8]] {
        var rest = bytes[...]
        var parts: [[UInt8]] = []
        for _ in 1..<count {
            guard rest.count >= 2 else { parts.append([]); continue }
            let length = min(Int(rest[rest.startIndex]) << 8 | Int(rest[rest.startIndex + 1]), rest.count - 2)
            parts.append(Array(rest.dropFirst(2).prefix(length)))
            rest = rest.dropFirst(2 + length)
        }
        return parts + [Array(rest)]
    }
}

extension Array where Element == UInt8 {
    /// Bytes from hexadecimal text; for the fixed vectors above, so a typo traps.
    init(hexadecimal text: String) {
        let digits = Array(text.utf8)
        precondition(digits.count % 2 == 0)
        self = stride(from: 0, to: digits.count, by: 2).map { UInt8(String(decoding: digits[$0...$0 + 1], as: UTF8.self), radix: 16)! }
    }
}
