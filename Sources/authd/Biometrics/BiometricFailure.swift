import Protocol

/// Why a fingerprint use ended without a match, or could not start. Each case is one stable
/// wire reason; `message` is the sentence people read (also inside the prompt that follows
/// when a flow falls back to a secret).
indirect enum BiometricFailure: WireErrorConvertible, Equatable {
    /// No fprintd, no reader, no enrolled finger, reader busy or not permitted.
    case unavailable(String)
    /// The caller's local user has no name fprintd can take.
    case noUsableUserName
    /// The reader or fprintd failed while in use.
    case readerFailed(String)
    case noMatch(attemptsLeft: Int)
    /// The user declined the fingerprint prompt.
    case cancelled
    case timeout(seconds: Int)
    /// `BiometricGate.failureLimit` fingers in a row did not match.
    case cutOff
    case unlockOff
    case signInOff
    /// `auth.fast` has no remembered sign-in, or it no longer holds.
    case rememberedInvalid
    /// `card.biometric.enable` without a saved PIN1 to release.
    case pin1NotSaved
    /// A fingerprint second step failed; the sign-in goes on with the PIN, or ends.
    case signInContinues(BiometricFailure, withPIN: Bool)

    /// A scan failure: the reader's own trouble or the person's finger, which a flow can fall back from.
    static func reader(_ failure: FingerprintFailure) -> BiometricFailure {
        switch failure {
        case .unavailable(let why): .unavailable(why)
        case .failed(let why): .readerFailed(why)
        }
    }

    var message: String {
        switch self {
        case .unavailable(let why): "The fingerprint reader cannot be used: \(why)."
        case .noUsableUserName: "Fingerprints need a local user with a plain login name."
        case .readerFailed(let why): "The fingerprint reader failed: \(why)."
        case .noMatch: "The fingerprint did not match."
        case .cancelled: "The user cancelled the fingerprint prompt."
        case .timeout(let seconds): "No finger was placed on the reader within \(seconds) s."
        case .cutOff: "Fingerprints are off after \(BiometricGate.failureLimit) that did not match; unlock with the password or an SMS code to turn them back on."
        case .unlockOff: "Fingerprint unlock is off; turn it on with `authctl biometric enable`."
        case .signInOff: "Fingerprint sign-in is off; turn it on with `authctl biometric enable`."
        case .rememberedInvalid: "There is no remembered sign-in on this user, or it no longer holds; sign in with the password."
        case .pin1NotSaved: "Save PIN1 first (`authctl card pin1 save`); the fingerprint releases the saved PIN1."
        case .signInContinues(let failure, let withPIN):
            failure.message + (withPIN ? " Continue this sign-in with the PIN." : " Sign in with an SMS code.")
        }
    }

    var reason: Reason {
        switch self {
        case .unavailable, .noUsableUserName: .biometricUnavailable
        case .readerFailed: .biometricFailed
        case .noMatch: .biometricNoMatch
        case .cancelled: .userCancelled
        case .timeout: .biometricTimeout
        case .cutOff: .biometricCutOff
        case .unlockOff, .signInOff: .biometricNotEnabled
        case .rememberedInvalid: .rememberedInvalid
        case .pin1NotSaved: .cardPIN1NotSaved
        case .signInContinues(let failure, _): failure.reason
        }
    }

    private var details: [String: JSONValue] {
        switch self {
        case .unavailable(let why), .readerFailed(let why): ["detail": .string(why)]
        case .noUsableUserName: ["detail": "no usable user name"]
        case .noMatch(let left): ["attempts_left": .integer(Int64(left))]
        case .timeout(let seconds): ["timeout_s": .integer(Int64(seconds))]
        case .signInContinues(let failure, let withPIN):
            failure.details.merging(["fallback": .string(withPIN ? "pin" : "otp")]) { _, fallback in fallback }
        default: [:]
        }
    }

    var rpcError: RPCError { .failure(reason, message, details: details) }

    /// For a flow that asks for a secret when the finger does not do: the sentence that starts
    /// that prompt (why the finger did not do; empty when the user chose to type instead), or
    /// nil when `error` is not the outcome of a scan and must propagate.
    static func fallbackPreface(_ error: any Error) -> String? {
        guard let failure = error as? BiometricFailure else { return nil }
        switch failure {
        case .cancelled: return ""
        case .unavailable, .noUsableUserName, .readerFailed, .noMatch, .timeout, .cutOff: return failure.message + " "
        default: return nil
        }
    }
}
