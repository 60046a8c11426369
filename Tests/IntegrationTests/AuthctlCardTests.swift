import Foundation
import Protocol
import Testing

/// `authctl card …` against the virtual card through a private pcscd: prompts answered from
/// file descriptors, progress on stderr, the token alone on stdout, reasons as exit codes.
@Suite("authctl card", .serialized)
struct AuthctlCardTests {
    private func daemon(_ rig: CardRig) throws -> DaemonHarness {
        let daemon = try DaemonHarness()
        try daemon.start(environment: rig.environment)
        return daemon
    }

    @Test("contactless (brainpoolP384r1 PACE): CAN and PIN from descriptors, token alone on stdout, saved CAN and PIN1")
    func loginAndSecrets() throws {
        let rig = try CardRig(profile: ["--mode", "contactless", "--pace", "brainpool384", "--can", "654321"])
        try rig.insertCard()
        let daemon = try daemon(rig)

        // PIN1 is asked first, then the card, then the CAN: one line each from stdin.
        let login = try daemon.authctl(["card", "login", "--aud", "app.example", "--nonce", "n-42", "--pin-fd", "0", "--can-fd", "0"],
                                       stdin: "1234\n654321\n")
        #expect(login.status == 0, "\(login.stderr)")
        let lines = login.stdout.split(separator: "\n")
        #expect(lines.count == 1, "only the token on stdout")
        #expect(!login.stderr.contains("1234") && !login.stderr.contains("654321"), "secrets are never echoed")
        let verified = try DaemonHarness.run(["/usr/bin/python3", CardTests.verifier, String(lines.first ?? ""), rig.caPath, "app.example"])
        #expect(verified.status == 0, "\(verified.stderr)")
        #expect(try WireCodec.decode(JSONValue.self, from: Data(verified.stdout.utf8))["nonce"] == "n-42", "\(verified.stdout)")

        // The card answered, so its reader lists it as present.
        let readers = try daemon.authctl(["card", "readers"])
        #expect(readers.status == 0)
        #expect(readers.stdout.contains("Virtual PCD") && readers.stdout.contains("card present"), "\(readers.stdout)")

        // Saved CAN and PIN1: the next login asks for nothing (there is no terminal to ask on).
        #expect(try daemon.authctl(["card", "can", "set", "--can-fd", "0"], stdin: "654321\n").status == 0)
        #expect(try daemon.authctl(["card", "can", "show"]).stdout == "654321\n")
        #expect(try daemon.authctl(["card", "pin1", "save", "--pin-fd", "0"], stdin: "1234\n").status == 0)
        let quiet = try daemon.authctl(["card", "login", "--aud", "app.example"])
        #expect(quiet.status == 0, "\(quiet.stderr)")
        #expect(quiet.stdout.split(separator: ".").count == 3)

        let read = try daemon.authctl(["card", "read", "--json"])
        #expect(read.status == 0, "\(read.stderr)")
        let data = try WireCodec.decode(JSONValue.self, from: Data(read.stdout.utf8))
        #expect(data["personal_code"] == "38001085718")

        #expect(try daemon.authctl(["card", "pin1", "clear"]).status == 0)
        #expect(try daemon.authctl(["card", "can", "clear"]).status == 0)
        let none = try daemon.authctl(["card", "can", "show"])
        #expect(none.status == 1 && none.stdout.isEmpty)
        #expect(none.stderr.contains("no CAN is saved"))
    }

    @Test("sign a sha256sum digest with PIN2; wrong PIN → exit 5 with retries; declined prompt → exit 3; bad digests → exit 2")
    func signAndOutcomes() throws {
        let rig = try CardRig()
        try rig.insertCard()
        let daemon = try daemon(rig)
        let digest = String(repeating: "ab", count: 32)
        let sign = try daemon.authctl(["card", "sign", "--aud", "https://sign.example", "--description", "contract.pdf",
                                       "--hash", digest, "--pin-fd", "0", "--json"], stdin: "12345\n")
        #expect(sign.status == 0, "\(sign.stderr)")
        let result = try WireCodec.decode(JSONValue.self, from: Data(sign.stdout.utf8))
        #expect(result["hash"] == .string(Base64URL.encode([UInt8](repeating: 0xAB, count: 32))), "hex is sent as base64url")
        #expect(result["hash_alg"] == "SHA-256")
        let claims = try DaemonHarness.run(["/usr/bin/python3", CardTests.verifier, try #require(result["token"]?.stringValue), rig.caPath, "https://sign.example"])
        #expect(claims.status == 0, "\(claims.stderr)")
        #expect(claims.stdout.contains("contract.pdf"))

        let wrong = try daemon.authctl(["card", "login", "--aud", "a", "--pin-fd", "0"], stdin: "9999\n")
        #expect(wrong.status == 5)
        #expect(wrong.stderr.contains("(pin.wrong)"), "\(wrong.stderr)")
        #expect(wrong.stdout.isEmpty)

        let declined = try daemon.authctl(["card", "login", "--aud", "a", "--pin-fd", "0"], stdin: "")
        #expect(declined.status == 3)
        #expect(declined.stderr.contains("(user.cancelled)"), "\(declined.stderr)")

        for arguments in [["--hash", "abcd"], ["--hash", digest, "--hash-alg", "MD5"], [], ["--hash", digest, "--file", "/etc/hostname"]] {
            let bad = try daemon.authctl(["card", "sign", "--aud", "a", "--description", "d"] + arguments)
            #expect(bad.status == 2, "\(arguments): \(bad.stderr)")
        }
        #expect(try daemon.authctl(["card", "login"]).status == 2, "--aud is required")
    }

    /// Waits (at most 15 s) until authd sees the virtual card in its reader.
    private func waitForCardPresent(_ daemon: DaemonHarness) throws {
        for _ in 0..<150 {
            if try daemon.authctl(["card", "readers"]).stdout.contains("card present") { return }
            usleep(100_000)
        }
        throw HarnessError("the virtual card never showed up in its reader")
    }

    @Test("a card already in the reader: no \"Place your ID card\" prompt, straight to the token")
    func cardAlreadyPresent() throws {
        let rig = try CardRig()
        try rig.insertCard()
        let daemon = try daemon(rig)
        try waitForCardPresent(daemon)
        let login = try daemon.authctl(["card", "login", "--aud", "app.example", "--pin-fd", "0"], stdin: "1234\n")
        #expect(login.status == 0, "\(login.stderr)")
        #expect(login.stdout.split(separator: ".").count == 3)
        #expect(!login.stderr.contains("Place your ID card"), "\(login.stderr)")
    }

    @Test("pcscd not running: the error alone, no \"Place your ID card\" prompt before it")
    func serviceUnavailableWithoutPrompt() throws {
        let rig = try CardRig()
        rig.stopPCSCD()
        let daemon = try daemon(rig)
        let read = try daemon.authctl(["card", "read", "--timeout", "5"])
        #expect(read.status == 1, "\(read.stderr)")
        #expect(read.stderr.contains("(card.service_unavailable)"), "\(read.stderr)")
        #expect(!read.stderr.contains("Place your ID card"), "\(read.stderr)")
    }

    @Test("the PIN2 prompt names what is signed and who asks; a declined one says which prompt")
    func pin2PromptWording() throws {
        let rig = try CardRig()
        try rig.insertCard()
        let daemon = try daemon(rig)
        let client = try daemon.connect()
        let params: JSONValue = ["aud": "https://bank.example", "hash": .string(Base64URL.encode([UInt8](repeating: 1, count: 32))),
                                 "hash_alg": "SHA-256", "description": "Loan contract"]
        let signed = try client.callAnswering("card.sign", params, answers: ["pin2": "12345"])
        let prompt = try #require(signed.prompts.first { $0["kind"] == "pin2" })
        #expect(prompt["message"] == "Enter PIN2 to sign \"Loan contract\" for https://bank.example", "\(prompt)")
        let declined = try daemon.authctl(["card", "sign", "--aud", "https://bank.example", "--description", "Loan contract",
                                           "--hash", String(repeating: "01", count: 32), "--pin-fd", "0"], stdin: "")
        #expect(declined.status == 3)
        #expect(declined.stderr.contains("The PIN2 prompt was cancelled (user.cancelled)"), "\(declined.stderr)")
    }

    @Test("on a terminal a refused or too short PIN2 is asked again, with the tries left; the question names what and who")
    func pinAskedAgainOnTerminal() throws {
        let rig = try CardRig()
        try rig.insertCard()
        let daemon = try daemon(rig)
        try waitForCardPresent(daemon)
        let terminal = try TerminalSession([DaemonHarness.authctlPath, "--socket", daemon.socketPath, "card", "sign", "--aud", "https://bank.example",
                                            "--description", "Loan contract", "--hash", String(repeating: "ab", count: 32)],
                                           environment: ["PATH": "/usr/bin:/bin", "HOME": daemon.directory])
        let question = "Enter PIN2 to sign \"Loan contract\" for https://bank.example: "
        try terminal.answer(question, "99999")
        try terminal.expect("authctl: Wrong PIN (2 tries left) (pin.wrong)")
        try terminal.answer(question, "123")
        try terminal.expect("(pin.invalid_length)")
        try terminal.answer(question, "12345")
        #expect(try terminal.finish() == 0, "\(terminal.transcript)")
        #expect(terminal.transcript.contains("eyJ"), "the token: \(terminal.transcript)")
        #expect(!terminal.transcript.contains("99999"), "PINs are typed without echo")
    }

    @Test("no card within --timeout → exit 4 (card.timeout) after the countdown on stderr")
    func timeout() throws {
        let rig = try CardRig()
        let daemon = try daemon(rig)
        let read = try daemon.authctl(["card", "read", "--timeout", "2"])
        #expect(read.status == 4)
        #expect(read.stderr.contains("Place your ID card on the reader — 2 s left"), "\(read.stderr)")
        #expect(read.stderr.contains("(card.timeout)"))
    }
}
