import Foundation
import Protocol

/// base64url without padding (RFC 4648 §5), as JOSE uses it.
enum Base64URL {
    static func encode(_ bytes: some Sequence<UInt8>) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Strict decoding: only the URL-safe alphabet, no padding, no whitespace.
    static func decode(_ text: some StringProtocol) -> [UInt8]? {
        guard text.utf8.allSatisfy({ ($0 >= 0x41 && $0 <= 0x5a) || ($0 >= 0x61 && $0 <= 0x7a) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2d || $0 == 0x5f }),
              text.utf8.count % 4 != 1
        else { return nil }
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        standard += String(repeating: "=", count: (4 - standard.utf8.count % 4) % 4)
        return Data(base64Encoded: standard).map(Array.init)
    }
}

/// Compact JWS (RFC 7515) with ES256, the daemon's token format.
enum JWS {
    /// The signing input and header for `claims`, signed by `key`.
    static func sign(claims: [String: JSONValue], kid: String, key: P256PrivateKey) throws -> String {
        let header: [String: JSONValue] = ["alg": "ES256", "typ": "JWT", "kid": .string(kid)]
        let input = Base64URL.encode(try WireCodec.encodeJSON(header)) + "." + Base64URL.encode(try WireCodec.encodeJSON(claims))
        let signature = try key.signES256(Array(input.utf8))
        return input + "." + Base64URL.encode(signature)
    }

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
