import FoundationEssentials

// The account data a device's own capabilities (its lock, fingerprints, PAM, federated sign-in)
// need from its hub. Only a linked machine calls these, over its hub link, and the hub lets it
// act only on accounts it is signed in to: those holding a live device of that machine. Each
// refusal is `hub.not_signed_in` (and audited at the hub).

/// `link.account`: an account the machine is signed in to, as the hub holds it now, and the
/// stamp a remembered sign-in keeps (it changes with the password).
public enum LinkAccount: RPCMethod {
    public static let name = "link.account"

    public struct Params: Codable, Sendable, Equatable {
        public var account: String
        public init(account: String) { self.account = account }
    }

    public struct Result: Codable, Sendable, Equatable {
        public var record: AccountRecord
        /// Base64url; absent when the account has no password.
        public var credentialStamp: String?

        public init(record: AccountRecord, credentialStamp: String?) {
            self.record = record
            self.credentialStamp = credentialStamp
        }

        enum CodingKeys: String, CodingKey {
            case record, credentialStamp = "credential_stamp"
        }
    }
}

/// `link.credential.confirm`: checks the password or PIN a person typed on the machine, at the
/// hub, exactly as sign-in checks it (counted, locked out, padded). Answers `auth.failed` or
/// `account.locked` like `auth.login`.
public enum LinkCredentialConfirm: RPCMethod {
    public static let name = "link.credential.confirm"

    public struct Params: Codable, Sendable, Equatable {
        public var account: String
        /// `password` or `pin`.
        public var factor: String
        public var secret: String

        public init(account: String, factor: String, secret: String) {
            self.account = account
            self.factor = factor
            self.secret = secret
        }
    }

    public typealias Result = Acknowledged
}

/// `link.signin.resume`: a new session for a sign-in the machine remembers, on the machine's own
/// device of the account, after the machine proved the person again (`amr` is `["fpt"]`: a
/// finger). `signed_in` is null when the account or that device is gone.
public enum LinkSignInResume: RPCMethod {
    public static let name = "link.signin.resume"

    public struct Params: Codable, Sendable, Equatable {
        public var account: String
        public var deviceID: String
        public var amr: [String]
        /// Base64url: the credential stamp the machine remembered with the sign-in. The hub
        /// checks it, with the account and the device, in the same change that makes the session;
        /// a machine that sends none (an older authd) resumes nothing.
        public var stamp: String?

        public init(account: String, deviceID: String, amr: [String], stamp: String?) {
            self.account = account
            self.deviceID = deviceID
            self.amr = amr
            self.stamp = stamp
        }

        enum CodingKeys: String, CodingKey {
            case account, deviceID = "device_id", amr, stamp
        }
    }

    public struct Result: Codable, Sendable, Equatable {
        public var signedIn: SignedIn?
        public init(signedIn: SignedIn?) { self.signedIn = signedIn }
        enum CodingKeys: String, CodingKey { case signedIn = "signed_in" }
    }
}

/// `link.signin.remembered`: whether a sign-in the machine remembers still holds: the account
/// active and not locked, its password unchanged since `stamp`, the machine's device not removed.
public enum LinkSignInRemembered: RPCMethod {
    public static let name = "link.signin.remembered"

    public struct Params: Codable, Sendable, Equatable {
        public var account: String
        public var deviceID: String
        /// The `credential_stamp` of `link.account` when the sign-in was remembered.
        public var stamp: String

        public init(account: String, deviceID: String, stamp: String) {
            self.account = account
            self.deviceID = deviceID
            self.stamp = stamp
        }

        enum CodingKeys: String, CodingKey {
            case account, deviceID = "device_id", stamp
        }
    }

    public struct Result: Codable, Sendable, Equatable {
        public var holds: Bool
        public init(holds: Bool) { self.holds = holds }
    }
}

/// `link.signin.pending`: a sign-in made through this machine that waits for its second step
/// (the finger is scanned on the machine); `pending` is null when it is unknown, expired, or was
/// opened through another machine.
public enum LinkSignInPending: RPCMethod {
    public static let name = "link.signin.pending"

    public struct Params: Codable, Sendable, Equatable {
        public var flow: String
        /// The machine's local user who asks: only the one who opened the sign-in may go on.
        public var uid: UInt32?
        public init(flow: String, uid: UInt32?) {
            self.flow = flow
            self.uid = uid
        }
    }

    public struct Result: Codable, Sendable, Equatable {
        public var pending: PendingSignIn?
        public init(pending: PendingSignIn?) { self.pending = pending }
    }

    public struct PendingSignIn: Codable, Sendable, Equatable {
        public var flow: String
        public var account: String
        /// `fingerprint` or `pin`.
        public var step: String
        public var deviceName: String
        /// Unix seconds.
        public var expiresAt: Int64
        public var accountHasPIN: Bool

        public init(flow: String, account: String, step: String, deviceName: String, expiresAt: Int64, accountHasPIN: Bool) {
            self.flow = flow
            self.account = account
            self.step = step
            self.deviceName = deviceName
            self.expiresAt = expiresAt
            self.accountHasPIN = accountHasPIN
        }

        enum CodingKeys: String, CodingKey {
            case flow, account, step, deviceName = "device_name", expiresAt = "expires_at", accountHasPIN = "account_has_pin"
        }
    }
}

/// `link.signin.fingerprint`: the outcome of the fingerprint second step of a sign-in made
/// through this machine, as the machine's reader decided it. `outcome` is `signed_in` (with
/// `signed_in`), `continues_with_pin` or `ended`.
public enum LinkSignInFingerprint: RPCMethod {
    public static let name = "link.signin.fingerprint"

    public struct Params: Codable, Sendable, Equatable {
        public var flow: String
        public var matched: Bool
        /// The machine's local user whose finger was scanned: the one who opened the sign-in.
        public var uid: UInt32?

        public init(flow: String, matched: Bool, uid: UInt32?) {
            self.flow = flow
            self.matched = matched
            self.uid = uid
        }
    }

    public struct Result: Codable, Sendable, Equatable {
        public var outcome: String
        public var signedIn: SignedIn?

        public init(outcome: String, signedIn: SignedIn?) {
            self.outcome = outcome
            self.signedIn = signedIn
        }

        enum CodingKeys: String, CodingKey { case outcome, signedIn = "signed_in" }
    }
}

/// `link.session.authenticate`: the live session behind a token of this machine (a token of
/// another machine is `session.invalid`), touching its idle timer.
public enum LinkSessionAuthenticate: RPCMethod {
    public static let name = "link.session.authenticate"

    public struct Params: Codable, Sendable, Equatable {
        public var session: String
        public init(session: String) { self.session = session }
    }

    public struct Result: Codable, Sendable, Equatable {
        public var id: String
        public var account: String
        public var deviceID: String
        public var amr: [String]
        /// Unix seconds.
        public var createdAt: Int64
        public var expiresAt: Int64
        public var idleExpiresAt: Int64

        public init(id: String, account: String, deviceID: String, amr: [String], createdAt: Int64, expiresAt: Int64, idleExpiresAt: Int64) {
            self.id = id
            self.account = account
            self.deviceID = deviceID
            self.amr = amr
            self.createdAt = createdAt
            self.expiresAt = expiresAt
            self.idleExpiresAt = idleExpiresAt
        }

        enum CodingKeys: String, CodingKey {
            case id, account, deviceID = "device_id", amr, createdAt = "created_at", expiresAt = "expires_at", idleExpiresAt = "idle_expires_at"
        }
    }
}

/// `link.session.end`: ends a session of this machine (one a sign-in just made that the machine
/// could not keep); answers the session's id.
public enum LinkSessionEnd: RPCMethod {
    public static let name = "link.session.end"

    public struct Params: Codable, Sendable, Equatable {
        public var session: String
        public init(session: String) { self.session = session }
    }

    public struct Result: Codable, Sendable, Equatable {
        public var id: String
        public init(id: String) { self.id = id }
    }
}

/// `link.signin.federated`: a federated sign-in the machine ran (browser or device code) ends
/// at the hub: the hub validates the ID token itself against its own `[federation.NAME]`
/// provider (signature by the provider's JWKS, `iss`, `aud`, `exp`, `nonce`), then makes or
/// checks the account's link to the identity and signs the account in on this machine. A
/// provider the hub does not know is `federation.unknown_provider`; a token it does not accept
/// is `federation.id_token_invalid`, and nothing is made.
public enum LinkSignInFederated: RPCMethod {
    public static let name = "link.signin.federated"

    public struct Params: Codable, Sendable, Equatable {
        /// The provider's name in the hub's configuration.
        public var provider: String
        public var idToken: String
        /// The nonce the sign-in sent; absent for the device grant.
        public var nonce: String?
        /// The machine's name, as the account's device list shows it.
        public var deviceName: String

        public init(provider: String, idToken: String, nonce: String?, deviceName: String) {
            self.provider = provider
            self.idToken = idToken
            self.nonce = nonce
            self.deviceName = deviceName
        }

        enum CodingKeys: String, CodingKey {
            case provider, idToken = "id_token", nonce, deviceName = "device_name"
        }
    }

    public struct Result: Codable, Sendable, Equatable {
        public var signedIn: SignedIn
        /// True when this sign-in registered the account.
        public var created: Bool

        public init(signedIn: SignedIn, created: Bool) {
            self.signedIn = signedIn
            self.created = created
        }

        enum CodingKeys: String, CodingKey { case signedIn = "signed_in", created }
    }
}

/// `link.federation.logout`: the machine's local user was logged out of a provider (or signed
/// out): the sessions that provider's sign-ins made for the account on this machine, up to
/// `made_by`, end at the hub, and the identity's cached email and name go.
public enum LinkFederationLogout: RPCMethod {
    public static let name = "link.federation.logout"

    public struct Params: Codable, Sendable, Equatable {
        public var account: String
        public var provider: String
        public var issuer: String
        public var subject: String?
        /// Unix seconds: sessions made later are not touched.
        public var madeBy: Int64

        public init(account: String, provider: String, issuer: String, subject: String?, madeBy: Int64) {
            self.account = account
            self.provider = provider
            self.issuer = issuer
            self.subject = subject
            self.madeBy = madeBy
        }

        enum CodingKeys: String, CodingKey {
            case account, provider, issuer, subject, madeBy = "made_by"
        }
    }

    public struct Result: Codable, Sendable, Equatable {
        public var sessionsEnded: Int
        public init(sessionsEnded: Int) { self.sessionsEnded = sessionsEnded }
        enum CodingKeys: String, CodingKey { case sessionsEnded = "sessions_ended" }
    }
}

/// `link.federation.email`: the email address the provider last gave for an identity linked
/// to an account the machine is signed in to (null after a logout).
public enum LinkFederationEmail: RPCMethod {
    public static let name = "link.federation.email"

    public struct Params: Codable, Sendable, Equatable {
        public var account: String
        public var issuer: String
        public var subject: String

        public init(account: String, issuer: String, subject: String) {
            self.account = account
            self.issuer = issuer
            self.subject = subject
        }
    }

    public struct Result: Codable, Sendable, Equatable {
        public var email: String?
        public init(email: String?) { self.email = email }
    }
}
