import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// A WebAuthn check that failed; `check` names it (it becomes `data.check` on the wire).
struct WebAuthnFailure: Error, Equatable, CustomStringConvertible {
    let check: String
    let description: String
}

/// Authenticator data (WebAuthn L3 §6.1): rpIdHash ‖ flags ‖ signCount ‖ [attested credential
/// data] ‖ [extensions]. Kept with its raw bytes: signatures cover those, never a re-encoding.
struct AuthenticatorData: Equatable, Sendable {
    enum Flag {
        static let userPresent: UInt8 = 0x01
        static let userVerified: UInt8 = 0x04
        static let backupEligible: UInt8 = 0x08
        static let backupState: UInt8 = 0x10
        static let attestedCredential: UInt8 = 0x40
        static let extensions: UInt8 = 0x80
    }

    struct AttestedCredential: Equatable, Sendable {
        let aaguid: [UInt8]
        let credentialID: [UInt8]
        let publicKey: ES256PublicKey
    }

    let raw: [UInt8]
    let rpIDHash: [UInt8]
    let flags: UInt8
    let signCount: UInt32
    let attested: AttestedCredential?

    var userPresent: Bool { flags & Flag.userPresent != 0 }
    var userVerified: Bool { flags & Flag.userVerified != 0 }
    var backupEligible: Bool { flags & Flag.backupEligible != 0 }
    var backupState: Bool { flags & Flag.backupState != 0 }

    /// §6.5.1: a credential id is at most 1023 bytes.
    static let maxCredentialIDLength = 1023

    static func parse(_ raw: [UInt8]) throws(WebAuthnFailure) -> AuthenticatorData {
        func fail(_ why: String) -> WebAuthnFailure { WebAuthnFailure(check: "authenticator_data", description: why) }
        guard raw.count >= 37 else { throw fail("the authenticator data is shorter than 37 bytes") }
        let flags = raw[32]
        let signCount = raw[33..<37].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        var offset = 37
        var attested: AttestedCredential?
        if flags & Flag.attestedCredential != 0 {
            guard raw.count >= 55 else { throw fail("the attested credential data is cut short") }
            let length = Int(raw[53]) << 8 | Int(raw[54])
            guard length >= 1, length <= maxCredentialIDLength, raw.count >= 55 + length else { throw fail("the credential id length is not valid") }
            let key: CBORValue, used: Int
            do {
                (key, used) = try CBOR.decodePrefix(raw[(55 + length)...])
            } catch {
                throw fail("the credential public key is not canonical CBOR: \(error)")
            }
            attested = AttestedCredential(aaguid: Array(raw[37..<53]), credentialID: Array(raw[55..<(55 + length)]), publicKey: try ES256PublicKey(cose: key))
            offset = 55 + length + used
        }
        if flags & Flag.extensions != 0 {
            guard offset < raw.count, case .map? = try? CBOR.decode(Array(raw[offset...])) else { throw fail("the extensions are not one CBOR map") }
            offset = raw.count
        }
        guard offset == raw.count else { throw fail("bytes follow the authenticator data") }
        return AuthenticatorData(raw: raw, rpIDHash: Array(raw[0..<32]), flags: flags, signCount: signCount, attested: attested)
    }

    /// The bytes an authenticator writes (no extensions).
    static func make(rpID: String, flags: UInt8, signCount: UInt32, attested: AttestedCredential?) throws(WebAuthnFailure) -> [UInt8] {
        var bytes = OpenSSL.sha256(Array(rpID.utf8))
        bytes.append(flags | (attested == nil ? 0 : Flag.attestedCredential))
        bytes += [UInt8(signCount >> 24), UInt8(signCount >> 16 & 0xFF), UInt8(signCount >> 8 & 0xFF), UInt8(signCount & 0xFF)]
        if let attested {
            bytes += attested.aaguid + [UInt8(attested.credentialID.count >> 8), UInt8(attested.credentialID.count & 0xFF)] + attested.credentialID
            bytes += try attested.publicKey.encoded()
        }
        return bytes
    }
}

/// An ES256 credential public key as a COSE_Key (RFC 9053 §7.1.1; WebAuthn §6.5.1.1): exactly
/// {1: 2, 3: -7, -1: 1, -2: x, -3: y}, the point on P-256.
struct ES256PublicKey: Equatable, Sendable {
    let x: [UInt8]
    let y: [UInt8]

    static let algorithm: Int64 = -7

    init(x: [UInt8], y: [UInt8]) throws(WebAuthnFailure) {
        guard (try? JWKPublicKey(p256X: x, y: y)) != nil else {
            throw WebAuthnFailure(check: "public_key", description: "the public key is not a P-256 point")
        }
        self.x = x
        self.y = y
    }

    init(cose: CBORValue) throws(WebAuthnFailure) {
        guard case .map(let pairs) = cose, pairs.count == 5,
              cose[.unsigned(1)] == .unsigned(2), cose[.unsigned(3)] == .integer(Self.algorithm), cose[.integer(-1)] == .unsigned(1),
              case .bytes(let x)? = cose[.integer(-2)], case .bytes(let y)? = cose[.integer(-3)]
        else { throw WebAuthnFailure(check: "public_key", description: "the credential public key is not an ES256 COSE key (EC2, alg -7, P-256)") }
        try self.init(x: x, y: y)
    }

    func encoded() throws(WebAuthnFailure) -> [UInt8] {
        do {
            return try CBOR.encode(.map([(.unsigned(1), .unsigned(2)), (.unsigned(3), .integer(Self.algorithm)), (.integer(-1), .unsigned(1)),
                                         (.integer(-2), .bytes(x)), (.integer(-3), .bytes(y))]))
        } catch {
            throw WebAuthnFailure(check: "public_key", description: "cannot encode the public key")
        }
    }

    /// The SubjectPublicKeyInfo DER (`response.publicKey` of the registration JSON, §5.2.1.1).
    var subjectPublicKeyInfo: [UInt8] {
        [0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01, 0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07,
         0x03, 0x42, 0x00, 0x04] + x + y
    }

    /// Verifies an ASN.1 DER ECDSA signature (WebAuthn §6.5.5) over `message` with SHA-256.
    func verify(derSignature: [UInt8], message: [UInt8]) -> Bool {
        guard derSignature.count <= 72, let raw = try? ECDSASignature.rawFromDER(derSignature, coordinateLength: 32),
              let key = try? JWKPublicKey(p256X: x, y: y) else { return false }
        return key.verify(signature: raw, message: message)
    }
}

/// `clientDataJSON` (§5.8.1), parsed from the exact bytes that will be hashed.
struct CollectedClientData: Equatable, Sendable {
    let type: String
    let challenge: String
    let origin: String
    let crossOrigin: Bool
    let topOrigin: String?

    static func parse(_ bytes: [UInt8]) throws(WebAuthnFailure) -> CollectedClientData {
        let body = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? Array(bytes.dropFirst(3)) : bytes
        guard body.count <= 16 * 1024, case .object(let object)? = try? WireCodec.decode(JSONValue.self, from: Data(body)),
              let type = object["type"]?.stringValue, let challenge = object["challenge"]?.stringValue, let origin = object["origin"]?.stringValue,
              object["crossOrigin"].map({ if case .bool = $0 { true } else { false } }) ?? true,
              object["topOrigin"].map({ $0.stringValue != nil }) ?? true
        else { throw WebAuthnFailure(check: "client_data", description: "clientDataJSON is not a client data object") }
        return CollectedClientData(type: type, challenge: challenge, origin: origin, crossOrigin: object["crossOrigin"] == .bool(true),
                                   topOrigin: object["topOrigin"]?.stringValue)
    }

    /// The bytes a client produces (§5.8.1.1 order and escaping): type, challenge, origin, crossOrigin.
    static func serialize(type: String, challenge: [UInt8], origin: String) -> [UInt8] {
        func quoted(_ text: String) -> String {
            var out = "\""
            for scalar in text.unicodeScalars {
                switch scalar {
                case "\"": out += "\\\""
                case "\\": out += "\\\\"
                case _ where scalar.value < 0x20: out += "\\u00" + (scalar.value < 0x10 ? "0" : "") + String(scalar.value, radix: 16)
                default: out.unicodeScalars.append(scalar)
                }
            }
            return out + "\""
        }
        return Array(("{\"type\":" + quoted(type) + ",\"challenge\":" + quoted(Base64URL.encode(challenge)) + ",\"origin\":" + quoted(origin)
                      + ",\"crossOrigin\":false}").utf8)
    }
}

/// What authd as relying party expects of a ceremony (its `[passkeys]` settings and the
/// challenge it issued).
struct RelyingPartyExpectation: Sendable {
    let rpID: String
    /// Origins accepted, compared exactly (§13.5.9).
    let origins: [String]
    let challenge: [UInt8]
    let requireUserVerification: Bool
}

/// The relying party's checks, WebAuthn L3 §7.1 (registration) and §7.2 (authentication), as pure
/// functions of the bytes received, the expectation and the stored credential.
enum RelyingPartyVerifier {
    struct NewCredential: Equatable, Sendable {
        let id: [UInt8]
        let publicKey: ES256PublicKey
        let signCount: UInt32
        let userVerified: Bool
        let backupEligible: Bool
        let backupState: Bool
    }

    struct StoredCredential: Sendable {
        let publicKey: ES256PublicKey
        let signCount: UInt32
        let backupEligible: Bool
    }

    struct VerifiedAssertion: Equatable, Sendable {
        let signCount: UInt32
        let userVerified: Bool
        let backupState: Bool
    }

    private static func checkClientData(_ bytes: [UInt8], type: String, _ expected: RelyingPartyExpectation) throws(WebAuthnFailure) {
        let client = try CollectedClientData.parse(bytes)
        guard client.type == type else { throw WebAuthnFailure(check: "type", description: "clientDataJSON.type is not \(type)") }
        guard let received = Base64URL.decode(client.challenge), OpenSSL.constantTimeEquals(received, expected.challenge) else {
            throw WebAuthnFailure(check: "challenge", description: "the challenge is not the one issued")
        }
        guard expected.origins.contains(client.origin) else { throw WebAuthnFailure(check: "origin", description: "the origin is not one this relying party accepts") }
        guard !client.crossOrigin, client.topOrigin == nil else {
            throw WebAuthnFailure(check: "cross_origin", description: "a cross-origin ceremony (an iframe) is not accepted")
        }
    }

    private static func checkFlags(_ data: AuthenticatorData, _ expected: RelyingPartyExpectation) throws(WebAuthnFailure) {
        guard OpenSSL.constantTimeEquals(data.rpIDHash, OpenSSL.sha256(Array(expected.rpID.utf8))) else {
            throw WebAuthnFailure(check: "rp_id", description: "the credential is scoped to another RP ID")
        }
        guard data.userPresent else { throw WebAuthnFailure(check: "user_present", description: "the authenticator did not test user presence") }
        guard !expected.requireUserVerification || data.userVerified else {
            throw WebAuthnFailure(check: "user_verified", description: "the authenticator did not verify the user")
        }
        guard data.backupEligible || !data.backupState else { throw WebAuthnFailure(check: "backup_state", description: "backed up but not backup eligible") }
    }

    /// §7.1 steps 5–26 for fmt "none" and ES256. `credentialID` is the response's rawId.
    static func verifyRegistration(clientDataJSON: [UInt8], attestationObject: [UInt8], credentialID: [UInt8],
                                   expected: RelyingPartyExpectation) throws(WebAuthnFailure) -> NewCredential {
        try checkClientData(clientDataJSON, type: "webauthn.create", expected)
        let object: CBORValue
        do { object = try CBOR.decode(attestationObject) } catch {
            throw WebAuthnFailure(check: "attestation_object", description: "the attestation object is not canonical CBOR: \(error)")
        }
        guard case .map(let pairs) = object, pairs.count == 3, case .text(let format)? = object[.text("fmt")],
              case .map(let statement)? = object[.text("attStmt")], case .bytes(let rawData)? = object[.text("authData")]
        else { throw WebAuthnFailure(check: "attestation_object", description: "the attestation object lacks fmt, attStmt or authData") }
        // authd accepts no attestation: "none" with an empty statement only.
        guard format == "none", statement.isEmpty else { throw WebAuthnFailure(check: "attestation_format", description: "only fmt \"none\" is accepted") }
        let data = try AuthenticatorData.parse(rawData)
        try checkFlags(data, expected)
        guard let attested = data.attested else { throw WebAuthnFailure(check: "authenticator_data", description: "no attested credential data") }
        guard attested.credentialID == credentialID else { throw WebAuthnFailure(check: "credential_id", description: "rawId differs from the attested credential id") }
        return NewCredential(id: attested.credentialID, publicKey: attested.publicKey, signCount: data.signCount, userVerified: data.userVerified,
                             backupEligible: data.backupEligible, backupState: data.backupState)
    }

    /// §7.2 steps 7–22 for a credential already found by its id (and user handle).
    static func verifyAssertion(clientDataJSON: [UInt8], authenticatorData: [UInt8], signature: [UInt8], stored: StoredCredential,
                                expected: RelyingPartyExpectation) throws(WebAuthnFailure) -> VerifiedAssertion {
        try checkClientData(clientDataJSON, type: "webauthn.get", expected)
        let data = try AuthenticatorData.parse(authenticatorData)
        guard data.attested == nil else { throw WebAuthnFailure(check: "authenticator_data", description: "an assertion carries attested credential data") }
        try checkFlags(data, expected)
        guard data.backupEligible == stored.backupEligible else {
            throw WebAuthnFailure(check: "backup_eligible", description: "backup eligibility changed since registration")
        }
        guard stored.publicKey.verify(derSignature: signature, message: authenticatorData + OpenSSL.sha256(clientDataJSON)) else {
            throw WebAuthnFailure(check: "signature", description: "the signature does not verify with the registered key")
        }
        // Both zero: the authenticator keeps no counter. Otherwise it must grow (a clone signal).
        if data.signCount != 0 || stored.signCount != 0, data.signCount <= stored.signCount {
            throw WebAuthnFailure(check: "sign_count", description: "the signature counter did not grow: the authenticator may be cloned")
        }
        return VerifiedAssertion(signCount: data.signCount, userVerified: data.userVerified, backupState: data.backupState)
    }
}
