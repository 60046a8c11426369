import FoundationEssentials
import Protocol

/// The `pam_links` table: which card holder and which account each Unix user signs in with.
/// Every change is one transaction, with its audit record.
struct PAMLinkStore: Sendable {
    let store: Store
    let now: @Sendable () -> Date

    enum Kind: String, Sendable { case card, account }

    /// The user's links.
    func links(_ user: String) async throws -> PAMLinks {
        try await store.read { database in try Self.links(in: database, user) }
    }

    private static func links(in database: Database, _ user: String) throws -> PAMLinks {
        var links = PAMLinks(user: user)
        for (kind, subject, holder) in try database.query("SELECT kind, subject, holder FROM pam_links WHERE user = ?", [.text(user)], row: {
            ($0.text(0), $0.text(1), $0.optionalText(2))
        }) {
            switch Kind(rawValue: kind) {
            case .card: links.card = .init(personalCode: subject, holder: holder ?? "")
            case .account: links.account = subject
            case nil: continue
            }
        }
        return links
    }

    /// Links `subject` to `user` (replacing the user's earlier link of that kind), unless it
    /// already serves `limit` other users.
    func link(_ user: String, kind: Kind, subject: String, holder: String?, by uid: UInt32, limit: Int) async throws -> PAMLinks {
        let at = Int64(now().timeIntervalSince1970)
        return try await store.transaction { database in
            let others = try database.queryOne("SELECT count(*) FROM pam_links WHERE kind = ? AND subject = ? AND user != ?",
                                               [.text(kind.rawValue), .text(subject), .text(user)]) { $0.int(0) } ?? 0
            guard others < limit else { throw PAMFailure.alreadyLinked(limit: limit) }
            try database.execute(
                """
                INSERT INTO pam_links (user, kind, subject, holder, linked_at, linked_by) VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT (user, kind) DO UPDATE SET subject = excluded.subject, holder = excluded.holder,
                    linked_at = excluded.linked_at, linked_by = excluded.linked_by
                """,
                [.text(user), .text(kind.rawValue), .text(subject), holder.map { .text($0) } ?? .null, .integer(at), .integer(Int64(uid))])
            try AuditScope.record(in: database, ["user": .string(user), "kind": .string(kind.rawValue)])
            return try Self.links(in: database, user)
        }
    }

    /// Removes the user's links of `kind` (both when nil).
    func unlink(_ user: String, kind: Kind?) async throws -> PAMLinks {
        try await store.transaction { database in
            if let kind {
                try database.execute("DELETE FROM pam_links WHERE user = ? AND kind = ?", [.text(user), .text(kind.rawValue)])
            } else {
                try database.execute("DELETE FROM pam_links WHERE user = ?", [.text(user)])
            }
            try AuditScope.record(in: database, ["user": .string(user), "kind": .string(kind?.rawValue ?? "all")])
            return try Self.links(in: database, user)
        }
    }
}
