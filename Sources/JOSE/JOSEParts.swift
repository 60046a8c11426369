import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// Reading JOSE text from outside (another device, via the hub): every JSON text passes the
/// strict check (unique member names, bounded depth, valid UTF-8) before it is decoded, and
/// every base64url part must be in its one canonical form, so that one JWE or JWS has one
/// spelling and two readers cannot see different values in it.
enum JOSEParts {
    /// The JSON object `bytes` hold, or nil.
    static func object(_ bytes: [UInt8]) -> [String: JSONValue]? {
        guard StrictJSON.check(bytes) == nil,
              case .object(let members)? = try? JSONDecoder().decode(JSONValue.self, from: Data(bytes))
        else { return nil }
        return members
    }

    /// The dot-separated parts of a compact serialisation, at most `maxParts` (the last takes
    /// the rest), found on its UTF-8 bytes (a `String` split walks grapheme clusters).
    static func parts(_ text: String, maxParts: Int) -> [Substring] {
        var text = text
        // The offsets of the dots, found on the contiguous UTF-8 bytes.
        let dots: [Int] = text.withUTF8 { bytes in
            var dots: [Int] = []
            var offset = 0
            while offset < bytes.count, dots.count < maxParts - 1 {
                if bytes[offset] == UInt8(ascii: ".") { dots.append(offset) }
                offset += 1
            }
            return dots
        }
        var parts: [Substring] = []
        var start = text.utf8.startIndex
        for dot in dots {
            let end = text.utf8.index(text.utf8.startIndex, offsetBy: dot)
            parts.append(text[start..<end])
            start = text.utf8.index(after: end)
        }
        parts.append(text[start...])
        return parts
    }

    /// The bytes of a base64url string value, when it is canonical (no padding, no stray bits)
    /// and, if `count` is given, exactly that long.
    static func bytes(_ value: JSONValue?, count: Int? = nil) -> [UInt8]? {
        guard case .string(let text)? = value else { return nil }
        return bytes(text, count: count)
    }

    static func bytes(_ text: some StringProtocol, count: Int? = nil) -> [UInt8]? {
        guard let decoded = Base64URL.decode(text), count.map({ $0 == decoded.count }) ?? true, hasNoStrayBits(text) else { return nil }
        return decoded
    }

    /// Whether the last character of unpadded base64url `text` leaves the bits past the data
    /// zero (RFC 4648 §3.5): two characters of a last group carry 8 bits and four spare, three
    /// carry 16 and two spare. Such text is the one spelling of its bytes (decoding already
    /// refused padding, other alphabets and a lone last character).
    private static func hasNoStrayBits(_ text: some StringProtocol) -> Bool {
        let spare: UInt8 = switch text.utf8.count % 4 {
        case 2: 0x0F
        case 3: 0x03
        default: 0
        }
        guard spare != 0, let last = text.utf8.reversed().first else { return true }
        let value: UInt8 = switch last {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): last - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): last - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): last - UInt8(ascii: "0") + 52
        case UInt8(ascii: "-"): 62
        default: 63
        }
        return value & spare == 0
    }

    /// A P-256 public key as a JWK's members (`kty`, `crv`, `x`, `y`); the point is not yet
    /// checked to be on the curve (``P256PublicKey/init(x:y:)`` does). Nil for anything else,
    /// and for a JWK that carries a private part.
    static func p256Coordinates(_ jwk: [String: JSONValue]) -> (x: [UInt8], y: [UInt8])? {
        guard jwk["kty"] == "EC", jwk["crv"] == "P-256", jwk["d"] == nil,
              let x = bytes(jwk["x"], count: 32), let y = bytes(jwk["y"], count: 32)
        else { return nil }
        return (x, y)
    }

    /// The JWK members of a P-256 public key.
    static func p256Members(_ key: P256PublicKey) throws -> [String: JSONValue] {
        let (x, y) = try key.coordinates()
        return ["kty": "EC", "crv": "P-256", "x": .string(Base64URL.encode(x)), "y": .string(Base64URL.encode(y))]
    }

    /// JSON text for `value`: compact, members sorted.
    static func text(_ value: some Encodable) throws -> String {
        try WireCodec.encodeJSONText(value)
    }
}

/// A compact JWS (RFC 7515 §7.1) with ES256, split and read: its protected header as a strict
/// JSON object, its payload as bytes. Nothing is verified here.
struct CompactJWS {
    let header: [String: JSONValue]
    let payload: [UInt8]
    let signingInput: [UInt8]
    let signature: [UInt8]

    /// Nil unless `text` (at most `limit` bytes) is three canonical base64url parts, the header
    /// a JSON object whose `alg` is ES256 and whose members are among `allowedHeader`, and the
    /// signature 64 bytes.
    init?(_ text: String, limit: Int, allowedHeader: Set<String>) {
        guard text.utf8.count <= limit else { return nil }
        let parts = JOSEParts.parts(text, maxParts: 4)
        guard parts.count == 3,
              let headerBytes = JOSEParts.bytes(parts[0]), let header = JOSEParts.object(headerBytes),
              header["alg"] == "ES256", Set(header.keys).isSubset(of: allowedHeader),
              let payload = JOSEParts.bytes(parts[1]), let signature = JOSEParts.bytes(parts[2], count: 64)
        else { return nil }
        self.header = header
        self.payload = payload
        signingInput = Array(text.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        self.signature = signature
    }

    /// `header` (which must say `"alg":"ES256"`) and `payload`, signed by `key`.
    static func sign(header: [String: JSONValue], payload: [UInt8], key: P256PrivateKey) throws -> String {
        precondition(header["alg"] == "ES256", "a compact JWS here is ES256")
        let input = Base64URL.encode(try WireCodec.encodeJSON(header)) + "." + Base64URL.encode(payload)
        return input + "." + Base64URL.encode(try key.signES256(Array(input.utf8)))
    }

    /// Whether the signature verifies with `key`.
    func verifies(with key: P256PublicKey) -> Bool {
        key.verifyES256(signature: signature, message: signingInput)
    }
}
