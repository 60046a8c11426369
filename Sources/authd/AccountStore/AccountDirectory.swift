import FoundationEssentials
import OpenSSLCrypto
import Protocol

// AccountStore/ — the account store: the one owner of account data (DESIGN §8, §10), and the
// only code with a statement on an account-owned table (migrations aside). The same statements
// run on SQLite and PostgreSQL; what differs per engine is in `SQLDialect` and `Database`. Each
// kind of caller has its own narrow interface, answering with values and decisions (entities
// the protocol also carries, such as `SyncEvent` or `AccountInfo`), never rows or a method's
// answer; each call is one all-or-nothing change:
//
// - The account directory, below: accounts and their credentials (password, PIN,
//   relying-party passkeys, federated links), sessions and the devices they are bound to, and
//   sign-in flows in progress (codes by SMS, second steps, passkey ceremonies).
// - `SyncLog`: the account's event log, its positions, read markers and cursors.
// - `PresenceBook`: friends, groups, hotspots and where people are.
// - `DeviceKeyBook`: the end-to-end keys of the accounts' devices, and each account's setting.
//
// The directory's interfaces are two types, by where a machine stands:
//
// - `MachineAccounts`: what this machine's own capabilities (the lock, fingerprints, PAM, the
//   token vault, the platform authenticator, federated sign-in) ask of the accounts signed in on
//   it, wherever those live. A standalone authd or a hub answers from its store
//   (`SQLAccountDirectory`), a device asks its hub over the link (`HubAccountDirectory`).
// - What only the account's home does, one narrow interface per kind of caller: codes by SMS
//   (`CodeFlows`), sign-in by password (`PasswordSignIns`), sessions and devices (`SessionBook`),
//   settings (`AccountSettingsBook`), relying-party passkeys (`RelyingPartyPasskeys`),
//   administration (`AccountAdministration`), the machines linked to a hub (`LinkedMachines`).
//   `AccountDirectory` is all of them. Only `SQLAccountDirectory` is one, so a device cannot
//   be handed where the home's work is done: that does not compile.
//
// Every error is an `AccountFailure`, `SessionFailure` or `PasskeyFailure`, or
// `FederationFailure.accountDeactivated` for a federated sign-in (a store failure is internal).

/// What a machine's own capabilities ask of the accounts signed in on it (see above).
protocol MachineAccounts: Sendable {
    /// The password of a signed-in account before a sensitive change, exactly as sign-in checks
    /// it: refused while locked, counted before it is checked (`Lockout`), failures padded.
    func confirmPassword(_ password: SecretBytes, account: String) async throws
    /// The same for the PIN second factor, with the PIN's own lock and counters.
    func confirmPIN(_ pin: SecretBytes, account: String) async throws
    /// The active account's PIN second factor (`none` for an account that is not active).
    func pinFactor(account: String) async throws -> PINFactor
    /// What could open a machine's lock for the account: whether it has a password (checked as
    /// `confirmPassword` checks it), and the verified number of the account while it is active.
    func lockCredentials(account: String) async throws -> LockCredentials
    /// An opaque value that changes whenever the account's password changes (nil: no password).
    /// A machine keeps it with a remembered sign-in, so a changed password ends the remembering.
    func credentialStamp(account: String) async throws -> [UInt8]?
    /// The account with this id (`unknownAccount` when there is none).
    func account(id: String) async throws -> AccountRecord

    /// A new session for a remembered sign-in whose credentials still hold, as
    /// `rememberedSignInHolds` checks them (`stamp`: the one remembered with it), in the change
    /// that makes the session: nil when they do not (the password changed, the account locked
    /// or gone, the device removed). A machine is never taken at its word that they hold.
    func resumeSignIn(account: String, deviceID: String, amr: [String], stamp: [UInt8]) async throws -> SignedIn?
    /// Whether a machine's remembered sign-in still holds: the account active and not locked,
    /// its password unchanged since (`stamp`), the device not revoked.
    func rememberedSignInHolds(account: String, deviceID: String, stamp: [UInt8]) async throws -> Bool
    /// A sign-in waiting for its second step, with what the account has now; nil when unknown,
    /// expired, its account is deactivated, or it belongs to another caller than `owner`.
    func pendingSignIn(_ id: String, owner: FlowOwner) async throws -> PendingSignIn?
    /// The fingerprint step's outcome, as the machine that scanned reports it, decided as of
    /// when the pending sign-in was read (a scan takes its time; the flow must not expire under it).
    func completeSignIn(_ pending: PendingSignIn, fingerMatched: Bool) async throws -> SecondStepOutcome
    /// The live session behind `token`, touching its idle timer (`sessionInvalid`,
    /// `sessionExpired` otherwise).
    func authenticate(_ session: PresentedSession) async throws -> ActiveSession
    /// `auth.logout`: ends the session; returns its id.
    func endSession(_ session: PresentedSession) async throws -> String

    /// Links a provider's identity to its account (registering one on the first sign-in) and
    /// signs it in on `device`. `accountDeactivated` when the linked account is. `proof` is the
    /// ID token the identity was read from: a directory that did not validate it itself (a
    /// device's hub) validates it again against the provider before it links anything. A token
    /// that already signed in, here or on another replica, is refused
    /// (`federation.id_token_invalid`, check `replay`) and changes nothing.
    func signIn(federated identity: FederatedIdentity, proof: FederatedProof, device: DeviceIdentity) async throws -> FederatedSignInResult
    /// A logout: the sessions the provider's sign-ins made for the account up to `madeBy` end,
    /// and the cached user data of the identity goes (the link stays). Returns how many sessions
    /// ended; running it again ends none more. For a machine linked to this hub (`machine`),
    /// only that machine's sessions end: the logout was its local user's.
    func endFederatedSessions(account: String, provider: String, issuer: String, subject: String?, madeBy: Int64, machine: DeviceID?) async throws -> Int
    /// The email address the provider last said the identity, linked to `account`, has (nil
    /// after a logout).
    func federatedEmail(account: String, issuer: String, subject: String) async throws -> String?
}

/// The account's home: everything about its accounts (see above), as the narrow interfaces
/// below that each capability takes only the one it needs of.
typealias AccountDirectory = MachineAccounts & CodeFlows & PasswordSignIns & SessionBook & AccountSettingsBook & RelyingPartyPasskeys
    & AccountAdministration & LinkedMachines

/// Codes by SMS, for registration, sign-in by code and the lock's code (`SMSCodes`,
/// `Registration`, `OTPLogin`, `Unlocker`).
protocol CodeFlows: Sendable {
    /// Stores a new challenge and counts its SMS against the number's hourly limit; refuses with
    /// `tooManyCodesSent`, storing nothing, when the number had its share.
    func openCodeChallenge(_ challenge: OTPChallenge, owner: FlowOwner, policy: OTPChallenge.Policy) async throws
    /// A resend: the flow may have a new code now (`OTPChallenge.checkResend`), whose MAC replaces
    /// the old one (which stops working); the SMS counts against the number's limit.
    func replaceCode(flow: String, purpose: OTPChallenge.Purpose, mac: [UInt8], owner: FlowOwner, policy: OTPChallenge.Policy) async throws -> OTPChallenge
    /// A code whose SMS failed never verifies, and the user may ask for another at once.
    func voidCode(flow: String, mac: [UInt8]) async throws
    /// The number a registration flow is for; nil for an unknown flow.
    func registrationPhone(flow: String, owner: FlowOwner) async throws -> String?
    /// Completes a registration: the attempt counts whatever its outcome; a right code proves
    /// the number, then makes the account (with `passwordHash` when one was chosen) and its
    /// first session. An email address another account holds keeps the flow open, uncounted.
    func register(flow: String, codeMAC: [UInt8], email: String?, passwordHash: String?, device: DeviceIdentity, owner: FlowOwner) async throws -> SignedIn
    /// Whether `phone` belongs to an active account (sign-in codes are sent only then).
    func hasActiveAccount(phone: String) async throws -> Bool
    /// One attempt at a sign-in code. A wrong code brings a fresh one at once (`replacementMAC`,
    /// or an unknowable one when the number has no account), at most `policy.maxResends` times.
    func signInWithCode(flow: String, codeMAC: [UInt8], replacementMAC: [UInt8], device: DeviceIdentity, owner: FlowOwner,
                        policy: OTPChallenge.Policy) async throws -> CodeSignIn
    /// One attempt at the code of an unlock flow, sent to `account`'s number: the same rules as
    /// a sign-in code (a wrong one counts and brings a fresh one, at most `policy.maxResends`
    /// times), but a right one makes no session; it proves the number is still the account's.
    func confirmCode(flow: String, account: String, codeMAC: [UInt8], replacementMAC: [UInt8], owner: FlowOwner,
                     policy: OTPChallenge.Policy) async throws -> CodeConfirmation
}

/// Sign-in by password and its PIN step (`Login`).
protocol PasswordSignIns: Sendable {
    /// Sign-in with a password, on `device`. Refused (`authFailed`, after the same work as a
    /// wrong password) for an unknown or deactivated account; a wrong password counts toward the
    /// account's lockout; `locked` while it holds; `pinSwitchedOff` when the PIN factor was
    /// switched off. A right one, in one change, resets the count and either makes the session
    /// or opens the second step `SignInFlow` decides (the finger when the account is one of
    /// `fingerprintAccounts`, this machine's, else its PIN); a refusal there (the device limit)
    /// changes nothing.
    func signIn(password: SecretBytes, login: AccountKey, device: DeviceIdentity, fingerprintAccounts: Set<String>) async throws -> PasswordSignIn
    /// The PIN step: checks the PIN under its lock (a wrong one counts), then completes the
    /// sign-in as `SignInFlow` decides. A flow that is not waiting for a PIN, or that `owner` did
    /// not open, is `authFailed` (and left as it was).
    func completeSignIn(_ id: String, pin: SecretBytes, owner: FlowOwner) async throws -> SignedIn
}

/// The sessions of an account and the devices they are bound to, as the account's own session
/// methods see them (`SessionService`).
protocol SessionBook: Sendable {
    /// A session for `account` on `device` (the device limit and policy apply), as a sign-in
    /// that needs no further step makes it. `federation` names the provider whose sign-in made it.
    func createSession(account: String, device: DeviceIdentity, amr: [String], federation: String?) async throws -> SignedIn
    /// The session, its account and its device.
    func describeSession(_ session: PresentedSession) async throws -> SessionDescription
    func sessions(_ session: PresentedSession) async throws -> [SessionSummary]
    /// Ends another session of the same account (`unknownSession` otherwise).
    func revokeSession(_ session: PresentedSession, id: String) async throws
    /// The account's devices and its device limit.
    func devices(_ session: PresentedSession) async throws -> AccountDevices
    /// Removes a device of the same account: its sessions end, its place frees.
    func revokeDevice(_ session: PresentedSession, id: String) async throws
}

/// The account's own settings: profile, PIN, deactivation (`AccountSettings`).
protocol AccountSettingsBook: Sendable {
    /// What a profile change needs to know about the session's account.
    func profile(_ session: PresentedSession) async throws -> AccountProfile
    /// Sets the email address (`emailTaken` when another account holds it) and/or the password
    /// hash (which lifts a password lock), in one change.
    func updateProfile(_ session: PresentedSession, email: String?, passwordHash: String?) async throws -> AccountInfo
    /// Whether the session may set a PIN now: signed in within `reauthenticationWindow` (else
    /// `reauthRequired`), and after a switched-off PIN only with a session that proved the
    /// phone by SMS (`pinReenrolmentNeedsCode`).
    func checkPINEnrolment(_ session: PresentedSession, reauthenticationWindow: Int64) async throws
    /// Sets the PIN second factor; its counters and any re-enrolment requirement reset.
    func setPIN(_ session: PresentedSession, hash: String) async throws
    func removePIN(_ session: PresentedSession) async throws
    /// Deactivates the account and ends every device and session of it.
    func deactivate(account: String) async throws
}

/// Passkeys of accounts, authd as their relying party (`RelyingParty`).
protocol RelyingPartyPasskeys: Sendable {
    /// Opens a registration ceremony for the session's account: its WebAuthn user handle
    /// (`newHandle` on first use), the name to show, and the credentials it already has.
    /// `owner`: who may finish it.
    func beginPasskeyRegistration(_ session: PresentedSession, challenge: [UInt8], newHandle: [UInt8], owner: FlowOwner, timeout: Int64) async throws -> PasskeyEnrolment
    /// Uses up a ceremony `owner` opened (whatever comes of it, so a challenge is answered once);
    /// another caller's is `flowInvalid` and stays.
    func consumePasskeyFlow(_ id: String, purpose: PasskeyCeremony, owner: FlowOwner) async throws -> PasskeyChallenge
    /// Stores a verified credential for the session's account, which must be `account`
    /// (`alreadyRegistered` when any account has it). Returns when it was registered.
    func addPasskey(_ session: PresentedSession, account: String, credential: RelyingPartyVerifier.NewCredential) async throws -> Int64
    /// Opens a sign-in ceremony: with a login, the credentials of its active account, or
    /// `decoy` alone when it has none, so the answer does not tell which logins exist.
    func beginPasskeySignIn(login: AccountKey?, challenge: [UInt8], decoy: [UInt8]?, owner: FlowOwner,
                            timeout: Int64) async throws -> (flow: String, allowed: [[UInt8]])
    /// A credential of an active account, as registered.
    func registeredPasskey(_ credentialID: [UInt8]) async throws -> RegisteredPasskey?
    /// Moves the credential's counter from the value checked to the one verified and signs the
    /// account in, in one change (a raced or replayed assertion finds the counter moved).
    func completePasskeySignIn(_ credentialID: [UInt8], checked: RegisteredPasskey, verified: RelyingPartyVerifier.VerifiedAssertion,
                               device: DeviceIdentity, amr: [String]) async throws -> SignedIn
    func passkeys(_ session: PresentedSession) async throws -> [AccountPasskey]
    func removePasskey(_ session: PresentedSession, id: [UInt8]) async throws
}

/// The administrator's view of the accounts, and their upkeep (`AccountAdmin`, `Maintenance`).
protocol AccountAdministration: Sendable {
    func accounts(limit: Int) async throws -> [AccountRecord]
    /// The first account any of `keys` names (`unknownAccount(selector)` when none).
    func account(_ keys: [AccountKey], selector: String) async throws -> AccountRecord
    /// Lifts the password and PIN locks.
    func unlock(_ keys: [AccountKey], selector: String) async throws -> AccountRecord
    func setDevicePolicy(_ keys: [AccountKey], selector: String, limit: Int?, policy: Config.DevicePolicy?) async throws -> AccountRecord
    /// Whether the account's messages and notifications are end-to-end encrypted.
    func setE2EE(_ keys: [AccountKey], selector: String, mode: E2EEMode) async throws -> AccountRecord
    func deactivate(_ keys: [AccountKey], selector: String) async throws -> AccountRecord
    /// Deletes what has expired for good: finished code flows and their send records, abandoned
    /// second steps, session rows that ended long ago. Accounts and devices stay.
    func purgeExpired() async throws -> DirectoryPurge
}

/// Where the accounts' sessions are held: by which machines linked to this hub, and which local
/// users (sync and presence delivery, the hub link's checks).
protocol LinkedMachines: Sendable {
    /// The device of `account` that `machine` signed in on (keyed by its device id), and whether
    /// it is live (not removed, the account active); nil when the machine never signed in to it.
    /// What a hub checks before it acts on an account for a machine.
    func machineDevice(account: String, machine: DeviceID) async throws -> (id: String, live: Bool)?
    /// Who holds a live session of each account: at a hub, the machines linked to it (those its
    /// events are pushed to) and, on each, the local users who signed in; and this machine's own
    /// local users (`machine` nil). One read for many accounts (a ping to a hundred friends).
    func sessionHolders(of accounts: Set<String>) async throws -> [String: [SessionHolder]]
    /// At a hub: the accounts a linked machine holds a live session of, with the local users
    /// there who signed in; for nil, those this machine's own local users signed in to here.
    func accounts(heldBy machine: DeviceID?) async throws -> [(account: String, users: [UInt32])]
    /// At a hub replica: the sessions another replica ended (each one's id and cause, as its
    /// `session.ended` events name them), read here as that replica's change reported them: the
    /// machine each was bound to, its local user there, and whether that machine holds any live
    /// session now. A session that is not ended, or was not bound to a machine, is left out.
    func endedSessions(_ ended: [(id: String, cause: EndedSession.Cause)]) async throws -> [EndedSession]
}

// MARK: Values the directory speaks in

/// How an account is named: by id, email address or phone number (normalized by the caller).
enum AccountKey: Sendable, Equatable {
    case id(String)
    case email(String)
    case phone(String)

    /// A stable text for the key, the same in every implementation (`email alice@example.org`):
    /// what the relying party's stand-in credential ids are derived from.
    var label: String {
        switch self {
        case .id(let id): "id \(id)"
        case .email(let email): "email \(email)"
        case .phone(let phone): "phone \(phone)"
        }
    }
}

/// The device a new session will be bound to: the caller's description, or this machine.
struct DeviceIdentity: Sendable, Equatable {
    let key: String
    let name: String
    /// False when `name` is the default (the host name): it then never renames a device.
    var nameGiven = true
    /// The local user who signs in: on this machine, or at a hub on the machine linked to it.
    var machineUser: UInt32?
}

/// An account's PIN second factor.
enum PINFactor: Sendable, Equatable {
    /// None: the password alone signs in.
    case none
    case enrolled
    /// Switched off after `PINPolicy.totalFailureLimit` wrong PINs: the password alone signs in
    /// nowhere until a sign-in with an SMS code sets a new PIN.
    case switchedOff
}

/// A live session's place: the machine linked to this hub it was made on (nil: this machine),
/// and the local user there who signed it in (nil when not recorded).
struct SessionHolder: Sendable, Hashable {
    let machine: DeviceID?
    let user: UInt32?
}

/// What a change did to an account that its machines hear of in the account's event log
/// (DESIGN §9, authd's own kinds): `device.linked`, `device.revoked`, `session.ended`.
struct AccountNotice: Sendable, Equatable {
    let account: String
    let kind: String
    let body: [String: JSONValue]

    /// The body's names for a device: its row id, and the machine's device id when it is one.
    static func device(_ id: String, key: String) -> [String: JSONValue] {
        ["device": .string(id), "device_id": DeviceIdentity.machine(ofKey: key).map(JSONValue.string) ?? .null]
    }
}

/// A session a change ended, and the machine it was bound to: what a hub tells that machine.
struct EndedSession: Sendable, Equatable {
    /// Why sessions end; the wire names `link.sessions_ended` and `session.ended` events carry.
    enum Cause: String, Sendable {
        case logout
        case sessionRevoke = "session.revoke"
        case deviceRevoke = "device.revoke"
        case replaceOldest = "replace_oldest"
        case accountDeactivated = "account.deactivated"
        case providerLogout = "provider.logout"
    }

    let id: String
    let account: String
    /// The device key the session was bound to (`device:` and a machine's id, for a machine
    /// linked to a hub).
    let deviceKey: String
    let machineUser: UInt32?
    let cause: Cause
    /// Whether that machine holds no live session of any account after the change.
    let machineUnlinked: Bool
}

/// A live session, as authenticated.
struct ActiveSession: Sendable, Equatable {
    let id: String
    let accountID: String
    let deviceID: String
    let amr: [String]
    let createdAt: Int64
    let expiresAt: Int64
    let idleExpiresAt: Int64
}

/// A live session with its account and the device it is bound to.
struct SessionDescription: Sendable, Equatable {
    let session: ActiveSession
    let account: AccountInfo
    let device: DeviceSummary
}

/// The account's devices that are not removed, oldest first, and the limit that holds for it.
struct AccountDevices: Sendable, Equatable {
    let devices: [DeviceRecord]
    let limit: Int
}

/// What a right password led to.
enum PasswordSignIn: Sendable, Equatable {
    case signedIn(SignedIn)
    /// The sign-in `flow` waits for its second step.
    case secondStep(flow: String, step: SignInFlow.Step)
}

/// A sign-in waiting for its second step, whether the account has a PIN to fall back to, and
/// when that was read.
struct PendingSignIn: Sendable, Equatable {
    let flow: SignInFlow
    let accountHasPIN: Bool
    let readAt: Int64
}

/// What a fingerprint second step led to.
enum SecondStepOutcome: Sendable, Equatable {
    case signedIn(SignedIn)
    /// The finger did not do; the same flow continues with the PIN.
    case continuesWithPIN
    /// The finger did not do and there is no PIN: the flow ended (sign in with an SMS code).
    case ended
}

/// What one sign-in code attempt led to.
enum CodeSignIn: Sendable, Equatable {
    case signedIn(SignedIn)
    /// Wrong; a new code replaced it. Deliver it to `challenge.phone` when `deliver` (the number
    /// has an account), and say `failure`.
    case replaced(OTPChallenge, deliver: Bool, failure: AccountFailure)
}

/// What one unlock code attempt led to.
enum CodeConfirmation: Sendable, Equatable {
    case confirmed
    /// Wrong; a new code replaced it: deliver it to `challenge.phone`, and say `failure`.
    case replaced(OTPChallenge, failure: AccountFailure)
}

/// The account's credentials a machine's lock can ask for.
struct LockCredentials: Sendable, Equatable {
    let hasPassword: Bool
    /// The verified phone number (E.164) of the active account; nil without one.
    let verifiedPhone: String?
    /// Why codes by SMS can never open the lock here, whatever the account has (a device: its
    /// hub could not check them); nil where they can.
    var codesRefused: MachineAccessFailure? = nil
}

/// The session's account as a profile change sees it.
struct AccountProfile: Sendable, Equatable {
    let id: String
    let phone: String?
    let email: String?
    let hasPassword: Bool
    let hasPIN: Bool
}

/// A provider's identity (`iss` + `sub`) and what its ID token said about the person.
struct FederatedIdentity: Sendable, Equatable {
    let provider: String
    let issuer: String
    let subject: String
    let email: String?
    let name: String?
}

/// The ID token a federated identity was read from, the nonce its sign-in sent (nil for the
/// device grant, which sends none), and when the token expires. An ID token signs in once:
/// the directory remembers each one it took until it expires.
struct FederatedProof: Sendable, Equatable {
    let idToken: String
    let nonce: String?
    let expiresAt: Int64
}

struct FederatedSignInResult: Sendable, Equatable {
    let signedIn: SignedIn
    /// True when this sign-in registered the account.
    let created: Bool
}

enum PasskeyCeremony: String, Sendable { case register, login }

/// A ceremony's challenge, and whom it was for.
struct PasskeyChallenge: Sendable, Equatable {
    let challenge: [UInt8]
    let account: String?
    /// The sign-in named a login: only that account's passkeys will do.
    let loginGiven: Bool
}

/// A registration ceremony opened for an account.
struct PasskeyEnrolment: Sendable, Equatable {
    let flow: String
    let userHandle: [UInt8]
    /// Email, phone or id: what the authenticator shows as the user's name.
    let name: String
    let registered: [[UInt8]]
}

/// A registered credential as stored.
struct RegisteredPasskey: Sendable, Equatable {
    let account: String
    let publicKey: [UInt8]
    let signCount: Int64
    let backupEligible: Bool
    /// The account's WebAuthn user handle.
    let userHandle: [UInt8]?
}

/// What `purgeExpired` deleted.
struct DirectoryPurge: Sendable, Equatable {
    var flows = 0, sends = 0, signIns = 0, sessions = 0, idTokens = 0
}
