import Foundation
import Protocol
import Testing

@Suite("Text encodings")
struct TextEncodingTests {
    @Test("base64url: RFC 4648's vectors, the two URL-safe characters, no padding, and back")
    func base64URL() {
        // RFC 4648 §10, without the padding.
        let vectors = ["": "", "f": "Zg", "fo": "Zm8", "foo": "Zm9v", "foob": "Zm9vYg", "fooba": "Zm9vYmE", "foobar": "Zm9vYmFy"]
        for (plain, encoded) in vectors {
            #expect(Base64URL.encode(Array(plain.utf8)) == encoded)
            #expect(Base64URL.decode(encoded) == Array(plain.utf8))
        }
        // 0xFB 0xFF is "+/8=" in standard base64.
        #expect(Base64URL.encode([0xFB, 0xFF]) == "-_8")
        #expect(Base64URL.decode("-_8") == [0xFB, 0xFF])
        #expect(Base64URL.decode("+/8") == nil)
        #expect(Base64URL.decode("-_8=") == nil)
        // Every kind of sequence encodes alike: an array, Data, and one with no contiguous storage.
        var generator = SystemRandomNumberGenerator()
        for count in 0..<70 {
            let bytes = (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
            let expected = Data(bytes).base64EncodedString().replacing("+", with: "-").replacing("/", with: "_").replacing("=", with: "")
            #expect(Base64URL.encode(bytes) == expected)
            #expect(Base64URL.encode(Data(bytes)) == expected)
            #expect(Base64URL.encode(bytes.lazy.map { $0 }) == expected)
            #expect(Base64URL.decode(expected) == bytes)
        }
    }
}
