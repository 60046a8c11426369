import Protocol

/// Why an account method refused: registration, sign-in, codes, credentials and their policies,
/// profile changes, administration. Each case is one stable wire reason; credential refusals
/// say as little as sign-in must (an unknown account and a wrong password look the same).
enum AccountFailure: WireErrorConvertible, Equatable {
    // Input rules
    case phoneInvalid(String)
    case phoneNotMobile(redacted: String)
    case emailInvalid
    case passwordWeak(rule: String, message: String)
    case pinWeak(rule: String, message: String)
    case pinMismatch

    // Codes (registration and sign-in by SMS)
    case unknownRegistration
    case registrationFinished
    case tooManyResends(max: Int)
    case resendTooEarly(retryAfter: Int64)
    case tooManyCodesSent(retryAfter: Int64)
    case codeUndeliverable(redactedPhone: String, flow: String)
    case wrongRegistrationCode(attemptsLeft: Int)
    case wrongSignInCode(newCodeSent: Bool, resendsLeft: Int)
    /// A right code, but its number's account went away meanwhile.
    case codeForNoAccount
    case registrationAttemptsExhausted
    case signInAttemptsExhausted(afterNewCode: Bool)
    case registrationCodeExpired(at: Int64)
    case signInCodeExpired
    case codeUsed
    case phoneTaken
    case emailTakenAtRegistration
    case emailTaken

    // Credentials
    /// Unknown login, wrong password or PIN, deactivated account: on purpose one answer.
    case authFailed
    case locked(until: Int64)
    /// Refused unchecked and uncounted because checks of the same secret still in progress
    /// locked it for now (`Lockout.Reservation.busy`): not a lock that failures earned.
    case busy
    case pinSwitchedOff
    case pinReenrolmentNeedsCode
    case noPINFactor
    case reauthRequired(for: String)
    case rateLimited(action: String, retryAfter: Int64)

    // Administration
    case unknownAccount(selector: String)

    /// The refusals that sign-in pads to a fixed delay (`CredentialPadding.delay`).
    var isCredentialRefusal: Bool {
        switch self {
        case .authFailed, .locked, .busy: true
        default: false
        }
    }

    var reason: Reason { rpcError.reason }

    var rpcError: RPCError {
        switch self {
        case .phoneInvalid(let message): .failure(.phoneInvalid, message)
        case .phoneNotMobile(let redacted): .failure(.phoneNotMobile, "\(redacted) is not a mobile number; codes are sent by SMS.")
        case .emailInvalid: .failure(.emailInvalid, "That is not a usable email address.")
        case .passwordWeak(let rule, let message): .failure(.passwordWeak, message, details: ["rule": .string(rule)])
        case .pinWeak(let rule, let message): .failure(.pinWeak, message, details: ["rule": .string(rule)])
        case .pinMismatch: .failure(.pinMismatch, "The PIN and its confirmation differ.")
        case .unknownRegistration: .failure(.otpUnknownFlow, "No such registration; start again.")
        case .registrationFinished: .failure(.otpUnknownFlow, "This registration is finished; start again.")
        case .tooManyResends(let max):
            .failure(.otpTooManySends, "No more codes for this registration (at most \(max) resends); start again later.")
        case .resendTooEarly(let retryAfter):
            .failure(.otpTooEarly, "Wait \(retryAfter) s before asking for a new code.", details: ["retry_after": .integer(retryAfter)])
        case .tooManyCodesSent(let retryAfter):
            .failure(.otpTooManySends, "Too many codes sent to this number; try again in \(retryAfter / 60 + 1) min.",
                     details: ["retry_after": .integer(retryAfter)])
        case .codeUndeliverable(let phone, let flow):
            .failure(.smsUndeliverable, "The code could not be sent to \(phone); try again with resend.", details: ["flow": .string(flow)])
        case .wrongRegistrationCode(let left):
            .failure(.otpWrong, "Wrong code; \(left) attempt\(left == 1 ? "" : "s") left.", details: ["attempts_left": .integer(Int64(left))])
        case .wrongSignInCode(_, let resendsLeft):
            .failure(.otpWrong, "Wrong code; a new one was sent.", details: ["new_code_sent": true, "resends_left": .integer(Int64(resendsLeft))])
        case .codeForNoAccount: .failure(.otpWrong, "Wrong code.", details: ["attempts_left": 0])
        case .registrationAttemptsExhausted: .failure(.otpAttemptsExhausted, "Too many wrong codes; start the registration again.")
        case .signInAttemptsExhausted(let afterNewCode):
            .failure(.otpAttemptsExhausted, afterNewCode ? "Wrong code again; sign in again from the start." : "Too many wrong codes; sign in again from the start.")
        case .registrationCodeExpired(let at):
            .failure(.otpExpired, "The code has expired; ask for a new one.", details: ["expired_at": .string(Timestamp.rfc3339(epochSeconds: at))])
        case .signInCodeExpired: .failure(.otpExpired, "The code has expired; sign in again.")
        case .codeUsed: .failure(.otpUsed, "This code was already used.")
        case .phoneTaken: .failure(.phoneTaken, "This number already has an account; sign in instead.")
        case .emailTakenAtRegistration: .failure(.emailTaken, "This email address belongs to another account; use another one or none.")
        case .emailTaken: .failure(.emailTaken, "This email address belongs to another account.")
        case .authFailed: .failure(.authFailed, "The login or the password is not right.")
        case .locked(let until):
            .failure(.accountLocked, "Too many failed sign-ins; try again after \(Timestamp.rfc3339(epochSeconds: until)).",
                     details: ["locked_until": .string(Timestamp.rfc3339(epochSeconds: until))])
        case .busy:
            .failure(.accountBusy, "Other sign-ins to this account are being checked; try again in a moment.",
                     details: ["retry_after": .integer(Lockout.busyRetryAfter)])
        case .pinSwitchedOff:
            .failure(.otpRequired, "This account's PIN was switched off after too many wrong PINs; sign in with an SMS code and set a new PIN.")
        case .pinReenrolmentNeedsCode:
            .failure(.otpRequired, "After too many wrong PINs, a new PIN needs a session that proved the phone with an SMS code.")
        case .noPINFactor: .failure(.twoFactorNotEnabled, "This account has no PIN second factor.")
        case .reauthRequired(let action): .failure(.reauthRequired, "Sign in again (within the last 10 minutes) to \(action).")
        case .rateLimited(RateLimiter.Action.emailChange.rawValue, let seconds):
            .failure(.rateLimited, "This account changed its email address too often; wait \(seconds) s.", details: ["retry_after": .integer(seconds)])
        case .rateLimited(let action, let seconds):
            .failure(.rateLimited, "Too many \(action) requests from your user; wait \(seconds) s.", details: ["retry_after": .integer(seconds)])
        case .unknownAccount(let selector): .failure(.accountUnknown, "No account matches '\(Redaction.printable(selector, limit: 64))'.")
        }
    }
}

/// Why a session, or something asked with one, was refused. Each case is one stable wire reason.
enum SessionFailure: WireErrorConvertible, Equatable {
    case notASessionToken
    case ended
    case expired
    /// The account already signs in on `limit` devices (these) and the policy refuses another.
    case deviceLimitReached(limit: Int, devices: [PlaceHolder])
    case unknownSession
    case unknownDevice
    /// The session's device was removed from the account (`device.revoke`).
    case deviceRevoked
    /// The session belongs to another machine than the one that forwarded the call.
    case otherMachine

    /// A device holding one of the account's places, as the refusal lists it.
    struct PlaceHolder: Equatable, Sendable {
        let id: String
        let name: String
        let key: String
        let lastSeen: Int64

        /// `id`, `name`, `last_seen`, and `device_id` for a machine linked to the hub.
        var wire: JSONValue {
            var object: [String: JSONValue] = ["id": .string(id), "name": .string(name), "last_seen": .string(Timestamp.rfc3339(epochSeconds: lastSeen))]
            if let machine = DeviceIdentity.machine(ofKey: key) { object["device_id"] = .string(machine) }
            return .object(object)
        }
    }

    var rpcError: RPCError {
        switch self {
        case .notASessionToken: .failure(.sessionInvalid, "That is not a session token.")
        case .ended: .failure(.sessionInvalid, "This session has ended; sign in again.")
        case .expired: .failure(.sessionExpired, "This session has expired; sign in again.")
        case .deviceLimitReached(let limit, let devices):
            .failure(.deviceLimitReached,
                     "This account may be signed in on \(limit) device\(limit == 1 ? "" : "s") at a time and already is: "
                        + devices.map { "\($0.name) (\($0.id), last seen \(Timestamp.rfc3339(epochSeconds: $0.lastSeen)))" }.joined(separator: ", ")
                        + ". Sign out on one of them, or remove one from a signed-in device (authctl devices revoke ID); "
                        + "an administrator can also let the oldest make room (device policy replace_oldest).",
                     details: ["limit": .integer(Int64(limit)), "devices": .array(devices.map(\.wire))])
        case .unknownSession: .failure(.sessionUnknown, "The account has no live session with that id.")
        case .unknownDevice: .failure(.deviceUnknown, "The account has no device with that id.")
        case .deviceRevoked: .failure(.deviceRevoked, "This device was removed from the account; sign in again (it counts against the device limit again).")
        case .otherMachine: .failure(.sessionInvalid, "This session belongs to another machine; sign in on this one.")
        }
    }
}
