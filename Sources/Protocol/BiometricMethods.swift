// Lock and unlock, fingerprints through fprintd, fast-forward login.

/// `lock` — locks authd for the calling local user: until `unlock`, every method that issues a
/// token or releases a secret answers `session.locked`. Needs a remembered account (one that
/// signed in from this user, `lock.no_account`) that can open the lock again: one with a
/// password or a verified phone number to send a code to (`lock.no_unlock_method`).
public enum Lock: RPCMethod {
    public static let name = "lock"
    public typealias Params = NoParams
    public typealias Result = LockState
}

/// `unlock` — with `password`: checks it against the remembered account. With `sms`: sends a
/// code to the account's verified number and asks for it (`code` prompt). Without either,
/// authd asks in this order: a finger when fingerprint unlock is on and a reader is there; then
/// the password (`password` prompt) when the account has one, else a code sent by SMS; the
/// finger falls back when it fails, is unavailable or the user cancels it.
public enum Unlock: RPCMethod {
    public static let name = "unlock"
    public struct Params: Codable, Sendable, Equatable {
        public var password: String?
        /// Unlock with a code sent by SMS to the account's number, even when it has a password.
        public var sms: Bool?
        /// Who asks for the password or code: `client` (default) or `desktop` (DESIGN §12).
        public var prompt: PromptRoute?
        public init(password: String? = nil, sms: Bool? = nil, prompt: PromptRoute? = nil) {
            self.password = password
            self.sms = sms
            self.prompt = prompt
        }
    }
    public typealias Result = LockState
}

/// `unlock.biometric` — one fingerprint attempt, no fallback (the caller offers its own).
public enum UnlockBiometric: RPCMethod {
    public static let name = "unlock.biometric"
    public typealias Params = NoParams
    public typealias Result = LockState
}

public struct LockState: Codable, Sendable, Equatable {
    public var locked: Bool
    /// How the last unlock was proved: `password`, `fingerprint` or `sms`; absent for `lock`.
    public var method: String?
    /// The remembered account, if any.
    public var account: String?
    public init(locked: Bool, method: String? = nil, account: String? = nil) {
        self.locked = locked
        self.method = method
        self.account = account
    }
}

/// `lock.status` — whether the caller is locked, by which account, and what opens the lock.
public enum LockStatus: RPCMethod {
    public static let name = "lock.status"
    public typealias Params = NoParams
    public struct Result: Codable, Sendable, Equatable {
        public var locked: Bool
        public var account: String?
        /// Seconds of inactivity before authd locks by itself; 0 = never.
        public var idleSeconds: Int
        /// What `unlock` can take, in the order it asks: `fingerprint`, `password`, `sms`.
        /// Empty when nothing could open the lock: `lock` is refused and the idle lock does
        /// not arm.
        public var unlockMethods: [String]
        public init(locked: Bool, account: String?, idleSeconds: Int, unlockMethods: [String] = []) {
            self.locked = locked
            self.account = account
            self.idleSeconds = idleSeconds
            self.unlockMethods = unlockMethods
        }
        enum CodingKeys: String, CodingKey { case locked, account, idleSeconds = "idle_seconds", unlockMethods = "unlock_methods" }
    }
}

/// `biometric.status` — the caller's fingerprint settings and the reader as fprintd sees it.
public enum BiometricStatus: RPCMethod {
    public static let name = "biometric.status"
    public typealias Params = NoParams
    public struct Result: Codable, Sendable, Equatable {
        /// Fingerprint unlock and fast-forward login are on.
        public var enabled: Bool
        /// A reader is there and the user has an enrolled finger.
        public var available: Bool
        /// Why not, when `available` is false.
        public var unavailableReason: String?
        public var reader: String?
        public var fingers: [String]
        /// Consecutive fingers that did not match; at 5 every fingerprint use is off until an unlock by password or SMS code.
        public var failures: Int
        public var cutOff: Bool
        /// The ID card's saved PIN1 released by fingerprint: `off`, `on` or `suspended`.
        public var cardPin1: String

        public init(enabled: Bool, available: Bool, unavailableReason: String?, reader: String?, fingers: [String], failures: Int,
                    cutOff: Bool, cardPin1: String) {
            self.enabled = enabled
            self.available = available
            self.unavailableReason = unavailableReason
            self.reader = reader
            self.fingers = fingers
            self.failures = failures
            self.cutOff = cutOff
            self.cardPin1 = cardPin1
        }
        enum CodingKeys: String, CodingKey {
            case enabled, available, reader, fingers, failures
            case unavailableReason = "unavailable_reason", cutOff = "cut_off", cardPin1 = "card_pin1"
        }
    }
}

/// `biometric.enable` — turns fingerprint unlock and fast-forward login on for the caller.
/// Needs a reader with an enrolled finger, and one matching scan now.
public enum BiometricEnable: RPCMethod {
    public static let name = "biometric.enable"
    public typealias Params = NoParams
    public typealias Result = BiometricStatus.Result
}

/// `biometric.disable` — turns them off (also fingerprint-released PIN1).
public enum BiometricDisable: RPCMethod {
    public static let name = "biometric.disable"
    public typealias Params = NoParams
    public typealias Result = BiometricStatus.Result
}

/// `card.biometric.enable` — a matching finger releases the saved PIN1 during `card.login`.
/// Needs a saved PIN1 and a reader with an enrolled finger.
public enum CardBiometricEnable: RPCMethod {
    public static let name = "card.biometric.enable"
    public typealias Params = NoParams
    public typealias Result = BiometricStatus.Result
}

/// `card.biometric.disable`.
public enum CardBiometricDisable: RPCMethod {
    public static let name = "card.biometric.disable"
    public typealias Params = NoParams
    public typealias Result = BiometricStatus.Result
}

/// `auth.fast` — fast-forward login of the account last signed in by this local user: authd
/// checks that its credentials still hold, then asks for the finger (up to 5 scans).
public enum AuthFast: RPCMethod {
    public static let name = "auth.fast"
    public typealias Params = NoParams
    public typealias Result = SignedIn
}

/// `auth.login.fingerprint` — the fingerprint step of a sign-in whose account chose it.
public enum AuthLoginFingerprint: RPCMethod {
    public static let name = "auth.login.fingerprint"
    public struct Params: Codable, Sendable, Equatable {
        public var flow: String
        public init(flow: String) { self.flow = flow }
    }
    public typealias Result = SignedIn
}

/// `twofactor.fingerprint.enable` — the session's account signs in with password + the
/// caller's finger from now on (one matching scan now). Needs a recent session.
public enum TwoFactorFingerprintEnable: RPCMethod {
    public static let name = "twofactor.fingerprint.enable"
    public struct Params: Codable, Sendable, Equatable {
        public var session: String
        public init(session: String) { self.session = session }
    }
    public struct Result: Codable, Sendable, Equatable {
        public var enabled: Bool
        /// The local user whose finger is the factor.
        public var user: String?
        public init(enabled: Bool, user: String?) {
            self.enabled = enabled
            self.user = user
        }
    }
}

/// `twofactor.fingerprint.disable` — needs the password.
public enum TwoFactorFingerprintDisable: RPCMethod {
    public static let name = "twofactor.fingerprint.disable"
    public struct Params: Codable, Sendable, Equatable {
        public var session: String
        public var password: String
        public init(session: String, password: String) {
            self.session = session
            self.password = password
        }
    }
    public typealias Result = TwoFactorFingerprintEnable.Result
}
