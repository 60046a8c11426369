import Protocol
import SmartCard

/// Why a card operation ended without a result. Each case is one stable wire reason.
enum CardFailure: Error, Equatable, WireErrorConvertible {
    /// The CAN typed or saved is not 6 digits; the card was not touched.
    case canInvalid
    /// A PIN of the wrong length or not digits; checked before the card is touched.
    case pinInvalidLength(EstEID.PIN)
    case timeout(seconds: Int)
    case canMismatch(savedDeleted: Bool)
    case removed
    case noReader
    case unsupported
    /// The card answered something no correct card sends. `detail` goes to the log only.
    case cardError(String)
    case serviceUnavailable
    case pinWrong(retriesLeft: Int, savedDeleted: Bool)
    case pinBlocked
    case cancelled
    /// The card's certificate is not the one the request names, or the card was swapped
    /// between reading its certificate and signing.
    case certificateMismatch

    var rpcError: RPCError {
        switch self {
        case .canInvalid:
            .failure(.canInvalid, "The CAN is the 6 digits printed on the front of the card.")
        case .pinInvalidLength(let pin):
            .failure(.pinInvalidLength, "\(pin == .pin1 ? "PIN1" : "PIN2") is \(pin.lengths.lowerBound)–\(pin.lengths.upperBound) digits.",
                     details: ["min": .integer(Int64(pin.lengths.lowerBound)), "max": .integer(Int64(pin.lengths.upperBound))])
        case .timeout(let seconds):
            .failure(.cardTimeout, "No card was presented within \(seconds) s.")
        case .canMismatch(let savedDeleted):
            .failure(.cardCANMismatch, savedDeleted
                     ? "The CAN does not match the card; the saved CAN was deleted."
                     : "The CAN does not match the card.",
                     details: ["saved_can_deleted": .bool(savedDeleted)])
        case .removed:
            .failure(.cardRemoved, "The card was removed or the reader connection was lost; try again.")
        case .noReader:
            .failure(.cardNoReader, "No smart-card reader is connected.")
        case .unsupported:
            .failure(.cardUnsupported, "The card in the reader is not a supported ID card.")
        case .cardError:
            .failure(.cardError, "The card gave an answer that cannot be right; nothing was signed.")
        case .serviceUnavailable:
            .failure(.cardServiceUnavailable, "The smart-card service (pcscd) is not running.")
        case .pinWrong(let left, let savedDeleted):
            .failure(.pinWrong, savedDeleted
                     ? "The card refused the saved PIN1 (\(left) tries left); it was deleted."
                     : "Wrong PIN (\(left) tries left).",
                     details: ["retries_left": .integer(Int64(left)), "saved_pin_deleted": .bool(savedDeleted)])
        case .pinBlocked:
            .failure(.pinBlocked, "The PIN is blocked on the card.")
        case .cancelled:
            .failure(.userCancelled, "The card operation was cancelled.")
        case .certificateMismatch:
            .failure(.cardCertificateMismatch, "The card in the reader is not the one whose certificate was given; nothing was signed.")
        }
    }
}
