import FoundationEssentials
import Protocol

/// Sign-ins that a finger completes: fast-forward login of the remembered account (a bank
/// app's "remembered user"), and the fingerprint as an account's second sign-in step.
struct FingerprintSignIn: Sendable {
    let store: Store
    let config: ConfigHolder
    let lock: LocalLock
    let biometrics: BiometricService
    let login: Login
    let sessions: SessionService
    let now: @Sendable () -> Date

    /// A first scan and up to four retries (issue 5), then the caller falls back to the password.
    static let attempts = 5

    private var seconds: Int64 { Int64(now().timeIntervalSince1970) }

    /// `auth.fast`.
    func fast(context: RequestContext) async throws -> SignedIn {
        let uid = context.caller.uid
        guard let remembered = try await lock.rememberedSignIn(uid) else { throw BiometricFailure.rememberedInvalid }
        guard try await biometrics.settings(uid).gate.enabled else { throw BiometricFailure.signInOff }
        try await biometrics.verify(user: try BiometricService.user(of: context.caller), gateUID: uid, attempts: Self.attempts,
                                    purpose: "to sign in", context: context)
        let config = config.current
        let now = seconds
        let signedIn = try await store.transaction { database -> SignedIn in
            guard let device = try database.queryOne("SELECT device_key, name FROM devices WHERE id = ? AND revoked_at IS NULL", [.text(remembered.device)], row: {
                SessionStore.DeviceIdentity(key: $0.text(0), name: $0.text(1), nameGiven: false)
            }) else { throw BiometricFailure.rememberedInvalid }
            let session = try SessionStore.create(in: database, account: remembered.account, device: device, amr: ["fpt"], limit: config.deviceLimit,
                                                  policy: config.devicePolicy, idle: Int64(config.sessionIdleSeconds), now: now,
                                                  lifetime: Int64(config.sessionLifetimeSeconds))
            guard let account = try SessionStore.accountInfo(in: database, where: "id", is: remembered.account) else { throw BiometricFailure.rememberedInvalid }
            return SignedIn(account: account, session: session)
        }
        try await lock.remember(uid, account: signedIn.account.id, device: signedIn.session.deviceID, proof: .fingerprint)
        return signedIn
    }

    /// `auth.login.fingerprint`: the finger of the local user the account chose. When the finger
    /// fails or the reader is unavailable, the same flow continues with the PIN if the account
    /// has one (`data.fallback = "pin"`); otherwise it ends (`"otp"`: sign in with an SMS code).
    func secondStep(_ params: AuthLoginFingerprint.Params, context: RequestContext) async throws -> SignedIn {
        let now = seconds
        struct Pending: Sendable { let account, deviceKey, deviceName: String; let user: String?; let hasPIN: Bool }
        let pending = try await store.read { database in
            try database.queryOne(
                """
                SELECT a.id, f.device_key, f.device_name, a.fingerprint_user, a.pin_hash IS NOT NULL
                FROM login_flows f JOIN accounts a ON a.id = f.account_id
                WHERE f.id = ? AND f.next = 'fingerprint' AND f.expires_at > ? AND a.deactivated_at IS NULL
                """, [.text(params.flow), .integer(now)]) {
                Pending(account: $0.text(0), deviceKey: $0.text(1), deviceName: $0.text(2), user: $0.optionalText(3), hasPIN: $0.int(4) != 0)
            }
        }
        guard let pending else { throw Login.failed }
        do {
            guard let user = FingerprintUser.validated(pending.user) else { throw BiometricFailure.unavailable("the account's fingerprint user is not valid") }
            try await biometrics.verify(user: user, gateUID: nil, attempts: Self.attempts, purpose: "to sign in", context: context)
        } catch let failure as BiometricFailure where failure != .cancelled {
            try await store.transaction { database in
                if pending.hasPIN {
                    try database.execute("UPDATE login_flows SET next = 'pin' WHERE id = ?", [.text(params.flow)])
                } else {
                    try database.execute("DELETE FROM login_flows WHERE id = ?", [.text(params.flow)])
                }
            }
            throw BiometricFailure.signInContinues(failure, withPIN: pending.hasPIN)
        }
        let config = config.current
        let device = SessionStore.DeviceIdentity(key: pending.deviceKey, name: pending.deviceName, nameGiven: false)
        let signedIn = try await store.transaction { database -> SignedIn in
            try database.execute("DELETE FROM login_flows WHERE id = ?", [.text(params.flow)])
            guard database.changes == 1 else { throw Login.failed }
            let session = try SessionStore.create(in: database, account: pending.account, device: device, amr: ["pwd", "fpt"], limit: config.deviceLimit,
                                                  policy: config.devicePolicy, idle: Int64(config.sessionIdleSeconds), now: now,
                                                  lifetime: Int64(config.sessionLifetimeSeconds))
            return SignedIn(account: try SessionStore.accountInfo(in: database, where: "id", is: pending.account)!, session: session)
        }
        try await lock.remember(context.caller.uid, account: pending.account, device: signedIn.session.deviceID, proof: .password)
        return signedIn
    }

    /// `twofactor.fingerprint.enable`: one matching scan of the caller's finger now.
    func enableSecondStep(_ params: TwoFactorFingerprintEnable.Params, context: RequestContext) async throws -> TwoFactorFingerprintEnable.Result {
        let now = seconds
        let user = try BiometricService.user(of: context.caller)
        let account = try await sessions.withSession(params.session) { _, session in
            guard session.createdAt >= now - SessionService.reauthenticationWindow else { throw AccountFailure.reauthRequired(for: "change how this account signs in") }
            return session.accountID
        }
        try await biometrics.verify(user: user, gateUID: nil, attempts: 3, purpose: "to make it this account's second step", context: context)
        try await store.transaction { database in
            try database.execute("UPDATE accounts SET fingerprint_user = ? WHERE id = ?", [.text(user), .text(account)])
        }
        return .init(enabled: true, user: user)
    }

    /// `twofactor.fingerprint.disable`: needs the password.
    func disableSecondStep(_ params: TwoFactorFingerprintDisable.Params) async throws -> TwoFactorFingerprintEnable.Result {
        let account = try await sessions.withSession(params.session) { _, session in session.accountID }
        try await login.confirmPassword(params.password, account: account)
        try await store.transaction { database in
            try database.execute("UPDATE accounts SET fingerprint_user = NULL WHERE id = ?", [.text(account)])
        }
        return .init(enabled: false, user: nil)
    }
}
