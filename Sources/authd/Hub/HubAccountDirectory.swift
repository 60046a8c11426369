import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// A device's account directory: the account data its machine capabilities (the lock,
/// fingerprint sign-ins, PAM, the platform authenticator's user verification, federated
/// sign-in) need, asked of the hub over the link (`link.*` methods). The hub answers only for
/// accounts this machine is signed in to, and checks every secret and makes every session
/// itself. Account methods never get here: the dispatcher forwards them whole. What a machine
/// capability could ask that the hub cannot check (a code flow this machine would send and
/// verify) fails with `MachineAccessFailure.notOnDevice`, never silently. While the link is
/// down every call fails at once with `hub.unavailable`.
struct HubAccountDirectory: AccountDirectory {
    let link: HubLink
    /// This machine, whose device the hub's answers are about.
    let machine: DeviceID
    let now: @Sendable () -> Date

    /// One call of a link method: its result, or the hub's error as the hub gave it.
    /// The link's edge: the hub's refusals that capability code acts on come back as domain
    /// errors (`MachineAccessFailure.notSignedIn`), never as wire errors matched by reason.
    private func ask<M: RPCMethod>(_: M.Type, _ params: M.Params) async throws -> M.Result {
        do {
            return try await link.call(M.self, params)
        } catch let error as RPCError where error.reason == .hubNotSignedIn {
            throw MachineAccessFailure.notSignedIn
        }
    }

    private func account(_ id: String) async throws -> LinkAccount.Result {
        try await ask(LinkAccount.self, .init(account: id))
    }

    private func refuse(_ operation: String) -> MachineAccessFailure { .notOnDevice(operation: operation) }

    // MARK: What the machine capabilities use

    func confirmPassword(_ password: SecretBytes, account: String) async throws {
        try await confirm(password, factor: "password", account: account)
    }

    func confirmPIN(_ pin: SecretBytes, account: String) async throws {
        try await confirm(pin, factor: "pin", account: account)
    }

    private func confirm(_ secret: SecretBytes, factor: String, account: String) async throws {
        let text = secret.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        _ = try await ask(LinkCredentialConfirm.self, .init(account: account, factor: factor, secret: text))
    }

    func hasPIN(account: String) async throws -> Bool {
        let record = try await self.account(account).record
        return record.deactivatedAt == nil && record.hasPIN
    }

    /// The password only: a code by SMS would be sent and checked by this machine, which the
    /// hub cannot verify, so the number is never offered to open the lock here. A machine the
    /// hub no longer counts as signed in (its device removed) has nothing to open it with.
    /// While the hub is away the lock fails closed: an idle lock still arms and the lock's
    /// status still answers (the finger opens it at once, the password once the hub is back).
    func lockCredentials(account: String) async throws -> LockCredentials {
        do {
            return LockCredentials(hasPassword: try await self.account(account).record.hasPassword, verifiedPhone: nil, codesRefused: Self.codesRefused)
        } catch MachineAccessFailure.notSignedIn {
            return LockCredentials(hasPassword: false, verifiedPhone: nil, codesRefused: Self.codesRefused)
        } catch is HubLinkFailure {
            return LockCredentials(hasPassword: true, verifiedPhone: nil, codesRefused: Self.codesRefused)
        }
    }

    private static let codesRefused = MachineAccessFailure.notOnDevice(operation: "unlock with a code sent by SMS")

    func credentialStamp(account: String) async throws -> [UInt8]? {
        try await self.account(account).credentialStamp.flatMap(Base64URL.decode)
    }

    func account(_ keys: [AccountKey], selector: String) async throws -> AccountRecord {
        guard keys.count == 1, case .id(let id) = keys[0] else { throw refuse("look an account up by email or phone") }
        return try await account(id).record
    }

    func resumeSignIn(account: String, deviceID: String, amr: [String]) async throws -> SignedIn? {
        try await ask(LinkSignInResume.self, .init(account: account, deviceID: deviceID, amr: amr)).signedIn
    }

    func rememberedSignInHolds(account: String, deviceID: String, stamp: [UInt8]) async throws -> Bool {
        try await ask(LinkSignInRemembered.self, .init(account: account, deviceID: deviceID, stamp: Base64URL.encode(stamp))).holds
    }

    /// The hub checks the machine (the link's); the local user who asks is told it to check too.
    func pendingSignIn(_ id: String, owner: FlowOwner) async throws -> PendingSignIn? {
        guard let pending = try await ask(LinkSignInPending.self, .init(flow: id, uid: owner.user)).pending,
              let step = SignInFlow.Step(rawValue: pending.step) else { return nil }
        let device = DeviceIdentity(key: DeviceIdentity.key(ofMachine: machine), name: pending.deviceName, nameGiven: false, machineUser: owner.user)
        let flow = SignInFlow(id: pending.flow, account: pending.account, device: device, step: step, expiresAt: pending.expiresAt)
        return PendingSignIn(flow: flow, accountHasPIN: pending.accountHasPIN, readAt: Int64(now().timeIntervalSince1970))
    }

    /// The hub decides on its own reading of the flow; only the finger's outcome crosses.
    func completeSignIn(_ pending: PendingSignIn, fingerMatched: Bool) async throws -> SecondStepOutcome {
        let answer = try await ask(LinkSignInFingerprint.self, .init(flow: pending.flow.id, matched: fingerMatched, uid: pending.flow.device.machineUser))
        switch (answer.outcome, answer.signedIn) {
        case ("signed_in", let signedIn?): return .signedIn(signedIn)
        case ("continues_with_pin", _): return .continuesWithPIN
        case ("ended", _): return .ended
        default: throw HubAnswerError(method: LinkSignInFingerprint.name)
        }
    }

    func authenticate(_ session: PresentedSession) async throws -> ActiveSession {
        let session = try await ask(LinkSessionAuthenticate.self, .init(session: session.token))
        return ActiveSession(id: session.id, accountID: session.account, deviceID: session.deviceID, amr: session.amr,
                             createdAt: session.createdAt, expiresAt: session.expiresAt, idleExpiresAt: session.idleExpiresAt)
    }

    func endSession(_ session: PresentedSession) async throws -> String {
        try await ask(LinkSessionEnd.self, .init(session: session.token)).id
    }

    /// The hub validates the ID token itself, against its own provider of that name, and makes
    /// or checks the link; what this machine read from the token is not taken on its word.
    func signIn(federated identity: FederatedIdentity, proof: FederatedProof, device: DeviceIdentity) async throws -> FederatedSignInResult {
        let answer = try await ask(LinkSignInFederated.self, .init(provider: identity.provider, idToken: proof.idToken, nonce: proof.nonce,
                                                                   deviceName: device.name))
        return FederatedSignInResult(signedIn: answer.signedIn, created: answer.created)
    }

    /// Only this machine's sessions end. A machine the hub no longer counts as signed in to
    /// the account (its device removed, the account deactivated) has none left to end.
    func endFederatedSessions(account: String, provider: String, issuer: String, subject: String?, madeBy: Int64, machine: DeviceID?) async throws -> Int {
        do {
            return try await ask(LinkFederationLogout.self, .init(account: account, provider: provider, issuer: issuer, subject: subject,
                                                                   madeBy: madeBy)).sessionsEnded
        } catch MachineAccessFailure.notSignedIn {
            return 0
        }
    }

    /// A detail of `federation.status`, a machine method that keeps answering while the hub is
    /// away or after this machine was removed from the account: then it shows no email.
    func federatedEmail(account: String, issuer: String, subject: String) async throws -> String? {
        do {
            return try await ask(LinkFederationEmail.self, .init(account: account, issuer: issuer, subject: subject)).email
        } catch is HubLinkFailure {
            return nil
        } catch MachineAccessFailure.notSignedIn {
            return nil
        }
    }

    func machineDevice(account: String, machine: DeviceID) async throws -> (id: String, live: Bool)? {
        throw refuse("check another machine's devices")
    }

    // MARK: Account methods (forwarded whole by the dispatcher; never asked here)

    func openCodeChallenge(_ challenge: OTPChallenge, owner: FlowOwner, policy: OTPChallenge.Policy) async throws { throw refuse("send a code by SMS") }
    func replaceCode(flow: String, purpose: OTPChallenge.Purpose, mac: [UInt8], owner: FlowOwner, policy: OTPChallenge.Policy) async throws -> OTPChallenge {
        throw refuse("send a code by SMS")
    }
    func voidCode(flow: String, mac: [UInt8]) async throws { throw refuse("send a code by SMS") }
    func registrationPhone(flow: String, owner: FlowOwner) async throws -> String? { throw refuse("register an account here") }
    func register(flow: String, codeMAC: [UInt8], email: String?, passwordHash: String?, device: DeviceIdentity, owner: FlowOwner) async throws -> SignedIn {
        throw refuse("register an account here")
    }
    func hasActiveAccount(phone: String) async throws -> Bool { throw refuse("sign in by SMS code here") }
    func signInWithCode(flow: String, codeMAC: [UInt8], replacementMAC: [UInt8], device: DeviceIdentity, owner: FlowOwner,
                        policy: OTPChallenge.Policy) async throws -> CodeSignIn {
        throw refuse("sign in by SMS code here")
    }
    func confirmCode(flow: String, account: String, codeMAC: [UInt8], replacementMAC: [UInt8], owner: FlowOwner,
                     policy: OTPChallenge.Policy) async throws -> CodeConfirmation {
        throw Self.codesRefused
    }
    func signIn(password: SecretBytes, login: AccountKey, device: DeviceIdentity, fingerprintAccounts: Set<String>) async throws -> PasswordSignIn {
        throw refuse("sign in by password here")
    }
    func completeSignIn(_ id: String, pin: SecretBytes, owner: FlowOwner) async throws -> SignedIn { throw refuse("complete a sign-in by PIN here") }
    func createSession(account: String, device: DeviceIdentity, amr: [String], federation: String?) async throws -> SignedIn {
        throw refuse("make a session without a sign-in")
    }
    func describeSession(_ session: PresentedSession) async throws -> SessionGet.Result { throw refuse("describe a session here") }
    func sessions(_ session: PresentedSession) async throws -> [SessionSummary] { throw refuse("list sessions here") }
    func revokeSession(_ session: PresentedSession, id: String) async throws { throw refuse("revoke a session here") }
    func devices(_ session: PresentedSession) async throws -> DeviceList.Result { throw refuse("list devices here") }
    func revokeDevice(_ session: PresentedSession, id: String) async throws { throw refuse("revoke a device here") }
    func sessionHolders(of accounts: Set<String>) async throws -> [String: [SessionHolder]] { throw refuse("push events to other machines") }
    func accounts(heldBy machine: DeviceID?) async throws -> [(account: String, users: [UInt32])] { throw refuse("keep other machines' sync cursors") }
    func profile(_ session: PresentedSession) async throws -> AccountProfile { throw refuse("change the account's settings here") }
    func updateProfile(_ session: PresentedSession, email: String?, passwordHash: String?) async throws -> AccountInfo {
        throw refuse("change the account's settings here")
    }
    func checkPINEnrolment(_ session: PresentedSession, reauthenticationWindow: Int64) async throws { throw refuse("change the account's settings here") }
    func setPIN(_ session: PresentedSession, hash: String) async throws { throw refuse("change the account's settings here") }
    func removePIN(_ session: PresentedSession) async throws { throw refuse("change the account's settings here") }
    func deactivate(account: String) async throws { throw refuse("deactivate an account here") }
    func beginPasskeyRegistration(_ session: PresentedSession, challenge: [UInt8], newHandle: [UInt8], owner: FlowOwner, timeout: Int64) async throws -> PasskeyEnrolment {
        throw refuse("register a relying-party passkey here")
    }
    func consumePasskeyFlow(_ id: String, purpose: PasskeyCeremony, owner: FlowOwner) async throws -> PasskeyChallenge { throw refuse("use a relying-party passkey here") }
    func addPasskey(_ session: PresentedSession, account: String, credential: RelyingPartyVerifier.NewCredential) async throws -> Int64 {
        throw refuse("register a relying-party passkey here")
    }
    func beginPasskeySignIn(login: AccountKey?, challenge: [UInt8], decoy: [UInt8]?, owner: FlowOwner,
                            timeout: Int64) async throws -> (flow: String, allowed: [[UInt8]]) {
        throw refuse("use a relying-party passkey here")
    }
    func registeredPasskey(_ credentialID: [UInt8]) async throws -> RegisteredPasskey? { throw refuse("use a relying-party passkey here") }
    func completePasskeySignIn(_ credentialID: [UInt8], checked: RegisteredPasskey, verified: RelyingPartyVerifier.VerifiedAssertion,
                               device: DeviceIdentity, amr: [String]) async throws -> SignedIn {
        throw refuse("use a relying-party passkey here")
    }
    func passkeys(_ session: PresentedSession) async throws -> [AccountPasskey] { throw refuse("use a relying-party passkey here") }
    func removePasskey(_ session: PresentedSession, id: [UInt8]) async throws { throw refuse("use a relying-party passkey here") }
    func accounts(limit: Int) async throws -> [AccountRecord] { throw refuse("administer accounts (the hub's administrator does)") }
    func unlock(_ keys: [AccountKey], selector: String) async throws -> AccountRecord { throw refuse("administer accounts (the hub's administrator does)") }
    func setDevicePolicy(_ keys: [AccountKey], selector: String, limit: Int?, policy: Config.DevicePolicy?) async throws -> AccountRecord {
        throw refuse("administer accounts (the hub's administrator does)")
    }
    func setE2EE(_ keys: [AccountKey], selector: String, mode: E2EEMode) async throws -> AccountRecord {
        throw refuse("administer accounts (the hub's administrator does)")
    }
    func deactivate(_ keys: [AccountKey], selector: String) async throws -> AccountRecord {
        throw refuse("administer accounts (the hub's administrator does)")
    }
    /// The hub purges its own store; a device holds no account data to purge.
    func purgeExpired() async throws -> DirectoryPurge { DirectoryPurge() }
}

/// The hub answered a link method with something it never sends (a newer or broken hub).
struct HubAnswerError: Error, CustomStringConvertible {
    let method: String
    var description: String { "the hub's answer to \(method) is not one this authd understands" }
}
