/// The rules a new account PIN (the 6-digit second factor) must meet. authd enforces them when
/// the PIN is set (`pin.weak`, with the rule in `data.rule`); a client may check a PIN with them
/// first, so that a person is told at once, before typing it a second time.
public enum AccountPINRules {
    public static let length = 6

    /// Why `pin` cannot be an account PIN: the rule (`format` or `trivial`) and a sentence for
    /// the person; nil when it can.
    public static func violation(_ pin: String) -> (rule: String, message: String)? {
        guard pin.count == length, pin.allSatisfy({ $0.isASCII && $0.isNumber }) else {
            return ("format", "The PIN must be exactly \(length) digits.")
        }
        guard !isTrivial(pin) else { return ("trivial", "That PIN is too easy to guess; choose another.") }
        return nil
    }

    /// Repeated digits, straight runs up or down, short repeated patterns, and the commonest
    /// PINs of the published PIN-frequency studies.
    public static func isTrivial(_ pin: String) -> Bool {
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
