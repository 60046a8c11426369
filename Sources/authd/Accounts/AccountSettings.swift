import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// What the owner of an account changes with a session: email and password, the PIN second
/// factor, and deactivation. Every change that weakens or removes a credential asks for a
/// credential first, under the same locks as sign-in: a stolen session must not be enough.
struct AccountSettings: Sendable {
    let directory: any AccountSettingsBook & MachineAccounts
    let logger: Logger
    /// Limits email changes per account (`RateLimiter.Action.emailChange`).
    let limiter: RateLimiter

    /// Sessions older than this must sign in again before changing security settings.
    static let reauthenticationWindow: Int64 = 600

    func setProfile(_ params: AccountProfileSet.Params, session: PresentedSession) async throws -> AccountInfo {
        let email = try params.email.map(Registration.normalizeEmail)
        let current = try await directory.profile(session)
        let emailChanges = email != nil && email != current.email
        // Changing the password or the email address needs the current password: a stolen
        // session must not be enough, nor a way to guess it without the lockout. An account
        // without a password changes its address with the session alone (under the local lock).
        if (params.password != nil || emailChanges) && current.hasPassword {
            guard let old = params.currentPassword else {
                let what = params.password != nil ? "the password" : "the email address"
                throw InvalidParameter("Changing \(what) needs 'current_password'.", field: "current_password")
            }
            try await directory.confirmPassword(SecretBytes(Array(old.utf8)), account: current.id)
        }
        // Every attempt counts, whatever comes of it: "taken" answers must stay few.
        if emailChanges { try limiter.take(.emailChange, account: current.id) }
        var newHash: String?
        if let password = params.password {
            try Self.checkNewPassword(password, for: current, email: email)
            newHash = try await Argon2id.owasp.hashOffPool(SecretBytes(Array(password.utf8)))
        }
        let info = try await directory.updateProfile(session, email: email, passwordHash: newHash)
        if emailChanges {
            logger.notice("email address changed by the account's owner", [
                ("AUTHD_ACCOUNT", current.id), ("AUTHD_EMAIL_FROM", current.email.map(Self.redacted(email:)) ?? "none"),
                ("AUTHD_EMAIL_TO", info.email.map(Self.redacted(email:)) ?? "none"),
            ])
        }
        return info
    }

    /// An email address as the journal and the audit log may show it: its first character and
    /// its domain (`o…@example.org`), enough to recognise a change, not to harvest addresses.
    static func redacted(email: String) -> String {
        guard let at = email.lastIndex(of: "@") else { return "…" }
        return String(email.prefix(1)) + "…" + email[at...]
    }

    /// `account.password.check`: changes nothing, so a client can check the current password
    /// and the new one's policy before the person types it again. The current password is
    /// checked as `setProfile` checks it: a wrong one counts toward the lockout.
    func checkPassword(_ params: AccountPasswordCheck.Params, session: PresentedSession) async throws -> AccountPasswordCheck.Result {
        let current = try await directory.profile(session)
        if let old = params.currentPassword {
            try await directory.confirmPassword(SecretBytes(Array(old.utf8)), account: current.id)
        }
        if let password = params.password { try Self.checkNewPassword(password, for: current, email: nil) }
        return .init(hasPassword: current.hasPassword)
    }

    /// The password policy for `account` (with `email` when it is about to change): longer
    /// without a PIN, never the phone number or email address.
    private static func checkNewPassword(_ password: String, for account: AccountProfile, email: String?) throws(AccountFailure) {
        try PasswordPolicy.check(password, hasSecondFactor: account.hasPIN, identifiers: [account.phone ?? "", email ?? account.email ?? ""])
    }

    func enablePIN(_ params: TwoFactorPINEnable.Params, session: PresentedSession) async throws -> TwoFactorPINEnable.Result {
        try PINPolicy.check(params.pin)
        guard OpenSSL.constantTimeEquals(Array(params.pin.utf8), Array(params.confirm.utf8)) else { throw AccountFailure.pinMismatch }
        try await directory.checkPINEnrolment(session, reauthenticationWindow: Self.reauthenticationWindow)
        let hash = try await Argon2id.owasp.hashOffPool(SecretBytes(Array(params.pin.utf8)))
        try await directory.setPIN(session, hash: hash)
        return .init(enabled: true)
    }

    func disablePIN(_ params: TwoFactorPINDisable.Params, session: PresentedSession) async throws -> TwoFactorPINEnable.Result {
        let account = try await directory.authenticate(session).accountID
        // Both, each with its own lock and counters, as at sign-in.
        try await directory.confirmPassword(SecretBytes(Array(params.password.utf8)), account: account)
        try await directory.confirmPIN(SecretBytes(Array(params.pin.utf8)), account: account)
        try await directory.removePIN(session)
        return .init(enabled: false)
    }

    /// `account.deactivate`: confirmed with the password or the PIN.
    func deactivate(_ params: AccountDeactivate.Params, session: PresentedSession) async throws -> AccountDeactivate.Result {
        let account = try await directory.authenticate(session).accountID
        if let password = params.password {
            try await directory.confirmPassword(SecretBytes(Array(password.utf8)), account: account)
        } else if let pin = params.pin {
            try await directory.confirmPIN(SecretBytes(Array(pin.utf8)), account: account)
        } else {
            throw InvalidParameter("Give 'password' or 'pin' to confirm the deactivation.", field: "password")
        }
        try await directory.deactivate(account: account)
        logger.notice("account deactivated by its owner", [("AUTHD_ACCOUNT", account)])
        return .init(deactivated: true)
    }
}
