import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// A device's account directory: the account data its machine capabilities (the lock,
/// fingerprint sign-ins, PAM, the platform authenticator's user verification, federated
/// sign-in) need, asked of the hub over the link (`link.*` methods). The hub answers only for
/// accounts this machine is signed in to, and checks every secret and makes every session
/// itself. It is a `MachineAccounts` only: what the account's home does (account methods, which
/// the dispatcher forwards whole) cannot be asked of it. While the link is down every call fails
/// at once with `hub.unavailable`.
struct HubAccountDirectory: MachineAccounts {
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

    func pinFactor(account: String) async throws -> PINFactor {
        let record = try await self.account(account).record
        guard record.deactivatedAt == nil else { return .none }
        return record.hasPIN ? .enrolled : record.pinSwitchedOff == true ? .switchedOff : .none
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

    func account(id: String) async throws -> AccountRecord {
        try await account(id).record
    }

    func resumeSignIn(account: String, deviceID: String, amr: [String], stamp: [UInt8]) async throws -> SignedIn? {
        try await ask(LinkSignInResume.self, .init(account: account, deviceID: deviceID, amr: amr, stamp: Base64URL.encode(stamp))).signedIn
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
}

/// The hub answered a link method with something it never sends (a newer or broken hub).
struct HubAnswerError: Error, CustomStringConvertible {
    let method: String
    var description: String { "the hub's answer to \(method) is not one this authd understands" }
}
