import Foundation
import Glibc
import Protocol

// authctl card …: the ID card through authd. authd owns the reader and runs the interaction;
// authctl answers its prompts (PINs and the CAN without echo, or from --pin-fd/--can-fd) and,
// while authd waits for a card, shows "Place your ID card on the reader — N s left" on stderr.
// A PIN typed at the terminal that the card refuses is asked again. Tokens alone go to stdout.
extension Command {
    private static let timeoutOption = OptionSpec(name: "timeout", value: "S", help: "wait at most S seconds for the card (default 90)")
    private static let canFDOption = OptionSpec(name: "can-fd", value: "N", help: "read the CAN from file descriptor N")
    /// `prompt: desktop`: authd asks the person through pinentry on their desktop, not authctl.
    static let desktopOption = OptionSpec(name: "desktop", value: nil, help: "authd asks on your desktop (pinentry), not this terminal")

    /// The prompt route the invocation asks for: nil (authd's default, this terminal) or desktop.
    static func promptRoute(_ invocation: Invocation) -> PromptRoute? { invocation.flag("desktop") ? .desktop : nil }

    static let cardReaders = Command(
        path: ["card", "readers"], synopsis: "",
        abstract: "List the smart-card readers and whether a card is in each."
    ) { invocation throws(CLIError) in
        let result = try invocation.connect().call(CardReaders.self, NoParams())
        if invocation.global.json { Output.json(result); return .ok }
        if result.readers.isEmpty { Output.error("no smart-card reader is connected") }
        for reader in result.readers {
            Output.line(reader.name + (reader.cardPresent ? "\tcard present\t\(reader.atr ?? "")" : "\tempty"))
        }
        return .ok
    }

    static let cardRead = Command(
        path: ["card", "read"], synopsis: "[--timeout S] [--can-fd N] [--desktop]",
        abstract: "Read the personal data file of the ID card (asks for the CAN on a contactless reader).",
        options: [timeoutOption, canFDOption, desktopOption]
    ) { invocation throws(CLIError) in
        let connection = try invocation.connect()
        var prompter = RequestPrompter(invocation: invocation, connection: connection)
        let data = try prompter.run(CardRead.self, .init(timeoutS: try invocation.number("timeout", in: 1...600), prompt: promptRoute(invocation)))
        if invocation.global.json { Output.json(data); return .ok }
        let rows: [(String, String?)] = [
            ("surname", data.surname), ("given names", data.givenNames), ("sex", data.sex), ("citizenship", data.citizenship),
            ("date of birth", data.dateOfBirth), ("place of birth", data.placeOfBirth), ("personal code", data.personalCode),
            ("document number", data.documentNumber), ("expiry", data.expiry),
        ]
        for case let (label, value?) in rows where !value.isEmpty {
            Output.line("\((label + ":").padding(toLength: 17, withPad: " ", startingAt: 0)) \(value)")
        }
        return .ok
    }

    static let cardLogin = Command(
        path: ["card", "login"], synopsis: "--aud AUD [--nonce NONCE] [--format jwt|web-eid] [--timeout S] [--pin-fd N] [--can-fd N] [--desktop]",
        abstract: """
            Get a login token signed by the ID card (PIN1) for AUD, the origin or application id it
            is meant for. Prints the JWT alone (or the Web eID token as JSON with --format web-eid).
            """,
        options: [
            OptionSpec(name: "aud", value: "AUD", help: "the origin or app id the token is for"),
            OptionSpec(name: "nonce", value: "NONCE", help: "the relying party's challenge, bound into the token"),
            OptionSpec(name: "format", value: "FORMAT", help: "jwt (default) or web-eid"),
            timeoutOption,
            OptionSpec(name: "pin-fd", value: "N", help: "read PIN1 from file descriptor N"),
            canFDOption,
            desktopOption,
        ]
    ) { invocation throws(CLIError) in
        guard let aud = invocation.value("aud"), !aud.isEmpty else { throw .usage("--aud is required: the origin or app id the token is for") }
        let format = invocation.value("format") ?? "jwt"
        guard ["jwt", "web-eid"].contains(format) else { throw .usage("--format must be jwt or web-eid") }
        let connection = try invocation.connect()
        var prompter = RequestPrompter(invocation: invocation, connection: connection)
        let result = try prompter.runAskingPINAgain(CardLogin.self, .init(aud: aud, nonce: invocation.value("nonce"),
                                                            timeoutS: try invocation.number("timeout", in: 1...600), format: format,
                                                            prompt: promptRoute(invocation)))
        if invocation.global.json { Output.json(result); return .ok }
        if let webEid = result.webEid { Output.json(webEid) } else if let token = result.token { Output.line(token) }
        return .ok
    }

    static let cardSign = Command(
        path: ["card", "sign"], synopsis: "--aud AUD --description TEXT (--hash DIGEST [--hash-alg ALG] | --file PATH) [--timeout S] [--pin-fd N] [--can-fd N] [--desktop]",
        abstract: """
            Sign with the ID card's signing key (PIN2, always asked). DIGEST is hex (as sha256sum
            prints it) or base64url; ALG is SHA-256, SHA-384 or SHA-512 (default SHA-256 with
            --hash, SHA-384 with --file, whose bytes authd hashes). Prints the signature token (JWT)
            alone; --json prints also the raw signature and the signing certificate.
            """,
        options: [
            OptionSpec(name: "aud", value: "AUD", help: "the origin or app id asking for the signature"),
            OptionSpec(name: "description", value: "TEXT", help: "what is being signed, shown with the PIN2 prompt"),
            OptionSpec(name: "hash", value: "DIGEST", help: "the digest to sign, hex or base64url"),
            OptionSpec(name: "hash-alg", value: "ALG", help: "SHA-256, SHA-384 or SHA-512"),
            OptionSpec(name: "file", value: "PATH", help: "sign this file (at most 512 KiB; hash larger ones)"),
            timeoutOption,
            OptionSpec(name: "pin-fd", value: "N", help: "read PIN2 from file descriptor N"),
            canFDOption,
            desktopOption,
        ]
    ) { invocation throws(CLIError) in
        guard let aud = invocation.value("aud"), !aud.isEmpty else { throw .usage("--aud is required: the origin or app id asking for the signature") }
        guard let description = invocation.value("description"), !description.isEmpty else { throw .usage("--description is required: say what is being signed") }
        var params = CardSign.Params(aud: aud, description: description, timeoutS: try invocation.number("timeout", in: 1...600),
                                     prompt: promptRoute(invocation))
        switch (invocation.value("hash"), invocation.value("file")) {
        case (let digest?, nil):
            let algorithm = invocation.value("hash-alg") ?? "SHA-256"
            params.hashAlg = algorithm
            params.hash = try SignedDigest.base64url(digest, algorithm: algorithm)
        case (nil, let path?):
            params.hashAlg = invocation.value("hash-alg")
            params.data = Base64URL.encode(try SignedDigest.fileContents(path))
        default:
            throw .usage("give either --hash DIGEST or --file PATH")
        }
        let connection = try invocation.connect()
        var prompter = RequestPrompter(invocation: invocation, connection: connection)
        let result = try prompter.runAskingPINAgain(CardSign.self, params)
        if invocation.global.json { Output.json(result) } else { Output.line(result.token) }
        return .ok
    }

    static let cardCANSet = Command(
        path: ["card", "can", "set"], synopsis: "[--can-fd N]",
        abstract: "Save the card's CAN (the 6 digits on its front), sealed, so contactless use does not ask for it.",
        options: [canFDOption]
    ) { invocation throws(CLIError) in
        let can = try Prompt.answer(invocation, fdOption: "can-fd", question: "CAN (6 digits on the card's front): ", secret: true)
        _ = try invocation.connect().call(CardCANSet.self, .init(can: can.trimmingCharacters(in: .whitespaces)))
        if invocation.global.json { Output.json(Acknowledged()) } else { Output.line("CAN saved") }
        return .ok
    }

    static let cardCANShow = Command(
        path: ["card", "can", "show"], synopsis: "",
        abstract: "Print the saved CAN. Exit 1 when none is saved."
    ) { invocation throws(CLIError) in
        let result = try invocation.connect().call(CardCANGet.self, NoParams())
        if invocation.global.json { Output.json(result) }
        guard let can = result.can else {
            if !invocation.global.json { Output.error("authctl: no CAN is saved") }
            return .failure
        }
        if !invocation.global.json { Output.line(can) }
        return .ok
    }

    static let cardCANClear = Command(
        path: ["card", "can", "clear"], synopsis: "",
        abstract: "Forget the saved CAN."
    ) { invocation throws(CLIError) in
        _ = try invocation.connect().call(CardCANClear.self, NoParams())
        if invocation.global.json { Output.json(Acknowledged()) } else { Output.line("CAN forgotten") }
        return .ok
    }

    static let cardPIN1Save = Command(
        path: ["card", "pin1", "save"], synopsis: "[--pin-fd N]",
        abstract: "Save PIN1, sealed, so card logins do not ask for it. PIN2 is never saved.",
        options: [OptionSpec(name: "pin-fd", value: "N", help: "read PIN1 from file descriptor N")]
    ) { invocation throws(CLIError) in
        let pin = try Prompt.newSecret(invocation, fdOption: "pin-fd", question: "PIN1 of the ID card: ", repeatQuestion: "Repeat PIN1: ",
                                       differ: "the PINs differ; nothing was saved")
        _ = try invocation.connect().call(CardPIN1Save.self, .init(pin: pin))
        if invocation.global.json { Output.json(Acknowledged()) } else { Output.line("PIN1 saved") }
        return .ok
    }

    static let cardPIN1Clear = Command(
        path: ["card", "pin1", "clear"], synopsis: "",
        abstract: "Forget the saved PIN1."
    ) { invocation throws(CLIError) in
        _ = try invocation.connect().call(CardPIN1Clear.self, NoParams())
        if invocation.global.json { Output.json(Acknowledged()) } else { Output.line("PIN1 forgotten") }
        return .ok
    }
}

/// The digest and data forms `card sign` accepts.
enum SignedDigest {
    static let lengths = ["SHA-256": 32, "SHA-384": 48, "SHA-512": 64]

    /// Hex (the length tells it apart: never the length of the same digest in base64url) or
    /// base64url, returned as base64url.
    static func base64url(_ digest: String, algorithm: String) throws(CLIError) -> String {
        guard let length = lengths[algorithm] else { throw .usage("--hash-alg must be SHA-256, SHA-384 or SHA-512") }
        let text = digest.trimmingCharacters(in: .whitespaces)
        if text.count == length * 2, !text.contains(" "), let bytes = Hex.decode(text) { return Base64URL.encode(bytes) }
        guard let bytes = Base64URL.decode(text), bytes.count == length else {
            throw .usage("--hash must be a \(algorithm) digest: \(length * 2) hex digits or \(length)-byte base64url")
        }
        return text
    }

    /// The bytes of a file small enough to send whole (a request line is at most 1 MiB, and
    /// base64url makes 4 characters of 3 bytes).
    static func fileContents(_ path: String) throws(CLIError) -> Data {
        let limit = 512 * 1024
        guard let handle = FileHandle(forReadingAtPath: path) else { throw .usage("cannot read \(path)") }
        defer { try? handle.close() }
        let data = (try? handle.read(upToCount: limit + 1)) ?? Data()
        guard data.count <= limit else { throw .usage("\(path) is larger than 512 KiB; pass its digest: --hash \"$(sha256sum \(path) | cut -d' ' -f1)\"") }
        return data
    }
}
