import FoundationEssentials

/// base64url without padding (RFC 4648 §5), as JOSE uses it. Encoding writes the URL-safe
/// alphabet straight into the string; decoding checks that alphabet and hands the standard form
/// to Foundation.
public enum Base64URL {
    private static let alphabet: StaticString = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

    /// Every token is three of these, so the bytes are read where they lie (a sequence without
    /// contiguous storage is copied once) and each group of three becomes four characters of
    /// the string, with no `Data` or standard-alphabet text in between.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        bytes.withContiguousStorageIfAvailable(encode) ?? Array(bytes).withUnsafeBufferPointer(encode)
    }

    private static func encode(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        let count = (bytes.count * 4 + 2) / 3  // 4 characters per 3 bytes, the last group unpadded
        return String(unsafeUninitializedCapacity: count) { text in
            let table = alphabet.utf8Start
            func character(_ group: UInt32, _ shift: UInt32) -> UInt8 { table[Int(group >> shift & 0x3F)] }
            var (input, output) = (0, 0)
            while input + 3 <= bytes.count {
                let group = UInt32(bytes[input]) << 16 | UInt32(bytes[input + 1]) << 8 | UInt32(bytes[input + 2])
                (text[output], text[output + 1], text[output + 2], text[output + 3]) =
                    (character(group, 18), character(group, 12), character(group, 6), character(group, 0))
                input += 3
                output += 4
            }
            switch bytes.count - input {
            case 1:
                let group = UInt32(bytes[input]) << 16
                (text[output], text[output + 1]) = (character(group, 18), character(group, 12))
            case 2:
                let group = UInt32(bytes[input]) << 16 | UInt32(bytes[input + 1]) << 8
                (text[output], text[output + 1], text[output + 2]) = (character(group, 18), character(group, 12), character(group, 6))
            default:
                break
            }
            return count
        }
    }

    /// Strict decoding: only the URL-safe alphabet, no padding, no whitespace.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var text = String(text)
        // On the contiguous bytes, written into a buffer of the padded size: a JWE's parts are
        // tens of kilobytes.
        return text.withUTF8 { utf8 -> [UInt8]? in
            guard utf8.count % 4 != 1 else { return nil }
            var valid = true
            var padded = Data(count: (utf8.count + 3) / 4 * 4)
            padded.withUnsafeMutableBytes { out in
                for index in 0..<utf8.count {
                    let byte = utf8[index]
                    switch byte {
                    case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): out[index] = byte
                    case UInt8(ascii: "-"): out[index] = UInt8(ascii: "+")
                    case UInt8(ascii: "_"): out[index] = UInt8(ascii: "/")
                    default:
                        valid = false
                        return
                    }
                }
                for index in utf8.count..<out.count { out[index] = UInt8(ascii: "=") }
            }
            guard valid else { return nil }
            return Data(base64Encoded: padded).map(Array.init)
        }
    }
}

/// Hexadecimal text (ATRs on the wire, card data in profiles, digests typed on a command line).
/// Decoding accepts either case and spaces between bytes.
public enum Hex {
    public static func decode(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8).filter { $0 != UInt8(ascii: " ") }
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        var index = 0
        while index < digits.count {
            guard let high = nibble(digits[index]), let low = nibble(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    public static func encode(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789ABCDEF".utf8)
        return String(decoding: bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0x0F)]] }, as: UTF8.self)
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// RFC 4648 base32 (upper case, no padding): what people read aloud and compare, such as a
/// device id.
public enum Base32 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".utf8)

    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        var output: [UInt8] = []
        var buffer = 0, bits = 0
        for byte in bytes {
            buffer = (buffer << 8) | Int(byte)
            bits += 8
            while bits >= 5 {
                bits -= 5
                output.append(alphabet[(buffer >> bits) & 31])
            }
            buffer &= (1 << bits) - 1
        }
        if bits > 0 { output.append(alphabet[(buffer << (5 - bits)) & 31]) }
        return String(decoding: output, as: UTF8.self)
    }
}

/// Tests on eight bytes at once, for the scans of the wire's hot path (framing a line, finding
/// what a string must escape). Each answers a mask with the high bit of the bytes that match:
/// the lowest one set is exactly the first match (borrows only run upwards), the higher ones
/// may be false.
enum ByteWords {
    private static let ones: UInt64 = 0x0101_0101_0101_0101
    static let highBits: UInt64 = 0x8080_8080_8080_8080

    /// The bytes of `word` below `limit` (at most 0x80): "has a zero byte", `(x - 0x01…) & ~x`,
    /// on `x - limit`.
    @inline(__always)
    static func below(_ limit: UInt8, in word: UInt64) -> UInt64 {
        (word &- ones &* UInt64(limit)) & ~word & highBits
    }

    /// The bytes of `word` equal to `byte`: the zero bytes of `word ^ byte…`.
    @inline(__always)
    static func equal(to byte: UInt8, in word: UInt64) -> UInt64 {
        below(1, in: word ^ (ones &* UInt64(byte)))
    }

    /// The eight bytes at `offset` of `bytes`, the first in the lowest bits.
    @inline(__always)
    static func load(_ bytes: UnsafeBufferPointer<UInt8>, at offset: Int) -> UInt64 {
        UInt64(littleEndian: UnsafeRawPointer(bytes.baseAddress! + offset).loadUnaligned(as: UInt64.self))
    }
}

extension UnsafeBufferPointer<UInt8> {
    /// Whether every byte is ASCII (below 0x80).
    var isASCII: Bool { reduce(0, |) < 0x80 }
}
