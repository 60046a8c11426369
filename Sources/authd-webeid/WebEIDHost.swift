import FoundationEssentials
import Protocol

/// The error object Web eID pages receive. The page learns only which of three things happened;
/// why a request failed (a blocked PIN, an unsupported card) concerns the person, not the
/// site, and goes to authd's log and audit. Only the host's own argument checks say more: the
/// page made those arguments itself.
struct WebEIDError: Error, Equatable, Sendable {
    struct Code: Equatable, Sendable {
        let rawValue: String
        static let nativeFatal = Code(rawValue: "ERR_WEBEID_NATIVE_FATAL")
        static let userCancelled = Code(rawValue: "ERR_WEBEID_USER_CANCELLED")
        static let userTimeout = Code(rawValue: "ERR_WEBEID_USER_TIMEOUT")
    }

    let code: Code
    let message: String

    static func invalid(_ why: String) -> WebEIDError { WebEIDError(code: .nativeFatal, message: "Invalid argument: \(why)") }
    static let cancelled = WebEIDError(code: .userCancelled, message: "The user cancelled.")
    static let timedOut = WebEIDError(code: .userTimeout, message: "No ID card was presented in time.")
    static let failed = WebEIDError(code: .nativeFatal, message: "authd could not complete the request.")
    static let authdUnreachable = WebEIDError(code: .nativeFatal, message: "authd is not running.")

    /// The page's error for authd's refusal `reason` (DESIGN §3's stable reasons).
    static func forReason(_ reason: String) -> WebEIDError {
        switch reason {
        case "prompt.cancelled", "user.cancelled", "consent.denied", "request.cancelled": .cancelled
        case "card.timeout", "prompt.timeout": .timedOut
        default: .failed
        }
    }

    var json: JSONValue { ["error": ["code": .string(code.rawValue), "message": .string(message)]] }
}

/// What the host asks authd for one command: always with `prompt: desktop` (the browser owns
/// the host's stdin and stdout, so authd asks the person itself) and the origin as the audience.
enum AuthdCall: Equatable, Sendable {
    case login(CardLogin.Params)
    case certificate(CardCertificate.Params)
    case sign(CardSign.Params, hashFunction: WebEIDCommand.HashFunction)
}

/// authd's answer to an `AuthdCall`.
enum AuthdOutcome: Equatable, Sendable {
    case login(WebEIDToken)
    case certificate(base64DER: String)
    case signature(base64URL: String)
    /// authd refused or failed: its stable reason.
    case refused(reason: String)
    /// No authd to ask, or the connection broke.
    case unreachable
}

/// One run of the Web eID native messaging host, as a value (no I/O): the host speaks first
/// (its version), takes exactly one command, answers it once, and exits. The caller performs
/// each returned `Action` and feeds back what happened.
struct WebEIDHost {
    /// `2.0.0+authd.<version>`: the extension requires major version 2 or more, and compares
    /// majors only; authd's own release rides in the build metadata.
    static let version = "2.0.0+authd.\(AuthdRelease.version)"

    enum State: Equatable {
        case fresh
        case awaitingHeader
        case awaitingBody(length: Int)
        case awaitingAuthd(AuthdCall)
        case finished
    }

    enum Action: Equatable {
        /// Write this frame, then read a 4-byte header.
        case sendThenReadHeader([UInt8])
        /// Read this many bytes of message.
        case readBody(Int)
        /// Ask authd, then feed its answer to `answered`.
        case ask(AuthdCall)
        /// Write this frame (the one reply) and exit.
        case replyAndExit([UInt8])
        /// Exit without a reply (the browser closed our input before any command).
        case exit
    }

    private(set) var state: State = .fresh

    mutating func start() -> Action {
        guard state == .fresh else { return finish() }
        state = .awaitingHeader
        return .sendThenReadHeader(Self.frame(["version": .string(Self.version)]))
    }

    mutating func received(header: [UInt8]) -> Action {
        guard state == .awaitingHeader, header.count == 4 else { return finish() }
        let length = NativeFrame.length(ofHeader: header)
        guard length >= NativeFrame.minimumRequest else { return reply(.invalid("the message is shorter than \(NativeFrame.minimumRequest) bytes")) }
        guard length <= NativeFrame.maximumRequest else { return reply(.invalid("the message is longer than \(NativeFrame.maximumRequest) bytes")) }
        state = .awaitingBody(length: length)
        return .readBody(length)
    }

    mutating func received(body: [UInt8]) -> Action {
        guard case .awaitingBody(let length) = state, body.count == length else { return finish() }
        switch WebEIDCommand.parse(body) {
        case .failure(let error):
            return reply(error)
        case .success(let command):
            guard let call = Self.call(for: command) else { return reply([:]) }
            state = .awaitingAuthd(call)
            return .ask(call)
        }
    }

    mutating func answered(_ outcome: AuthdOutcome) -> Action {
        guard case .awaitingAuthd(let call) = state else { return finish() }
        switch (call, outcome) {
        case (.login, .login(let token)):
            return reply(["unverifiedCertificate": .string(token.unverifiedCertificate), "algorithm": .string(token.algorithm),
                          "signature": .string(token.signature), "format": .string(token.format), "appVersion": .string(token.appVersion)])
        case (.certificate, .certificate(let certificate)):
            let algorithms = WebEIDCommand.HashFunction.allCases.map { function -> JSONValue in
                ["cryptoAlgorithm": "ECC", "hashFunction": .string(function.rawValue), "paddingScheme": "NONE"]
            }
            return reply(["certificate": .string(certificate), "supportedSignatureAlgorithms": .array(algorithms)])
        case (.sign(_, let function), .signature(let signature)):
            guard let raw = Base64URL.decode(signature) else { return reply(.failed) }
            return reply(["signature": .string(Data(raw).base64EncodedString()),
                          "signatureAlgorithm": ["cryptoAlgorithm": "ECC", "hashFunction": .string(function.rawValue), "paddingScheme": "NONE"]])
        case (_, .refused(let reason)):
            return reply(.forReason(reason))
        case (_, .unreachable):
            return reply(.authdUnreachable)
        default:
            return reply(.failed)
        }
    }

    /// Our input ended (the browser disconnected): nothing to answer.
    mutating func inputEnded() -> Action { finish() }

    private mutating func finish() -> Action {
        state = .finished
        return .exit
    }

    private mutating func reply(_ error: WebEIDError) -> Action { reply(error.json) }

    private mutating func reply(_ value: JSONValue) -> Action {
        state = .finished
        var frame = Self.frame(value)
        if frame.count - 4 > NativeFrame.maximumReply { frame = Self.frame(WebEIDError.failed.json) }
        return .replyAndExit(frame)
    }

    static func frame(_ value: JSONValue) -> [UInt8] {
        // A JSONValue always encodes.
        NativeFrame.frame(Array((try? WireCodec.encodeJSON(value)) ?? Data("{}".utf8)))
    }

    /// The authd request for a command (none for `quit`); the document description names the
    /// origin, since Web eID sends none.
    static func call(for command: WebEIDCommand) -> AuthdCall? {
        switch command {
        case .authenticate(let nonce, let origin):
            .login(CardLogin.Params(aud: origin, nonce: nonce, format: "web-eid", prompt: .desktop))
        case .getSigningCertificate(let origin):
            .certificate(CardCertificate.Params(use: "signing", aud: origin, prompt: .desktop))
        case .sign(let hash, let function, let certificate, let origin):
            .sign(CardSign.Params(aud: origin, hash: Base64URL.encode(hash), hashAlg: function.rawValue,
                                  description: "A document from \(origin)", prompt: .desktop,
                                  certificate: Data(certificate).base64EncodedString()), hashFunction: function)
        case .quit:
            nil
        }
    }
}
