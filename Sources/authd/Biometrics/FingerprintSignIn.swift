import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// Sign-ins that a finger completes: fast-forward login of the remembered account (a bank
/// app's "remembered user"), and the fingerprint as an account's second sign-in step.
struct FingerprintSignIn: Sendable {
    let directory: any MachineAccounts
    let steps: FingerprintSteps
    let lock: LocalLock
    let biometrics: BiometricService
    let now: @Sendable () -> Date

    /// A first scan and up to four retries, then the caller falls back to the password.
    static let attempts = 5

    /// Sessions older than this must sign in again before changing how the account signs in.
    static let reauthenticationWindow: Int64 = 600

    /// `auth.fast`.
    func fast(context: RequestContext) async throws -> SignedIn {
        let uid = context.caller.uid
        guard let remembered = try await lock.rememberedSignIn(uid) else { throw BiometricFailure.rememberedInvalid }
        guard try await biometrics.settings(uid).gate.enabled else { throw BiometricFailure.signInOff }
        try await biometrics.verify(user: try BiometricService.user(of: context.caller), gateUID: uid, attempts: Self.attempts,
                                    purpose: "to sign in", context: context)
        guard let signedIn = try await directory.resumeSignIn(account: remembered.account, deviceID: remembered.device, amr: ["fpt"],
                                                              stamp: remembered.stamp) else {
            throw BiometricFailure.rememberedInvalid
        }
        return signedIn
    }

    /// `auth.login.fingerprint`: the finger of the local user the account chose. When the finger
    /// fails or the reader is unavailable, the same flow continues with the PIN if the account
    /// has one (`data.fallback = "pin"`); otherwise it ends (`"otp"`: sign in with an SMS code).
    func secondStep(_ params: AuthLoginFingerprint.Params, context: RequestContext) async throws -> SignedIn {
        // The flow is this local user's: the password they gave here opened it.
        guard let pending = try await directory.pendingSignIn(params.flow, owner: FlowOwner(.local(context.caller))), pending.flow.step == .fingerprint else { throw AccountFailure.authFailed }
        do {
            guard let user = FingerprintUser.validated(try await steps.user(account: pending.flow.account)),
                  let uid = Syscalls.userID(named: user)
            else { throw BiometricFailure.unavailable("the account's fingerprint user is not valid") }
            // Each finger that does not match counts against that local user's gate, as at the
            // lock: whoever knows the password gets five fingers in all, not five per sign-in.
            try await biometrics.verify(user: user, gateUID: uid, attempts: Self.attempts, purpose: "to sign in", context: context)
        } catch let failure as BiometricFailure where failure != .cancelled {
            let outcome = try await directory.completeSignIn(pending, fingerMatched: false)
            throw BiometricFailure.signInContinues(failure, withPIN: outcome == .continuesWithPIN)
        }
        guard case .signedIn(let signedIn) = try await directory.completeSignIn(pending, fingerMatched: true) else {
            throw AccountFailure.authFailed
        }
        return signedIn
    }

    /// `twofactor.fingerprint.enable`: one matching scan of the caller's finger now.
    func enableSecondStep(_ params: TwoFactorFingerprintEnable.Params, context: RequestContext) async throws -> TwoFactorFingerprintEnable.Result {
        let user = try BiometricService.user(of: context.caller)
        let session = try await directory.authenticate(context.session(params.session))
        guard session.createdAt >= Int64(now().timeIntervalSince1970) - Self.reauthenticationWindow else {
            throw AccountFailure.reauthRequired(for: "change how this account signs in")
        }
        try await biometrics.verify(user: user, gateUID: nil, attempts: 3, purpose: "to make it this account's second step", context: context)
        try await steps.set(account: session.accountID, user: user)
        return .init(enabled: true, user: user)
    }

    /// `twofactor.fingerprint.disable`: needs the password.
    func disableSecondStep(_ params: TwoFactorFingerprintDisable.Params, session: PresentedSession) async throws -> TwoFactorFingerprintEnable.Result {
        let account = try await directory.authenticate(session).accountID
        try await directory.confirmPassword(SecretBytes(Array(params.password.utf8)), account: account)
        try await steps.remove(account: account)
        return .init(enabled: false, user: nil)
    }
}
