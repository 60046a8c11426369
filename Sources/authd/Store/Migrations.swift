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
        Migration(version: 2, sql: [
            // SMS code challenges (registration, OTP login). The code is stored only as an
            // HMAC under a key derived from the master key.
            """
            CREATE TABLE otp_flows (
                id TEXT PRIMARY KEY,
                purpose TEXT NOT NULL,
                phone TEXT NOT NULL,
                code_mac BLOB NOT NULL,
                code_deliverable INTEGER NOT NULL,
                created_at INTEGER NOT NULL,
                expires_at INTEGER NOT NULL,
                resend_after INTEGER NOT NULL,
                resends INTEGER NOT NULL,
                attempts_left INTEGER NOT NULL,
                state TEXT NOT NULL
            ) STRICT
            """,
            // Every code sent, for the per-number hourly limit.
            "CREATE TABLE sms_sends (phone TEXT NOT NULL, at INTEGER NOT NULL) STRICT",
            "CREATE INDEX sms_sends_by_phone ON sms_sends (phone, at)",
            """
            CREATE TABLE accounts (
                id TEXT PRIMARY KEY,
                phone TEXT NOT NULL UNIQUE,
                phone_verified_at INTEGER NOT NULL,
                email TEXT UNIQUE,
                password_hash TEXT,
                created_at INTEGER NOT NULL,
                deactivated_at INTEGER
            ) STRICT
            """,
            """
            CREATE TABLE devices (
                id TEXT PRIMARY KEY,
                account_id TEXT NOT NULL REFERENCES accounts (id),
                device_key TEXT NOT NULL,
                name TEXT NOT NULL,
                first_seen INTEGER NOT NULL,
                last_seen INTEGER NOT NULL,
                revoked_at INTEGER,
                UNIQUE (account_id, device_key)
            ) STRICT
            """,
            // Session tokens are stored only as SHA-256 hashes.
            """
            CREATE TABLE sessions (
                id TEXT PRIMARY KEY,
                account_id TEXT NOT NULL REFERENCES accounts (id),
                device_id TEXT NOT NULL REFERENCES devices (id),
                token_hash BLOB NOT NULL UNIQUE,
                amr TEXT NOT NULL,
                created_at INTEGER NOT NULL,
                last_used_at INTEGER NOT NULL,
                expires_at INTEGER NOT NULL,
                revoked_at INTEGER
            ) STRICT
            """,
        ]),
        Migration(version: 3, sql: [
            // Password brute-force protection: consecutive failures and the soft lock they cause.
            "ALTER TABLE accounts ADD COLUMN failed_logins INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE accounts ADD COLUMN locked_until INTEGER",
        ]),
        Migration(version: 4, sql: [
            // PIN second factor: Argon2id hash, consecutive and lifetime failures, its own lock,
            // and whether it must be re-enrolled after an SMS code (100 failures switch it off).
            "ALTER TABLE accounts ADD COLUMN pin_hash TEXT",
            "ALTER TABLE accounts ADD COLUMN pin_failures INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE accounts ADD COLUMN pin_total_failures INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE accounts ADD COLUMN pin_locked_until INTEGER",
            "ALTER TABLE accounts ADD COLUMN pin_reenroll_required INTEGER NOT NULL DEFAULT 0",
            // Sign-ins waiting for their second factor.
            """
            CREATE TABLE login_flows (
                id TEXT PRIMARY KEY,
                account_id TEXT NOT NULL REFERENCES accounts (id),
                device_key TEXT NOT NULL,
                device_name TEXT NOT NULL,
                next TEXT NOT NULL,
                expires_at INTEGER NOT NULL
            ) STRICT
            """,
        ]),
        Migration(version: 5, sql: [
            // Per-account device limit and policy; NULL means the [accounts] setting.
            "ALTER TABLE accounts ADD COLUMN device_limit INTEGER",
            "ALTER TABLE accounts ADD COLUMN device_policy TEXT",
        ]),
        Migration(version: 6, sql: [
            // The ID card's saved CAN and PIN1 per local user, sealed (PIN2 is never saved).
            """
            CREATE TABLE card_secrets (
                uid INTEGER NOT NULL,
                kind TEXT NOT NULL CHECK (kind IN ('can', 'pin1')),
                sealed BLOB NOT NULL,
                updated_at INTEGER NOT NULL,
                PRIMARY KEY (uid, kind)
            ) STRICT
            """,
        ]),
        Migration(version: 7, sql: [
            // Per local user (uid): the remembered account (fast-forward login; its password
            // unlocks), the lock, and fingerprint settings. `credential_check` is SHA-256 of the
            // account's password hash when remembered: a changed password makes it stale.
            """
            CREATE TABLE local_users (
                uid INTEGER PRIMARY KEY,
                account_id TEXT REFERENCES accounts (id),
                device_id TEXT REFERENCES devices (id),
                credential_check BLOB,
                locked INTEGER NOT NULL DEFAULT 0,
                active_at INTEGER NOT NULL DEFAULT 0,
                biometric_enabled INTEGER NOT NULL DEFAULT 0,
                biometric_failures INTEGER NOT NULL DEFAULT 0,
                card_pin1_release INTEGER NOT NULL DEFAULT 0
            ) STRICT
            """,
            // The local user whose finger is the account's second sign-in step, if it chose one.
            "ALTER TABLE accounts ADD COLUMN fingerprint_user TEXT",
        ]),
        Migration(version: 8, sql: [
            // Federated accounts have no phone number: `phone` and `phone_verified_at` become
            // optional. SQLite cannot drop NOT NULL in place, so the table is rebuilt (the
            // documented 12-step procedure; `apply` turns foreign keys off around it and checks them).
            """
            CREATE TABLE accounts_v8 (
                id TEXT PRIMARY KEY,
                phone TEXT UNIQUE,
                phone_verified_at INTEGER,
                email TEXT UNIQUE,
                password_hash TEXT,
                created_at INTEGER NOT NULL,
                deactivated_at INTEGER,
                failed_logins INTEGER NOT NULL DEFAULT 0,
                locked_until INTEGER,
                pin_hash TEXT,
                pin_failures INTEGER NOT NULL DEFAULT 0,
                pin_total_failures INTEGER NOT NULL DEFAULT 0,
                pin_locked_until INTEGER,
                pin_reenroll_required INTEGER NOT NULL DEFAULT 0,
                device_limit INTEGER,
                device_policy TEXT,
                fingerprint_user TEXT
            ) STRICT
            """,
            """
            INSERT INTO accounts_v8 SELECT id, phone, phone_verified_at, email, password_hash, created_at, deactivated_at,
                failed_logins, locked_until, pin_hash, pin_failures, pin_total_failures, pin_locked_until, pin_reenroll_required,
                device_limit, device_policy, fingerprint_user FROM accounts
            """,
            "DROP TABLE accounts",
            "ALTER TABLE accounts_v8 RENAME TO accounts",
            // The link between a provider's identity (iss + sub) and the local account it
            // registered. `email` and `name` are cached user data from the ID token, deleted by
            // a persistent logout; the link itself stays so the next sign-in finds the account.
            """
            CREATE TABLE federated_identities (
                issuer TEXT NOT NULL,
                subject TEXT NOT NULL,
                account_id TEXT NOT NULL REFERENCES accounts (id),
                provider TEXT NOT NULL,
                email TEXT,
                name TEXT,
                created_at INTEGER NOT NULL,
                last_login_at INTEGER NOT NULL,
                PRIMARY KEY (issuer, subject)
            ) STRICT
            """,
            // The token vault, per local user and provider: access and refresh tokens sealed
            // (AAD names uid, provider and issuer), or the persistent logged-out state a 401 left.
            """
            CREATE TABLE remote_tokens (
                uid INTEGER NOT NULL,
                provider TEXT NOT NULL,
                issuer TEXT NOT NULL,
                account_id TEXT REFERENCES accounts (id),
                subject TEXT,
                state TEXT NOT NULL CHECK (state IN ('signed_in', 'logged_out')),
                access_sealed BLOB,
                refresh_sealed BLOB,
                access_expires_at INTEGER,
                updated_at INTEGER NOT NULL,
                logged_out_at INTEGER,
                logged_out_by TEXT,
                PRIMARY KEY (uid, provider)
            ) STRICT
            """,
            // Which provider's sign-in created a session (NULL: a local sign-in), so a
            // persistent logout ends exactly those.
            "ALTER TABLE sessions ADD COLUMN federation TEXT",
        ]),
        Migration(version: 9, sql: [
            // Passkeys authd holds as this machine's platform authenticator, per local user.
            // The private key is sealed (AAD = "passkey:<credential id, base64url>"). One
            // passkey per user, RP and user handle: a new one replaces the old (CTAP 2.1).
            """
            CREATE TABLE passkey_keys (
                credential_id BLOB PRIMARY KEY,
                uid INTEGER NOT NULL,
                rp_id TEXT NOT NULL,
                rp_name TEXT NOT NULL,
                user_handle BLOB NOT NULL,
                user_name TEXT NOT NULL,
                display_name TEXT NOT NULL,
                private_sealed BLOB NOT NULL,
                sign_count INTEGER NOT NULL,
                created_at INTEGER NOT NULL,
                last_used_at INTEGER,
                UNIQUE (uid, rp_id, user_handle)
            ) STRICT
            """,
            // Passkeys registered to authd's own accounts (authd as relying party): the COSE
            // public key and the credential record WebAuthn L3 §7.1 step 27 asks to keep.
            """
            CREATE TABLE account_passkeys (
                credential_id BLOB PRIMARY KEY,
                account_id TEXT NOT NULL REFERENCES accounts (id),
                public_key BLOB NOT NULL,
                sign_count INTEGER NOT NULL,
                uv_initialized INTEGER NOT NULL,
                backup_eligible INTEGER NOT NULL,
                backup_state INTEGER NOT NULL,
                created_at INTEGER NOT NULL,
                last_used_at INTEGER
            ) STRICT
            """,
            "CREATE INDEX account_passkeys_account ON account_passkeys (account_id)",
            // Ceremonies in progress: the challenge, single use (deleted by the finish that
            // names the flow, whatever its outcome) and expiring. `login_given` = 1 when the
            // sign-in named a login: only that account's passkeys will do.
            """
            CREATE TABLE passkey_flows (
                id TEXT PRIMARY KEY,
                purpose TEXT NOT NULL CHECK (purpose IN ('register', 'login')),
                account_id TEXT REFERENCES accounts (id),
                login_given INTEGER NOT NULL,
                challenge BLOB NOT NULL,
                expires_at INTEGER NOT NULL
            ) STRICT
            """,
            // The WebAuthn user handle of an account: 32 random bytes, made on first use,
            // never personal data (§14.6.1).
            "ALTER TABLE accounts ADD COLUMN webauthn_user_id BLOB",
            "CREATE UNIQUE INDEX accounts_webauthn_user_id ON accounts (webauthn_user_id)",
        ]),
        Migration(version: 10, sql: [
            // The line between the machine and the account (DESIGN §8): machine tables keep the
            // account and device ids they were told, without foreign keys into account tables
            // (an account may live elsewhere, or be gone), and a machine fact leaves the
            // account's row. SQLite cannot drop a foreign key in place: the two machine tables
            // are rebuilt (`apply` turns foreign keys off around it and checks them).
            """
            CREATE TABLE local_users_v10 (
                uid INTEGER PRIMARY KEY,
                account_id TEXT,
                device_id TEXT,
                credential_check BLOB,
                locked INTEGER NOT NULL DEFAULT 0,
                active_at INTEGER NOT NULL DEFAULT 0,
                biometric_enabled INTEGER NOT NULL DEFAULT 0,
                biometric_failures INTEGER NOT NULL DEFAULT 0,
                card_pin1_release INTEGER NOT NULL DEFAULT 0
            ) STRICT
            """,
            "INSERT INTO local_users_v10 SELECT * FROM local_users",
            "DROP TABLE local_users",
            "ALTER TABLE local_users_v10 RENAME TO local_users",
            """
            CREATE TABLE remote_tokens_v10 (
                uid INTEGER NOT NULL,
                provider TEXT NOT NULL,
                issuer TEXT NOT NULL,
                account_id TEXT,
                subject TEXT,
                state TEXT NOT NULL CHECK (state IN ('signed_in', 'logged_out')),
                access_sealed BLOB,
                refresh_sealed BLOB,
                access_expires_at INTEGER,
                updated_at INTEGER NOT NULL,
                logged_out_at INTEGER,
                logged_out_by TEXT,
                PRIMARY KEY (uid, provider)
            ) STRICT
            """,
            """
            INSERT INTO remote_tokens_v10 (uid, provider, issuer, account_id, subject, state, access_sealed, refresh_sealed, access_expires_at,
                updated_at, logged_out_at, logged_out_by)
            SELECT uid, provider, issuer, account_id, subject, state, access_sealed, refresh_sealed, access_expires_at, updated_at, logged_out_at,
                logged_out_by FROM remote_tokens
            """,
            "DROP TABLE remote_tokens",
            "ALTER TABLE remote_tokens_v10 RENAME TO remote_tokens",
            // Persistent logouts whose sessions (in the account directory) are still to end: those
            // the provider's sign-ins made for the account up to `logged_out_at`. Written with the
            // vault's change, deleted once the sessions ended; finished at start and hourly.
            """
            CREATE TABLE pending_logouts (
                uid INTEGER NOT NULL,
                provider TEXT NOT NULL,
                account_id TEXT NOT NULL,
                issuer TEXT NOT NULL,
                subject TEXT,
                logged_out_at INTEGER NOT NULL,
                PRIMARY KEY (uid, provider, account_id, logged_out_at)
            ) STRICT
            """,
            // The local user whose finger is an account's second sign-in step on this machine
            // (it was `accounts.fingerprint_user`).
            """
            CREATE TABLE fingerprint_steps (
                account_id TEXT PRIMARY KEY,
                user TEXT NOT NULL
            ) STRICT
            """,
            "INSERT INTO fingerprint_steps (account_id, user) SELECT id, fingerprint_user FROM accounts WHERE fingerprint_user IS NOT NULL",
            "ALTER TABLE accounts DROP COLUMN fingerprint_user",
        ]),
        Migration(version: 11, sql: [
            // The machine's device key (DESIGN §8), made on first start: its identity towards a
            // hub. One row; the private key sealed under the master key.
            """
            CREATE TABLE device_identity (
                singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
                key_sealed BLOB NOT NULL,
                certificate BLOB NOT NULL,
                created_at INTEGER NOT NULL
            ) STRICT
            """,
        ]),
        Migration(version: 12, sql: [
            // Which ID card (its holder's personal code) and which account a Unix user signs in
            // with through pam_authd: at most one of each per user. How many users one card or
            // account may serve is `[pam] link_limit`, checked in the linking transaction.
            """
            CREATE TABLE pam_links (
                user TEXT NOT NULL,
                kind TEXT NOT NULL CHECK (kind IN ('card', 'account')),
                subject TEXT NOT NULL,
                holder TEXT,
                linked_at INTEGER NOT NULL,
                linked_by INTEGER NOT NULL,
                PRIMARY KEY (user, kind)
            ) STRICT
            """,
            "CREATE INDEX pam_links_subject ON pam_links (kind, subject)",
        ]),
        Migration(version: 13, sql: [
            // At a hub: which local user of the machine signed a session in (a device forwards
            // its caller), so when the session ends the machine tells that user and no other; a
            // sign-in waiting for its second step keeps it for the session it will make.
            "ALTER TABLE sessions ADD COLUMN machine_uid INTEGER",
            "ALTER TABLE login_flows ADD COLUMN machine_uid INTEGER",
        ]),
        Migration(version: 14, sql: [
            // The account's event log (DESIGN §9). `sync_heads` holds each account's newest
            // position: it is raised in the inserting transaction, under SQLite's one writer, so
            // positions are gap-free and a reader never passes one that commits later.
            "CREATE TABLE sync_heads (account_id TEXT PRIMARY KEY REFERENCES accounts(id), position INTEGER NOT NULL) STRICT",
            """
            CREATE TABLE sync_events (
                account_id TEXT NOT NULL REFERENCES accounts(id),
                position INTEGER NOT NULL,
                kind TEXT NOT NULL,
                conversation TEXT,
                body TEXT NOT NULL,
                device_key TEXT NOT NULL,
                machine TEXT NOT NULL,
                device_id TEXT,
                exe TEXT,
                idempotency_key TEXT,
                created_at INTEGER NOT NULL,
                PRIMARY KEY (account_id, position)
            ) STRICT
            """,
            // The same key from the same machine is the same event.
            "CREATE UNIQUE INDEX sync_events_idempotency ON sync_events (account_id, device_key, idempotency_key) WHERE idempotency_key IS NOT NULL",
            "CREATE INDEX sync_events_conversation ON sync_events (account_id, conversation, position)",
            "CREATE INDEX sync_events_age ON sync_events (created_at)",
            """
            CREATE TABLE sync_read_markers (
                account_id TEXT NOT NULL REFERENCES accounts(id),
                conversation TEXT NOT NULL,
                up_to INTEGER NOT NULL,
                PRIMARY KEY (account_id, conversation)
            ) STRICT
            """,
        ]),
        Migration(version: 15, sql: [
            // A device's outbox: what apps sent while the hub was away, in order, until the hub
            // has it. The app's session token is sealed (it is a bearer secret); the hash finds
            // the app's streams for `sync.sent`. The idempotency key makes a resend after a crash
            // the same event at the hub.
            """
            CREATE TABLE sync_outbox (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                session_sealed BLOB NOT NULL,
                session_hash BLOB NOT NULL,
                uid INTEGER NOT NULL,
                username TEXT,
                exe TEXT,
                kind TEXT NOT NULL,
                conversation TEXT,
                body TEXT NOT NULL,
                idempotency_key TEXT NOT NULL UNIQUE,
                queued_at INTEGER NOT NULL
            ) STRICT
            """,
        ]),
        Migration(version: 16, sql: [
            // At a hub: how far each linked machine has taken each account's log (forward only),
            // so a machine that comes back resumes where it was.
            """
            CREATE TABLE sync_cursors (
                account_id TEXT NOT NULL REFERENCES accounts(id),
                device_key TEXT NOT NULL,
                position INTEGER NOT NULL,
                PRIMARY KEY (account_id, device_key)
            ) STRICT
            """,
        ]),
        Migration(version: 17, sql: [
            // Friends, groups, hotspots and presence, where the account lives. A person's friends
            // are the people they added; each group of theirs is an audience; a block is the
            // blocked person's pings never reaching the one who blocks.
            """
            CREATE TABLE presence_friends (
                account_id TEXT NOT NULL REFERENCES accounts(id),
                friend_id TEXT NOT NULL REFERENCES accounts(id),
                added_at INTEGER NOT NULL,
                PRIMARY KEY (account_id, friend_id)
            ) STRICT
            """,
            "CREATE INDEX presence_friends_friend ON presence_friends (friend_id)",
            """
            CREATE TABLE presence_groups (
                id TEXT PRIMARY KEY,
                account_id TEXT NOT NULL REFERENCES accounts(id),
                name TEXT NOT NULL,
                created_at INTEGER NOT NULL,
                UNIQUE (account_id, name)
            ) STRICT
            """,
            """
            CREATE TABLE presence_members (
                group_id TEXT NOT NULL REFERENCES presence_groups(id) ON DELETE CASCADE,
                member_id TEXT NOT NULL REFERENCES accounts(id),
                PRIMARY KEY (group_id, member_id)
            ) STRICT
            """,
            "CREATE INDEX presence_members_member ON presence_members (member_id)",
            """
            CREATE TABLE presence_blocks (
                account_id TEXT NOT NULL REFERENCES accounts(id),
                blocked_id TEXT NOT NULL REFERENCES accounts(id),
                blocked_at INTEGER NOT NULL,
                PRIMARY KEY (account_id, blocked_id)
            ) STRICT
            """,
            // A hotspot of an account's own, or an admin's shared one (account_id NULL). BSSIDs:
            // a JSON array of strings; beacons: a JSON array of {address, lat, lon}.
            """
            CREATE TABLE presence_hotspots (
                id TEXT PRIMARY KEY,
                account_id TEXT REFERENCES accounts(id),
                name TEXT NOT NULL,
                latitude REAL,
                longitude REAL,
                radius REAL,
                bssids TEXT,
                beacons TEXT,
                created_at INTEGER NOT NULL
            ) STRICT
            """,
            "CREATE INDEX presence_hotspots_account ON presence_hotspots (account_id)",
            // How a person shares (no row: enabled, ask, nobody, manual), and the groups they
            // share with; `until` ends a timed share, checked at every read; `precise` is how a
            // precise point is given (manual, or beacon).
            """
            CREATE TABLE presence_settings (
                account_id TEXT PRIMARY KEY REFERENCES accounts(id),
                enabled INTEGER NOT NULL,
                mode TEXT NOT NULL,
                until INTEGER,
                precise TEXT NOT NULL DEFAULT 'manual'
            ) STRICT
            """,
            """
            CREATE TABLE presence_shares (
                account_id TEXT NOT NULL REFERENCES accounts(id),
                group_id TEXT NOT NULL REFERENCES presence_groups(id) ON DELETE CASCADE,
                PRIMARY KEY (account_id, group_id)
            ) STRICT
            """,
            // Where a person is now: the hotspot, since when, when a machine last said so, the
            // point they pinned, and (ask mode) the group they chose to tell for this stay.
            """
            CREATE TABLE presence_places (
                account_id TEXT PRIMARY KEY REFERENCES accounts(id),
                hotspot_id TEXT NOT NULL REFERENCES presence_hotspots(id) ON DELETE CASCADE,
                since INTEGER NOT NULL,
                reported_at INTEGER NOT NULL,
                pin_latitude REAL,
                pin_longitude REAL,
                group_id TEXT REFERENCES presence_groups(id) ON DELETE SET NULL
            ) STRICT
            """,
        ]),
        Migration(version: 18, sql: [
            // Who opened a passkey ceremony (`FlowOwner.stored`: the machine it came through and
            // the local user there): only they may finish it. Ceremonies open before this have
            // no owner and are refused, as expired ones are (they last minutes).
            "ALTER TABLE passkey_flows ADD COLUMN opened_by TEXT",
            // The same for code flows (registration, sign-in and unlock by SMS code).
            "ALTER TABLE otp_flows ADD COLUMN opened_by TEXT",
            // At a hub: whether a machine holds a session decides, at each connection, whether it
            // is a signed-in machine or a newcomer (HubListener); looked up by its device key.
            "CREATE INDEX devices_device_key ON devices (device_key)",
            "CREATE INDEX sessions_device ON sessions (device_id)",
        ]),
        Migration(version: 19, sql: [
            // The name a person gave this machine (`device.name`); NULL: its host name.
            "ALTER TABLE device_identity ADD COLUMN name TEXT",
        ]),
        Migration(version: 20, sql: [
            // What a local user let a program have without asking again (DESIGN §12): tokens for
            // an audience, under `prompt: desktop`. `program` is the identity authd read
            // (`exe:/usr/bin/foo`, `flatpak:org.example.App`, `snap:name`).
            """
            CREATE TABLE desktop_consents (
                uid INTEGER NOT NULL,
                program TEXT NOT NULL,
                audience TEXT NOT NULL,
                granted_at INTEGER NOT NULL,
                PRIMARY KEY (uid, program, audience)
            ) STRICT, WITHOUT ROWID
            """,
        ]),
        Migration(version: 21, sql: [
            // End-to-end encrypted sync. At a hub: whether an account's bodies are encrypted
            // between its devices (accounts made from now on: required; those before: off until
            // an admin turns it on), each linked machine's key-agreement key as it signed it, and
            // an event's encrypted body (`body` is then null).
            "ALTER TABLE accounts ADD COLUMN e2ee TEXT NOT NULL DEFAULT 'required' CHECK (e2ee IN ('required', 'off'))",
            "UPDATE accounts SET e2ee = 'off'",
            """
            CREATE TABLE device_e2ee_keys (
                device_id TEXT PRIMARY KEY,
                spki BLOB NOT NULL,
                statement TEXT NOT NULL,
                published_at INTEGER NOT NULL
            ) STRICT
            """,
            "ALTER TABLE sync_events ADD COLUMN sealed TEXT",
            // On every machine: its own key-agreement key, sealed beside its device key.
            "ALTER TABLE device_identity ADD COLUMN agreement_key_sealed BLOB",
        ]),
        Migration(version: 22, sql: [
            // The audit log without AUTOINCREMENT, as on PostgreSQL. Its ids were already the
            // writer's (the newest + 1, never below what a purge deleted, and a purge always
            // leaves its own record as the newest), so the sqlite_sequence row SQLite kept
            // beside them was a second write and a second page in every commit of every token.
            """
            CREATE TABLE audit_rebuilt (
                id INTEGER PRIMARY KEY,
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
            """
            INSERT INTO audit_rebuilt (id, at_ms, uid, pid, exe, method, outcome, reason, detail)
            SELECT id, at_ms, uid, pid, exe, method, outcome, reason, detail FROM audit ORDER BY id
            """,
            "DROP TABLE audit",
            "ALTER TABLE audit_rebuilt RENAME TO audit",
        ]),
        Migration(version: 23, sql: [
            // The ID tokens that signed in, by SHA-256, until they expire: an ID token signs in
            // once, whoever else comes to hold it.
            "CREATE TABLE used_id_tokens (digest BLOB PRIMARY KEY, expires_at INTEGER NOT NULL) STRICT",
            "CREATE INDEX used_id_tokens_expiry ON used_id_tokens (expires_at)",
        ]),
        Migration(version: 24, sql: [
            // Consents keyed by purpose too (`ConsentPurpose`), as the question words it: an
            // "Always allow" to ask for a signature (PIN2 asked every time) must not answer the
            // question before an account token (no secret asked) for the same audience. A
            // consent given before could have been for any purpose: kept for every one it would
            // keep that hole open, and kept for none it would be listed but never used. So it
            // goes; the person is asked again the next time the program asks.
            "DROP TABLE desktop_consents",
            """
            CREATE TABLE desktop_consents (
                uid INTEGER NOT NULL,
                program TEXT NOT NULL,
                purpose TEXT NOT NULL CHECK (purpose IN ('card_login', 'card_sign', 'card_certificate', 'account_token')),
                audience TEXT NOT NULL,
                granted_at INTEGER NOT NULL,
                PRIMARY KEY (uid, program, purpose, audience)
            ) STRICT, WITHOUT ROWID
            """,
        ]),
    ]

    static var latestVersion: Int { all.last?.version ?? 0 }

    struct TooNew: Error, CustomStringConvertible {
        let found: Int
        var known = Migrations.latestVersion
        var description: String {
            "the store has schema version \(found), newer than this authd knows (\(known)); refusing to touch it: upgrade this authd"
        }
    }

    struct ForeignKeyViolation: Error, CustomStringConvertible {
        let table: String
        var description: String { "a migration left rows in \(table) that point nowhere; the store is unchanged" }
    }

    static func apply(to database: Database) throws {
        // Table rebuilds need foreign keys off (the pragma is a no-op inside a transaction);
        // the check before commit keeps them honest.
        try database.execute("PRAGMA foreign_keys = OFF")
        defer { try? database.execute("PRAGMA foreign_keys = ON") }
        try database.transaction {
            let current = try database.queryOne("PRAGMA user_version") { $0.int(0) } ?? 0
            guard current <= latestVersion else { throw TooNew(found: current) }
            for migration in all where migration.version > current {
                for statement in migration.sql { try database.execute(statement) }
                try database.execute("PRAGMA user_version = \(migration.version)")
            }
            if let table = try database.queryOne("PRAGMA foreign_key_check", row: { $0.text(0) }) { throw ForeignKeyViolation(table: table) }
        }
    }
}
