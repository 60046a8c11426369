import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// Reading JOSE text from outside (another device, via the hub): every JSON text passes the
/// strict check (unique member names, bounded depth, valid UTF-8) before it is decoded, and
/// every base64url part must be in its one canonical form, so that one JWE or JWS has one
/// spelling and two readers cannot see different values in it.
enum JOSE {
    /// The JSON object `bytes` hold, or nil.
    static func object(_ bytes: [UInt8]) -> [String: JSONValue]? {
        guard StrictJSON.check(bytes) == nil,
              case .object(let members)? = try? JSONDecoder().decode(JSONValue.self, from: Data(bytes))
        else { return nil }
        return members
    }

    /// The bytes of a base64url string value, when it is canonical (no padding, no stray bits)
    /// and, if `count` is given, exactly that long.
    static func bytes(_ value: JSONValue?, count: Int? = nil) -> [UInt8]? {
        guard case .string(let text)? = value else { return nil }
        return bytes(text, count: count)
    }

    static func bytes(_ text: some StringProtocol, count: Int? = nil) -> [UInt8]? {
        guard let decoded = Base64URL.decode(text), count.map({ $0 == decoded.count }) ?? true,
              Base64URL.encode(decoded).utf8.elementsEqual(text.utf8)
        else { return nil }
        return decoded
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
        String(decoding: try WireCodec.encodeJSON(value), as: UTF8.self)
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
        let parts = text.split(separator: ".", maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count == 3,
              let headerBytes = JOSE.bytes(parts[0]), let header = JOSE.object(headerBytes),
              header["alg"] == "ES256", Set(header.keys).isSubset(of: allowedHeader),
              let payload = JOSE.bytes(parts[1]), let signature = JOSE.bytes(parts[2], count: 64)
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
