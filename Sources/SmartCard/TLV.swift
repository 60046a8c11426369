/// BER-TLV (ISO/IEC 7816-4 §5.2, X.690) with bounds-checked parsing: a length that runs past
/// the buffer, a tag that never ends, an indefinite length or more than three length bytes (no
/// card object is 16 MiB) is an error.
public struct TLV: Sendable, Equatable {
    /// The tag bytes as one number (e.g. 0x7C, 0xBF8101).
    public let tag: UInt32
    public let value: [UInt8]

    public init(tag: UInt32, value: [UInt8]) {
        self.tag = tag
        self.value = value
    }

    public var isConstructed: Bool {
        var first = tag
        while first > 0xFF { first >>= 8 }
        return first & 0x20 != 0
    }

    /// Every TLV in `bytes`, in order; the whole buffer must be consumed (trailing 00/FF padding
    /// between objects is skipped, as ISO 7816-4 allows).
    public static func parse(_ bytes: some Collection<UInt8>) throws(CardDataError) -> [TLV] {
        let bytes = Array(bytes)
        var objects: [TLV] = []
        var index = 0
        while index < bytes.count {
            if bytes[index] == 0x00 || bytes[index] == 0xFF { index += 1; continue }
            var tag = UInt32(bytes[index])
            index += 1
            if tag & 0x1F == 0x1F {
                var count = 0
                repeat {
                    guard index < bytes.count, count < 3 else { throw .malformed("tag runs past the data") }
                    tag = tag << 8 | UInt32(bytes[index])
                    count += 1
                    index += 1
                } while bytes[index - 1] & 0x80 != 0
            }
            guard index < bytes.count else { throw .malformed("missing length") }
            var length = Int(bytes[index])
            index += 1
            if length & 0x80 != 0 {
                let count = length & 0x7F
                guard count >= 1, count <= 3, index + count <= bytes.count else { throw .malformed("bad length encoding") }
                length = 0
                for _ in 0..<count {
                    length = length << 8 | Int(bytes[index])
                    index += 1
                }
            }
            guard length <= bytes.count - index else { throw .malformed("length \(length) runs past the data") }
            objects.append(TLV(tag: tag, value: Array(bytes[index..<(index + length)])))
            index += length
        }
        return objects
    }

    /// The first object with `tag` in `bytes`.
    public static func find(_ tag: UInt32, in bytes: some Collection<UInt8>) throws(CardDataError) -> TLV? {
        try parse(bytes).first { $0.tag == tag }
    }

    /// The first child with `tag`, parsing this object's value as a sequence of TLVs.
    public func child(_ tag: UInt32) throws(CardDataError) -> TLV {
        guard let found = try TLV.find(tag, in: value) else { throw .malformed(String(format: tag)) }
        return found
    }

    public func encoded() -> [UInt8] { TLV.encode(tag, value) }

    public static func encode(_ tag: UInt32, _ value: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = []
        var shift = 24
        while shift > 0 && (tag >> UInt32(shift)) == 0 { shift -= 8 }
        while shift >= 0 {
            bytes.append(UInt8((tag >> UInt32(shift)) & 0xFF))
            shift -= 8
        }
        switch value.count {
        case ..<0x80: bytes.append(UInt8(value.count))
        case ..<0x100: bytes += [0x81, UInt8(value.count)]
        case ..<0x10000: bytes += [0x82, UInt8(value.count >> 8), UInt8(value.count & 0xFF)]
        default: bytes += [0x83, UInt8(value.count >> 16), UInt8((value.count >> 8) & 0xFF), UInt8(value.count & 0xFF)]
        }
        return bytes + value
    }
}

private extension String {
    init(format tag: UInt32) {
        self = "missing tag " + String(tag, radix: 16, uppercase: true)
    }
}
