/// ISO/IEC 7816-4 command and response APDUs, short and extended length.
///
/// Both directions are parsed as untrusted input: every length is checked against the bytes
/// actually present, and a mismatch is an error, never a trap.
public struct CommandAPDU: Sendable, Equatable {
    public var cla: UInt8
    public var ins: UInt8
    public var p1: UInt8
    public var p2: UInt8
    public var data: [UInt8]
    /// Expected response length: nil when absent, 256 (short) or 65536 (extended) for "any".
    public var le: Int?

    public init(cla: UInt8 = 0x00, ins: UInt8, p1: UInt8, p2: UInt8, data: [UInt8] = [], le: Int? = nil) {
        self.cla = cla
        self.ins = ins
        self.p1 = p1
        self.p2 = p2
        self.data = data
        self.le = le
    }

    public var isExtended: Bool { data.count > 255 || (le ?? 0) > 256 }

    /// The bytes on the wire (case 1–4, extended where the data or Le needs it).
    public func encoded() -> [UInt8] {
        var bytes = [cla, ins, p1, p2]
        if isExtended {
            if !data.isEmpty {
                bytes += [0x00, UInt8(data.count >> 8), UInt8(data.count & 0xFF)]
                bytes += data
            }
            if let le {
                if data.isEmpty { bytes.append(0x00) }
                let value = le >= 65536 ? 0 : le
                bytes += [UInt8(value >> 8), UInt8(value & 0xFF)]
            }
        } else {
            if !data.isEmpty {
                bytes.append(UInt8(data.count))
                bytes += data
            }
            if let le { bytes.append(le >= 256 ? 0 : UInt8(le)) }
        }
        return bytes
    }

    /// Parses a command as a card receives it.
    public init(parsing bytes: [UInt8]) throws(CardDataError) {
        guard bytes.count >= 4 else { throw .malformed("command shorter than its header") }
        cla = bytes[0]; ins = bytes[1]; p1 = bytes[2]; p2 = bytes[3]
        data = []
        le = nil
        let body = Array(bytes[4...])
        if body.isEmpty { return }
        if body.count == 1 {
            le = body[0] == 0 ? 256 : Int(body[0])
            return
        }
        if body[0] != 0 {
            let lc = Int(body[0])
            guard body.count == 1 + lc || body.count == 2 + lc else { throw .malformed("Lc does not match the command length") }
            data = Array(body[1..<(1 + lc)])
            if body.count == 2 + lc { le = body[1 + lc] == 0 ? 256 : Int(body[1 + lc]) }
            return
        }
        // Extended length.
        guard body.count >= 3 else { throw .malformed("truncated extended length") }
        let length = Int(body[1]) << 8 | Int(body[2])
        if body.count == 3 {
            le = length == 0 ? 65536 : length
            return
        }
        guard length > 0 else { throw .malformed("extended Lc of zero") }
        guard body.count == 3 + length || body.count == 5 + length else { throw .malformed("extended Lc does not match the command length") }
        data = Array(body[3..<(3 + length)])
        if body.count == 5 + length {
            let value = Int(body[3 + length]) << 8 | Int(body[4 + length])
            le = value == 0 ? 65536 : value
        }
    }
}

public struct ResponseAPDU: Sendable, Equatable {
    public var data: [UInt8]
    public var sw: UInt16

    public init(data: [UInt8] = [], sw: UInt16) {
        self.data = data
        self.sw = sw
    }

    public init(raw: [UInt8]) throws(CardDataError) {
        guard raw.count >= 2 else { throw .malformed("response shorter than a status word") }
        data = Array(raw[..<(raw.count - 2)])
        sw = UInt16(raw[raw.count - 2]) << 8 | UInt16(raw[raw.count - 1])
    }

    public var sw1: UInt8 { UInt8(sw >> 8) }
    public var sw2: UInt8 { UInt8(sw & 0xFF) }
    public var isSuccess: Bool { sw == 0x9000 }
    public func encoded() -> [UInt8] { data + [sw1, sw2] }
}

/// A card's answer that cannot be what the command asked for.
public enum CardDataError: Error, Equatable, CustomStringConvertible {
    case malformed(String)
    public var description: String {
        switch self { case .malformed(let what): "malformed card data: \(what)" }
    }
}
