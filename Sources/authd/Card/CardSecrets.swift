import FoundationEssentials
import OpenSSLCrypto

/// The saved CAN and PIN1 of each local user, sealed (`card-can`, `card-pin1`) with the
/// user's uid as the row identity. PIN2 is never saved.
struct CardSecrets: Sendable {
    enum Kind: String, Sendable {
        case can, pin1
        var purpose: SealPurpose { self == .can ? .cardCAN : .cardPIN1 }
    }

    let store: Store
    let sealer: Sealer
    let now: @Sendable () -> Date

    private func identity(_ kind: Kind, _ uid: UInt32) -> String { "card_secrets:\(uid):\(kind.rawValue)" }

    func save(_ kind: Kind, uid: UInt32, _ secret: SecretBytes) async throws {
        let sealed = try sealer.seal(secret, purpose: kind.purpose, identity: identity(kind, uid))
        let time = Int64(now().timeIntervalSince1970)
        try await store.transaction { database in
            try database.execute(
                "INSERT INTO card_secrets (uid, kind, sealed, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT (uid, kind) DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at",
                [.integer(Int64(uid)), .text(kind.rawValue), .blob(sealed), .integer(time)])
        }
    }

    /// The saved secret, or nil. A value that does not open (moved, tampered) counts as none.
    func load(_ kind: Kind, uid: UInt32) async throws -> SecretBytes? {
        let sealed = try await store.read { database in
            try database.queryOne("SELECT sealed FROM card_secrets WHERE uid = ? AND kind = ?", [.integer(Int64(uid)), .text(kind.rawValue)]) { $0.blob(0) }
        }
        guard let sealed else { return nil }
        return try sealer.open(sealed, purpose: kind.purpose, identity: identity(kind, uid))
    }

    @discardableResult
    func clear(_ kind: Kind, uid: UInt32) async throws -> Bool {
        try await store.transaction { database in
            try database.execute("DELETE FROM card_secrets WHERE uid = ? AND kind = ?", [.integer(Int64(uid)), .text(kind.rawValue)])
            return database.changes > 0
        }
    }
}
