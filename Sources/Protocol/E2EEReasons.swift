// End-to-end encrypted sync (DESIGN §13): why a device refuses an encrypted event or a device's
// published key. The reasons say which check failed, never anything of the keys or the text.

extension Reason {
    /// Not a JWE (or signed envelope) of authd's profile: not its JSON, a part of the wrong size,
    /// an algorithm other than ECDH-ES+A256KW with A256GCM on P-256, or over the size limit.
    public static let e2eeMalformed = Reason("e2ee.malformed")
    /// The JWE names no recipient with this device's key id: it was not encrypted to this device.
    public static let e2eeNotARecipient = Reason("e2ee.not_a_recipient")
    /// The content key did not unwrap or the content's tag did not verify: the JWE was changed
    /// on the way, or encrypted to another key under this device's id.
    public static let e2eeTampered = Reason("e2ee.tampered")
    /// The sending device's signature over the JWE does not verify with its device key.
    public static let e2eeBadSignature = Reason("e2ee.bad_signature")
    /// The envelope names a sending device the account does not have (or no longer has).
    public static let e2eeUnknownSender = Reason("e2ee.unknown_sender")
    /// A device's published key-agreement key is not signed by the device key its id names
    /// (`data.device_id`): nothing is encrypted to it.
    public static let e2eeBadDeviceKey = Reason("e2ee.bad_device_key")
    /// A plaintext too large to encrypt within the JWE size limit (`data.limit` bytes).
    public static let e2eeTooLarge = Reason("e2ee.too_large")
}
