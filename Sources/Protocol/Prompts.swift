// Prompts (DESIGN §3, like gpg-agent's loopback pinentry): when a request needs the user, authd
// sends a `prompt` notification on the same connection, and the client answers it.

/// What a `prompt` asks for. Programs match on these names; a kind, once shipped, keeps its
/// meaning, and a client meets kinds it does not know by showing the message.
public struct PromptKind: OpenName {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    // Secrets, answered with `prompt.answer`.
    /// The ID card's PIN1 (authentication).
    public static let pin1 = PromptKind(rawValue: "pin1")
    /// The ID card's PIN2 (signature).
    public static let pin2 = PromptKind(rawValue: "pin2")
    /// The contactless card's CAN (6 digits on its front).
    public static let can = PromptKind(rawValue: "can")
    /// The account's 6-digit PIN second factor.
    public static let pin = PromptKind(rawValue: "pin")
    /// The account's password.
    public static let password = PromptKind(rawValue: "password")
    /// A 6-digit one-time code authd just sent by SMS to the account's number (`unlock`).
    public static let code = PromptKind(rawValue: "code")

    // Progress, which only `prompt.cancel` answers.
    /// Present the ID card (`seconds_left`).
    public static let card = PromptKind(rawValue: "card")
    /// Touch the fingerprint reader (`seconds_left`).
    public static let fingerprint = PromptKind(rawValue: "fingerprint")
    /// Open `url` in a browser to sign in with a provider.
    public static let browser = PromptKind(rawValue: "browser")
    /// Open `url` on any device and type `user_code` there.
    public static let deviceCode = PromptKind(rawValue: "device_code")
    /// The person's desktop asks whether this program may have the token (`prompt: desktop`).
    public static let consent = PromptKind(rawValue: "consent")
}

/// `prompt` — authd needs the user: a secret answered with `prompt.answer`, or progress (the card,
/// a finger, a browser) that only `prompt.cancel` answers; `kind` says which.
public enum PromptNotification: RPCNotification {
    public static let name = "prompt"
    public struct Params: Codable, Sendable, Equatable {
        public var promptId: String
        public var kind: PromptKind
        public var message: String
        /// Whether `prompt.answer` is expected (false for progress such as "present your card").
        public var expectsAnswer: Bool
        public var secondsLeft: Int?
        public var retriesLeft: Int?
        /// Kinds `browser` and `device_code`: the address the user opens.
        public var url: String?
        /// Kind `device_code`: what the user types at `url`.
        public var userCode: String?
        public init(promptId: String, kind: PromptKind, message: String, expectsAnswer: Bool, secondsLeft: Int? = nil, retriesLeft: Int? = nil,
                    url: String? = nil, userCode: String? = nil) {
            self.promptId = promptId; self.kind = kind; self.message = message; self.expectsAnswer = expectsAnswer
            self.secondsLeft = secondsLeft; self.retriesLeft = retriesLeft; self.url = url; self.userCode = userCode
        }
        enum CodingKeys: String, CodingKey {
            case kind, message, url
            case promptId = "prompt_id", expectsAnswer = "expects_answer", secondsLeft = "seconds_left", retriesLeft = "retries_left"
            case userCode = "user_code"
        }
    }
}

/// `prompt.answer` — answers a prompt raised on this connection.
public enum PromptAnswer: RPCMethod {
    public static let name = "prompt.answer"
    public struct Params: Codable, Sendable, Equatable {
        public var promptId: String
        public var value: String
        public init(promptId: String, value: String) { self.promptId = promptId; self.value = value }
        enum CodingKeys: String, CodingKey { case value, promptId = "prompt_id" }
    }
    public typealias Result = Acknowledged
}

/// `prompt.cancel` — the user declined: the waiting request ends with `user.cancelled`.
public enum PromptCancel: RPCMethod {
    public static let name = "prompt.cancel"
    public struct Params: Codable, Sendable, Equatable {
        public var promptId: String
        public init(promptId: String) { self.promptId = promptId }
        enum CodingKeys: String, CodingKey { case promptId = "prompt_id" }
    }
    public typealias Result = Acknowledged
}

