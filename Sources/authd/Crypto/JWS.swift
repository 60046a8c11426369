import FoundationEssentials
import OpenSSLCrypto
import Protocol
import Synchronization

/// Compact JWS (RFC 7515) with ES256, the daemon's token format.
enum JWS {
    /// The signing input and header for `claims`, signed by `key`.
    static func sign(claims: some Encodable, kid: String, key: P256PrivateKey) throws -> String {
        let payload = Base64URL.encode(try WireCodec.encodeJSON(claims))
        // One string from the header on, with room for the signature (86 characters and its
        // dot); the signature is made over its bytes where they lie.
        var token = header(kid: kid)
        token.reserveCapacity(token.utf8.count + 1 + payload.utf8.count + 87)
        token += "."
        token += payload
        let signature = try token.withUTF8 { try key.signES256(UnsafeRawBufferPointer($0)) }
        token += "."
        token += Base64URL.encode(signature)
        return token
    }

    /// The signing input of an ES384 token whose key is the certificate in `x5c` (card tokens:
    /// the card, not authd, makes the signature).
    static func certificateSigningInput(certificate: [UInt8], claims: some Encodable) throws -> String {
        let header: [String: JSONValue] = ["alg": "ES384", "typ": "JWT", "x5c": .array([.string(Data(certificate).base64EncodedString())])]
        return Base64URL.encode(try WireCodec.encodeJSON(header)) + "." + Base64URL.encode(try WireCodec.encodeJSON(claims))
    }

    /// The encoded protected header `{"alg":"ES256","kid":…,"typ":"JWT"}`, built once per key.
    static func header(kid: String) -> String {
        if let cached = headerCache.withLock({ $0[kid] }) { return cached }
        let header: [String: JSONValue] = ["alg": "ES256", "typ": "JWT", "kid": .string(kid)]
        let encoded = Base64URL.encode((try? WireCodec.encodeJSON(header)) ?? Data())
        headerCache.withLock { $0[kid] = encoded }
        return encoded
    }

    private static let headerCache = Mutex<[String: String]>([:])

    struct Parsed {
        var header: [String: JSONValue]
        var claims: [String: JSONValue]
        var signingInput: [UInt8]
        var signature: [UInt8]
    }

    /// Splits and decodes a compact JWS without verifying it. `nil` when it is not well formed.
    static func parse(_ token: String) -> Parsed? {
        guard token.utf8.count <= 16 * 1024 else { return nil }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
              let headerBytes = Base64URL.decode(parts[0]), let claimBytes = Base64URL.decode(parts[1]),
              let signature = Base64URL.decode(parts[2]),
              case .object(let header)? = try? WireCodec.decode(JSONValue.self, from: Data(headerBytes)),
              case .object(let claims)? = try? WireCodec.decode(JSONValue.self, from: Data(claimBytes))
        else { return nil }
        return Parsed(header: header, claims: claims, signingInput: Array("\(parts[0]).\(parts[1])".utf8), signature: signature)
    }
}
