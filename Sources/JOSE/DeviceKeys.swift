import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// A device's key-agreement public key, signed by its device key: compact JWS ES256, header {"alg":"ES256","kid":deviceID,"typ":"authd-e2ee-key"}, payload {"device_id": deviceID, "jwk": {"kty":"EC","crv":"P-256","x":…,"y":…,"use":"enc","alg":"ECDH-ES+A256KW","kid":deviceID}}.
///
/// The hub relays these but cannot make one: the device id is the SHA-256 of the signing
/// key, so a key the hub substitutes fails either the id or the signature, and a sender checks
/// both (``verified()``) before it encrypts to a device.
public struct PublishedDeviceKey: Sendable, Equatable {
    public let deviceID: String   // as DeviceIDText writes it
    public let signingKeySPKI: [UInt8]   // the device key (its SHA-256 is the device id)
    public let statement: String         // the compact JWS above

    public init(deviceID: String, signingKeySPKI: [UInt8], statement: String) {
        self.deviceID = deviceID
        self.signingKeySPKI = signingKeySPKI
        self.statement = statement
    }

    /// The JWS `typ` of a published key.
    static let type = "authd-e2ee-key"
    /// Far more than a statement takes (about 500 bytes).
    static let maximumStatementBytes = 4096

    /// Signs `agreementKey` as `deviceID`'s with its device key; throws ``E2EEFailure/badDeviceKey(deviceID:)``
    /// when `deviceID` is not `signingKey`'s.
    public static func make(deviceID: String, signingKey: P256PrivateKey, agreementKey: P256PublicKey) throws -> PublishedDeviceKey {
        let spki = try signingKey.publicKey().spki
        guard DeviceIDText.of(keySHA256: OpenSSL.sha256(spki)) == deviceID else { throw E2EEFailure.badDeviceKey(deviceID: deviceID) }
        var jwk = try JOSEParts.p256Members(agreementKey)
        jwk["use"] = "enc"
        jwk["alg"] = .string(JWE.keyAgreement)
        jwk["kid"] = .string(deviceID)
        let payload = try WireCodec.encodeJSON(["device_id": JSONValue.string(deviceID), "jwk": .object(jwk)])
        let statement = try CompactJWS.sign(header: ["alg": "ES256", "kid": .string(deviceID), "typ": .string(type)], payload: Array(payload), key: signingKey)
        return PublishedDeviceKey(deviceID: deviceID, signingKeySPKI: spki, statement: statement)
    }

    /// Checks SHA-256(spki) is deviceID, the JWS verifies with that spki, kid/device_id match;
    /// returns (signing key, agreement key). Throws .badDeviceKey(deviceID:) otherwise.
    public func verified() throws(E2EEFailure) -> (signing: P256PublicKey, agreement: P256PublicKey) {
        let refused = E2EEFailure.badDeviceKey(deviceID: deviceID)
        guard DeviceIDText.of(keySHA256: OpenSSL.sha256(signingKeySPKI)) == deviceID,
              let signing = try? P256PublicKey(spki: signingKeySPKI),
              let jws = CompactJWS(statement, limit: Self.maximumStatementBytes, allowedHeader: ["alg", "kid", "typ"]),
              jws.header["kid"] == .string(deviceID), jws.header["typ"] == .string(Self.type),
              jws.verifies(with: signing),
              let payload = JOSEParts.object(jws.payload), Set(payload.keys) == ["device_id", "jwk"],
              payload["device_id"] == .string(deviceID),
              case .object(let jwk)? = payload["jwk"], Set(jwk.keys) == ["kty", "crv", "x", "y", "use", "alg", "kid"],
              jwk["use"] == "enc", jwk["alg"] == .string(JWE.keyAgreement), jwk["kid"] == .string(deviceID),
              let (x, y) = JOSEParts.p256Coordinates(jwk),
              let agreement = try? P256PublicKey(x: x, y: y)
        else { throw refused }
        return (signing, agreement)
    }
}
