import FoundationEssentials

/// A JSON value kept as the text it came in, already checked strict: what authd passes on
/// without reading it. A device forwards a caller's params to its hub as the caller wrote them,
/// and hands the hub's answer back as the hub wrote it; neither is read into a `JSONValue` and
/// written again on the way. CompactJSON writes the text as it is (a text passed through is not
/// compared with JSONEncoder's in debug builds: it is not this process's writing); `value` and
/// `decode` read it when something must look inside.
public struct RawJSON: Sendable, Equatable {
    /// The text the value lies in (a whole line, kept rather than copied), and where.
    private let text: [UInt8]
    private let range: Range<Int>

    /// The value at `range` of `text`, which passed the strict check (``StrictJSON``).
    init(checked text: [UInt8], range: Range<Int>) {
        self.text = text
        self.range = range
    }

    /// `value`'s JSON text.
    public init(encoding value: some Encodable) throws {
        let text = [UInt8](try WireCodec.encodeJSON(value))
        self.init(checked: text, range: 0..<text.count)
    }

    /// `null`, for a response without a result.
    static let null = RawJSON(checked: Array("null".utf8), range: 0..<4)

    /// The JSON text.
    public var bytes: ArraySlice<UInt8> { text[range] }

    /// The value read (`null` for a text that is not one, which a checked text never is).
    public var value: JSONValue { StrictJSON.value(at: range, in: text) ?? .null }

    /// The value decoded as `T`, from its text read once (``JSONValueDecoder``).
    public func decode<T: Decodable>(_: T.Type) throws -> T {
        try JSONValueDecoder.decode(T.self, from: value)
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.bytes.elementsEqual(rhs.bytes) }
}

extension RawJSON: Codable {
    /// Another encoder than CompactJSON writes the value read.
    public func encode(to encoder: any Encoder) throws {
        try value.encode(to: encoder)
    }

    public init(from decoder: any Decoder) throws {
        try self.init(encoding: try JSONValue(from: decoder))
    }
}
