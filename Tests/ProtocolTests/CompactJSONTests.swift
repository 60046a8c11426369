import Foundation
import Protocol
import Testing

/// CompactJSON must write what JSONEncoder([.sortedKeys, .withoutEscapingSlashes]) writes, byte
/// for byte (debug builds also compare every wire encoding; these are the corners).
@Suite("Compact JSON")
struct CompactJSONTests {
    private static func reference(_ value: some Encodable) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return [UInt8](try encoder.encode(value))
    }

    struct Nested: Encodable {
        var name: String
        var count: Int
        var ratio: Double
        var flag: Bool?
        var missing: String?
        var list: [Int8]
        var table: [String: UInt64]
        var inner: [Nested]
        var value: JSONValue
    }

    /// Writes through every container kind by hand: nested, unkeyed, super encoders.
    struct Handwritten: Encodable {
        enum Keys: String, CodingKey { case b, a, nested, list, `super` }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(UInt8.max, forKey: .b)
            try container.encodeNil(forKey: .a)
            var nested = container.nestedContainer(keyedBy: Keys.self, forKey: .nested)
            try nested.encode(Float(0.5), forKey: .a)
            var list = container.nestedUnkeyedContainer(forKey: .list)
            try list.encodeNil()
            try list.encode(Int16.min)
            var inner = list.nestedUnkeyedContainer()
            try inner.encode("x")
            var object = list.nestedContainer(keyedBy: Keys.self)
            try object.encode(true, forKey: .b)
            var single = container.superEncoder().singleValueContainer()
            try single.encode(UInt32.max)
        }
    }

    struct Empty: Encodable {
        func encode(to encoder: any Encoder) throws {}
    }

    static let strings = [
        "", "plain", "quote \" and backslash \\", "slash / stays", "\u{8}\u{C}\n\r\t", "\u{0}\u{1}\u{F}\u{10}\u{1F}\u{7F}",
        "é ü 😀 中文", "</script>", "\u{2028}\u{2029}",
    ]

    @Test("strings, escapes and non-ASCII text", arguments: strings)
    func escapes(_ text: String) throws {
        #expect(try CompactJSON.encode(text) == Self.reference(text))
        #expect(try CompactJSON.encode([text: [text]]) == Self.reference([text: [text]]))
    }

    @Test("numbers at their limits", arguments: [0.0, -0.0, 1.0, -1.5, 0.1, 1e20, 1e21, 1.7976931348623157e308, 5e-324, 123456789.125, 1e-7])
    func doubles(_ number: Double) throws {
        #expect(try CompactJSON.encode(number) == Self.reference(number))
        let single = Float(number)
        if single.isFinite { #expect(try CompactJSON.encode([single]) == Self.reference([single])) }
    }

    @Test("integers, booleans and null")
    func scalars() throws {
        #expect(try CompactJSON.encode([Int64.min, Int64.max]) == Self.reference([Int64.min, Int64.max]))
        #expect(try CompactJSON.encode([UInt64.max]) == Self.reference([UInt64.max]))
        #expect(try CompactJSON.encode([true, false]) == Self.reference([true, false]))
        #expect(try CompactJSON.encode([String?.none, "x"]) == Self.reference([String?.none, "x"]))
    }

    @Test("structures: key order by UTF-8 bytes, optionals left out, nesting")
    func structures() throws {
        let leaf = Nested(name: "leaf", count: -3, ratio: 2.0, flag: nil, missing: nil, list: [], table: [:], inner: [], value: .null)
        let value = Nested(name: "root", count: 1, ratio: 0.25, flag: true, missing: nil, list: [-128, 127],
                           table: ["b": 2, "a": 1, "B": 3, "é": 4, "aa": 5, "a10": 6, "a9": 7], inner: [leaf, leaf],
                           value: .object(["z": .array([.integer(1), .double(1.5), .string("s"), .bool(false), .null]), "Z": .object([:])]))
        #expect(try CompactJSON.encode(value) == Self.reference(value))
        #expect(try CompactJSON.encode(Handwritten()) == Self.reference(Handwritten()))
        #expect(try CompactJSON.encode([Empty()]) == Self.reference([Empty()]))
        #expect(try CompactJSON.encode([String: Int]()) == Self.reference([String: Int]()))
    }

    @Test("what JSONEncoder refuses is refused; what it treats specially is left to it")
    func refusals() throws {
        #expect(throws: EncodingError.self) { try CompactJSON.encode([Double.nan]) }
        #expect(throws: EncodingError.self) { try CompactJSON.encode(["x": Double.infinity]) }
        #expect(throws: EncodingError.self) { try CompactJSON.encode(Empty()) }
        #expect(try CompactJSON.encode(["when": Date(timeIntervalSince1970: 0)]) == nil)
        #expect(try CompactJSON.encode([Data([1, 2, 3])]) == nil)
        // Through WireCodec, those values still encode, as JSONEncoder writes them.
        let data = ["bytes": Data([1, 2, 3])]
        #expect(try [UInt8](WireCodec.encodeJSON(data)) == Self.reference(data))
    }
}
