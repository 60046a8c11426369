import Protocol

/// Why a passkey was not made, used or accepted. Each case is one stable wire reason.
enum PasskeyFailure: WireErrorConvertible, Equatable {
    case badOrigin
    /// The RP ID is neither the origin's host nor an allowed parent of it.
    case rpIDNotAllowed(rpID: String, origin: String)
    case unsupportedAlgorithm
    /// The user already holds a passkey the request excludes.
    case excludedHeld(rpID: String)
    /// The credential is already registered to an account.
    case alreadyRegistered
    /// This user holds no passkey for the RP ID (or none the allow list names).
    case noneForRP(rpID: String, allowListGiven: Bool)
    case deletedMeanwhile
    case noSuchPasskey
    /// The account has no passkey with that id (authd as relying party).
    case noSuchAccountPasskey
    /// The user could not be verified: neither the finger (which failed with `finger`, or is
    /// off) nor a PIN can do it. `preface` says why the finger did not.
    case noVerificationMethod(preface: String, finger: BiometricFailure?)
    /// The account's PIN was refused (wrong, locked, switched off).
    case pinRefused(AccountFailure)
    case invalid(WebAuthnFailure)
    case flowInvalid

    var rpcError: RPCError {
        switch self {
        case .badOrigin:
            .failure(.passkeyBadOrigin, "The origin must be https://HOST[:PORT] (or http://localhost[:PORT]), serialized exactly, with no path.")
        case .rpIDNotAllowed(let rpID, let origin):
            .failure(.passkeyBadOrigin, "The RP ID is not valid for this origin: it must be the origin's host or a parent domain that is not a public suffix.",
                     details: ["rp_id": .string(Redaction.printable(rpID, limit: 253)), "origin": .string(origin)])
        case .unsupportedAlgorithm:
            .failure(.passkeyUnsupportedAlgorithm, "authd makes ES256 (-7) passkeys only, and the request does not accept ES256.")
        case .excludedHeld(let rpID):
            .failure(.passkeyExcluded, "This user already holds one of the passkeys the request excludes for \(rpID).")
        case .alreadyRegistered:
            .failure(.passkeyExcluded, "This passkey is already registered.")
        case .noneForRP(let rpID, let allowListGiven):
            .failure(.passkeyNone, "This user holds no passkey for \(rpID)" + (allowListGiven ? " that the request allows." : "."),
                     details: ["rp_id": .string(rpID)])
        case .deletedMeanwhile: .failure(.passkeyNone, "The passkey was deleted meanwhile.")
        case .noSuchPasskey: .failure(.passkeyNone, "This user holds no passkey with that id.")
        case .noSuchAccountPasskey: .failure(.passkeyNone, "The account has no passkey with that id.")
        case .noVerificationMethod(let preface, let finger):
            Self.userVerificationFailed(
                preface + "There is no other way to verify the user: no account with a PIN is signed in here "
                    + "(`authctl biometric enable` turns on the finger, `authctl 2fa enable` sets a PIN).",
                detail: finger?.reason ?? Reason("no_method"))
        case .pinRefused(let failure):
            Self.userVerificationFailed(failure == .authFailed ? "The PIN is not right." : failure.rpcError.message, detail: failure.rpcError.reason)
        case .invalid(let failure):
            .failure(.passkeyInvalid, "The passkey response is not valid: \(failure.description).", details: ["check": .string(failure.check)])
        case .flowInvalid:
            .failure(.passkeyFlowInvalid, "This passkey ceremony is unknown, expired or already used; begin again.")
        }
    }

    private static func userVerificationFailed(_ message: String, detail: Reason) -> RPCError {
        .failure(.passkeyUVFailed, message + " Nothing was signed.", details: ["detail": .string(detail.rawValue)])
    }
}
