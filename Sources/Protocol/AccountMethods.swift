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

    private enum CodingKeys: String, CodingKey, CaseIterable { case key, name }

    /// Unknown members are refused, as they are at the top level of params.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: AnyCodingKey.self)
        for member in container.allKeys where CodingKeys(rawValue: member.stringValue) == nil {
            throw DecodingError.dataCorruptedError(forKey: member, in: container, debugDescription: "unknown member")
        }
        let known = try decoder.container(keyedBy: CodingKeys.self)
        key = try known.decodeIfPresent(String.self, forKey: .key)
        name = try known.decodeIfPresent(String.self, forKey: .name)
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
    public var phone: String?
    public var email: String?
    public var hasPassword: Bool

    public init(id: String, phone: String?, email: String?, hasPassword: Bool) {
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

    enum CodingKeys: String, CodingKey { case id, name }
}

// `session.get` answers every check of a session (and a hub every device's): it writes its own
// members (as a token's result does); `encode(to:)` stays the reference.

extension SessionGet.Result: CompactJSON.Writable {
    public func write(to object: inout CompactJSON.Object) {
        object.member(CodingKeys.account, account)
        object.member(CodingKeys.amr, amr)
        object.member(CodingKeys.createdAt, createdAt)
        object.member(CodingKeys.device, device)
        object.member(CodingKeys.expiresAt, expiresAt)
        object.member(CodingKeys.id, id)
        object.member(CodingKeys.idleExpiresAt, idleExpiresAt)
    }
}

extension AccountInfo: CompactJSON.Writable {
    public func write(to object: inout CompactJSON.Object) {
        object.member(CodingKeys.email, email)
        object.member(CodingKeys.hasPassword, hasPassword)
        object.member(CodingKeys.id, id)
        object.member(CodingKeys.phone, phone)
    }
}

extension DeviceSummary: CompactJSON.Writable {
    public func write(to object: inout CompactJSON.Object) {
        object.member(CodingKeys.id, id)
        object.member(CodingKeys.name, name)
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
        /// The id of the session that ended.
        public var session: String
        public init(loggedOut: Bool, session: String) {
            self.loggedOut = loggedOut
            self.session = session
        }
        enum CodingKeys: String, CodingKey { case loggedOut = "logged_out", session }
    }
}

/// `auth.login` — password sign-in by phone number or email. Unknown account, wrong
/// password and deactivated account all answer `auth.failed` (no account enumeration);
/// `account.locked` (with `data.locked_until`) is the one reason told after repeated failures.
public enum AuthLogin: RPCMethod {
    public static let name = "auth.login"

    public struct Params: Codable, Sendable, Equatable {
        /// A phone number (international, or national with `region`) or an email address.
        public var login: String
        public var password: String
        public var region: String?
        public var device: DeviceDescription?

        public init(login: String, password: String, region: String? = nil, device: DeviceDescription? = nil) {
            self.login = login
            self.password = password
            self.region = region
            self.device = device
        }
    }

    public typealias Result = LoginStep
}

/// A sign-in step: either done (`account` and `session`), or a second factor is needed
/// (`flow` and `next`, e.g. `"pin"` → `auth.login.pin`).
public struct LoginStep: Codable, Sendable, Equatable {
    public var account: AccountInfo?
    public var session: SessionToken?
    public var flow: String?
    public var next: String?

    public init(account: AccountInfo? = nil, session: SessionToken? = nil, flow: String? = nil, next: String? = nil) {
        self.account = account
        self.session = session
        self.flow = flow
        self.next = next
    }
}

/// `auth.login.pin` — the PIN step of a sign-in. Wrong and missing PINs answer `auth.failed`;
/// 5 in a row lock (`account.locked`), 100 in total switch the factor off until re-enrolment
/// after an SMS code.
public enum AuthLoginPIN: RPCMethod {
    public static let name = "auth.login.pin"

    public struct Params: Codable, Sendable, Equatable {
        public var flow: String
        /// Absent or empty answers `auth.failed`, like a wrong PIN.
        public var pin: String?
        public init(flow: String, pin: String?) {
            self.flow = flow
            self.pin = pin
        }
    }

    public typealias Result = SignedIn
}

/// `twofactor.pin.enable` — a 6-digit PIN as second factor. Needs a session authenticated in
/// the last 10 minutes (`auth.reauth_required`), and after the factor was switched off for too
/// many wrong PINs, one that proved the phone with a code (`otp` in its `amr`).
public enum TwoFactorPINEnable: RPCMethod {
    public static let name = "twofactor.pin.enable"

    public struct Params: Codable, Sendable, Equatable {
        public var session: String
        public var pin: String
        public var confirm: String
        public init(session: String, pin: String, confirm: String) {
            self.session = session
            self.pin = pin
            self.confirm = confirm
        }
    }

    public struct Result: Codable, Sendable, Equatable {
        public var enabled: Bool
        public init(enabled: Bool) { self.enabled = enabled }
    }
}

/// `twofactor.pin.disable` — switches the PIN factor off; needs the password and the PIN.
public enum TwoFactorPINDisable: RPCMethod {
    public static let name = "twofactor.pin.disable"

    public struct Params: Codable, Sendable, Equatable {
        public var session: String
        public var password: String
        public var pin: String
        public init(session: String, password: String, pin: String) {
            self.session = session
            self.password = password
            self.pin = pin
        }
    }

    public typealias Result = TwoFactorPINEnable.Result
}

/// `account.profile.set` — sets the email and/or password of the session's account. Changing
/// an existing password needs `current_password`.
public enum AccountProfileSet: RPCMethod {
    public static let name = "account.profile.set"

    public struct Params: Codable, Sendable, Equatable {
        public var session: String
        public var email: String?
        public var password: String?
        public var currentPassword: String?

        public init(session: String, email: String? = nil, password: String? = nil, currentPassword: String? = nil) {
            self.session = session
            self.email = email
            self.password = password
            self.currentPassword = currentPassword
        }

        enum CodingKeys: String, CodingKey { case session, email, password, currentPassword = "current_password" }
    }

    public typealias Result = AccountInfo
}

/// `account.password.check` — checks without changing anything, before a person types a new
/// password twice: `current_password` against the session account's password (a wrong one
/// counts toward the lockout, as at sign-in), and `password` against the password policy for
/// this account (`password.weak` with `data.rule`). Says whether the account has a password,
/// so a client knows whether to set one or to change it.
public enum AccountPasswordCheck: RPCMethod {
    public static let name = "account.password.check"

    public struct Params: Codable, Sendable, Equatable {
        public var session: String
        public var password: String?
        public var currentPassword: String?

        public init(session: String, password: String? = nil, currentPassword: String? = nil) {
            self.session = session
            self.password = password
            self.currentPassword = currentPassword
        }

        enum CodingKeys: String, CodingKey { case session, password, currentPassword = "current_password" }
    }

    public struct Result: Codable, Sendable, Equatable {
        public var hasPassword: Bool
        public init(hasPassword: Bool) { self.hasPassword = hasPassword }
        enum CodingKeys: String, CodingKey { case hasPassword = "has_password" }
    }
}

/// Params of methods that act on the caller's session only.
public struct SessionParams: Codable, Sendable, Equatable {
    public var session: String
    public init(session: String) { self.session = session }
}

/// Params of methods that act on one item of the session's account.
public struct SessionItemParams: Codable, Sendable, Equatable {
    public var session: String
    public var id: String
    public init(session: String, id: String) {
        self.session = session
        self.id = id
    }
}

/// `session.list` — the account's live sessions.
public enum SessionList: RPCMethod {
    public static let name = "session.list"
    public typealias Params = SessionParams

    public struct Result: Codable, Sendable, Equatable {
        public var sessions: [SessionSummary]
        public init(sessions: [SessionSummary]) { self.sessions = sessions }
    }
}

public struct SessionSummary: Codable, Sendable, Equatable {
    public var id: String
    public var deviceID: String
    public var amr: [String]
    public var createdAt: String
    public var lastUsedAt: String
    public var expiresAt: String
    /// True for the session that made this call.
    public var current: Bool

    public init(id: String, deviceID: String, amr: [String], createdAt: String, lastUsedAt: String, expiresAt: String, current: Bool) {
        self.id = id
        self.deviceID = deviceID
        self.amr = amr
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
        self.expiresAt = expiresAt
        self.current = current
    }

    enum CodingKeys: String, CodingKey {
        case id, deviceID = "device_id", amr, createdAt = "created_at", lastUsedAt = "last_used_at", expiresAt = "expires_at", current
    }
}

/// `session.revoke` — ends one of the account's sessions.
public enum SessionRevoke: RPCMethod {
    public static let name = "session.revoke"
    public typealias Params = SessionItemParams

    public struct Result: Codable, Sendable, Equatable {
        public var revoked: Bool
        public init(revoked: Bool) { self.revoked = revoked }
    }
}

/// `device.list` — the account's devices (each active one counts against the device limit).
public enum DeviceList: RPCMethod {
    public static let name = "device.list"
    public typealias Params = SessionParams

    public struct Result: Codable, Sendable, Equatable {
        public var devices: [DeviceRecord]
        public var limit: Int
        public init(devices: [DeviceRecord], limit: Int) {
            self.devices = devices
            self.limit = limit
        }
    }
}

public struct DeviceRecord: Codable, Sendable, Equatable {
    public var id: String
    public var name: String
    public var firstSeen: String
    public var lastSeen: String
    public var current: Bool
    /// For a machine linked to the hub: its device id, as `authctl device id` prints it there.
    public var deviceID: String?

    public init(id: String, name: String, firstSeen: String, lastSeen: String, current: Bool, deviceID: String? = nil) {
        self.id = id
        self.name = name
        self.firstSeen = firstSeen
        self.lastSeen = lastSeen
        self.current = current
        self.deviceID = deviceID
    }

    enum CodingKeys: String, CodingKey { case id, name, firstSeen = "first_seen", lastSeen = "last_seen", current, deviceID = "device_id" }
}

/// `device.revoke` — removes a device and ends all its sessions (freeing a place under the limit).
public enum DeviceRevoke: RPCMethod {
    public static let name = "device.revoke"
    public typealias Params = SessionItemParams
    public typealias Result = SessionRevoke.Result
}

/// `auth.token` — a daemon-signed JWT for the session's account: `sub` = account id, `amr`,
/// `phone_number_verified`, `azp` = the caller.
public enum AuthToken: RPCMethod {
    public static let name = "auth.token"

    public struct Params: Codable, Sendable, Equatable {
        public var session: String
        public var aud: String
        public var nonce: String?
        /// `desktop`: the person is asked on their desktop whether this program may have the
        /// token (consent, DESIGN §12); `client` (default) asks nothing.
        public var prompt: PromptRoute?

        public init(session: String, aud: String, nonce: String? = nil, prompt: PromptRoute? = nil) {
            self.session = session
            self.aud = aud
            self.nonce = nonce
            self.prompt = prompt
        }
    }

    public typealias Result = IssuedToken
}

/// `auth.otp.start` — sign in with a code sent by SMS. Answers the same whether or not the
/// number has an account (no enumeration): a number without one simply never gets a code.
public enum AuthOTPStart: RPCMethod {
    public static let name = "auth.otp.start"
    /// The same as registration's: `phone` and the optional `region`.
    public typealias Params = AccountRegisterStart.Params
    public typealias Result = OTPFlowInfo
}

/// `auth.otp.verify` — completes an OTP sign-in (`amr` `otp`). After a wrong code a new one
/// is sent at once (`data.new_code_sent`), at most twice; the next wrong code ends the flow.
public enum AuthOTPVerify: RPCMethod {
    public static let name = "auth.otp.verify"

    public struct Params: Codable, Sendable, Equatable {
        public var flow: String
        public var code: String
        public var device: DeviceDescription?
        public init(flow: String, code: String, device: DeviceDescription? = nil) {
            self.flow = flow
            self.code = code
            self.device = device
        }
    }

    public typealias Result = SignedIn
}

/// `account.deactivate` — ends every session and device of the account for good; it can
/// never sign in again (its record stays, for audit). Needs the password or the PIN.
public enum AccountDeactivate: RPCMethod {
    public static let name = "account.deactivate"

    public struct Params: Codable, Sendable, Equatable {
        public var session: String
        public var password: String?
        public var pin: String?
        public init(session: String, password: String? = nil, pin: String? = nil) {
            self.session = session
            self.password = password
            self.pin = pin
        }
    }

    public struct Result: Codable, Sendable, Equatable {
        public var deactivated: Bool
        public init(deactivated: Bool) { self.deactivated = deactivated }
    }
}

/// An account as admins see it.
public struct AccountRecord: Codable, Sendable, Equatable {
    public var id: String
    public var phone: String?
    public var email: String?
    public var createdAt: String
    public var deactivatedAt: String?
    public var lockedUntil: String?
    public var hasPassword: Bool
    public var hasPIN: Bool
    /// True when the PIN second factor was switched off after too many wrong PINs (absent
    /// otherwise): the password alone signs in nowhere until a sign-in with an SMS code sets a
    /// new PIN.
    public var pinSwitchedOff: Bool?
    public var activeDevices: Int
    /// The account's own device limit and policy, when set (else the `[accounts]` settings apply).
    public var deviceLimit: Int?
    public var devicePolicy: String?
    /// Whether its messages and notifications are end-to-end encrypted between its devices.
    public var e2ee: E2EEMode?

    public init(id: String, phone: String?, email: String?, createdAt: String, deactivatedAt: String?, lockedUntil: String?,
                hasPassword: Bool, hasPIN: Bool, pinSwitchedOff: Bool? = nil, activeDevices: Int, deviceLimit: Int? = nil, devicePolicy: String? = nil,
                e2ee: E2EEMode? = nil) {
        self.e2ee = e2ee
        self.pinSwitchedOff = pinSwitchedOff
        self.deviceLimit = deviceLimit
        self.devicePolicy = devicePolicy
        self.id = id
        self.phone = phone
        self.email = email
        self.createdAt = createdAt
        self.deactivatedAt = deactivatedAt
        self.lockedUntil = lockedUntil
        self.hasPassword = hasPassword
        self.hasPIN = hasPIN
        self.activeDevices = activeDevices
    }

    enum CodingKeys: String, CodingKey {
        case id, phone, email, createdAt = "created_at", deactivatedAt = "deactivated_at", lockedUntil = "locked_until"
        case hasPassword = "has_password", hasPIN = "has_pin", pinSwitchedOff = "pin_switched_off", activeDevices = "active_devices"
        case deviceLimit = "device_limit", devicePolicy = "device_policy", e2ee
    }
}

/// `admin.accounts.list` — accounts, newest first.
public enum AdminAccountsList: RPCMethod {
    public static let name = "admin.accounts.list"

    public struct Params: Codable, Sendable, Equatable {
        /// 1…1000, default 100.
        public var limit: Int?
        public init(limit: Int? = nil) { self.limit = limit }
    }

    public struct Result: Codable, Sendable, Equatable {
        public var accounts: [AccountRecord]
        public init(accounts: [AccountRecord]) { self.accounts = accounts }
    }
}

/// Params naming one account (by id, phone or email).
public struct AccountSelector: Codable, Sendable, Equatable {
    public var account: String
    public init(account: String) { self.account = account }
}

/// `admin.accounts.show` — one account.
public enum AdminAccountsShow: RPCMethod {
    public static let name = "admin.accounts.show"
    public typealias Params = AccountSelector
    public typealias Result = AccountRecord
}

/// `admin.accounts.unlock` — lifts password and PIN locks and resets their failure counts.
public enum AdminAccountsUnlock: RPCMethod {
    public static let name = "admin.accounts.unlock"
    public typealias Params = AccountSelector
    public typealias Result = AccountRecord
}

/// `admin.accounts.deactivate` — as `account.deactivate`, by an admin.
public enum AdminAccountsDeactivate: RPCMethod {
    public static let name = "admin.accounts.deactivate"
    public typealias Params = AccountSelector
    public typealias Result = AccountRecord
}

/// `admin.accounts.set` — the account's own device limit and policy (`deny` or
/// `replace_oldest`); `null` or absent returns a field to the `[accounts]` setting.
public enum AdminAccountsSet: RPCMethod {
    public static let name = "admin.accounts.set"

    public struct Params: Codable, Sendable, Equatable {
        public var account: String
        public var deviceLimit: Int?
        public var devicePolicy: String?

        public init(account: String, deviceLimit: Int? = nil, devicePolicy: String? = nil) {
            self.account = account
            self.deviceLimit = deviceLimit
            self.devicePolicy = devicePolicy
        }

        enum CodingKeys: String, CodingKey { case account, deviceLimit = "device_limit", devicePolicy = "device_policy" }
    }

    public typealias Result = AccountRecord
}
