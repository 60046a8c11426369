import Foundation
import OpenSSLCrypto
import Protocol
import Testing
@testable import authd

private func bytes(_ secret: SecretBytes) -> [UInt8] { secret.withUnsafeBytes { Array($0) } }

@Suite("Crypto: sealing, JWK thumbprints, base64url")
struct CryptoTests {
    @Test("sealed values open only for the same purpose, row identity and master key")
    func sealing() throws {
        let master = MasterKey(secret: try OpenSSL.randomSecret(32), source: .keyFile(path: "/dev/null"))
        let sealer = try Sealer(masterKey: master)
        let secret = SecretBytes(Array("private key bytes".utf8))
        let sealed = try sealer.seal(secret, purpose: .signingKey, identity: "signing_key:a")
        #expect(try sealer.open(sealed, purpose: .signingKey, identity: "signing_key:a").map(bytes) == bytes(secret))
        #expect(try sealer.open(sealed, purpose: .signingKey, identity: "signing_key:b") == nil, "moved to another row")
        #expect(try sealer.open(sealed, purpose: .keyCheck, identity: "signing_key:a") == nil, "another purpose")
        let other = try Sealer(masterKey: MasterKey(secret: try OpenSSL.randomSecret(32), source: .keyFile(path: "/dev/null")))
        #expect(try other.open(sealed, purpose: .signingKey, identity: "signing_key:a") == nil, "another master key")
        var wrongVersion = sealed
        wrongVersion[0] = 2
        #expect(try sealer.open(wrongVersion, purpose: .signingKey, identity: "signing_key:a") == nil)
        // Two seals of the same value differ (fresh nonce).
        #expect(try sealer.seal(secret, purpose: .signingKey, identity: "signing_key:a") != sealed)
    }

    @Test("JWK thumbprint follows RFC 7638 (canonical JSON of crv, kty, x, y)")
    func thumbprint() {
        let x = [UInt8](repeating: 1, count: 32), y = [UInt8](repeating: 2, count: 32)
        let canonical = #"{"crv":"P-256","kty":"EC","x":"\#(Base64URL.encode(x))","y":"\#(Base64URL.encode(y))"}"#
        #expect(KeyRing.thumbprint(x: x, y: y) == Base64URL.encode(OpenSSL.sha256(Array(canonical.utf8))))
        #expect(KeyRing.thumbprint(x: x, y: y).count == 43)
    }

    @Test("base64url is strict", arguments: ["a+b", "a/b", "ab==", "a b", "a", "é"])
    func base64Rejects(text: String) {
        #expect(Base64URL.decode(text) == nil)
    }

    @Test("base64url round-trips without padding")
    func base64RoundTrip() {
        for length in 0..<40 {
            let data = (0..<length).map { UInt8(truncatingIfNeeded: $0 * 37 + 250) }
            let text = Base64URL.encode(data)
            #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
            #expect(Base64URL.decode(text) == data)
        }
    }
}
