// PAM: pam_authd.so is a client of the system daemon. `pam.authenticate` and `pam.account` are
// what its pam_sm_authenticate and pam_sm_acct_mgmt ask (root callers only); `pam.link.*`,
// `pam.unlink` and `pam.status` keep which ID card or account a Unix user signs in with.

/// Where a PAM request comes from, as the PAM application set it: what the audit log records
/// with every decision.
public struct PAMOrigin: Codable, Sendable, Equatable {
    /// The PAM service name (`sudo`, `login`, `gdm-password`): the `[pam]` policy that applies.
    public var service: String
    /// `PAM_TTY`, when set.
    public var tty: String?
    /// `PAM_RHOST`, when set (a remote login).
    public var rhost: String?
    public init(service: String, tty: String? = nil, rhost: String? = nil) {
        self.service = service; self.tty = tty; self.rhost = rhost
    }
}

/// `pam.authenticate` — verifies the Unix user `user` by the methods the `[pam]` policy allows
/// for `service` and the user has linked (ID card, fingerprint, account), in the policy's order,
/// through prompts on this connection. Root callers only.
public enum PAMAuthenticate: RPCMethod {
    public static let name = "pam.authenticate"
    public struct Params: Codable, Sendable, Equatable {
        public var user: String
        public var service: String
        public var tty: String?
        public var rhost: String?
        public init(user: String, service: String, tty: String? = nil, rhost: String? = nil) {
            self.user = user; self.service = service; self.tty = tty; self.rhost = rhost
        }
        public var origin: PAMOrigin { PAMOrigin(service: service, tty: tty, rhost: rhost) }
    }
    public struct Result: Codable, Sendable, Equatable {
        public var user: String
        /// What proved it: `card`, `fingerprint` or `account` (`fingerprint+pin` when a finger
        /// alone was not enough for the service).
        public var method: String
        public init(user: String, method: String) { self.user = user; self.method = method }
    }
}

/// `pam.account` — whether the Unix user may sign in now: refused with `pam.account_deactivated`
/// when the linked account is deactivated, `account.locked` (with `data.locked_until`) while it
/// is locked. A user with no linked account passes. Root callers only.
public enum PAMAccount: RPCMethod {
    public static let name = "pam.account"
    public typealias Params = PAMAuthenticate.Params
    public struct Result: Codable, Sendable, Equatable {
        public var user: String
        /// The linked account checked, if any.
        public var account: String?
        public init(user: String, account: String?) { self.user = user; self.account = account }
    }
}

/// A Unix user's links as `pam.status` and the link methods report them.
public struct PAMLinks: Codable, Sendable, Equatable {
    public struct Card: Codable, Sendable, Equatable {
        /// The holder's personal code (the certificate subject's serial number, without `PNOEE-`).
        public var personalCode: String
        /// The holder's name as the certificate gives it (`MARI MAASIKAS`).
        public var holder: String
        public init(personalCode: String, holder: String) { self.personalCode = personalCode; self.holder = holder }
        enum CodingKeys: String, CodingKey { case holder, personalCode = "personal_code" }
    }
    public var user: String
    public var card: Card?
    /// The linked account's id.
    public var account: String?
    public init(user: String, card: Card? = nil, account: String? = nil) { self.user = user; self.card = card; self.account = account }
}

/// `pam.link.card` — links the ID card in the reader to a Unix user (the caller's own; another
/// one only for an admin): its holder's personal code, read from the authentication certificate.
public enum PAMLinkCard: RPCMethod {
    public static let name = "pam.link.card"
    public struct Params: Codable, Sendable, Equatable {
        /// The Unix user; the caller's own when absent.
        public var user: String?
        public var timeoutS: Int?
        public init(user: String? = nil, timeoutS: Int? = nil) { self.user = user; self.timeoutS = timeoutS }
        enum CodingKeys: String, CodingKey { case user, timeoutS = "timeout_s" }
    }
    public typealias Result = PAMLinks
}

/// `pam.link.account` — links an account to a Unix user: the account the caller's local user is
/// signed in to, or, for an admin, `account` by id.
public enum PAMLinkAccount: RPCMethod {
    public static let name = "pam.link.account"
    public struct Params: Codable, Sendable, Equatable {
        public var user: String?
        /// Admins only: the account id to link.
        public var account: String?
        public init(user: String? = nil, account: String? = nil) { self.user = user; self.account = account }
    }
    public typealias Result = PAMLinks
}

/// `pam.unlink` — removes a Unix user's card link, account link, or both (`kind` absent).
public enum PAMUnlink: RPCMethod {
    public static let name = "pam.unlink"
    public struct Params: Codable, Sendable, Equatable {
        public var user: String?
        /// `card` or `account`; both when absent.
        public var kind: String?
        public init(user: String? = nil, kind: String? = nil) { self.user = user; self.kind = kind }
    }
    public typealias Result = PAMLinks
}

/// `pam.status` — a Unix user's links.
public enum PAMStatus: RPCMethod {
    public static let name = "pam.status"
    public struct Params: Codable, Sendable, Equatable {
        public var user: String?
        public init(user: String? = nil) { self.user = user }
    }
    public typealias Result = PAMLinks
}
