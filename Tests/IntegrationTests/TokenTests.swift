import Foundation
import Glibc
import Protocol
import Testing

@Suite("Tokens")
struct TokenTests {
    static let pythonScript = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Python/verify_jwt.py").path

    @Test("token verify of an ID card's token says what it is and how to check it")
    func cardTokenIsNamed() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        func part(_ json: String) -> String {
            Data(json.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        let token = part(#"{"alg":"ES384","typ":"JWT","x5c":["MIIB"]}"#) + "." + part(#"{"sub":"PNOEE-38001085718","aud":["app"]}"#) + ".c2ln"
        let verify = try daemon.authctl(["token", "verify", token])
        #expect(verify.status == 5, "\(verify)")
        #expect(verify.stderr.contains("ID card's token") && verify.stderr.contains("certificate") && verify.stderr.contains("(token.malformed)"), "\(verify.stderr)")
    }

    @Test("auth.local asserts the caller's Unix identity")
    func localTokenClaims() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        let issued = try client.result("auth.local", ["aud": "org.example.app", "nonce": "n-123"])
        let token = try #require(issued["token"]?.stringValue)
        let verified = try client.result("token.verify", ["token": .string(token), "aud": "org.example.app"])
        let claims = try #require(verified["claims"])
        #expect(claims["sub"] == .string("unix:\(getuid())"))
        #expect(claims["aud"] == "org.example.app")
        #expect(claims["nonce"] == "n-123")
        #expect(claims["iss"] == "authd")
        #expect(claims["azp"] == .string(URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().path) || claims["azp"]?.stringValue?.isEmpty == false)
        let name = String(cString: getpwuid(getuid()).pointee.pw_name)
        #expect(claims["preferred_username"] == .string(name))
        let issuedAt = try #require(claims["iat"]?.integerValue)
        #expect(claims["exp"]?.integerValue == issuedAt + 300, "default lifetime is 5 minutes")
        #expect(claims["nbf"]?.integerValue == issuedAt)
        #expect(claims["jti"]?.stringValue?.count == 22)
        #expect(verified["header"]?["alg"] == "ES256")
        #expect(verified["header"]?["kid"] == issued["kid"])
    }

    @Test("token.verify gives the precise reason", arguments: [
        ("wrong audience", "token.wrong_audience"),
        ("bad signature", "token.bad_signature"),
        ("malformed", "token.malformed"),
        ("unknown key", "token.unknown_key"),
        ("alg none", "token.malformed"),
    ])
    func verifyReasons(change: String, reason: String) throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        let token = try #require(try client.result("auth.local", ["aud": "a"])["token"]?.stringValue)
        var parts = token.split(separator: ".").map(String.init)
        var audience: JSONValue = "a"
        switch change {
        case "wrong audience": audience = "b"
        case "bad signature": parts[2] = String(parts[2].reversed())
        case "malformed": parts = ["not", "a"]
        case "unknown key": parts[0] = base64URL(#"{"alg":"ES256","kid":"nope","typ":"JWT"}"#)
        case "alg none": parts[0] = base64URL(#"{"alg":"none","kid":"x"}"#); parts[2] = ""
        default: Issue.record("unknown case")
        }
        let response = try client.call("token.verify", ["token": .string(parts.joined(separator: ".")), "aud": audience])
        #expect(response.errorReason == reason)
    }

    @Test("a token with a changed claim fails the signature check")
    func tamperedClaims() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        let token = try #require(try client.result("auth.local", ["aud": "a"])["token"]?.stringValue)
        var parts = token.split(separator: ".").map(String.init)
        let claims = Data(try #require(Base64URL.decode(parts[1])))
        let forged = String(decoding: claims, as: UTF8.self).replacingOccurrences(of: "unix:\(getuid())", with: "unix:4242")
        parts[1] = base64URL(forged)
        #expect(try client.call("token.verify", ["token": .string(parts.joined(separator: "."))]).errorReason == "token.bad_signature")
    }

    @Test("rotation: new tokens use the new key, old tokens still verify, the JWKS has both")
    func rotation() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        let old = try client.result("auth.local", ["aud": "a"])
        let rotated = try client.result("admin.keys.rotate")
        #expect(rotated["previous_kid"] == old["kid"])
        let new = try client.result("auth.local", ["aud": "a"])
        #expect(new["kid"] == rotated["kid"])
        #expect(new["kid"] != old["kid"])
        let kids = try #require(try client.result("keys.jwks")["keys"]?.arrayValue).compactMap { $0["kid"] }
        #expect(Set(kids) == [old["kid"]!, new["kid"]!])
        for token in [old["token"]!, new["token"]!] {
            #expect(try client.result("token.verify", ["token": token])["claims"]?["aud"] == "a")
        }
        // The retired key survives a restart as published-only.
        #expect(try daemon.terminate() == 0)
        try daemon.start()
        let again = try daemon.connect()
        #expect(try again.result("token.verify", ["token": old["token"]!])["claims"]?["aud"] == "a")
        let keys = try #require(try again.result("admin.status")["keys"]?.arrayValue)
        #expect(keys.filter { $0["status"] == "current" }.count == 1)
        #expect(keys.filter { $0["status"] == "retired" }.count == 1)
    }

    @Test("an independent JOSE library (PyJWT) verifies authd's tokens with the JWKS from authctl")
    func interoperability() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let token = try daemon.authctl(["token", "local", "--aud", "https://rp.example", "--nonce", "abc"])
        #expect(token.status == 0)
        let jwks = try daemon.authctl(["keys", "jwks"])
        #expect(jwks.status == 0)
        let compact = token.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let verified = try DaemonHarness.run(["/usr/bin/python3", Self.pythonScript, compact, jwks.stdout, "https://rp.example", "authd"])
        #expect(verified.status == 0, "\(verified.stderr)")
        let claims = try WireCodec.decode(JSONValue.self, from: Data(verified.stdout.utf8))
        #expect(claims["sub"] == .string("unix:\(getuid())"))
        #expect(claims["nonce"] == "abc")
        #expect(claims["azp"] == .string(DaemonHarness.authctlPath) || claims["azp"]?.stringValue?.hasSuffix("/authctl") == true)
        // The same library refuses a token whose payload was changed.
        var parts = compact.split(separator: ".").map(String.init)
        parts[1] = base64URL(String(decoding: Base64URL.decode(parts[1])!, as: UTF8.self).replacingOccurrences(of: "abc", with: "abd"))
        let tampered = try DaemonHarness.run(["/usr/bin/python3", Self.pythonScript, parts.joined(separator: "."), jwks.stdout, "https://rp.example", "authd"])
        #expect(tampered.status == 1)
        #expect(tampered.stderr.contains("InvalidSignatureError"))
        // And a rotated JWKS still verifies the old token.
        #expect(try daemon.authctl(["admin", "keys", "rotate"]).status == 0)
        let rotatedJWKS = try daemon.authctl(["keys", "jwks"]).stdout
        #expect(try DaemonHarness.run(["/usr/bin/python3", Self.pythonScript, compact, rotatedJWKS, "https://rp.example", "authd"]).status == 0)
    }

    @Test("the daemon's log never contains a token or key material")
    func noSecretsInLogs() throws {
        let daemon = try DaemonHarness(config: "[log]\nlevel = debug\n")
        try daemon.start()
        let client = try daemon.connect()
        var tokens: [String] = []
        for index in 0..<20 {
            tokens.append(try #require(try client.result("auth.local", ["aud": .string("app\(index)"), "nonce": .string("secret-nonce-\(index)")])["token"]?.stringValue))
        }
        _ = try client.call("token.verify", ["token": .string(tokens[0] + "x")])
        _ = try client.result("admin.keys.rotate")
        #expect(try daemon.terminate() == 0)
        let log = daemon.log
        #expect(log.contains("auth.local ok"), "debug logging was on")
        for token in tokens {
            for part in token.split(separator: ".") { #expect(!log.contains(part)) }
        }
        #expect(!log.contains("secret-nonce"))
        let key = try Data(contentsOf: URL(fileURLWithPath: daemon.stateDirectory + "/master.key"))
        #expect(!log.contains(key.base64EncodedString()))
        #expect(!log.contains(key.map { String(format: "%02x", $0) }.joined()))
    }
}

func base64URL(_ text: String) -> String {
    Base64URL.encode(Array(text.utf8))
}
