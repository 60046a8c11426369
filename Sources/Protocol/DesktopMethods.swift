// Desktop prompts (DESIGN §12, the intent model): a request may have authd ask the person itself,
// through pinentry on their desktop, instead of the asking program. A system authd reaches a
// person's desktop through their agent (`authd --desktop`), which registers for their prompts.

/// Who asks the person for what a request needs: the asking program on its own connection
/// (`client`, the loopback of gpg-agent; the default) or authd through pinentry on the person's
/// desktop (`desktop`), in which case no secret crosses the asking program's connection.
public enum PromptRoute: String, Codable, Sendable, CaseIterable {
    case client, desktop
}

/// What a desktop dialog asks, as authd hands it to the agent that shows it. Every text is
/// already worded and escaped by authd; the agent shows it as it is.
public struct DesktopDialog: Codable, Sendable, Equatable {
    /// `secret` (a PIN, CAN, password or code: pinentry's GETPIN) or `confirm` (pinentry's CONFIRM).
    public var question: String
    public var title: String
    public var description: String
    /// The label before the entry field (`secret`).
    public var prompt: String?
    /// What went wrong the last time ("Wrong PIN1: 2 tries left"), shown above the entry.
    public var error: String?
    /// The buttons of a `confirm`: `ok`, an optional `not_ok`, and `cancel`.
    public var ok: String?
    public var notOk: String?
    public var cancel: String?
    /// How long the dialog stays open.
    public var timeoutS: Int?

    public init(question: String, title: String, description: String, prompt: String? = nil, error: String? = nil,
                ok: String? = nil, notOk: String? = nil, cancel: String? = nil, timeoutS: Int? = nil) {
        self.question = question; self.title = title; self.description = description; self.prompt = prompt; self.error = error
        self.ok = ok; self.notOk = notOk; self.cancel = cancel; self.timeoutS = timeoutS
    }
    enum CodingKeys: String, CodingKey {
        case question, title, description, prompt, error, ok, cancel
        case notOk = "not_ok", timeoutS = "timeout_s"
    }
}

/// `desktop.register` — the calling user's desktop agent offers to show that user's desktop
/// prompts. The response acknowledges; `desktop.ask`, `desktop.withdraw` and `desktop.show`
/// notifications follow on this connection until it closes. A later registration of the same
/// user replaces an earlier one.
public enum DesktopRegister: RPCMethod {
    public static let name = "desktop.register"
    public typealias Params = NoParams
    public struct Result: Codable, Sendable, Equatable {
        public var subscription: String
        /// authd's `[prompts] pinentry`, when set: the program the agent runs unless told another.
        public var pinentry: String?
        /// What names this registration in `desktop.forward`: only the agent knows it.
        public var agentToken: String
        public init(subscription: String, pinentry: String? = nil, agentToken: String) {
            self.subscription = subscription; self.pinentry = pinentry; self.agentToken = agentToken
        }
        enum CodingKeys: String, CodingKey { case subscription, pinentry, agentToken = "agent_token" }
    }
}

/// A program as the agent reads it from /proc for authd (`desktop.identified`), when authd
/// cannot read another user's processes itself (a system authd).
public struct DesktopProgram: Codable, Sendable, Equatable {
    /// `executable`, `flatpak` or `snap`.
    public var kind: String
    /// The executable's path, the Flatpak application id or the snap name.
    public var name: String
    public var executable: String?
    public init(kind: String, name: String, executable: String?) { self.kind = kind; self.name = name; self.executable = executable }
}

/// `desktop.identify` — authd asks the agent who process `pid` (of the agent's user) is; the
/// agent answers with `desktop.identified`.
public enum DesktopIdentify: RPCNotification {
    public static let name = "desktop.identify"
    public struct Params: Codable, Sendable, Equatable {
        public var subscription: String
        public var askId: String
        public var pid: Int32
        public init(subscription: String, askId: String, pid: Int32) { self.subscription = subscription; self.askId = askId; self.pid = pid }
        enum CodingKeys: String, CodingKey { case subscription, pid, askId = "ask_id" }
    }
}

/// `desktop.identified` — the agent's answer to `desktop.identify`: the program, or none when
/// the process is gone or not of the agent's user.
public enum DesktopIdentified: RPCMethod {
    public static let name = "desktop.identified"
    public struct Params: Codable, Sendable, Equatable {
        public var askId: String
        public var program: DesktopProgram?
        public init(askId: String, program: DesktopProgram?) { self.askId = askId; self.program = program }
        enum CodingKeys: String, CodingKey { case program, askId = "ask_id" }
    }
    public typealias Result = Acknowledged
}

/// `desktop.ask` — show `dialog` and answer with `desktop.reply` for `ask_id`.
public enum DesktopAsk: RPCNotification {
    public static let name = "desktop.ask"
    public struct Params: Codable, Sendable, Equatable {
        public var subscription: String
        public var askId: String
        public var dialog: DesktopDialog
        public init(subscription: String, askId: String, dialog: DesktopDialog) {
            self.subscription = subscription; self.askId = askId; self.dialog = dialog
        }
        enum CodingKeys: String, CodingKey { case subscription, dialog, askId = "ask_id" }
    }
}

/// `desktop.withdraw` — the request behind `ask_id` ended (the asking program left, the card
/// window closed): close its dialog; a reply to it is no longer heard.
public enum DesktopWithdraw: RPCNotification {
    public static let name = "desktop.withdraw"
    public struct Params: Codable, Sendable, Equatable {
        public var subscription: String
        public var askId: String
        public init(subscription: String, askId: String) { self.subscription = subscription; self.askId = askId }
        enum CodingKeys: String, CodingKey { case subscription, askId = "ask_id" }
    }
}

/// `desktop.show` — progress of a desktop-prompted request (present the card, touch the
/// reader), shown as a desktop notification; `done` closes it.
public enum DesktopShow: RPCNotification {
    public static let name = "desktop.show"
    public struct Params: Codable, Sendable, Equatable {
        public var subscription: String
        /// Identifies the notification across updates.
        public var showId: String
        public var kind: PromptKind
        public var title: String
        public var message: String
        public var done: Bool
        public init(subscription: String, showId: String, kind: PromptKind, title: String, message: String, done: Bool) {
            self.subscription = subscription; self.showId = showId; self.kind = kind; self.title = title; self.message = message; self.done = done
        }
        enum CodingKeys: String, CodingKey { case subscription, kind, title, message, done, showId = "show_id" }
    }
}

/// How the person answered a desktop dialog.
public enum DesktopAnswer: String, Codable, Sendable {
    /// `value` holds what they typed.
    case secret
    /// `confirm`: the `ok` button, or the `not_ok` one.
    case ok, notOk = "not_ok"
    /// They closed or cancelled the dialog.
    case cancelled
    /// The dialog's timeout passed.
    case timedOut = "timed_out"
    /// The agent could not show it (no pinentry, no display).
    case unavailable
}

/// `desktop.reply` — the agent's answer to one of its `desktop.ask`s, on the connection that
/// registered. Only that connection may answer them.
public enum DesktopReply: RPCMethod {
    public static let name = "desktop.reply"
    public struct Params: Codable, Sendable, Equatable {
        public var askId: String
        public var answer: DesktopAnswer
        /// `answer: secret`: the secret.
        public var value: String?
        public init(askId: String, answer: DesktopAnswer, value: String? = nil) { self.askId = askId; self.answer = answer; self.value = value }
        enum CodingKeys: String, CodingKey { case answer, value, askId = "ask_id" }
    }
    public typealias Result = Acknowledged
}

/// `desktop.forward` — the desktop agent passes on a request a program made on the session bus,
/// for that program (`pid`, as the bus vouches for it): authd reads who it is itself, asks on the
/// desktop (`prompt: desktop` is implied) and applies the same consent. Only authd's own agent, of
/// the same user as the program, may call it (with its registration's `agent_token`); only
/// `card.login`, `card.sign` and `auth.token`.
public enum DesktopForward: RPCMethod {
    public static let name = "desktop.forward"
    public struct Params: Codable, Sendable, Equatable {
        /// `desktop.register`'s `agent_token`: that the caller is the user's registered agent.
        public var agentToken: String
        public var pid: Int32
        public var method: String
        public var params: JSONValue?
        public init(agentToken: String, pid: Int32, method: String, params: JSONValue?) {
            self.agentToken = agentToken; self.pid = pid; self.method = method; self.params = params
        }
        enum CodingKeys: String, CodingKey { case pid, method, params, agentToken = "agent_token" }
    }
    public typealias Result = JSONValue
}

/// What a consent lets a program have, as the consent question words it. "Always allow" is
/// remembered for one purpose: a program allowed to ask for a signature (PIN2 asked every time)
/// is asked again before it gets an account token (no secret asked) for the same audience.
public enum ConsentPurpose: String, Codable, Sendable, CaseIterable {
    /// `card.login`: a login token the ID card signs.
    case cardLogin = "card_login"
    /// `card.sign`: a signature of the ID card.
    case cardSign = "card_sign"
    /// `card.certificate`: one of the ID card's certificates.
    case cardCertificate = "card_certificate"
    /// `auth.token`: a token of the account.
    case accountToken = "account_token"
}

/// A remembered "allow": this local user let `program` have what `purpose` names for `audience`.
public struct Consent: Codable, Sendable, Equatable {
    /// `exe:/usr/bin/foo`, `flatpak:org.example.App` or `snap:name`.
    public var program: String
    public var purpose: ConsentPurpose
    public var audience: String
    /// Unix seconds.
    public var grantedAt: Int64
    public init(program: String, purpose: ConsentPurpose, audience: String, grantedAt: Int64) {
        self.program = program; self.purpose = purpose; self.audience = audience; self.grantedAt = grantedAt
    }
    enum CodingKeys: String, CodingKey { case program, purpose, audience, grantedAt = "granted_at" }
}

/// `consents.list` — the calling user's remembered consents.
public enum ConsentsList: RPCMethod {
    public static let name = "consents.list"
    public typealias Params = NoParams
    public struct Result: Codable, Sendable, Equatable {
        public var consents: [Consent]
        public init(consents: [Consent]) { self.consents = consents }
    }
}

/// `consents.revoke` — forgets the calling user's consents of `program`, for `purpose` and
/// `audience` (every purpose, every audience, when absent); `consent.unknown` when none matched.
public enum ConsentsRevoke: RPCMethod {
    public static let name = "consents.revoke"
    public struct Params: Codable, Sendable, Equatable {
        public var program: String
        public var purpose: ConsentPurpose?
        public var audience: String?
        public init(program: String, purpose: ConsentPurpose? = nil, audience: String? = nil) {
            self.program = program; self.purpose = purpose; self.audience = audience
        }
    }
    public struct Result: Codable, Sendable, Equatable {
        public var revoked: Int
        public init(revoked: Int) { self.revoked = revoked }
    }
}
