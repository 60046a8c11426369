import OpenSSLCrypto
import Protocol

/// The 6-digit PIN second factor's rules, pure. The rules themselves are `AccountPINRules`,
/// shared with clients so they can check a new PIN before asking for its repeat.
enum PINPolicy {
    static let length = AccountPINRules.length
    /// Consecutive wrong PINs lock like passwords do; this many in total switch the factor off.
    static let totalFailureLimit = 100

    static func check(_ pin: String) throws(AccountFailure) {
        if let violation = AccountPINRules.violation(pin) { throw .pinWeak(rule: violation.rule, message: violation.message) }
    }

    /// Six ASCII digits: the only shape a PIN can have, checked before any Argon2id work.
    static func isWellFormed(_ pin: SecretBytes) -> Bool {
        pin.withUnsafeBytes { $0.count == length && $0.allSatisfy { (0x30...0x39).contains($0) } }
    }
}
