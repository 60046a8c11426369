import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// What links an account to credentials outside authd: a provider's identity
/// (`federated_identities`) and the passkeys registered to it (`account_passkeys`, with their
/// ceremonies in `passkey_flows` and the account's WebAuthn user handle).
extension SQLAccountDirectory {
    // MARK: Federated identities

    /// The identity comes from an ID token this authd validated itself. The token's digest is
    /// kept until it expires (`purgeExpired` deletes it then), in the sign-in's own transaction:
    /// whoever else holds the token (a log, a machine that saw it) cannot sign in with it again,
    /// and a sign-in that fails does not use it up.
    func signIn(federated identity: FederatedIdentity, proof: FederatedProof, device: DeviceIdentity) async throws -> FederatedSignInResult {
        let config = config.current
        let now = seconds
        let digest = OpenSSL.sha256(Array(proof.idToken.utf8))
        return try await store.transaction { database in
            try database.execute("INSERT INTO used_id_tokens (digest, expires_at) VALUES (?, ?) ON CONFLICT (digest) DO NOTHING",
                                 [.blob(digest), .integer(proof.expiresAt + IDTokenValidator.skewSeconds)])
            guard database.changes == 1 else {
                throw FederationFailure.idTokenInvalid(
                    provider: identity.provider, IDTokenFailure(check: "replay", description: "the ID token has signed in already; sign in again"))
            }
            let linked = try database.queryOne(
                "SELECT f.account_id, a.deactivated_at IS NOT NULL FROM federated_identities f JOIN accounts a ON a.id = f.account_id WHERE f.issuer = ? AND f.subject = ?",
                [.text(identity.issuer), .text(identity.subject)]) { ($0.text(0), $0.int(1) != 0) }
            let account: String
            if let (existing, deactivated) = linked {
                guard !deactivated else { throw FederationFailure.accountDeactivated(provider: identity.provider) }
                account = existing
                try database.execute(
                    "UPDATE federated_identities SET email = ?, name = ?, last_login_at = ? WHERE issuer = ? AND subject = ?",
                    [identity.email.map(SQLValue.text) ?? .null, identity.name.map(SQLValue.text) ?? .null, .integer(now), .text(identity.issuer),
                     .text(identity.subject)])
            } else {
                // The first sign-in with this identity registers an account for it (the
                // provider is the registration path: no phone, no password).
                account = "acc_" + Base64URL.encode(try OpenSSL.randomBytes(12))
                try database.execute("INSERT INTO accounts (id, created_at) VALUES (?, ?)", [.text(account), .integer(now)])
                try database.execute(
                    """
                    INSERT INTO federated_identities (issuer, subject, account_id, provider, email, name, created_at, last_login_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                    [.text(identity.issuer), .text(identity.subject), .text(account), .text(identity.provider),
                     identity.email.map(SQLValue.text) ?? .null, identity.name.map(SQLValue.text) ?? .null, .integer(now), .integer(now)])
            }
            let signedIn = try Self.signedIn(in: database, account: account, device: device, amr: ["fed"], federation: identity.provider,
                                             config: config, now: now)
            return FederatedSignInResult(signedIn: signedIn, created: linked == nil)
        }
    }

    func endFederatedSessions(account: String, provider: String, issuer: String, subject: String?, madeBy: Int64, machine: DeviceID?) async throws -> Int {
        let now = seconds
        let machineKey: SQLValue = machine.map { .text(DeviceIdentity.key(ofMachine: $0)) } ?? .null
        return try await store.transaction { database in
            if let subject {
                try database.execute("UPDATE federated_identities SET email = NULL, name = NULL WHERE issuer = ? AND subject = ? AND account_id = ?",
                                     [.text(issuer), .text(subject), .text(account)])
            }
            return try Self.endSessions(
                in: database,
                where: """
                    account_id = ? AND federation = ? AND expires_at > ? AND created_at <= ?
                    AND (CAST(? AS TEXT) IS NULL OR device_id IN (SELECT id FROM devices WHERE account_id = ? AND device_key = ?))
                    """,
                [.text(account), .text(provider), .integer(now), .integer(madeBy), machineKey, .text(account), machineKey], cause: .providerLogout, now: now)
        }
    }

    func federatedEmail(account: String, issuer: String, subject: String) async throws -> String? {
        try await store.read { database in
            try database.queryOne("SELECT email FROM federated_identities WHERE issuer = ? AND subject = ? AND account_id = ?",
                                  [.text(issuer), .text(subject), .text(account)]) { $0.optionalText(0) } ?? nil
        }
    }

    // MARK: Passkeys of accounts

    /// Opens a ceremony: expired ones go, an account keeps at most `flowsPerAccount` open
    /// (the oldest give way).
    private static func newPasskeyFlow(in database: Database, purpose: PasskeyCeremony, account: String?, loginGiven: Bool, challenge: [UInt8],
                                       owner: FlowOwner, now: Int64, timeout: Int64) throws -> String {
        try database.execute("DELETE FROM passkey_flows WHERE expires_at <= ?", [.integer(now)])
        if let account {
            try database.execute(
                "DELETE FROM passkey_flows WHERE id IN (SELECT id FROM passkey_flows WHERE account_id = ? ORDER BY expires_at DESC \(database.dialect.noLimit) OFFSET ?)",
                [.text(account), .integer(Int64(RelyingParty.flowsPerAccount - 1))])
        }
        let flow = Base64URL.encode(try OpenSSL.randomBytes(16))
        try database.execute(
            "INSERT INTO passkey_flows (id, purpose, account_id, login_given, challenge, expires_at, opened_by) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [.text(flow), .text(purpose.rawValue), account.map(SQLValue.text) ?? .null, .integer(loginGiven ? 1 : 0), .blob(challenge),
             .integer(now + timeout), .text(owner.stored)])
        return flow
    }

    func beginPasskeyRegistration(_ session: PresentedSession, challenge: [UInt8], newHandle: [UInt8], owner: FlowOwner, timeout: Int64) async throws -> PasskeyEnrolment {
        let now = seconds
        return try await withSession(session) { database, session in
            guard let (handle, name) = try database.queryOne("SELECT webauthn_user_id, coalesce(email, phone, id) FROM accounts WHERE id = ?",
                                                              [.text(session.accountID)], row: { ($0.optionalBlob(0), $0.text(1)) })
            else { throw PasskeyFailure.flowInvalid }
            let userHandle = handle ?? newHandle
            if handle == nil {
                try database.execute("UPDATE accounts SET webauthn_user_id = ? WHERE id = ?", [.blob(userHandle), .text(session.accountID)])
            }
            let registered = try database.query("SELECT credential_id FROM account_passkeys WHERE account_id = ? ORDER BY created_at",
                                                [.text(session.accountID)]) { $0.blob(0) }
            let flow = try Self.newPasskeyFlow(in: database, purpose: .register, account: session.accountID, loginGiven: true, challenge: challenge,
                                               owner: owner, now: now, timeout: timeout)
            return PasskeyEnrolment(flow: flow, userHandle: userHandle, name: name, registered: registered)
        }
    }

    /// Another caller's ceremony is refused as an unknown one, and stays for its owner.
    func consumePasskeyFlow(_ id: String, purpose: PasskeyCeremony, owner: FlowOwner) async throws -> PasskeyChallenge {
        let now = seconds
        let row = try await store.transaction { database -> PasskeyChallenge? in
            let row = try database.queryOne(
                "SELECT challenge, account_id, login_given FROM passkey_flows WHERE id = ? AND purpose = ? AND expires_at > ? AND opened_by = ?",
                [.text(id), .text(purpose.rawValue), .integer(now), .text(owner.stored)]) {
                PasskeyChallenge(challenge: $0.blob(0), account: $0.optionalText(1), loginGiven: $0.int(2) != 0)
            }
            if row != nil { try database.execute("DELETE FROM passkey_flows WHERE id = ?", [.text(id)]) }
            return row
        }
        guard let row else { throw PasskeyFailure.flowInvalid }
        return row
    }

    /// Keeps the credential record WebAuthn L3 §7.1 step 27 asks for: the COSE key, the counter,
    /// and the flags seen at registration.
    func addPasskey(_ session: PresentedSession, account: String, credential: RelyingPartyVerifier.NewCredential) async throws -> Int64 {
        let now = seconds
        let publicKey = try credential.publicKey.encoded()
        return try await withSession(session) { database, session in
            guard session.accountID == account else { throw PasskeyFailure.flowInvalid }
            // WebAuthn L3 §7.1 step 26: a credential id registered to anyone is refused.
            guard try database.queryOne("SELECT 1 FROM account_passkeys WHERE credential_id = ?", [.blob(credential.id)], row: { _ in true }) == nil
            else { throw PasskeyFailure.alreadyRegistered }
            try database.execute(
                """
                INSERT INTO account_passkeys (credential_id, account_id, public_key, sign_count, uv_initialized, backup_eligible, backup_state, created_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [.blob(credential.id), .text(account), .blob(publicKey), .integer(Int64(credential.signCount)),
                 .integer(credential.userVerified ? 1 : 0), .integer(credential.backupEligible ? 1 : 0), .integer(credential.backupState ? 1 : 0),
                 .integer(now)])
            try AuditScope.record(in: database, ["account": .string(account), "credential": .string(Base64URL.encode(credential.id))])
            return now
        }
    }

    func beginPasskeySignIn(login: AccountKey?, challenge: [UInt8], decoy: [UInt8]?, owner: FlowOwner,
                            timeout: Int64) async throws -> (flow: String, allowed: [[UInt8]]) {
        let now = seconds
        return try await store.transaction { database in
            var account: String?
            var allowed: [[UInt8]] = []
            if let login {
                let (column, value) = Self.column(login)
                account = try database.queryOne("SELECT id FROM accounts WHERE \(column) = ? AND deactivated_at IS NULL", [.text(value)]) { $0.text(0) }
                if let account {
                    allowed = try database.query("SELECT credential_id FROM account_passkeys WHERE account_id = ? ORDER BY created_at", [.text(account)]) {
                        $0.blob(0)
                    }
                }
                if allowed.isEmpty, let decoy { allowed = [decoy] }
            }
            let flow = try Self.newPasskeyFlow(in: database, purpose: .login, account: account, loginGiven: login != nil, challenge: challenge,
                                               owner: owner, now: now, timeout: timeout)
            return (flow, allowed)
        }
    }

    func registeredPasskey(_ credentialID: [UInt8]) async throws -> RegisteredPasskey? {
        try await store.read { database in
            try database.queryOne(
                """
                SELECT p.account_id, p.public_key, p.sign_count, p.backup_eligible, a.webauthn_user_id
                FROM account_passkeys p JOIN accounts a ON a.id = p.account_id
                WHERE p.credential_id = ? AND a.deactivated_at IS NULL
                """, [.blob(credentialID)]) {
                RegisteredPasskey(account: $0.text(0), publicKey: $0.blob(1), signCount: $0.int64(2), backupEligible: $0.int(3) != 0,
                                  userHandle: $0.optionalBlob(4))
            }
        }
    }

    func completePasskeySignIn(_ credentialID: [UInt8], checked: RegisteredPasskey, verified: RelyingPartyVerifier.VerifiedAssertion,
                               device: DeviceIdentity, amr: [String]) async throws -> SignedIn {
        let config = config.current
        let now = seconds
        return try await store.transaction { database in
            // The counter moves only from the value checked: two sign-ins with one assertion
            // (or racing clones) cannot both pass.
            try database.execute(
                """
                UPDATE account_passkeys SET sign_count = ?, backup_state = ?, uv_initialized = uv_initialized | ?, last_used_at = ?
                WHERE credential_id = ? AND sign_count = ?
                """,
                [.integer(Int64(verified.signCount)), .integer(verified.backupState ? 1 : 0), .integer(verified.userVerified ? 1 : 0), .integer(now),
                 .blob(credentialID), .integer(checked.signCount)])
            guard database.changes == 1 else {
                throw PasskeyFailure.invalid(WebAuthnFailure(check: "sign_count", description: "the passkey was used by another sign-in at the same time"))
            }
            return try Self.signedIn(in: database, account: checked.account, device: device, amr: amr, config: config, now: now)
        }
    }

    func passkeys(_ session: PresentedSession) async throws -> [AccountPasskey] {
        try await readingSession(session) { database, session in
            try database.query(
                """
                SELECT credential_id, sign_count, backup_eligible, backup_state, created_at, last_used_at
                FROM account_passkeys WHERE account_id = ? ORDER BY created_at DESC, rowid DESC
                """, [.text(session.accountID)]) {
                AccountPasskey(id: Base64URL.encode($0.blob(0)), signCount: $0.int(1), backupEligible: $0.int(2) != 0, backupState: $0.int(3) != 0,
                               createdAt: Timestamp.rfc3339(epochSeconds: $0.int64(4)), lastUsedAt: $0.optionalInt64(5).map { Timestamp.rfc3339(epochSeconds: $0) })
            }
        }
    }

    func removePasskey(_ session: PresentedSession, id: [UInt8]) async throws {
        try await withSession(session) { database, session in
            try database.execute("DELETE FROM account_passkeys WHERE credential_id = ? AND account_id = ?", [.blob(id), .text(session.accountID)])
            guard database.changes == 1 else { throw PasskeyFailure.noSuchAccountPasskey }
            try AuditScope.record(in: database, ["account": .string(session.accountID), "credential": .string(Base64URL.encode(id))])
        }
    }
}
