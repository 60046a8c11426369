import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// `unlock` and `unlock.biometric`: the proofs that open a local user's lock. authd decides
/// like a phone: fingerprint first when it is on and the reader works; then the account's
/// password when it has one, else a code sent by SMS to its verified number (the same codes,
/// limits and attempt counting as sign-in by code). The finger falls back when it fails, is
/// unavailable, or the user would rather type; `sms` asks for the code even when there is a
/// password.
struct Unlocker: Sendable {
    let lock: LocalLock
    let directory: any MachineAccounts
    let biometrics: BiometricService
    /// Codes by SMS, where the account's home is this machine; nil on a device, whose lock
    /// never offers them (`LockCredentials.codesRefused`).
    let codes: SMSCodes?
    let limiter: RateLimiter

    /// Wrongly shaped answers to the code prompt (not 6 digits) asked again before giving up;
    /// they are not attempts at the code.
    static let malformedCodeAnswers = 3

    private func rememberedAccount(_ uid: UInt32) async throws -> String {
        guard let account = try await lock.account(uid) else { throw LockFailure.nothingToUnlock }
        return account
    }

    func unlock(_ params: Unlock.Params, context: RequestContext) async throws -> LockState {
        let uid = context.caller.uid
        let account = try await rememberedAccount(uid)
        let methods = try await lock.unlockMethods(uid, account: account)
        if let password = params.password {
            guard methods.password else { throw LockFailure.noPassword }
            return try await withPassword(password, account: account, uid: uid)
        }
        let codeAsked = params.sms == true
        if codeAsked && methods.phone == nil { throw methods.codesRefused ?? LockFailure.noPhone }
        var why = ""
        if !codeAsked {
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
        }
        switch methods.secret(codeAsked: codeAsked) {
        case .password:
            let password = try await context.prompts.ask(.password, message: why + "Enter the account password to unlock authd")
            return try await withPassword(password, account: account, uid: uid)
        case .code(let phone):
            return try await withCode(to: phone, account: account, uid: uid, preface: why, context: context)
        case nil:
            throw LockFailure.nothingOpens
        }
    }

    /// The password of the remembered account, with sign-in's lockout and padding. It also
    /// lifts a fingerprint cut-off.
    private func withPassword(_ password: String, account: String, uid: UInt32) async throws -> LockState {
        try await directory.confirmPassword(SecretBytes(Array(password.utf8)), account: account)
        try await biometrics.update(uid) { $0.gate.passwordProved() }
        try await lock.unlocked(uid)
        return LockState(locked: false, method: "password", account: account)
    }

    /// A code sent by SMS to the account's number, asked for through `code` prompts: a wrong
    /// code counts and brings a new one at once, as at sign-in by code, until the flow ends.
    /// Like the password, a right code lifts a fingerprint cut-off (for an account without a
    /// password it is the only thing that could).
    private func withCode(to phone: String, account: String, uid: UInt32, preface: String, context: RequestContext) async throws -> LockState {
        guard let codes else { throw MachineAccessFailure.notOnDevice(operation: "unlock with a code sent by SMS") }
        try limiter.take(.unlockCode, caller: .local(context.caller))
        let number = try PhoneNumber.parse(phone, region: nil)
        let owner = FlowOwner(.local(context.caller))
        let (challenge, code) = try await codes.open(.unlock, for: number, owner: owner)
        try await deliver(code, to: number, flow: challenge, by: codes)
        var message = preface + "Enter the \(SMSCodes.length)-digit code sent by SMS to \(number.redacted) to unlock authd"
        var malformed = 0
        while true {
            let answer = String(try await context.prompts.ask(.code, message: message).filter { $0 != " " })
            do {
                try SMSCodes.checkFormat(answer)
            } catch {
                malformed += 1
                guard malformed < Self.malformedCodeAnswers else { throw error }
                message = "The code is \(SMSCodes.length) digits. Enter the code sent by SMS to \(number.redacted) to unlock authd"
                continue
            }
            let replacement = try SMSCodes.newCode()
            let outcome: CodeConfirmation
            do {
                outcome = try await codes.directory.confirmCode(flow: challenge.id, account: account, codeMAC: try codes.mac(flow: challenge.id, code: answer),
                                                                replacementMAC: try codes.mac(flow: challenge.id, code: replacement), owner: owner, policy: codes.policy)
            } catch AccountFailure.signInAttemptsExhausted {
                throw LockFailure.codeAttemptsExhausted
            } catch AccountFailure.signInCodeExpired {
                throw LockFailure.codeExpired
            }
            switch outcome {
            case .confirmed:
                try await biometrics.update(uid) { $0.gate.passwordProved() }
                try await lock.unlocked(uid)
                return LockState(locked: false, method: "sms", account: account)
            case .replaced(let renewed, _):
                try await deliver(replacement, to: number, flow: renewed, by: codes)
                message = "Wrong code; a new one was sent to \(number.redacted). Enter it to unlock authd"
            }
        }
    }

    /// Sends a code; a failure is said in the lock's words (the flow stays void, see `SMSCodes.deliver`).
    private func deliver(_ code: String, to number: PhoneNumber, flow: OTPChallenge, by codes: SMSCodes) async throws {
        do {
            try await codes.deliver(code: code, to: number, flow: flow)
        } catch AccountFailure.codeUndeliverable(let redacted, _) {
            throw LockFailure.codeUndeliverable(redactedPhone: redacted)
        }
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
