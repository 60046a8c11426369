import Protocol

/// Why an end-to-end encrypted event or a device's published key was refused (DESIGN §13).
/// Messages say which check failed and never carry key material, plaintext or ciphertext.
public enum E2EEFailure: Error, Equatable, Sendable {
    /// Not a JWE or signed envelope of authd's profile (shape, sizes, algorithms, limits).
    case malformed
    /// No recipient has this device's key id.
    case notARecipient
    /// The content key did not unwrap, or the content's tag did not verify.
    case tampered
    /// The sender's signature does not verify with its device key.
    case badSignature
    /// The envelope's signer is not a device of the account.
    case unknownSender
    /// A device's published key is not signed by the device key its id names.
    case badDeviceKey(deviceID: String)
    /// A plaintext that would not fit the JWE size limit (`limit` bytes of serialisation).
    case tooLarge(limit: Int)

    /// The wire reason, one per case.
    public var reason: Reason {
        switch self {
        case .malformed: .e2eeMalformed
        case .notARecipient: .e2eeNotARecipient
        case .tampered: .e2eeTampered
        case .badSignature: .e2eeBadSignature
        case .unknownSender: .e2eeUnknownSender
        case .badDeviceKey: .e2eeBadDeviceKey
        case .tooLarge: .e2eeTooLarge
        }
    }

    /// One sentence for people and logs.
    public var message: String {
        switch self {
        case .malformed: "The encrypted event is not a JWE of authd's profile (ECDH-ES+A256KW, A256GCM, P-256)."
        case .notARecipient: "The encrypted event was not encrypted to this device."
        case .tampered: "The encrypted event does not decrypt: it was changed, or encrypted to another key."
        case .badSignature: "The encrypted event's signature does not verify with the sending device's key."
        case .unknownSender: "The encrypted event is signed by a device this account does not have."
        case .badDeviceKey(let deviceID):
            "The encryption key published for device \(Redaction.printable(deviceID, limit: 80)) is not signed by that device's key."
        case .tooLarge(let limit): "The event is too large to encrypt (the encrypted form may be at most \(limit) bytes)."
        }
    }

    public var rpcError: RPCError {
        switch self {
        case .badDeviceKey(let deviceID): .failure(reason, message, details: ["device_id": .string(deviceID)])
        case .tooLarge(let limit): .failure(reason, message, details: ["limit": .integer(Int64(limit))])
        default: .failure(reason, message)
        }
    }
}
