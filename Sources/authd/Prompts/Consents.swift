import FoundationEssentials
import Protocol

/// What a local user let programs have without asking again (DESIGN §12): "allow PROGRAM to sign
/// you in to AUDIENCE", keyed by (local user, program identity, audience), on this machine.
struct ConsentBook: Sendable {
    let store: Store
    let now: @Sendable () -> Date

    /// The longest audience a consent is kept for (a longer one is asked every time).
    static let maxAudienceBytes = 1024

    func isGranted(uid: UInt32, program: String, audience: String) async throws -> Bool {
        try await store.read { database in
            try database.queryOne("SELECT 1 FROM desktop_consents WHERE uid = ? AND program = ? AND audience = ?",
                                  [.integer(Int64(uid)), .text(program), .text(audience)]) { _ in true } ?? false
        }
    }

    func grant(uid: UInt32, program: String, audience: String) async throws {
        guard audience.utf8.count <= Self.maxAudienceBytes else { return }
        let at = Int64(now().timeIntervalSince1970)
        try await store.transaction { database in
            try database.execute("INSERT OR REPLACE INTO desktop_consents (uid, program, audience, granted_at) VALUES (?, ?, ?, ?)",
                                 [.integer(Int64(uid)), .text(program), .text(audience), .integer(at)])
        }
    }

    func list(uid: UInt32) async throws -> [Consent] {
        try await store.read { database in
            try database.query("SELECT program, audience, granted_at FROM desktop_consents WHERE uid = ? ORDER BY program, audience",
                               [.integer(Int64(uid))]) { row in
                Consent(program: row.text(0), audience: row.text(1), grantedAt: Int64(row.int(2)))
            }
        }
    }

    /// Forgets `uid`'s consents of `program` (for `audience`, or every audience): how many.
    func revoke(uid: UInt32, program: String, audience: String?) async throws -> Int {
        try await store.transaction { database in
            if let audience {
                try database.execute("DELETE FROM desktop_consents WHERE uid = ? AND program = ? AND audience = ?",
                                     [.integer(Int64(uid)), .text(program), .text(audience)])
            } else {
                try database.execute("DELETE FROM desktop_consents WHERE uid = ? AND program = ?", [.integer(Int64(uid)), .text(program)])
            }
            return database.changes
        }
    }
}
