@testable import authd

/// A phone number as a person types it, optionally after a region and a newline ("EE\n5123 4567"),
/// through libphonenumber; an accepted number must be E.164 and redact without trapping.
enum PhoneFuzz {
    static func run(_ input: [UInt8]) {
        let (head, tail) = input.splitOnce(at: UInt8(ascii: "\n"))
        let region = tail.isEmpty ? nil : String(decoding: head, as: UTF8.self)
        let number = String(decoding: tail.isEmpty ? head : tail, as: UTF8.self)
        guard let parsed = try? PhoneNumber.parse(number, region: region) else { return }
        precondition(parsed.e164.first == "+" && parsed.e164.dropFirst().allSatisfy(\.isASCII), "not E.164: \(parsed.e164)")
        _ = PhoneNumber.redact(parsed.e164)
    }
}
