import FoundationEssentials
import Protocol
import Testing
@testable import authd_webeid

private let nonce = String(repeating: "n", count: 44)
private let certificate = Data([0x30, 0x82, 0x01]).base64EncodedString()
private let sha384 = Data(repeating: 7, count: 48).base64EncodedString()

private func message(_ command: String, _ arguments: JSONValue) -> [UInt8] {
    Array(try! WireCodec.encodeJSON(JSONValue.object(["command": .string(command), "arguments": arguments])))
}

private func header(_ length: Int) -> [UInt8] { withUnsafeBytes(of: UInt32(length)) { Array($0) } }

/// The reply inside a `replyAndExit` frame.
private func reply(_ action: WebEIDHost.Action) throws -> JSONValue {
    guard case .replyAndExit(let frame) = action else { throw ReplyMissing(action: action) }
    #expect(NativeFrame.length(ofHeader: Array(frame.prefix(4))) == frame.count - 4)
    return try JSONDecoder().decode(JSONValue.self, from: Data(frame.dropFirst(4)))
}

private struct ReplyMissing: Error { let action: WebEIDHost.Action }

/// A host that has sent its version and read the header of `body`.
private func host(receiving body: [UInt8]) -> (WebEIDHost, WebEIDHost.Action) {
    var host = WebEIDHost()
    _ = host.start()
    _ = host.received(header: header(body.count))
    let action = host.received(body: body)
    return (host, action)
}

@Suite("Web eID host: framing, argument checks, one command")
struct WebEIDHostTests {
    @Test("a frame's header is the body's length in native byte order")
    func framing() {
        let frame = NativeFrame.frame(Array("{\"a\":1}".utf8))
        #expect(frame.count == 11)
        #expect(NativeFrame.length(ofHeader: Array(frame.prefix(4))) == 7)
        #expect(Array(frame.prefix(4)) == withUnsafeBytes(of: UInt32(7)) { Array($0) })
    }

    @Test("the host speaks first: its version, a 2.x semver with authd's release in the build metadata")
    func versionFirst() throws {
        var host = WebEIDHost()
        guard case .sendThenReadHeader(let frame) = host.start() else { Issue.record("no version"); return }
        let version = try JSONDecoder().decode(JSONValue.self, from: Data(frame.dropFirst(4)))
        #expect(version == ["version": .string("2.0.0+authd.\(AuthdRelease.version)")])
        #expect(host.start() == .exit, "a second start is no protocol")
    }

    @Test("a request under 5 or over 8192 bytes is refused before it is read", arguments: [0, 1, 4, 8193, Int(UInt32.max)])
    func sizeLimits(length: Int) throws {
        var host = WebEIDHost()
        _ = host.start()
        let answer = try reply(host.received(header: header(length)))
        #expect(answer["error"]?["code"] == "ERR_WEBEID_NATIVE_FATAL")
        #expect(host.state == .finished)
    }

    @Test("the limits themselves are read", arguments: [5, 8192])
    func sizeLimitsInclusive(length: Int) {
        var host = WebEIDHost()
        _ = host.start()
        #expect(host.received(header: header(length)) == .readBody(length))
    }

    @Test("quit is answered with {} at once, asking authd nothing")
    func quit() throws {
        let (host, action) = host(receiving: message("quit", [:]))
        #expect(try reply(action) == [:])
        #expect(host.state == .finished)
    }

    @Test("each command becomes one authd request with prompt: desktop and the origin as the audience")
    func commands() {
        let (_, login) = host(receiving: message("authenticate", ["challengeNonce": .string(nonce), "origin": "https://rp.example", "lang": "et"]))
        #expect(login == .ask(.login(CardLogin.Params(aud: "https://rp.example", nonce: nonce, format: "web-eid", prompt: .desktop))))
        let (_, certificateCall) = host(receiving: message("get-signing-certificate", ["origin": "wss://rp.example:8443"]))
        #expect(certificateCall == .ask(.certificate(CardCertificate.Params(use: "signing", aud: "wss://rp.example:8443", prompt: .desktop))))
        let (_, sign) = host(receiving: message("sign", ["hash": .string(sha384), "hashFunction": "SHA-384", "certificate": .string(certificate),
                                                         "origin": "https://rp.example"]))
        guard case .ask(.sign(let params, let function)) = sign else { Issue.record("\(sign)"); return }
        #expect(function == .sha384 && params.hashAlg == "SHA-384" && params.prompt == .desktop && params.aud == "https://rp.example")
        #expect(params.hash == Base64URL.encode([UInt8](repeating: 7, count: 48)) && params.certificate == certificate)
    }

    static let refused: [(String, [UInt8])] = [
        ("not JSON", Array("{\"command\":".utf8)),
        ("a duplicate member", Array(#"{"command":"quit","command":"quit","arguments":{}}"#.utf8)),
        ("not an object", Array("[1,2,3]".utf8)),
        ("an unknown command", message("format-disk", [:])),
        ("no arguments", Array(#"{"command":"quit"}"#.utf8)),
        ("an unknown top-level member", Array(#"{"command":"quit","arguments":{},"x":1}"#.utf8)),
        ("quit with an argument", message("quit", ["origin": "https://rp.example"])),
        ("an unknown argument", message("authenticate", ["challengeNonce": .string(nonce), "origin": "https://rp.example", "extra": "1"])),
        ("an empty argument", message("authenticate", ["challengeNonce": .string(nonce), "origin": ""])),
        ("an empty lang", message("authenticate", ["challengeNonce": .string(nonce), "origin": "https://rp.example", "lang": ""])),
        ("a number for a string", message("authenticate", ["challengeNonce": 5, "origin": "https://rp.example"])),
        ("a missing nonce", message("authenticate", ["origin": "https://rp.example"])),
        ("a 43-character nonce", message("authenticate", ["challengeNonce": .string(String(nonce.dropLast())), "origin": "https://rp.example"])),
        ("a 129-character nonce", message("authenticate", ["challengeNonce": .string(String(repeating: "n", count: 129)), "origin": "https://rp.example"])),
        ("an http origin", message("get-signing-certificate", ["origin": "http://rp.example"])),
        ("an origin with a path", message("get-signing-certificate", ["origin": "https://rp.example/"])),
        ("an origin with a query", message("get-signing-certificate", ["origin": "https://rp.example?a"])),
        ("an origin with a user", message("get-signing-certificate", ["origin": "https://me@rp.example"])),
        ("an origin with a bad port", message("get-signing-certificate", ["origin": "https://rp.example:0"])),
        ("an origin with a port of leading zero", message("get-signing-certificate", ["origin": "https://rp.example:0443"])),
        ("an upper-case origin", message("get-signing-certificate", ["origin": "https://RP.example"])),
        ("an origin with a newline", message("get-signing-certificate", ["origin": "https://rp.example\nPIN:"])),
        ("an origin of 256 characters", message("get-signing-certificate", ["origin": .string("https://" + String(repeating: "a.", count: 124))])),
        ("a hash of the wrong length", message("sign", ["hash": .string(Data(repeating: 1, count: 32).base64EncodedString()), "hashFunction": "SHA-384",
                                                        "certificate": .string(certificate), "origin": "https://rp.example"])),
        ("a hash that is not base64", message("sign", ["hash": "!!!!", "hashFunction": "SHA-384", "certificate": .string(certificate), "origin": "https://rp.example"])),
        ("an unsupported hash function", message("sign", ["hash": .string(Data(repeating: 1, count: 28).base64EncodedString()), "hashFunction": "SHA-224",
                                                          "certificate": .string(certificate), "origin": "https://rp.example"])),
        ("a certificate that is not base64", message("sign", ["hash": .string(sha384), "hashFunction": "SHA-384", "certificate": "***", "origin": "https://rp.example"])),
    ]

    @Test("arguments exactly as listed, or ERR_WEBEID_NATIVE_FATAL before any prompt", arguments: refused)
    func argumentChecks(name: String, body: [UInt8]) throws {
        let (host, action) = host(receiving: body)
        let answer = try reply(action)
        #expect(answer["error"]?["code"] == "ERR_WEBEID_NATIVE_FATAL", "\(name): \(answer)")
        #expect(host.state == .finished)
    }

    @Test("origins a browser writes are taken as they are",
          arguments: ["https://rp.example", "https://rp.example:8443", "wss://rp.example", "https://127.0.0.1", "https://[::1]:8443", "https://xn--maasikas-9za.ee"])
    func goodOrigins(origin: String) throws {
        #expect(try WebEIDCommand.origin(origin) == origin)
    }

    @Test("authd's reasons become the page's three errors; the detail stays with authd",
          arguments: [("prompt.cancelled", "ERR_WEBEID_USER_CANCELLED"), ("user.cancelled", "ERR_WEBEID_USER_CANCELLED"),
                      ("consent.denied", "ERR_WEBEID_USER_CANCELLED"), ("card.timeout", "ERR_WEBEID_USER_TIMEOUT"),
                      ("prompt.timeout", "ERR_WEBEID_USER_TIMEOUT"), ("pin.blocked", "ERR_WEBEID_NATIVE_FATAL"),
                      ("card.certificate_mismatch", "ERR_WEBEID_NATIVE_FATAL"), ("prompt.no_desktop", "ERR_WEBEID_NATIVE_FATAL")])
    func refusals(reason: String, code: String) throws {
        var (host, _) = host(receiving: message("get-signing-certificate", ["origin": "https://rp.example"]))
        let answer = try reply(host.answered(.refused(reason: reason)))
        #expect(answer["error"]?["code"] == .string(code))
        #expect(answer["error"]?["message"]?.stringValue?.contains(reason) == false, "the reason reached the page")
    }

    @Test("authd's answers in Web eID's shapes: the token's five fields; the certificate with ECC algorithms; the signature in standard base64")
    func answers() throws {
        let token = WebEIDToken(unverifiedCertificate: "MIIB", algorithm: "ES384", signature: "c2ln", format: "web-eid:1.0", appVersion: "v")
        var (login, _) = host(receiving: message("authenticate", ["challengeNonce": .string(nonce), "origin": "https://rp.example"]))
        #expect(try reply(login.answered(.login(token))) == ["unverifiedCertificate": "MIIB", "algorithm": "ES384", "signature": "c2ln",
                                                             "format": "web-eid:1.0", "appVersion": "v"])
        var (certificateHost, _) = host(receiving: message("get-signing-certificate", ["origin": "https://rp.example"]))
        let certificateReply = try reply(certificateHost.answered(.certificate(base64DER: certificate)))
        #expect(certificateReply["certificate"] == .string(certificate))
        #expect(certificateReply["supportedSignatureAlgorithms"]?.arrayValue?.contains(["cryptoAlgorithm": "ECC", "hashFunction": "SHA-384", "paddingScheme": "NONE"]) == true)
        var (signer, _) = host(receiving: message("sign", ["hash": .string(sha384), "hashFunction": "SHA-384", "certificate": .string(certificate),
                                                           "origin": "https://rp.example"]))
        let raw: [UInt8] = [0xfb, 0xff, 0x01]
        #expect(try reply(signer.answered(.signature(base64URL: Base64URL.encode(raw)))) ==
                ["signature": .string(Data(raw).base64EncodedString()),
                 "signatureAlgorithm": ["cryptoAlgorithm": "ECC", "hashFunction": "SHA-384", "paddingScheme": "NONE"]])
    }

    @Test("a reply of 1 MB or more is replaced by an error")
    func replyLimit() throws {
        var (host, _) = host(receiving: message("get-signing-certificate", ["origin": "https://rp.example"]))
        let answer = try reply(host.answered(.certificate(base64DER: String(repeating: "A", count: NativeFrame.maximumReply))))
        #expect(answer["error"]?["code"] == "ERR_WEBEID_NATIVE_FATAL")
    }

    @Test("out of order events end the run; input that ends before a command is no reply")
    func outOfOrder() {
        var host = WebEIDHost()
        #expect(host.received(body: [1, 2, 3, 4, 5]) == .exit)
        var started = WebEIDHost()
        _ = started.start()
        #expect(started.inputEnded() == .exit)
        #expect(started.answered(.unreachable) == .exit)
    }
}
