import FoundationEssentials
import OpenSSLCrypto

/// Where the 256-bit master key came from.
enum MasterKeySource: Equatable, Sendable {
    /// systemd credential `authd.key` (`LoadCredentialEncrypted=`, TPM2-bound where present).
    case credential(path: String)
    /// A 0600 key file in the state directory, created on first start.
    case keyFile(path: String)

    var description: String {
        switch self {
        case .credential: "credential"
        case .keyFile(let path): path
        }
    }
}

struct MasterKeyError: Error, CustomStringConvertible {
    let description: String
}

/// The root of the key hierarchy (DESIGN §5). Never leaves this process and never touches disk
/// except as the key file it was read from.
struct MasterKey: Sendable {
    static let length = 32
    let secret: SecretBytes
    let source: MasterKeySource

    /// `$CREDENTIALS_DIRECTORY/authd.key` when present, else the key file (created if missing).
    static func load(environment: [String: String], keyFilePath: String) throws -> MasterKey {
        if let directory = environment["CREDENTIALS_DIRECTORY"], !directory.isEmpty {
            let path = directory + "/authd.key"
            if Syscalls.fileExists(path) {
                let bytes = try readSecretFile(path, requirePrivate: false)
                guard bytes.count == length else {
                    throw MasterKeyError(description: "the credential \(path) holds \(bytes.count) bytes; authd.key must be exactly \(length) random bytes")
                }
                return MasterKey(secret: bytes, source: .credential(path: path))
            }
        }
        if !Syscalls.fileExists(keyFilePath) {
            try createKeyFile(keyFilePath)
        }
        let bytes = try readSecretFile(keyFilePath, requirePrivate: true)
        guard bytes.count == length else {
            throw MasterKeyError(description: "\(keyFilePath) holds \(bytes.count) bytes, expected \(length); it is damaged — restore it from backup")
        }
        return MasterKey(secret: bytes, source: .keyFile(path: keyFilePath))
    }

    /// Writes 32 random bytes to a temporary file, fsyncs, then links it into place so a crash
    /// never leaves a partial key and two racing starts cannot both create one.
    private static func createKeyFile(_ path: String) throws {
        let key = try OpenSSL.randomSecret(length)
        let temporary = path + ".new.\(Syscalls.processID())"
        let fd = try Syscalls.createNewFile(temporary, mode: 0o600)
        defer { Syscalls.remove(temporary) }
        do {
            defer { Syscalls.close(fd) }
            try key.withUnsafeBytes { try Syscalls.writeAll(fd, $0, name: temporary) }
            try Syscalls.synchronize(fd, name: temporary)
        }
        do throws(SystemError) {
            try Syscalls.hardLink(temporary, to: path)
        } catch {
            if !error.fileExists { throw error }
        }
        Syscalls.synchronizeDirectory(Syscalls.directoryName(path))
    }

    private static func readSecretFile(_ path: String, requirePrivate: Bool) throws -> SecretBytes {
        let fd = try Syscalls.openForReading(path)
        defer { Syscalls.close(fd) }
        let info = try Syscalls.fileStatus(fd, name: path)
        guard info.kind == .regular else { throw MasterKeyError(description: "\(path) is not a regular file") }
        if requirePrivate {
            guard info.ownerUID == Syscalls.effectiveUserID() else { throw MasterKeyError(description: "\(path) is not owned by the daemon's user") }
            guard info.permissions & 0o077 == 0 else {
                throw MasterKeyError(description: "\(path) is readable by others (mode \(String(info.permissions & 0o777, radix: 8))); it must be 0600")
            }
        }
        let size = Int(info.size)
        guard size <= 4096 else { throw MasterKeyError(description: "\(path) is too large to be a key") }
        return try SecretBytes(count: size) { buffer in
            try Syscalls.readExactly(fd, into: buffer, name: path)
        }
    }
}

/// Keys for other purposes than sealing (HMACs of one-time codes, …), derived from the master
/// key with HKDF under their own labels, so no key is ever used for two things.
enum KeyDerivation {
    static func key(_ masterKey: MasterKey, label: String) throws -> SecretBytes {
        try OpenSSL.hkdfSHA256(key: masterKey.secret, salt: Array("authd derive v1".utf8), info: Array("authd/\(label)".utf8), length: 32)
    }
}

/// What a sealed value is for. Each purpose gets its own HKDF-derived key, so a value sealed for
/// one purpose can never be opened as another. New capabilities add cases; never rename one.
enum SealPurpose: String, CaseIterable, Sendable {
    case keyCheck = "key-check"
    case signingKey = "signing-key"
    case cardCAN = "card-can"
    case cardPIN1 = "card-pin1"
    case remoteAccessToken = "remote-access-token"
    case remoteRefreshToken = "remote-refresh-token"
    case passkeyKey = "passkey-key"
    case deviceKey = "device-key"
    case deviceAgreementKey = "device-agreement-key"
    case syncOutboxSession = "sync-outbox-session"
}

/// AES-256-GCM sealing under per-purpose keys, with the owning row's identity as associated
/// data: a sealed value copied to another row (or another purpose) fails to open.
///
/// Format: `0x01` ‖ nonce(12) ‖ ciphertext ‖ tag(16).
struct Sealer: Sendable {
    private static let version: UInt8 = 1
    private let keys: [SealPurpose: SecretBytes]

    init(masterKey: MasterKey) throws {
        var keys: [SealPurpose: SecretBytes] = [:]
        for purpose in SealPurpose.allCases {
            keys[purpose] = try OpenSSL.hkdfSHA256(
                key: masterKey.secret, salt: Array("authd seal v1".utf8),
                info: Array("authd/seal/\(purpose.rawValue)".utf8), length: 32)
        }
        self.keys = keys
    }

    func seal(_ plaintext: SecretBytes, purpose: SealPurpose, identity: String) throws -> [UInt8] {
        let box = try plaintext.withUnsafeBytes {
            try AESGCM.seal($0, key: keys[purpose]!, associatedData: Self.associatedData(purpose, identity))
        }
        return [Self.version] + box
    }

    /// The plaintext, or `nil` when the box is not authentic for this purpose and identity.
    func open(_ sealed: [UInt8], purpose: SealPurpose, identity: String) throws -> SecretBytes? {
        guard sealed.first == Self.version else { return nil }
        return try AESGCM.open(Array(sealed.dropFirst()), key: keys[purpose]!, associatedData: Self.associatedData(purpose, identity))
    }

    private static func associatedData(_ purpose: SealPurpose, _ identity: String) -> [UInt8] {
        Array("authd/v1/\(purpose.rawValue)\u{0}\(identity)".utf8)
    }
}
