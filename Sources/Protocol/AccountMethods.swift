// Accounts: registration by phone number with an SMS code, sessions.

/// `account.register.start` — validates the number (libphonenumber) and sends a 6-digit code.
/// Never tells whether the number already has an account (that is learnt only after proving
/// the number with the code).
public enum AccountRegisterStart: RPCMethod {
    public static let name = "account.register.start"

    public struct Params: Codable, Sendable, Equatable {
        /// International (`+372 5123 4567`) or national form with `region`.
        public var phone: String
        /// ISO 3166-1 alpha-2 default region for national forms, e.g. `EE`.
        public var region: String?

        public init(phone: String, region: String? = nil) {
            self.phone = phone
            self.region = region
        }
    }

    public typealias Result = OTPFlowInfo
}

/// `account.register.resend` — a new code for the flow (at most 2 per flow, 5 per number per
/// hour); the previous code stops working.
public enum AccountRegisterResend: RPCMethod {
    public static let name = "account.register.resend"

    public struct Params: Codable, Sendable, Equatable {
        public var flow: String
        public init(flow: String) { self.flow = flow }
    }

    public typealias Result = OTPFlowInfo
}

/// A code was sent: how to continue.
public struct OTPFlowInfo: Codable, Sendable, Equatable {
    public var flow: String
    /// The normalized number the code went to, E.164.
    public var phone: String
    public var codeLength: Int
    /// RFC 3339; after this the code is `otp.expired`.
    public var expiresAt: String
    /// RFC 3339; a resend before this is `otp.too_early`.
    public var resendAfter: String
    public var resendsLeft: Int

    public init(flow: String, phone: String, codeLength: Int, expiresAt: String, resendAfter: String, resendsLeft: Int) {
        self.flow = flow
        self.phone = phone
        self.codeLength = codeLength
        self.expiresAt = expiresAt
        self.resendAfter = resendAfter
        self.resendsLeft = resendsLeft
    }

    enum CodingKeys: String, CodingKey {
        case flow, phone, codeLength = "code_length", expiresAt = "expires_at", resendAfter = "resend_after", resendsLeft = "resends_left"
    }
}

/// The device a session is bound to. Both fields optional: by default the device is this
/// machine (its machine id) and its host name.
public struct DeviceDescription: Codable, Sendable, Equatable {
    /// A stable identifier the client keeps for itself (1–128 printable characters).
    public var key: String?
    /// A human name for device lists (1–128 printable characters).
    public var name: String?

    public init(key: String? = nil, name: String? = nil) {
        self.key = key
        self.name = name
    }
}

/// `account.register.verify` — checks the code; on success creates the account (phone
/// verified, optional email and password) and returns a session at once.
public enum AccountRegisterVerify: RPCMethod {
    public static let name = "account.register.verify"

    public struct Params: Codable, Sendable, Equatable {
        public var flow: String
        public var code: String
        public var email: String?
        public var password: String?
        public var device: DeviceDescription?

        public init(flow: String, code: String, email: String? = nil, password: String? = nil, device: DeviceDescription? = nil) {
            self.flow = flow
            self.code = code
            self.email = email
            self.password = password
            self.device = device
        }
    }

    public typealias Result = SignedIn
}

/// An account and a fresh session.
public struct SignedIn: Codable, Sendable, Equatable {
    public var account: AccountInfo
    public var session: SessionToken

    public init(account: AccountInfo, session: SessionToken) {
        self.account = account
        self.session = session
    }
}

public struct AccountInfo: Codable, Sendable, Equatable {
    public var id: String
    public var phone: String
    public var email: String?
    public var hasPassword: Bool

    public init(id: String, phone: String, email: String?, hasPassword: Bool) {
        self.id = id
        self.phone = phone
        self.email = email
        self.hasPassword = hasPassword
    }

    enum CodingKeys: String, CodingKey { case id, phone, email, hasPassword = "has_password" }
}

/// A session token: shown once, stored by authd only as a hash.
public struct SessionToken: Codable, Sendable, Equatable {
    /// The opaque bearer token (256 bits). Keep it secret.
    public var token: String
    public var id: String
    public var deviceID: String
    /// RFC 3339: the session's maximum lifetime ends here.
    public var expiresAt: String

    public init(token: String, id: String, deviceID: String, expiresAt: String) {
        self.token = token
        self.id = id
        self.deviceID = deviceID
        self.expiresAt = expiresAt
    }

    enum CodingKeys: String, CodingKey { case token, id, deviceID = "device_id", expiresAt = "expires_at" }
}

/// `session.get` — what a session token stands for. Also refreshes its idle timer.
public enum SessionGet: RPCMethod {
    public static let name = "session.get"

    public struct Params: Codable, Sendable, Equatable {
        public var session: String
        public init(session: String) { self.session = session }
    }

    public struct Result: Codable, Sendable, Equatable {
        public var id: String
        public var account: AccountInfo
        public var device: DeviceSummary
        /// Authentication methods used: `otp`, `pwd`, `pin`, …
        public var amr: [String]
        public var createdAt: String
        public var expiresAt: String
        public var idleExpiresAt: String

        public init(id: String, account: AccountInfo, device: DeviceSummary, amr: [String], createdAt: String, expiresAt: String, idleExpiresAt: String) {
            self.id = id
            self.account = account
            self.device = device
            self.amr = amr
            self.createdAt = createdAt
            self.expiresAt = expiresAt
            self.idleExpiresAt = idleExpiresAt
        }

        enum CodingKeys: String, CodingKey {
            case id, account, device, amr, createdAt = "created_at", expiresAt = "expires_at", idleExpiresAt = "idle_expires_at"
        }
    }
}

public struct DeviceSummary: Codable, Sendable, Equatable {
    public var id: String
    public var name: String
    public init(id: String, name: String) {
        self.id = id
        self.name = name
    }
}

/// `auth.logout` — ends the session.
public enum AuthLogout: RPCMethod {
    public static let name = "auth.logout"

    public struct Params: Codable, Sendable, Equatable {
        public var session: String
        public init(session: String) { self.session = session }
    }

    public struct Result: Codable, Sendable, Equatable {
        public var loggedOut: Bool
        public init(loggedOut: Bool) { self.loggedOut = loggedOut }
        enum CodingKeys: String, CodingKey { case loggedOut = "logged_out" }
    }
}
