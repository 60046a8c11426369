import FoundationEssentials
import Protocol

/// What every token authd issues or has the card sign begins with: when it was issued, until
/// when it holds, its id (`jti`, by which the audit log names it) and who asked for it (`azp`).
/// Made in one place, so daemon tokens and card tokens cannot drift apart.
struct TokenStamp: Sendable, Equatable {
    let issuedAt: Int64
    let expires: Int64
    let jti: String
    /// The requesting executable.
    let azp: String?

    /// A stamp issued now, holding for `lifetime` seconds, with a fresh 128-bit `jti`.
    static func issue(now: Date, lifetime: Int, azp: String?) throws -> TokenStamp {
        let issuedAt = Int64(now.timeIntervalSince1970)
        return TokenStamp(issuedAt: issuedAt, expires: issuedAt + Int64(lifetime), jti: Base64URL.encode(try RandomIdentifiers.shared.next()), azp: azp)
    }

    var expiresAt: String { Timestamp.rfc3339(epochSeconds: expires) }

    /// The one rule for a token's audience (`aud`) and nonce, whichever method asks: 1 to 256
    /// characters, no control characters. They end up in tokens and in the audit log.
    static func checkText(_ value: String, field: String) throws(InvalidParameter) {
        guard !value.isEmpty, value.unicodeScalars.count <= 256, !value.containsControlCharacter else {
            throw InvalidParameter("Parameter '\(field)' must be 1–256 printable characters.", field: field)
        }
    }
}
