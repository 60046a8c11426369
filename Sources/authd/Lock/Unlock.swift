import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// `unlock` and `unlock.biometric`: the proofs that open a local user's lock. authd decides
/// like a phone: fingerprint first when it is on and the reader works; the password when the
/// finger fails, is unavailable, or the user would rather type it.
struct Unlocker: Sendable {
    let lock: LocalLock
    let directory: any AccountDirectory
    let biometrics: BiometricService

    private func rememberedAccount(_ uid: UInt32) async throws -> String {
        guard let account = try await lock.account(uid) else { throw LockFailure.nothingToUnlock }
        return account
    }

    func unlock(_ params: Unlock.Params, context: RequestContext) async throws -> LockState {
        let uid = context.caller.uid
        let account = try await rememberedAccount(uid)
        if let password = params.password { return try await withPassword(password, account: account, uid: uid) }
        var why = ""
        let settings = try await biometrics.settings(uid)
        if settings.gate.enabled && !settings.gate.cutOff {
            do {
                try await biometrics.verify(user: try BiometricService.user(of: context.caller), gateUID: uid,
                                            attempts: settings.gate.attemptsLeft, purpose: "to unlock authd", context: context)
                try await lock.unlocked(uid)
                return LockState(locked: false, method: "fingerprint", account: account)
            } catch {
                guard let preface = BiometricFailure.fallbackPreface(error) else { throw error }
                why = preface
            }
        } else if settings.gate.enabled {
            why = BiometricFailure.cutOff.message + " "
        }
        let password = try await context.prompts.ask(.password,
                                                               message: why + "Enter the account password to unlock authd")
        return try await withPassword(password, account: account, uid: uid)
    }

    /// The password of the remembered account, with sign-in's lockout and padding. It also
    /// lifts a fingerprint cut-off.
    private func withPassword(_ password: String, account: String, uid: UInt32) async throws -> LockState {
        try await directory.confirmPassword(SecretBytes(Array(password.utf8)), account: account)
        try await biometrics.update(uid) { $0.gate.passwordProved() }
        try await lock.unlocked(uid)
        return LockState(locked: false, method: "password", account: account)
    }

    func unlockBiometric(context: RequestContext) async throws -> LockState {
        let uid = context.caller.uid
        let account = try await rememberedAccount(uid)
        let settings = try await biometrics.settings(uid)
        guard settings.gate.enabled else { throw BiometricFailure.unlockOff }
        try await biometrics.verify(user: try BiometricService.user(of: context.caller), gateUID: uid, attempts: 1,
                                    purpose: "to unlock authd", context: context)
        try await lock.unlocked(uid)
        return LockState(locked: false, method: "fingerprint", account: account)
    }
}
