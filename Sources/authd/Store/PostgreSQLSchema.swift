import FoundationEssentials

/// The account tables on PostgreSQL (`[hub] database`): the same tables, columns and keys as the
/// SQLite store's account tables at the same schema version, in PostgreSQL's types. The version
/// numbers are shared with `Migrations`: a change to an account table is a migration on both
/// engines, with the same number. Machine-owned tables never live here (DESIGN §8).
///
/// Each migration runs in one transaction with its version bump, under an advisory lock, so
/// replicas starting together apply it once. A database at a newer version than this authd
/// knows is refused at start: a replica older than its schema must not write to it.
enum PostgreSQLSchema {
    /// The lock every replica takes while it reads or changes the schema version.
    static let advisoryLock: Int64 = 0x6175_7468_645f_7363  // "authd_sc"

    static let all: [Migrations.Migration] = [
        Migrations.Migration(version: 21, sql: [
            // Text compares and sorts byte by byte, as in SQLite, whatever the database's locale.
            "CREATE DOMAIN ctext AS text COLLATE \"C\"",
            "CREATE TABLE schema_version (singleton BIGINT PRIMARY KEY CHECK (singleton = 1), version BIGINT NOT NULL)",
            "INSERT INTO schema_version (singleton, version) VALUES (1, 0)",
            """
            CREATE TABLE audit (
                id BIGINT PRIMARY KEY,
                at_ms BIGINT NOT NULL,
                uid BIGINT NOT NULL,
                pid BIGINT NOT NULL,
                exe ctext,
                method ctext NOT NULL,
                outcome ctext NOT NULL,
                reason ctext,
                detail ctext NOT NULL
            )
            """,
            """
            CREATE TABLE otp_flows (
                id ctext PRIMARY KEY,
                purpose ctext NOT NULL,
                phone ctext NOT NULL,
                code_mac BYTEA NOT NULL,
                code_deliverable BIGINT NOT NULL,
                created_at BIGINT NOT NULL,
                expires_at BIGINT NOT NULL,
                resend_after BIGINT NOT NULL,
                resends BIGINT NOT NULL,
                attempts_left BIGINT NOT NULL,
                state ctext NOT NULL,
                opened_by ctext
            )
            """,
            "CREATE TABLE sms_sends (phone ctext NOT NULL, at BIGINT NOT NULL)",
            "CREATE INDEX sms_sends_by_phone ON sms_sends (phone, at)",
            """
            CREATE TABLE accounts (
                id ctext PRIMARY KEY,
                phone ctext UNIQUE,
                phone_verified_at BIGINT,
                email ctext UNIQUE,
                password_hash ctext,
                created_at BIGINT NOT NULL,
                deactivated_at BIGINT,
                failed_logins BIGINT NOT NULL DEFAULT 0,
                locked_until BIGINT,
                pin_hash ctext,
                pin_failures BIGINT NOT NULL DEFAULT 0,
                pin_total_failures BIGINT NOT NULL DEFAULT 0,
                pin_locked_until BIGINT,
                pin_reenroll_required BIGINT NOT NULL DEFAULT 0,
                device_limit BIGINT,
                device_policy ctext,
                webauthn_user_id BYTEA,
                e2ee ctext NOT NULL DEFAULT 'required' CHECK (e2ee IN ('required', 'off'))
            )
            """,
            "CREATE UNIQUE INDEX accounts_webauthn_user_id ON accounts (webauthn_user_id)",
            // `rowid`: the order devices were added in, as SQLite's implicit rowid gives it.
            """
            CREATE TABLE devices (
                id ctext PRIMARY KEY,
                account_id ctext NOT NULL REFERENCES accounts (id),
                device_key ctext NOT NULL,
                name ctext NOT NULL,
                first_seen BIGINT NOT NULL,
                last_seen BIGINT NOT NULL,
                revoked_at BIGINT,
                rowid BIGINT GENERATED ALWAYS AS IDENTITY,
                UNIQUE (account_id, device_key)
            )
            """,
            "CREATE INDEX devices_device_key ON devices (device_key)",
            """
            CREATE TABLE sessions (
                id ctext PRIMARY KEY,
                account_id ctext NOT NULL REFERENCES accounts (id),
                device_id ctext NOT NULL REFERENCES devices (id),
                token_hash BYTEA NOT NULL UNIQUE,
                amr ctext NOT NULL,
                created_at BIGINT NOT NULL,
                last_used_at BIGINT NOT NULL,
                expires_at BIGINT NOT NULL,
                revoked_at BIGINT,
                federation ctext,
                machine_uid BIGINT
            )
            """,
            "CREATE INDEX sessions_device ON sessions (device_id)",
            "CREATE INDEX sessions_account ON sessions (account_id)",
            """
            CREATE TABLE login_flows (
                id ctext PRIMARY KEY,
                account_id ctext NOT NULL REFERENCES accounts (id),
                device_key ctext NOT NULL,
                device_name ctext NOT NULL,
                next ctext NOT NULL,
                expires_at BIGINT NOT NULL,
                machine_uid BIGINT
            )
            """,
            """
            CREATE TABLE federated_identities (
                issuer ctext NOT NULL,
                subject ctext NOT NULL,
                account_id ctext NOT NULL REFERENCES accounts (id),
                provider ctext NOT NULL,
                email ctext,
                name ctext,
                created_at BIGINT NOT NULL,
                last_login_at BIGINT NOT NULL,
                PRIMARY KEY (issuer, subject)
            )
            """,
            """
            CREATE TABLE account_passkeys (
                credential_id BYTEA PRIMARY KEY,
                account_id ctext NOT NULL REFERENCES accounts (id),
                public_key BYTEA NOT NULL,
                sign_count BIGINT NOT NULL,
                uv_initialized BIGINT NOT NULL,
                backup_eligible BIGINT NOT NULL,
                backup_state BIGINT NOT NULL,
                created_at BIGINT NOT NULL,
                last_used_at BIGINT,
                rowid BIGINT GENERATED ALWAYS AS IDENTITY
            )
            """,
            "CREATE INDEX account_passkeys_account ON account_passkeys (account_id)",
            """
            CREATE TABLE passkey_flows (
                id ctext PRIMARY KEY,
                purpose ctext NOT NULL CHECK (purpose IN ('register', 'login')),
                account_id ctext REFERENCES accounts (id),
                login_given BIGINT NOT NULL,
                challenge BYTEA NOT NULL,
                expires_at BIGINT NOT NULL,
                opened_by ctext
            )
            """,
            "CREATE TABLE sync_heads (account_id ctext PRIMARY KEY REFERENCES accounts (id), position BIGINT NOT NULL)",
            """
            CREATE TABLE sync_events (
                account_id ctext NOT NULL REFERENCES accounts (id),
                position BIGINT NOT NULL,
                kind ctext NOT NULL,
                conversation ctext,
                body ctext NOT NULL,
                device_key ctext NOT NULL,
                machine ctext NOT NULL,
                device_id ctext,
                exe ctext,
                idempotency_key ctext,
                created_at BIGINT NOT NULL,
                sealed ctext,
                PRIMARY KEY (account_id, position)
            )
            """,
            "CREATE UNIQUE INDEX sync_events_idempotency ON sync_events (account_id, device_key, idempotency_key) WHERE idempotency_key IS NOT NULL",
            "CREATE INDEX sync_events_conversation ON sync_events (account_id, conversation, position)",
            "CREATE INDEX sync_events_age ON sync_events (created_at)",
            """
            CREATE TABLE sync_read_markers (
                account_id ctext NOT NULL REFERENCES accounts (id),
                conversation ctext NOT NULL,
                up_to BIGINT NOT NULL,
                PRIMARY KEY (account_id, conversation)
            )
            """,
            """
            CREATE TABLE sync_cursors (
                account_id ctext NOT NULL REFERENCES accounts (id),
                device_key ctext NOT NULL,
                position BIGINT NOT NULL,
                PRIMARY KEY (account_id, device_key)
            )
            """,
            """
            CREATE TABLE presence_friends (
                account_id ctext NOT NULL REFERENCES accounts (id),
                friend_id ctext NOT NULL REFERENCES accounts (id),
                added_at BIGINT NOT NULL,
                PRIMARY KEY (account_id, friend_id)
            )
            """,
            "CREATE INDEX presence_friends_friend ON presence_friends (friend_id)",
            """
            CREATE TABLE presence_groups (
                id ctext PRIMARY KEY,
                account_id ctext NOT NULL REFERENCES accounts (id),
                name ctext NOT NULL,
                created_at BIGINT NOT NULL,
                UNIQUE (account_id, name)
            )
            """,
            """
            CREATE TABLE presence_members (
                group_id ctext NOT NULL REFERENCES presence_groups (id) ON DELETE CASCADE,
                member_id ctext NOT NULL REFERENCES accounts (id),
                PRIMARY KEY (group_id, member_id)
            )
            """,
            "CREATE INDEX presence_members_member ON presence_members (member_id)",
            """
            CREATE TABLE presence_blocks (
                account_id ctext NOT NULL REFERENCES accounts (id),
                blocked_id ctext NOT NULL REFERENCES accounts (id),
                blocked_at BIGINT NOT NULL,
                PRIMARY KEY (account_id, blocked_id)
            )
            """,
            """
            CREATE TABLE presence_hotspots (
                id ctext PRIMARY KEY,
                account_id ctext REFERENCES accounts (id),
                name ctext NOT NULL,
                latitude DOUBLE PRECISION,
                longitude DOUBLE PRECISION,
                radius DOUBLE PRECISION,
                bssids ctext,
                beacons ctext,
                created_at BIGINT NOT NULL
            )
            """,
            "CREATE INDEX presence_hotspots_account ON presence_hotspots (account_id)",
            """
            CREATE TABLE presence_settings (
                account_id ctext PRIMARY KEY REFERENCES accounts (id),
                enabled BIGINT NOT NULL,
                mode ctext NOT NULL,
                until BIGINT,
                precise ctext NOT NULL DEFAULT 'manual'
            )
            """,
            """
            CREATE TABLE presence_shares (
                account_id ctext NOT NULL REFERENCES accounts (id),
                group_id ctext NOT NULL REFERENCES presence_groups (id) ON DELETE CASCADE,
                PRIMARY KEY (account_id, group_id)
            )
            """,
            """
            CREATE TABLE presence_places (
                account_id ctext PRIMARY KEY REFERENCES accounts (id),
                hotspot_id ctext NOT NULL REFERENCES presence_hotspots (id) ON DELETE CASCADE,
                since BIGINT NOT NULL,
                reported_at BIGINT NOT NULL,
                pin_latitude DOUBLE PRECISION,
                pin_longitude DOUBLE PRECISION,
                group_id ctext REFERENCES presence_groups (id) ON DELETE SET NULL
            )
            """,
            """
            CREATE TABLE device_e2ee_keys (
                device_id ctext PRIMARY KEY,
                spki BYTEA NOT NULL,
                statement ctext NOT NULL,
                published_at BIGINT NOT NULL
            )
            """,
            // The public halves of every replica's token-signing keys: one JWKS for the hub. The
            // private halves stay sealed in each replica's own store.
            """
            CREATE TABLE hub_signing_keys (
                kid ctext PRIMARY KEY,
                replica ctext NOT NULL,
                public_spki BYTEA NOT NULL,
                created_at BIGINT NOT NULL,
                published_until BIGINT
            )
            """,
            // The hub replicas on this database, each as it last said it was alive (`admin status`).
            """
            CREATE TABLE hub_replicas (
                id ctext PRIMARY KEY,
                name ctext NOT NULL,
                started_at BIGINT NOT NULL,
                seen_at BIGINT NOT NULL
            )
            """,
        ]),
        // Version 22 rebuilt SQLite's audit table as it already is here.
        Migrations.Migration(version: 23, sql: [
            "CREATE TABLE used_id_tokens (digest BYTEA PRIMARY KEY, expires_at BIGINT NOT NULL)",
            "CREATE INDEX used_id_tokens_expiry ON used_id_tokens (expires_at)",
        ]),
    ]

    static var latestVersion: Int { all.last!.version }

    /// Applies what is missing, each migration in one transaction with its version bump.
    static func apply(to database: Database) throws {
        try database.transaction {
            try database.execute("SELECT pg_advisory_xact_lock(?)", [.integer(advisoryLock)])
            let exists = try database.queryOne("SELECT to_regclass('schema_version') IS NOT NULL") { $0.int(0) != 0 } ?? false
            let current = exists ? try database.queryOne("SELECT version FROM schema_version") { $0.int(0) } ?? 0 : 0
            guard current <= latestVersion else { throw Migrations.TooNew(found: current, known: latestVersion) }
            for migration in all where migration.version > current {
                for statement in migration.sql { try database.execute(statement) }
                try database.execute("UPDATE schema_version SET version = ?", [.integer(Int64(migration.version))])
            }
        }
    }

    /// The version the database is at.
    static func version(of database: Database) throws -> Int {
        try database.queryOne("SELECT version FROM schema_version") { $0.int(0) } ?? 0
    }
}
