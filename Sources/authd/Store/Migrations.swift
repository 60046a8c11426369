/// Versioned schema migrations. Each runs once, in order, inside one transaction with the
/// `user_version` bump, so a crash mid-migration leaves the previous version intact.
/// Never edit a shipped migration: add a new one.
enum Migrations {
    struct Migration {
        let version: Int
        let sql: [String]
    }

    static let all: [Migration] = [
        Migration(version: 1, sql: [
            // Small facts about the store itself, e.g. the master-key check value.
            """
            CREATE TABLE meta (
                key TEXT PRIMARY KEY,
                value BLOB NOT NULL
            ) STRICT
            """,
            // Token-signing keys. The private half is sealed (AAD = "signing_key:<kid>") and set
            // to NULL once the key is retired; the public half stays until `published_until`.
            """
            CREATE TABLE signing_keys (
                kid TEXT PRIMARY KEY,
                alg TEXT NOT NULL,
                public_spki BLOB NOT NULL,
                private_sealed BLOB,
                created_at INTEGER NOT NULL,
                retired_at INTEGER,
                published_until INTEGER
            ) STRICT
            """,
            "CREATE UNIQUE INDEX signing_keys_one_current ON signing_keys ((retired_at IS NULL)) WHERE retired_at IS NULL",
            // Audit log: append-only, no secrets.
            """
            CREATE TABLE audit (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                at_ms INTEGER NOT NULL,
                uid INTEGER NOT NULL,
                pid INTEGER NOT NULL,
                exe TEXT,
                method TEXT NOT NULL,
                outcome TEXT NOT NULL,
                reason TEXT,
                detail TEXT NOT NULL
            ) STRICT
            """,
        ]),
    ]

    static var latestVersion: Int { all.last?.version ?? 0 }

    struct TooNew: Error, CustomStringConvertible {
        let found: Int
        var description: String {
            "the store has schema version \(found), newer than this authd knows (\(Migrations.latestVersion)); refusing to touch it"
        }
    }

    static func apply(to database: Database) throws {
        try database.transaction {
            let current = try database.queryOne("PRAGMA user_version") { $0.int(0) } ?? 0
            guard current <= latestVersion else { throw TooNew(found: current) }
            for migration in all where migration.version > current {
                for statement in migration.sql { try database.execute(statement) }
                try database.execute("PRAGMA user_version = \(migration.version)")
            }
        }
    }
}
