import SmartCard
import Testing

/// Bytes from hex text with optional spaces, for fixtures copied from the card's tools and specs.
/// A typo in a fixture is a bug in the test, so it traps rather than returning nil.
func hex(_ text: String) -> [UInt8] {
    let digits = text.utf8.filter { $0 != UInt8(ascii: " ") }.map { digit -> UInt8 in
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        default: preconditionFailure("not a hex digit in fixture \(text)")
        }
    }
    precondition(digits.count % 2 == 0, "odd number of hex digits in fixture \(text)")
    return stride(from: 0, to: digits.count, by: 2).map { digits[$0] << 4 | digits[$0 + 1] }
}

/// SplitMix64: the fuzz tests draw from a fixed seed, so a failure reproduces on every run.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func bytes(_ count: Int) -> [UInt8] {
        (0..<count).map { _ in UInt8.random(in: 0...255, using: &self) }
    }
}

/// `count` bytes counting up from `start` (wrapping), so a shifted or truncated copy shows.
func pattern(_ count: Int, from start: UInt8 = 0) -> [UInt8] {
    (0..<count).map { start &+ UInt8(truncatingIfNeeded: $0) }
}

// Short names for test arguments: the default description of a 64 KiB command is 64 K numbers.

func hexDescription(_ bytes: [UInt8]) -> String {
    let digits = Array("0123456789ABCDEF")
    let shown = bytes.prefix(24).map { String([digits[Int($0 >> 4)], digits[Int($0 & 0x0F)]]) }.joined(separator: " ")
    return bytes.count > 24 ? "\(shown) … (\(bytes.count) bytes)" : "[\(shown)]"
}

extension Array: @retroactive CustomTestStringConvertible where Element == UInt8 {
    public var testDescription: String { hexDescription(self) }
}

extension CommandAPDU: CustomTestStringConvertible {
    public var testDescription: String {
        let le = le.map { ", Le \($0)" } ?? ""
        return "\(hexDescription([cla, ins, p1, p2])), \(data.count) bytes\(le)"
    }
}

extension ResponseAPDU: CustomTestStringConvertible {
    public var testDescription: String { "\(data.count) bytes, SW \(String(sw, radix: 16, uppercase: true))" }
}
