import Protocol

/// Password rules (NIST SP 800-63B style): length over composition rules, and a
/// blocklist of passwords attackers try first.
enum PasswordPolicy {
    static let minimumWithSecondFactor = 8
    static let minimumWithoutSecondFactor = 15
    static let maximum = 256

    /// Checks `password` for an account identified by `identifiers` (phone, email), which
    /// must not be the password either. Length counts characters, not bytes.
    static func check(_ password: String, hasSecondFactor: Bool, identifiers: [String] = []) throws(AccountFailure) {
        let length = password.count
        let minimum = hasSecondFactor ? minimumWithSecondFactor : minimumWithoutSecondFactor
        guard length >= minimum else {
            throw weak("too_short", "The password must have at least \(minimum) characters\(hasSecondFactor ? "" : " (8 once a PIN second factor is on)").")
        }
        guard length <= maximum else { throw weak("too_long", "The password must have at most \(maximum) characters.") }
        guard !password.containsControlCharacter else {
            throw weak("control", "The password must not contain control characters.")
        }
        let folded = password.lowercased()
        if blocklist.contains(folded) || folded.allSatisfy({ $0 == folded.first }) {
            throw weak("common", "That password is among the most commonly used ones; choose another.")
        }
        let digitsOnly = folded.filter(\.isNumber)
        for identifier in identifiers where !identifier.isEmpty {
            let candidate = identifier.lowercased()
            if folded == candidate || (digitsOnly.count == folded.count && candidate.filter(\.isNumber).hasSuffix(digitsOnly)) {
                throw weak("identifier", "The password must not be your phone number or email address.")
            }
        }
    }

    private static func weak(_ rule: String, _ message: String) -> AccountFailure {
        .passwordWeak(rule: rule, message: message)
    }

    /// Common passwords of 8+ characters, lower-cased (from the public top-password lists).
    static let blocklist: Set<String> = [
        "password", "password1", "password12", "password123", "password1234", "passw0rd", "p@ssw0rd", "p@ssword",
        "12345678", "123456789", "1234567890", "12345678910", "123123123", "987654321", "1q2w3e4r", "1q2w3e4r5t",
        "1qaz2wsx", "qwertyuiop", "qwerty123", "qwerty12", "qwertyui", "asdfghjkl", "asdfasdf", "zxcvbnm1",
        "iloveyou", "iloveyou1", "sunshine", "princess", "football", "baseball", "welcome1", "welcome123",
        "superman", "starwars", "trustno1", "whatever", "letmein1", "letmeinplease", "michelle", "jennifer",
        "computer", "corvette", "mercedes", "11111111", "00000000", "88888888", "12341234", "abcd1234",
        "abcdefgh", "abc12345", "a1b2c3d4", "aa123456", "changeme", "changeme123", "admin123", "administrator",
        "internet", "football1", "passport", "shadow12", "master12", "monkey12", "dragon12", "charlie1",
        "1234qwer", "q1w2e3r4", "q1w2e3r4t5", "zaq12wsx", "!qaz2wsx", "qazwsxedc", "1qazxsw2", "11223344",
        "qwertyuiop123", "correcthorsebatterystaple", "passwordpassword", "123456789012345", "qwertyuiopasdfg",
        "iloveyouiloveyou", "1234567890qwerty", "letmeinletmein", "welcomewelcome", "passwort", "motdepasse",
        "contraseña", "parool123", "salasana", "hasło123", "пароль123", "qwertz123", "azerty123",
    ]
}
