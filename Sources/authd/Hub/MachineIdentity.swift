import FoundationEssentials
import OpenSSLCrypto
import Protocol

extension DeviceID {
    /// The printable form of a device key's identity (``DeviceIDText``).
    init(keySHA256 digest: [UInt8]) {
        description = DeviceIDText.of(keySHA256: digest)
    }
}

/// This machine towards a hub (DESIGN §8): a P-256 key made on first start and sealed in the
/// machine's store, with a self-signed certificate that carries it as the TLS client
/// certificate. The device id is the key's, so the certificate may be remade; the key never is.
/// Beside it, sealed the same way, the machine's key-agreement key: what the account's other
/// machines encrypt sync bodies to (DESIGN §13), published signed by the device key.
struct MachineIdentity: Sendable {
    let key: P256PrivateKey
    let certificate: X509Certificate
    let id: DeviceID
    let agreementKey: P256PrivateKey
    /// The machine's name as its account's device lists show it (`MachineName`).
    var name: String { MachineName.current }

    /// Loads the identity, making it on first start.
    static func open(store: Store, sealer: Sealer, now: Date) async throws -> MachineIdentity {
        if let stored = try await load(store: store, sealer: sealer) { return stored }
        let key = try P256PrivateKey.generate()
        let certificate = try X509Certificate.selfSigned(commonName: "authd device \(MachineName.current)", key: key, serial: 1, days: 36_500)
        let sealed = try sealer.seal(try key.derRepresentation(), purpose: .deviceKey, identity: "device_identity")
        try await store.transaction { database in
            // Two starts racing: the first one's key stays.
            try database.execute("INSERT OR IGNORE INTO device_identity (singleton, key_sealed, certificate, created_at) VALUES (1, ?, ?, ?)",
                                 [.blob(sealed), .blob(certificate.der), .integer(Int64(now.timeIntervalSince1970))])
        }
        guard let made = try await load(store: store, sealer: sealer) else {
            throw MasterKeyError(description: "the device key could not be stored")
        }
        return made
    }

    private static func load(store: Store, sealer: Sealer) async throws -> MachineIdentity? {
        struct Row: Sendable { let sealed: [UInt8], certificate: [UInt8], name: String?, agreement: [UInt8]? }
        let read = { @Sendable in
            try await store.read { database in
                try database.queryOne("SELECT key_sealed, certificate, name, agreement_key_sealed FROM device_identity WHERE singleton = 1") {
                    Row(sealed: $0.blob(0), certificate: $0.blob(1), name: $0.optionalText(2), agreement: $0.optionalBlob(3))
                }
            }
        }
        guard var row = try await read() else { return nil }
        if row.agreement == nil {
            // Made once, by the first start that needs it; a start racing it keeps the first.
            let sealed = try sealer.seal(try P256PrivateKey.generate().derRepresentation(), purpose: .deviceAgreementKey, identity: "device_identity")
            try await store.transaction { database in
                try database.execute("UPDATE device_identity SET agreement_key_sealed = ? WHERE singleton = 1 AND agreement_key_sealed IS NULL", [.blob(sealed)])
            }
            guard let again = try await read(), again.agreement != nil else { throw MasterKeyError(description: "the device's key-agreement key could not be stored") }
            row = again
        }
        MachineName.load(row.name)
        guard let der = try sealer.open(row.sealed, purpose: .deviceKey, identity: "device_identity") else {
            throw MasterKeyError(description: "the device key does not open with this master key")
        }
        guard let agreementDER = try sealer.open(row.agreement ?? [], purpose: .deviceAgreementKey, identity: "device_identity") else {
            throw MasterKeyError(description: "the device's key-agreement key does not open with this master key")
        }
        let key = try P256PrivateKey(der: der)
        let certificate = try X509Certificate(der: row.certificate)
        return MachineIdentity(key: key, certificate: certificate, id: DeviceID(keySHA256: OpenSSL.sha256(try certificate.publicKeyInfo)),
                               agreementKey: try P256PrivateKey(der: agreementDER))
    }
}
