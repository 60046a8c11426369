import Foundation
import Glibc
import Protocol
import Testing

/// `authd-webeid` driven through its stdin and stdout exactly as a browser drives it, against a
/// user-mode authd, the virtual card, and the PIN typed into the scripted pinentry authd runs;
/// the token and the signature checked by a relying party's rules (Python/verify_webeid.py).
@Suite("Web eID host against authd and the virtual card", .serialized)
struct WebEIDHostProtocolTests {
    typealias Script = PinentryPromptTests.Script
    static let relyingParty = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Python/verify_webeid.py").path
    static var hostPath: String { DaemonHarness.buildDirectory + "/authd-webeid" }
    static let origin = "https://rp.example"

    /// A challenge nonce as a relying party makes one: base64 of 32 random bytes (44 characters).
    static func nonce() -> String { Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString() }

    /// Starts the host as Chrome does (the extension's origin as its argument) for `daemon`, and reads its version.
    static func start(_ daemon: DaemonHarness) throws -> (NativeHost, version: String, Duration) {
        let host = try NativeHost(hostPath, arguments: ["chrome-extension://ncibgoaomkmdpilpocfeponihegamlic/"],
                                  environment: ["PATH=/usr/bin:/bin", "AUTHD_SOCKET=\(daemon.socketPath)", "HOME=\(daemon.directory)"],
                                  stderr: daemon.directory + "/webeid.log")
        let version = try #require(try host.receive(within: .seconds(5))?["version"]?.stringValue)
        return (host, version, ContinuousClock.now - host.started)
    }

    /// One command, one reply, and the host exits 0.
    static func run(_ daemon: DaemonHarness, _ command: String, _ arguments: JSONValue) throws -> JSONValue {
        let (host, _, _) = try start(daemon)
        try host.send(["command": .string(command), "arguments": arguments])
        let reply = try #require(try host.receive(within: .seconds(60)))
        #expect(try host.waitForExit() == 0)
        return reply
    }

    static func verify(_ arguments: [String]) throws -> DaemonHarness.CommandResult {
        try DaemonHarness.run(["/usr/bin/python3", relyingParty] + arguments)
    }

    static func daemon(_ script: Script, rig: CardRig, extra: String = "") throws -> DaemonHarness {
        let daemon = try DaemonHarness(config: "[prompts]\npinentry = \(script.path)\n" + extra)
        try daemon.start(environment: rig.environment)
        return daemon
    }

    @Test("the version first, within 5 s: 2.x with authd's release; quit answered {}; input closed before a command is no reply")
    func handshakeAndQuit() throws {
        let rig = try CardRig()
        let script = try Script([])
        let daemon = try Self.daemon(script, rig: rig)
        let (host, version, elapsed) = try Self.start(daemon)
        #expect(version == "2.0.0+authd.\(AuthdRelease.version)")
        #expect(elapsed < .seconds(5), "version after \(elapsed)")
        print("authd-webeid: start to version \(elapsed)")
        try host.send(["command": "quit", "arguments": [:]])
        #expect(try host.receive() == [:])
        #expect(try host.waitForExit() == 0)

        let (silent, _, _) = try Self.start(daemon)
        silent.closeInput()
        #expect(try silent.receive(within: .seconds(10)) == nil)
        #expect(try silent.waitForExit() == 0)
        #expect(script.dialogs.isEmpty)
    }

    @Test("requests under 5 or over 8192 bytes, and bad arguments, are ERR_WEBEID_NATIVE_FATAL with no dialog")
    func refusedBeforeAnyPrompt() throws {
        let rig = try CardRig()
        try rig.insertCard()
        let script = try Script([])
        let daemon = try Self.daemon(script, rig: rig)
        for length in [UInt32(4), 8193, UInt32.max] {
            let (host, _, _) = try Self.start(daemon)
            try host.sendRaw(withUnsafeBytes(of: length) { Array($0) } + Array("{}".utf8))
            #expect(try host.receive()?["error"]?["code"] == "ERR_WEBEID_NATIVE_FATAL", "length \(length)")
            #expect(try host.waitForExit() == 0)
        }
        let padded = "{\"command\":\"quit\",\"arguments\":{}}" + String(repeating: " ", count: 8192 - 33)
        let (limit, _, _) = try Self.start(daemon)
        try limit.sendRaw(withUnsafeBytes(of: UInt32(8192)) { Array($0) } + Array(padded.utf8))
        #expect(try limit.receive() == [:], "8192 bytes is within the limit")
        let bad: [(String, JSONValue)] = [
            ("authenticate", ["challengeNonce": .string(Self.nonce()), "origin": "http://rp.example"]),
            ("authenticate", ["challengeNonce": "short", "origin": .string(Self.origin)]),
            ("authenticate", ["challengeNonce": .string(Self.nonce()), "origin": .string(Self.origin), "user": "x"]),
            ("get-signing-certificate", ["origin": "https://rp.example/path"]),
            ("get-signing-certificate", ["origin": .string("https://" + String(repeating: "a", count: 250))]),
            ("sign", ["hash": "", "hashFunction": "SHA-384", "certificate": "MIIB", "origin": .string(Self.origin)]),
            ("sign", ["hash": .string(Data(count: 32).base64EncodedString()), "hashFunction": "SHA-384", "certificate": "MIIB", "origin": .string(Self.origin)]),
            ("reboot", [:]),
        ]
        for (command, arguments) in bad {
            let reply = try Self.run(daemon, command, arguments)
            #expect(reply["error"]?["code"] == "ERR_WEBEID_NATIVE_FATAL", "\(command) \(arguments): \(reply)")
        }
        #expect(script.dialogs.isEmpty, "a refused request asked the person: \(script.dialogs)")
    }

    @Test("authenticate: consent for the origin, PIN1 in a dialog naming the origin, the holder and the tries left; a token a relying party accepts for that origin only")
    func authenticate() throws {
        let rig = try CardRig()
        try rig.insertCard()
        let script = try Script([["confirm": "ok"], ["pin": "1234"]])
        let daemon = try Self.daemon(script, rig: rig)
        let nonce = Self.nonce()
        let reply = try Self.run(daemon, "authenticate", ["challengeNonce": .string(nonce), "origin": .string(Self.origin), "lang": "et"])
        #expect(reply["format"] == "web-eid:1.0" && reply["algorithm"] == "ES384", "\(reply)")
        let token = String(decoding: try WireCodec.encodeJSON(reply), as: UTF8.self)
        let accepted = try Self.verify(["auth", token, rig.caPath, Self.origin, nonce])
        #expect(accepted.status == 0, "\(accepted.stderr)")
        for (origin, otherNonce) in [("https://rp.example:443", nonce), ("https://evil.example", nonce), (Self.origin, Self.nonce())] {
            #expect(try Self.verify(["auth", token, rig.caPath, origin, otherNonce]).status == 1, "accepted for \(origin)")
        }
        // The certificate is the card's own authentication certificate.
        let client = try daemon.connect()
        let card = try client.result("card.certificate", ["use": "authentication"])
        #expect(reply["unverifiedCertificate"] == card["certificate"])

        // What the person saw: who asks, for which origin; the holder; the tries left.
        let holder = try client.result("card.read")
        let dialogs = script.dialogs
        try #require(dialogs.count == 2, "\(script.commands)")
        #expect(dialogs[0]["SETDESC"]?.contains(Self.origin) == true && dialogs[0]["SETDESC"]?.contains("authd-webeid") == true, "\(dialogs[0])")
        let pinDialog = try #require(dialogs[1]["SETDESC"])
        #expect(dialogs[1]["SETPROMPT"] == "PIN1:")
        #expect(pinDialog.contains(Self.origin) && pinDialog.contains("3 tries left"), "\(pinDialog)")
        for field in ["personal_code", "surname"] {
            let value = try #require(holder[field]?.stringValue)
            #expect(pinDialog.localizedCaseInsensitiveContains(value), "\(field) \(value) is not in \(pinDialog)")
        }
        #expect(!(try String(contentsOfFile: daemon.directory + "/webeid.log", encoding: .utf8)).contains("1234"))

        // Consent is per origin: the same origin asks only for PIN1, another origin asks again.
        let again = try Script([["pin": "1234"], ["confirm": "cancel"]])
        try PinentryPromptTests.reconfigure(daemon, pinentry: again.path)
        let second = try Self.run(daemon, "authenticate", ["challengeNonce": .string(Self.nonce()), "origin": .string(Self.origin)])
        #expect(second["signature"] != nil, "\(second)")
        let other = try Self.run(daemon, "authenticate", ["challengeNonce": .string(Self.nonce()), "origin": "https://other.example"])
        #expect(other["error"]?["code"] == "ERR_WEBEID_USER_CANCELLED", "\(other)")
        #expect(again.dialogs.count == 2 && again.dialogs[1]["SETDESC"]?.contains("https://other.example") == true, "\(again.dialogs)")
        let consents = try client.result("consents.list")["consents"]?.arrayValue ?? []
        #expect(consents.contains { $0["audience"] == .string(Self.origin) && $0["program"]?.stringValue?.hasSuffix("/authd-webeid") == true }, "\(consents)")
    }

    @Test("get-signing-certificate: the person hands the card's signing certificate over; sign: its own consent, PIN2 with the hash in the dialog, a signature that verifies; another certificate is refused")
    func certificateAndSign() throws {
        let rig = try CardRig()
        try rig.insertCard()
        let script = try Script([["confirm": "ok"], ["confirm": "ok"]])
        let daemon = try Self.daemon(script, rig: rig)
        let reply = try Self.run(daemon, "get-signing-certificate", ["origin": .string(Self.origin), "lang": "en"])
        let certificate = try #require(reply["certificate"]?.stringValue, "\(reply)")
        #expect(reply["supportedSignatureAlgorithms"]?.arrayValue?.contains(["cryptoAlgorithm": "ECC", "hashFunction": "SHA-384", "paddingScheme": "NONE"]) == true)
        let client = try daemon.connect()
        #expect(try client.result("card.certificate", ["use": "signing"])["certificate"] == .string(certificate))
        try #require(script.dialogs.count == 2)
        #expect(script.dialogs[1]["SETOK"] == "Hand over" && script.dialogs[1]["SETDESC"]?.contains("signing certificate for \(Self.origin)") == true,
                "\(script.dialogs[1])")

        // The signature is another purpose than the certificate: its consent is asked on its own.
        let digest = Data((0..<48).map { _ in UInt8.random(in: 0...255) })
        let signing = try Script([["confirm": "ok"], ["pin": "12345"]])
        try PinentryPromptTests.reconfigure(daemon, pinentry: signing.path)
        let signed = try Self.run(daemon, "sign", ["hash": .string(digest.base64EncodedString()), "hashFunction": "SHA-384",
                                                  "certificate": .string(certificate), "origin": .string(Self.origin)])
        #expect(signed["signatureAlgorithm"] == ["cryptoAlgorithm": "ECC", "hashFunction": "SHA-384", "paddingScheme": "NONE"], "\(signed)")
        let signature = try #require(signed["signature"]?.stringValue)
        let verified = try Self.verify(["sign", signature, certificate, digest.base64EncodedString(), "SHA-384", rig.caPath])
        #expect(verified.status == 0, "\(verified.stderr)")
        #expect(try Self.verify(["sign", signature, certificate, Data(count: 48).base64EncodedString(), "SHA-384", rig.caPath]).status == 1)
        try #require(signing.dialogs.count == 2, "\(signing.commands)")
        #expect(signing.dialogs[0]["SETDESC"]?.contains("ask for your signature for \(Self.origin)") == true, "\(signing.dialogs[0])")
        let pinDialog = signing.dialogs[1]
        #expect(pinDialog["SETPROMPT"] == "PIN2:" && pinDialog["SETDESC"]?.contains(Base64URL.encode(Array(digest))) == true, "\(pinDialog)")

        // A certificate that is not the card's signing one: nothing is signed.
        let authentication = try #require(try client.result("card.certificate", ["use": "authentication"])["certificate"]?.stringValue)
        let wrong = try Script([["pin": "12345"]])
        try PinentryPromptTests.reconfigure(daemon, pinentry: wrong.path)
        let refused = try Self.run(daemon, "sign", ["hash": .string(digest.base64EncodedString()), "hashFunction": "SHA-384",
                                                   "certificate": .string(authentication), "origin": .string(Self.origin)])
        #expect(refused["error"] == ["code": "ERR_WEBEID_NATIVE_FATAL", "message": "authd could not complete the request."], "\(refused)")
    }

    @Test("the person cancelling is ERR_WEBEID_USER_CANCELLED (PIN, consent, hand-over); no card in the window is ERR_WEBEID_USER_TIMEOUT; no authd is fatal")
    func cancelTimeout() throws {
        let rig = try CardRig()
        try rig.insertCard()
        let script = try Script([["confirm": "ok"], ["cancel": true], ["confirm": "cancel"], ["confirm": "ok"], ["confirm": "cancel"]])
        let daemon = try Self.daemon(script, rig: rig, extra: "consent = first\n[card]\nwindow = 2\n")
        let login: JSONValue = ["challengeNonce": .string(Self.nonce()), "origin": .string(Self.origin)]
        #expect(try Self.run(daemon, "authenticate", login)["error"]?["code"] == "ERR_WEBEID_USER_CANCELLED")
        #expect(try Self.run(daemon, "authenticate", ["challengeNonce": .string(Self.nonce()), "origin": "https://b.example"])["error"]?["code"]
                == "ERR_WEBEID_USER_CANCELLED")
        #expect(try Self.run(daemon, "get-signing-certificate", ["origin": "https://c.example"])["error"]?["code"] == "ERR_WEBEID_USER_CANCELLED")
        #expect(script.dialogs.count == 5, "\(script.dialogs)")
        rig.stopCard()
        let timedOut = try Self.run(daemon, "authenticate", login)
        #expect(timedOut["error"]?["code"] == "ERR_WEBEID_USER_TIMEOUT", "\(timedOut)")
        let audit = try daemon.connect().result("admin.audit.tail", ["limit": 10])
        #expect(String(decoding: try WireCodec.encodeJSON(audit), as: UTF8.self).contains("card.timeout"), "the reason is in authd's audit")
        _ = try daemon.terminate()
        #expect(try Self.run(daemon, "get-signing-certificate", ["origin": .string(Self.origin)])["error"]?["code"] == "ERR_WEBEID_NATIVE_FATAL")
    }
}

/// `authctl webeid install --user`, `--remove` and `status` in a home of the test's own.
@Suite("Web eID manifests")
struct WebEIDManifestTests {
    @Test("install --user writes the three manifests naming the host, status says so, --remove takes only authd's away")
    func userManifests() throws {
        var template = Array("/tmp/authd-webeid-home-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw HarnessError("mkdtemp failed") }
        let home = String(cString: made)
        defer { try? FileManager.default.removeItem(atPath: home) }
        let environment = ["HOME": home, "PATH": "/usr/bin:/bin"]
        let chromium = home + "/.config/chromium/NativeMessagingHosts/eu.webeid.json"
        let chrome = home + "/.config/google-chrome/NativeMessagingHosts/eu.webeid.json"
        let firefox = home + "/.mozilla/native-messaging-hosts/eu.webeid.json"

        let installed = try DaemonHarness.run([DaemonHarness.authctlPath, "webeid", "install", "--user"], environment: environment)
        #expect(installed.status == 0, "\(installed.stderr)")
        for path in [chromium, chrome, firefox] {
            let manifest = try WireCodec.decode(JSONValue.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
            #expect(manifest["name"] == "eu.webeid" && manifest["type"] == "stdio", "\(path): \(manifest)")
            #expect(manifest["path"]?.stringValue?.hasSuffix("/authd-webeid") == true)
        }
        #expect(try WireCodec.decode(JSONValue.self, from: Data(contentsOf: URL(fileURLWithPath: firefox)))["allowed_extensions"]
                    == ["{e68418bc-f2b0-4459-a9ea-3e72b6751b07}"])
        let status = try DaemonHarness.run([DaemonHarness.authctlPath, "--json", "webeid", "status"], environment: environment)
        let rows = try WireCodec.decode(JSONValue.self, from: Data(status.stdout.utf8)).arrayValue ?? []
        #expect(rows.count == 3 && rows.allSatisfy { $0["authd"] == true }, "\(status.stdout)")

        // Another host's manifest (web-eid-app's) stays; authd's go.
        try #"{"name":"eu.webeid","type":"stdio","path":"/usr/bin/web-eid","allowed_origins":[]}"#.write(toFile: chrome, atomically: true, encoding: .utf8)
        let removed = try DaemonHarness.run([DaemonHarness.authctlPath, "webeid", "install", "--user", "--remove"], environment: environment)
        #expect(removed.status == 0 && removed.stdout.contains("left alone"), "\(removed.stdout) \(removed.stderr)")
        #expect(!FileManager.default.fileExists(atPath: chromium) && !FileManager.default.fileExists(atPath: firefox))
        #expect(FileManager.default.fileExists(atPath: chrome))
    }
}
