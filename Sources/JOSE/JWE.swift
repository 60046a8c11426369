import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// RFC 7516 JWE, General JSON Serialization, alg ECDH-ES+A256KW (per recipient), enc A256GCM.
///
/// The one profile authd writes and reads (DESIGN §13): one random content key per message,
/// wrapped for each recipient device under a key agreed with a fresh ephemeral P-256 key
/// (RFC 7518 §4.6). Reading follows RFC 7516 §7.2 far enough to take what another library
/// writes for the same profile: the headers are the union of `protected`, `unprotected` and
/// the recipient's `header` (a name in two of them is refused), `aad` is honoured, and the
/// flattened syntax (one recipient, no `recipients` array) is read as one recipient.
/// Anything else — another algorithm or curve, `zip`, `crit`, a part of the wrong size, more
/// than ``maximumSerializationBytes`` — is refused as malformed, before any key is used.
public enum JWE {
    public struct Recipient: Sendable {
        public let kid: String
        public let key: P256PublicKey

        public init(kid: String, key: P256PublicKey) {
            self.kid = kid
            self.key = key
        }
    }

    /// The largest serialisation read or written: a sync line's limit.
    public static let maximumSerializationBytes = 1 << 20

    public static let keyAgreement = "ECDH-ES+A256KW"
    public static let contentEncryption = "A256GCM"
    /// `{"enc":"A256GCM"}`, the protected header every JWE of ours has; its base64url text is
    /// the content's associated data.
    static let protectedHeader = Base64URL.encode(Array(#"{"enc":"A256GCM"}"#.utf8))

    /// One random 256-bit CEK, one random 96-bit IV; protected header {"enc":"A256GCM"};
    /// per recipient: header {"alg":"ECDH-ES+A256KW","kid":kid,"epk":{"kty":"EC","crv":"P-256","x":…,"y":…}}, encrypted_key.
    /// Returns the serialisation as compact JSON text (members: protected, recipients, iv, ciphertext, tag).
    /// Throws ``E2EEFailure/malformed`` for no recipients or two with one kid, and
    /// ``E2EEFailure/tooLarge(limit:)`` when the result would pass ``maximumSerializationBytes``.
    public static func encrypt(_ plaintext: [UInt8], to recipients: [Recipient]) throws -> String {
        guard !recipients.isEmpty, Set(recipients.map(\.kid)).count == recipients.count, !recipients.contains(where: \.kid.isEmpty) else {
            throw E2EEFailure.malformed
        }
        guard plaintext.count <= maximumSerializationBytes else { throw E2EEFailure.tooLarge(limit: maximumSerializationBytes) }
        let contentKey = try OpenSSL.randomSecret(32)
        let iv = try OpenSSL.randomBytes(AESGCM.nonceLength)
        let (ciphertext, tag) = try AESGCM.seal(plaintext, key: contentKey, iv: iv, associatedData: Array(protectedHeader.utf8))
        var wrapped: [Serialized.Recipient] = []
        for recipient in recipients {
            // A fresh ephemeral key per recipient, as RFC 7516's general syntax does.
            let ephemeral = try P256PrivateKey.generate()
            let keyEncryptionKey = try deriveKeyEncryptionKey(secret: try ephemeral.sharedSecret(with: recipient.key), apu: [], apv: [])
            let encryptedKey = try AESKeyWrap.wrap(contentKey, kek: keyEncryptionKey)
            var header: [String: JSONValue] = ["alg": .string(keyAgreement), "kid": .string(recipient.kid)]
            header["epk"] = .object(try JOSEParts.p256Members(try ephemeral.publicKey()))
            wrapped.append(Serialized.Recipient(encryptedKey: Base64URL.encode(encryptedKey), header: header))
        }
        let text = try JOSEParts.text(Serialized(ciphertext: Base64URL.encode(ciphertext), iv: Base64URL.encode(iv), protected: protectedHeader,
                                            recipients: wrapped, tag: Base64URL.encode(tag)))
        guard text.utf8.count <= maximumSerializationBytes else { throw E2EEFailure.tooLarge(limit: maximumSerializationBytes) }
        return text
    }

    /// Decrypts as recipient `kid` holding `key`.
    public static func decrypt(_ serialization: String, kid: String, key: P256PrivateKey) throws(E2EEFailure) -> [UInt8] {
        guard let parsed = Parsed(serialization) else { throw .malformed }
        guard let recipient = parsed.recipients.first(where: { $0.kid == kid }) else { throw .notARecipient }
        let contentKey: SecretBytes?
        do {
            // A point off the curve is refused here, before it meets our key.
            let ephemeral = try P256PublicKey(x: recipient.epk.x, y: recipient.epk.y)
            let keyEncryptionKey = try deriveKeyEncryptionKey(secret: try key.sharedSecret(with: ephemeral), apu: recipient.apu, apv: recipient.apv)
            contentKey = try AESKeyWrap.unwrap(recipient.encryptedKey, kek: keyEncryptionKey)
        } catch {
            throw .malformed
        }
        guard let contentKey, contentKey.count == 32 else { throw .tampered }
        let plaintext: SecretBytes?
        do {
            plaintext = try AESGCM.open(ciphertext: parsed.ciphertext, tag: parsed.tag, key: contentKey, iv: parsed.iv,
                                        associatedData: parsed.associatedData)
        } catch {
            throw .malformed
        }
        guard let plaintext else { throw .tampered }
        return plaintext.withUnsafeBytes { Array($0) }
    }

    /// The recipients' kids, in order, without decrypting (what the hub checks); nil when not a well-formed JWE of this profile.
    /// (Every check but one that needs no key: whether each `epk` is on the curve is left to
    /// the recipient, which refuses it as malformed.)
    public static func recipientIDs(_ serialization: String) -> [String]? {
        Parsed(serialization)?.recipients.map(\.kid)
    }

    /// The key-encryption key of RFC 7518 §4.6.2: the Concat KDF over the agreed secret with
    /// AlgorithmID ‖ PartyUInfo ‖ PartyVInfo ‖ SuppPubInfo (keydatalen 256) and no SuppPrivInfo.
    static func deriveKeyEncryptionKey(secret: SecretBytes, apu: [UInt8], apv: [UInt8]) throws -> SecretBytes {
        func lengthPrefixed(_ bytes: [UInt8]) -> [UInt8] { bigEndian(UInt32(bytes.count)) + bytes }
        func bigEndian(_ value: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> (24 - 8 * $0)) } }
        let otherInfo = lengthPrefixed(Array(keyAgreement.utf8)) + lengthPrefixed(apu) + lengthPrefixed(apv) + bigEndian(256)
        return try ConcatKDF.sha256(secret: secret, otherInfo: otherInfo, length: 32)
    }

    /// The serialisation as written; the encoder sorts the members.
    private struct Serialized: Encodable {
        let ciphertext: String
        let iv: String
        let protected: String
        let recipients: [Recipient]
        let tag: String

        struct Recipient: Encodable {
            let encryptedKey: String
            let header: [String: JSONValue]

            enum CodingKeys: String, CodingKey {
                case encryptedKey = "encrypted_key"
                case header
            }
        }
    }

    /// A serialisation read and checked against the profile, nothing decrypted.
    struct Parsed {
        struct Recipient {
            let kid: String
            let epk: (x: [UInt8], y: [UInt8])
            let encryptedKey: [UInt8]
            let apu: [UInt8]
            let apv: [UInt8]
        }

        let recipients: [Recipient]
        let iv: [UInt8]
        let ciphertext: [UInt8]
        let tag: [UInt8]
        /// ASCII(BASE64URL(protected)), and `.` ‖ BASE64URL(aad) when there is an `aad`.
        let associatedData: [UInt8]

        init?(_ serialization: String) {
            let text = Array(serialization.utf8)
            guard text.count <= JWE.maximumSerializationBytes, let top = JOSEParts.object(text),
                  case .string(let protectedText)? = top["protected"],
                  let protectedBytes = JOSEParts.bytes(protectedText), let protected = JOSEParts.object(protectedBytes),
                  let iv = JOSEParts.bytes(top["iv"], count: AESGCM.nonceLength),
                  let ciphertext = JOSEParts.bytes(top["ciphertext"]),
                  let tag = JOSEParts.bytes(top["tag"], count: AESGCM.tagLength)
            else { return nil }
            var shared = protected
            if let unprotected = top["unprotected"] {
                guard case .object(let members) = unprotected, let merged = Self.union(shared, members) else { return nil }
                shared = merged
            }
            var associatedData = Array(protectedText.utf8)
            if let aad = top["aad"] {
                guard case .string(let aadText) = aad, JOSEParts.bytes(aadText) != nil else { return nil }
                associatedData += Array(".\(aadText)".utf8)
            }
            // The general syntax's recipients, or the flattened syntax's one.
            let entries: [JSONValue]
            if let list = top["recipients"] {
                guard top["header"] == nil, top["encrypted_key"] == nil, case .array(let array) = list, !array.isEmpty else { return nil }
                entries = array
            } else {
                var flattened: [String: JSONValue] = [:]
                flattened["header"] = top["header"]
                flattened["encrypted_key"] = top["encrypted_key"]
                entries = [.object(flattened)]
            }
            var recipients: [Recipient] = []
            recipients.reserveCapacity(entries.count)
            for entry in entries {
                guard case .object(let members) = entry, let recipient = Self.recipient(members, shared: shared) else { return nil }
                recipients.append(recipient)
            }
            guard Set(recipients.map(\.kid)).count == recipients.count else { return nil }
            self.recipients = recipients
            self.iv = iv
            self.ciphertext = ciphertext
            self.tag = tag
            self.associatedData = associatedData
        }

        /// One recipient's headers, with the shared ones, checked against the profile.
        private static func recipient(_ members: [String: JSONValue], shared: [String: JSONValue]) -> Recipient? {
            var header = shared
            if let own = members["header"] {
                guard case .object(let ownMembers) = own, let merged = union(shared, ownMembers) else { return nil }
                header = merged
            }
            guard header["alg"] == .string(JWE.keyAgreement), header["enc"] == .string(JWE.contentEncryption),
                  header["zip"] == nil, header["crit"] == nil,
                  case .string(let kid)? = header["kid"], !kid.isEmpty,
                  case .object(let epk)? = header["epk"], let point = JOSEParts.p256Coordinates(epk),
                  let encryptedKey = JOSEParts.bytes(members["encrypted_key"], count: 40)
            else { return nil }
            var party: [[UInt8]] = []
            for name in ["apu", "apv"] {
                guard let value = header[name] else {
                    party.append([])
                    continue
                }
                guard let bytes = JOSEParts.bytes(value) else { return nil }
                party.append(bytes)
            }
            return Recipient(kid: kid, epk: point, encryptedKey: encryptedKey, apu: party[0], apv: party[1])
        }

        /// The union of two headers, nil when a name is in both (RFC 7516 §7.2.1).
        private static func union(_ first: [String: JSONValue], _ second: [String: JSONValue]) -> [String: JSONValue]? {
            var union = first
            for (name, value) in second {
                guard union.updateValue(value, forKey: name) == nil else { return nil }
            }
            return union
        }
    }
}
