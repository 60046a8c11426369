import OpenSSLCrypto
import Protocol

/// User verification for passkeys, as a phone's platform authenticator does it: the finger
/// when fingerprint unlock is on and the reader works, else the 6-digit PIN of the account
/// signed in on this local user (the account that owns its lock). Anything else ends with
/// `passkey.uv_failed`, and the caller makes or signs nothing.
struct PasskeyUserVerification: Sendable {
    let directory: any MachineAccounts
    let lock: LocalLock
    let biometrics: BiometricService

    /// How the user was verified.
    enum Method: String, Sendable { case fingerprint, pin }

    /// `purpose` completes "Touch the fingerprint reader …" and "Enter … PIN …"; `timeoutMilliseconds`
    /// is the WebAuthn options' `timeout`, which bounds the PIN prompt when it is shorter than
    /// `[server] prompt_timeout`.
    func verify(purpose: String, timeoutMilliseconds: Int?, context: RequestContext) async throws -> Method {
        let uid = context.caller.uid
        let settings = try await biometrics.settings(uid)
        var why = ""
        var fingerFailure: BiometricFailure?
        if settings.gate.enabled && !settings.gate.cutOff {
            do {
                try await biometrics.verify(user: try BiometricService.user(of: context.caller), gateUID: uid,
                                            attempts: settings.gate.attemptsLeft, purpose: purpose, context: context)
                return .fingerprint
            } catch {
                guard let preface = BiometricFailure.fallbackPreface(error) else { throw error }
                why = preface
                fingerFailure = error as? BiometricFailure
            }
        } else if settings.gate.enabled {
            why = BiometricFailure.cutOff.message + " "
            fingerFailure = .cutOff
        }
        var pinAccount: String?
        if let account = try await lock.account(uid), try await directory.pinFactor(account: account) == .enrolled { pinAccount = account }
        guard let account = pinAccount else { throw PasskeyFailure.noVerificationMethod(preface: why, finger: fingerFailure) }
        let pin = try await context.prompts.ask(.pin, message: why + "Enter your account PIN \(purpose)",
                                                within: timeoutMilliseconds.map { .milliseconds(max($0, 0)) })
        do {
            try await directory.confirmPIN(SecretBytes(Array(pin.utf8)), account: account)
        } catch let failure as AccountFailure {
            throw PasskeyFailure.pinRefused(failure)
        }
        return .pin
    }
}
