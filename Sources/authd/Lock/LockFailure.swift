import Protocol

/// Why the local lock refused. Each case is one stable wire reason.
enum LockFailure: WireErrorConvertible, Equatable {
    /// The caller's local user is locked: guarded methods wait for `unlock`, which takes
    /// `methods` (`UnlockMethods.names`).
    case locked(methods: [String])
    /// `lock` with no remembered account whose password or number could open it again.
    case nothingToLockWith
    /// `lock` for a remembered account that has neither a password nor a number to send a code
    /// to: nothing could open the lock again.
    case noUnlockMethod
    /// `unlock` with no remembered account, so there is no lock to open.
    case nothingToUnlock
    /// `unlock` of a lock that nothing can open (the account lost its password and number
    /// after the lock closed).
    case nothingOpens
    /// `unlock` with a password, for an account that has none.
    case noPassword
    /// `unlock` by SMS code, for an account without a verified number.
    case noPhone
    /// The code could not be sent to `redactedPhone`.
    case codeUndeliverable(redactedPhone: String)
    /// The unlock's code flow ended: too many wrong codes, or it expired.
    case codeAttemptsExhausted
    case codeExpired

    var rpcError: RPCError {
        switch self {
        case .locked(let methods):
            .failure(.sessionLocked, "authd is locked; unlock it with `authctl unlock`" + (Self.words(methods).map { " (\($0))." } ?? "."))
        case .nothingToLockWith:
            .failure(.lockNoAccount, "Nothing to lock with: sign in to an account first; its password, or a code sent to its number, unlocks.")
        case .noUnlockMethod:
            .failure(.lockNoUnlockMethod,
                     "Not locked: nothing could unlock authd again, as the account signed in here has no password and no phone number to send a code to. Set a password with `authctl password set`, then lock.")
        case .nothingToUnlock: .failure(.lockNoAccount, "No account signed in from this user, so there is no lock to open.")
        case .nothingOpens:
            .failure(.lockNoUnlockMethod, "The account signed in here has no password and no phone number to send a code to, so nothing can unlock authd.")
        case .noPassword:
            .failure(.lockNoUnlockMethod,
                     "The account signed in here has no password: unlock with a code sent by SMS (`authctl unlock`), then set one with `authctl password set`.")
        case .noPhone: .failure(.lockNoUnlockMethod, "The account signed in here has no phone number to send a code to; unlock with its password.")
        case .codeUndeliverable(let phone): .failure(.smsUndeliverable, "The code could not be sent to \(phone); run `authctl unlock` again later.")
        case .codeAttemptsExhausted: .failure(.otpAttemptsExhausted, "Too many wrong codes; run `authctl unlock` again for a new code.")
        case .codeExpired: .failure(.otpExpired, "The code has expired; run `authctl unlock` again for a new one.")
        }
    }

    /// `unlock`'s methods as a person says them: "fingerprint, password or a code sent by SMS".
    static func words(_ methods: [String]) -> String? {
        let said = methods.map { $0 == "sms" ? "a code sent by SMS" : $0 }
        guard let last = said.last else { return nil }
        return said.count == 1 ? last : said.dropLast().joined(separator: ", ") + " or " + last
    }
}
