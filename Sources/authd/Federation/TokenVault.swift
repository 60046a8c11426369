import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// The remote-token vault (`remote_tokens`, a machine table): per local user and provider, the
/// access and refresh tokens sealed at rest, or the persistent logged-out state a 401 left. The
/// sessions a provider's sign-ins created are the account directory's: a logout ends them there
/// after the vault's own change, and a logout interrupted in between is finished later
/// (`pending_logouts`), so a persistent logout never leaves the provider's sessions alive.
struct TokenVault: Sendable {
    let store: Store
    let sealer: Sealer
    let directory: any MachineAccounts

    /// A sealed token that does not open under its row's identity (moved, or the master key
    /// changed): an internal error, never a token.
    struct VaultDamaged: Error, CustomStringConvertible {
        var description: String { "a sealed remote token does not open under its row's identity" }
    }

    /// One row, opened.
    struct Entry: Sendable {
        let issuer: String
        let account: String?
        let subject: String?
        let loggedOut: Bool
        let accessToken: String?
        let refreshToken: String?
        /// The sealed refresh token as stored: a refresh replaces the row only if it still holds it.
        let refreshSealed: [UInt8]?
        let accessExpiresAt: Int64?
        let loggedOutAt: Int64?
        let loggedOutBy: String?
    }

    private static func identity(uid: UInt32, provider: String, issuer: String) -> String {
        "\(uid)\u{0}\(provider)\u{0}\(issuer)"
    }

    private func seal(_ token: String?, _ purpose: SealPurpose, _ identity: String) throws -> SQLValue {
        guard let token else { return .null }
        return .blob(try sealer.seal(SecretBytes(Array(token.utf8)), purpose: purpose, identity: identity))
    }

    private func open(_ sealed: [UInt8]?, _ purpose: SealPurpose, _ identity: String) throws -> String? {
        guard let sealed else { return nil }
        guard let secret = try sealer.open(sealed, purpose: purpose, identity: identity) else {
            throw VaultDamaged()
        }
        return secret.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
    }

    func entry(uid: UInt32, provider: String) async throws -> Entry? {
        let row = try await store.read { database in
            try database.queryOne(
                """
                SELECT issuer, account_id, subject, state, access_sealed, refresh_sealed, access_expires_at, logged_out_at, logged_out_by
                FROM remote_tokens WHERE uid = ? AND provider = ?
                """, [.integer(Int64(uid)), .text(provider)]) {
                ($0.text(0), $0.optionalText(1), $0.optionalText(2), $0.text(3), $0.isNull(4) ? nil : $0.blob(4), $0.isNull(5) ? nil : $0.blob(5),
                 $0.optionalInt64(6), $0.optionalInt64(7), $0.optionalText(8))
            }
        }
        guard let row else { return nil }
        let identity = Self.identity(uid: uid, provider: provider, issuer: row.0)
        return Entry(issuer: row.0, account: row.1, subject: row.2, loggedOut: row.3 == "logged_out",
                     accessToken: try open(row.4, .remoteAccessToken, identity), refreshToken: try open(row.5, .remoteRefreshToken, identity),
                     refreshSealed: row.5, accessExpiresAt: row.6, loggedOutAt: row.7, loggedOutBy: row.8)
    }

    /// After a successful sign-in: the new tokens replace whatever the row held, and a
    /// logged-out state is cleared.
    func storeSignIn(uid: UInt32, provider: Config.FederationProvider, account: String, subject: String, tokens: TokenSet, now: Int64) async throws {
        let identity = Self.identity(uid: uid, provider: provider.name, issuer: provider.issuer)
        let values: [SQLValue] = [
            .integer(Int64(uid)), .text(provider.name), .text(provider.issuer), .text(account), .text(subject),
            try seal(tokens.accessToken, .remoteAccessToken, identity), try seal(tokens.refreshToken, .remoteRefreshToken, identity),
            .integer(Self.expiresAt(tokens, now: now)), .integer(now),
        ]
        try await store.transaction { database in
            try database.execute(
                """
                INSERT INTO remote_tokens (uid, provider, issuer, account_id, subject, state, access_sealed, refresh_sealed, access_expires_at, updated_at)
                VALUES (?, ?, ?, ?, ?, 'signed_in', ?, ?, ?, ?)
                ON CONFLICT (uid, provider) DO UPDATE SET issuer = excluded.issuer, account_id = excluded.account_id, subject = excluded.subject,
                    state = 'signed_in', access_sealed = excluded.access_sealed, refresh_sealed = excluded.refresh_sealed,
                    access_expires_at = excluded.access_expires_at, updated_at = excluded.updated_at, logged_out_at = NULL, logged_out_by = NULL
                """, values)
        }
    }

    /// Without `expires_in` the provider promised nothing: authd assumes an hour (RFC 6749
    /// leaves the default to the provider) and learns otherwise from a 401.
    static func expiresAt(_ tokens: TokenSet, now: Int64) -> Int64 {
        now + max(0, min(tokens.expiresIn ?? 3600, 366 * 86400))
    }

    /// After a refresh: stores the new tokens if the row still holds the refresh token that was
    /// used (a concurrent logout wins). A provider that does not rotate keeps the old refresh token.
    func replace(uid: UInt32, provider: String, issuer: String, usedRefreshSealed: [UInt8], tokens: TokenSet, now: Int64) async throws -> Bool {
        let identity = Self.identity(uid: uid, provider: provider, issuer: issuer)
        let access = try seal(tokens.accessToken, .remoteAccessToken, identity)
        let refresh = try tokens.refreshToken.map { try seal($0, .remoteRefreshToken, identity) } ?? .blob(usedRefreshSealed)
        return try await store.transaction { database in
            try database.execute(
                """
                UPDATE remote_tokens SET access_sealed = ?, refresh_sealed = ?, access_expires_at = ?, updated_at = ?
                WHERE uid = ? AND provider = ? AND state = 'signed_in' AND refresh_sealed = ?
                """,
                [access, refresh, .integer(Self.expiresAt(tokens, now: now)), .integer(now), .integer(Int64(uid)), .text(provider), .blob(usedRefreshSealed)])
            return database.changes > 0
        }
    }

    /// Which credential a 401 refused: the logout happens only while the vault still holds it, so
    /// a late refusal of an old token never ends a newer sign-in.
    enum RefusedCredential: Sendable {
        /// A client's report: whatever the vault holds.
        case current
        case refreshToken(sealed: [UInt8])
        case accessToken(String)
    }

    enum LogoutOutcome: Sendable {
        case loggedOut(LoggedOutEvent)
        /// Nothing signed in (already logged out, or never signed in): nothing changed.
        case notSignedIn
        /// The vault holds newer tokens than the refused one (a sign-in or refresh since): nothing changed.
        case superseded
    }

    /// The persistent logout: deletes the tokens, records who refused, and notes the sessions
    /// still to end (`pending_logouts`), in one change; then the provider's sessions made up to
    /// now end and the cached user data goes, in the account directory, and the note goes.
    func logOut(uid: UInt32, provider: String, source: String, refused: RefusedCredential, now: Int64) async throws -> LogoutOutcome {
        let sealer = sealer
        let decision = try await store.transaction { database -> LogoutDecision in
            guard let (account, issuer, subject, accessSealed, refreshSealed) = try database.queryOne(
                "SELECT account_id, issuer, subject, access_sealed, refresh_sealed FROM remote_tokens WHERE uid = ? AND provider = ? AND state = 'signed_in'",
                [.integer(Int64(uid)), .text(provider)],
                row: { ($0.optionalText(0), $0.text(1), $0.optionalText(2), $0.isNull(3) ? nil : $0.blob(3), $0.isNull(4) ? nil : $0.blob(4)) })
            else { return .unchanged(.notSignedIn) }
            switch refused {
            case .current: break
            case .refreshToken(let sealed):
                guard refreshSealed == sealed else { return .unchanged(.superseded) }
            case .accessToken(let token):
                let identity = Self.identity(uid: uid, provider: provider, issuer: issuer)
                guard let accessSealed, let held = try sealer.open(accessSealed, purpose: .remoteAccessToken, identity: identity),
                      held.withUnsafeBytes({ OpenSSL.constantTimeEquals(Array($0), Array(token.utf8)) })
                else { return .unchanged(.superseded) }
            }
            try database.execute(
                """
                UPDATE remote_tokens SET state = 'logged_out', access_sealed = NULL, refresh_sealed = NULL, access_expires_at = NULL,
                    updated_at = ?, logged_out_at = ?, logged_out_by = ? WHERE uid = ? AND provider = ?
                """, [.integer(now), .integer(now), .text(source), .integer(Int64(uid)), .text(provider)])
            guard let account else { return .loggedOut(nil) }
            let pending = PendingLogout(uid: uid, provider: provider, account: account, issuer: issuer, subject: subject, at: now)
            try database.execute("INSERT OR REPLACE INTO pending_logouts (uid, provider, account_id, issuer, subject, logged_out_at) VALUES (?, ?, ?, ?, ?, ?)",
                                 [.integer(Int64(uid)), .text(provider), .text(account), .text(issuer), subject.map(SQLValue.text) ?? .null, .integer(now)])
            return .loggedOut(pending)
        }
        switch decision {
        case .unchanged(let outcome):
            return outcome
        case .loggedOut(let pending):
            var ended = 0
            if let pending { ended = try await finish(pending) }
            return .loggedOut(LoggedOutEvent(provider: provider, account: pending?.account, source: source, at: Timestamp.rfc3339(epochSeconds: now),
                                             sessionsEnded: ended))
        }
    }

    private enum LogoutDecision: Sendable {
        case unchanged(LogoutOutcome)
        /// Logged out; the sessions still to end, when the row named an account.
        case loggedOut(PendingLogout?)
    }

    /// A logout whose sessions are still to end: those the provider's sign-ins made for the
    /// account up to the logout (a later sign-in's are not touched).
    private struct PendingLogout: Sendable {
        let uid: UInt32
        let provider: String
        let account: String
        let issuer: String
        let subject: String?
        let at: Int64
    }

    /// Ends a logout's sessions in the directory, then forgets the note. Safe to run twice.
    private func finish(_ pending: PendingLogout) async throws -> Int {
        let ended = try await directory.endFederatedSessions(account: pending.account, provider: pending.provider, issuer: pending.issuer,
                                                             subject: pending.subject, madeBy: pending.at, machine: nil)
        try await store.transaction { database in
            try database.execute("DELETE FROM pending_logouts WHERE uid = ? AND provider = ? AND account_id = ? AND logged_out_at = ?",
                                 [.integer(Int64(pending.uid)), .text(pending.provider), .text(pending.account), .integer(pending.at)])
        }
        return ended
    }

    /// Ends the sessions of logouts interrupted before their sessions ended (a crash, a store
    /// error); run at start and hourly. Returns how many logouts it finished.
    func finishPendingLogouts() async throws -> Int {
        let pending = try await store.read { database in
            try database.query("SELECT uid, provider, account_id, issuer, subject, logged_out_at FROM pending_logouts") {
                PendingLogout(uid: UInt32(truncatingIfNeeded: $0.int64(0)), provider: $0.text(1), account: $0.text(2), issuer: $0.text(3),
                              subject: $0.optionalText(4), at: $0.int64(5))
            }
        }
        for logout in pending { _ = try await finish(logout) }
        return pending.count
    }

    /// The user's own sign-out: the provider's sessions end and the cached user data goes (in the
    /// directory, first: a failure there changes nothing), then the row goes; its tokens are
    /// returned for revocation. nil when there was no row.
    func signOut(uid: UInt32, provider: String, now: Int64) async throws -> (ended: Int, entry: Entry)? {
        guard let entry = try await entry(uid: uid, provider: provider) else { return nil }
        var ended = 0
        if let account = entry.account {
            ended = try await directory.endFederatedSessions(account: account, provider: provider, issuer: entry.issuer, subject: entry.subject,
                                                             madeBy: now, machine: nil)
        }
        try await store.transaction { database in
            try database.execute("DELETE FROM remote_tokens WHERE uid = ? AND provider = ?", [.integer(Int64(uid)), .text(provider)])
        }
        return (ended, entry)
    }

    /// The calling user's rows with the email the provider last gave, for `federation.status`.
    func summaries(uid: UInt32) async throws -> [String: FederationProviderState] {
        let rows = try await store.read { database in
            try database.query(
                """
                SELECT provider, state, account_id, subject, issuer, access_expires_at, refresh_sealed IS NOT NULL, logged_out_at, logged_out_by
                FROM remote_tokens WHERE uid = ?
                """, [.integer(Int64(uid))]) { row in
                (FederationProviderState(
                    name: row.text(0), issuer: "", isDefault: false, state: row.text(1) == "logged_out" ? "logged_out" : "signed_in",
                    account: row.optionalText(2), subject: row.optionalText(3), email: nil,
                    accessExpiresAt: row.optionalInt64(5).map { Timestamp.rfc3339(epochSeconds: $0) }, hasRefreshToken: row.int(6) != 0,
                    loggedOutAt: row.optionalInt64(7).map { Timestamp.rfc3339(epochSeconds: $0) }, loggedOutBy: row.optionalText(8)), row.text(4))
            }
        }
        var states: [String: FederationProviderState] = [:]
        for (var state, issuer) in rows where states[state.name] == nil {
            if let subject = state.subject, let account = state.account {
                state.email = try await directory.federatedEmail(account: account, issuer: issuer, subject: subject)
            }
            states[state.name] = state
        }
        return states
    }
}
