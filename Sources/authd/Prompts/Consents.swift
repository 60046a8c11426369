import FoundationEssentials
import Protocol

/// What a local user let programs have without asking again (DESIGN §12): "allow PROGRAM to ask
/// for your signature for AUDIENCE", keyed by (local user, program identity, purpose, audience),
/// on this machine. The purpose is in the key because the question names it: a "yes" to one
/// purpose's question answers no other's.
struct ConsentBook: Sendable {
    let store: Store
    let now: @Sendable () -> Date

    /// The longest audience a consent is kept for (a longer one is asked every time).
    static let maxAudienceBytes = 1024

    func isGranted(uid: UInt32, program: String, purpose: ConsentPurpose, audience: String) async throws -> Bool {
        try await store.read { database in
            try database.queryOne("SELECT 1 FROM desktop_consents WHERE uid = ? AND program = ? AND purpose = ? AND audience = ?",
                                  [.integer(Int64(uid)), .text(program), .text(purpose.rawValue), .text(audience)]) { _ in true } ?? false
        }
    }

    func grant(uid: UInt32, program: String, purpose: ConsentPurpose, audience: String) async throws {
        guard audience.utf8.count <= Self.maxAudienceBytes else { return }
        let at = Int64(now().timeIntervalSince1970)
        try await store.transaction { database in
            try database.execute("INSERT OR REPLACE INTO desktop_consents (uid, program, purpose, audience, granted_at) VALUES (?, ?, ?, ?, ?)",
                                 [.integer(Int64(uid)), .text(program), .text(purpose.rawValue), .text(audience), .integer(at)])
        }
    }

    func list(uid: UInt32) async throws -> [Consent] {
        try await store.read { database in
            try database.query("SELECT program, purpose, audience, granted_at FROM desktop_consents WHERE uid = ? ORDER BY program, audience, purpose",
                               [.integer(Int64(uid))]) { row in
                // The table's CHECK admits only the purposes this authd knows.
                ConsentPurpose(rawValue: row.text(1)).map { Consent(program: row.text(0), purpose: $0, audience: row.text(2), grantedAt: Int64(row.int(3))) }
            }.compactMap { $0 }
        }
    }

    /// Forgets `uid`'s consents of `program` (for `purpose` and `audience`, each or every one):
    /// how many.
    func revoke(uid: UInt32, program: String, purpose: ConsentPurpose?, audience: String?) async throws -> Int {
        // NULL matches every purpose, every audience.
        let purposeText: SQLValue = purpose.map { .text($0.rawValue) } ?? .null
        let audienceText: SQLValue = audience.map { .text($0) } ?? .null
        return try await store.transaction { database in
            try database.execute("""
                DELETE FROM desktop_consents WHERE uid = ? AND program = ?
                AND (CAST(? AS TEXT) IS NULL OR purpose = ?) AND (CAST(? AS TEXT) IS NULL OR audience = ?)
                """, [.integer(Int64(uid)), .text(program), purposeText, purposeText, audienceText, audienceText])
            return database.changes
        }
    }
}
