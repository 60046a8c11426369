import OpenSSLCrypto
import Protocol

/// The 6-digit PIN second factor's rules, pure.
enum PINPolicy {
    static let length = 6
    /// Consecutive wrong PINs lock like passwords do; this many in total switch the factor off.
    static let totalFailureLimit = 100

    static func check(_ pin: String) throws(AccountFailure) {
        guard pin.count == length, pin.allSatisfy({ $0.isASCII && $0.isNumber }) else {
            throw .pinWeak(rule: "format", message: "The PIN must be exactly \(length) digits.")
        }
        guard !isTrivial(pin) else {
            throw .pinWeak(rule: "trivial", message: "That PIN is too easy to guess; choose another.")
        }
    }

    /// Six ASCII digits: the only shape a PIN can have, checked before any Argon2id work.
    static func isWellFormed(_ pin: SecretBytes) -> Bool {
        pin.withUnsafeBytes { $0.count == length && $0.allSatisfy { (0x30...0x39).contains($0) } }
    }

    /// Repeated digits, straight runs up or down, short repeated patterns, and the commonest
    /// PINs of the published PIN-frequency studies.
    static func isTrivial(_ pin: String) -> Bool {
        let digits = pin.compactMap { $0.wholeNumberValue }
        guard digits.count == length else { return true }
        let steps = Set(zip(digits, digits.dropFirst()).map { ($1 - $0 + 10) % 10 })
        if steps.count == 1 && (steps.contains(0) || steps.contains(1) || steps.contains(9)) { return true }  // 000000, 123456, 987654
        if pin.prefix(2) == pin.dropFirst(2).prefix(2) && pin.prefix(2) == pin.suffix(2) { return true }  // 121212
        if pin.prefix(3) == pin.suffix(3) { return true }  // 123123
        return common.contains(pin)
    }

    static let common: Set<String> = [
        "112233", "102030", "159753", "147258", "258369", "123321", "654321", "696969", "111222", "131313",
        "101010", "202020", "007007", "123654", "789456", "456789", "000123", "999000", "142536", "252525",
    ]
}
