import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// authd as the WebAuthn relying party of its own accounts (`auth.passkey.*`): ceremonies with
/// a single-use, expiring challenge kept in the store, checked by `RelyingPartyVerifier`
/// (WebAuthn L3 §7.1/§7.2), credentials kept per account.
struct RelyingParty: Sendable {
    let store: Store
    let config: ConfigHolder
    let sessions: SessionService
    let lock: LocalLock
    /// Keys the stand-in credential ids of a login with no passkey (see `loginBegin`).
    let decoyKey: SecretBytes
    let logger: Logger
    let now: @Sendable () -> Date

    /// Open ceremonies one account may have; beginning another drops the oldest.
    static let flowsPerAccount = 8
    /// A sign-in with a passkey proves possession of the key and the authenticator's user
    /// verification (RFC 8176 `pop` and `mfa`).
    static let amr = ["pop", "mfa"]

    private var seconds: Int64 { Int64(now().timeIntervalSince1970) }

    static let flowInvalid = RPCError.failure(.passkeyFlowInvalid, "This passkey ceremony is unknown, expired or already used; begin again.")

    static func invalid(_ failure: WebAuthnFailure) -> RPCError {
        .failure(.passkeyInvalid, "The passkey response is not valid: \(failure.description).", details: ["check": .string(failure.check)])
    }

    private static func invalid(_ check: String, _ description: String) -> RPCError {
        invalid(WebAuthnFailure(check: check, description: description))
    }

    private func newFlow(in database: Database, purpose: String, account: String?, loginGiven: Bool, challenge: [UInt8], now: Int64) throws -> String {
        try database.execute("DELETE FROM passkey_flows WHERE expires_at <= ?", [.integer(now)])
        if let account {
            try database.execute(
                "DELETE FROM passkey_flows WHERE id IN (SELECT id FROM passkey_flows WHERE account_id = ? ORDER BY expires_at DESC LIMIT -1 OFFSET ?)",
                [.text(account), .integer(Int64(Self.flowsPerAccount - 1))])
        }
        let flow = Base64URL.encode(try OpenSSL.randomBytes(16))
        try database.execute("INSERT INTO passkey_flows (id, purpose, account_id, login_given, challenge, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
                             [.text(flow), .text(purpose), account.map { .text($0) } ?? .null, .integer(loginGiven ? 1 : 0), .blob(challenge),
                              .integer(now + Int64(config.current.passkeyTimeoutSeconds))])
        return flow
    }

    /// Deletes the flow and returns it, in its own transaction: a finish uses up its flow
    /// whatever the outcome, so a challenge can never be answered twice.
    private func consumeFlow(_ flow: String, purpose: String) async throws -> (challenge: [UInt8], account: String?, loginGiven: Bool) {
        let now = seconds
        let row = try await store.transaction { database in
            let row = try database.queryOne("SELECT challenge, account_id, login_given FROM passkey_flows WHERE id = ? AND purpose = ? AND expires_at > ?",
                                            [.text(flow), .text(purpose), .integer(now)]) { ($0.blob(0), $0.optionalText(1), $0.int(2) != 0) }
            try database.execute("DELETE FROM passkey_flows WHERE id = ?", [.text(flow)])
            return row
        }
        guard let row else { throw Self.flowInvalid }
        return row
    }

    private func expectation(_ challenge: [UInt8]) -> RelyingPartyExpectation {
        let config = config.current
        return RelyingPartyExpectation(rpID: config.passkeyRPID, origins: config.passkeyOrigins, challenge: challenge, requireUserVerification: true)
    }

    /// The credential id of a response whose `id` and `type` are what WebAuthn requires.
    private static func credentialID(_ id: String, _ rawID: String, _ type: String) throws(RPCError) -> [UInt8] {
        let credentialID = try PlatformAuthenticator.binary(rawID, field: "credential.rawId", bytes: 1...AuthenticatorData.maxCredentialIDLength)
        guard type == "public-key", id == Base64URL.encode(credentialID) else {
            throw invalid("credential", "the credential's type is not public-key, or its id is not its rawId")
        }
        return credentialID
    }

    // MARK: registration

    func registerBegin(_ params: AuthPasskeyRegisterBegin.Params) async throws -> AuthPasskeyRegisterBegin.Result {
        let config = config.current
        let now = seconds
        let challenge = try OpenSSL.randomBytes(32)
        let newHandle = try OpenSSL.randomBytes(32)
        return try await sessions.withSession(params.session) { database, session in
            guard let row = try database.queryOne("SELECT webauthn_user_id, coalesce(email, phone, id) FROM accounts WHERE id = ?",
                                                   [.text(session.accountID)], row: { ($0.optionalBlob(0), $0.text(1)) })
            else { throw Self.flowInvalid }
            let (handle, name) = row
            let userHandle = handle ?? newHandle
            if handle == nil {
                try database.execute("UPDATE accounts SET webauthn_user_id = ? WHERE id = ?", [.blob(userHandle), .text(session.accountID)])
            }
            let registered = try database.query("SELECT credential_id FROM account_passkeys WHERE account_id = ? ORDER BY created_at",
                                                [.text(session.accountID)]) { PasskeyDescriptor(id: Base64URL.encode($0.blob(0)), transports: nil) }
            let flow = try newFlow(in: database, purpose: "register", account: session.accountID, loginGiven: true, challenge: challenge, now: now)
            return .init(flow: flow, origin: config.passkeyOrigins[0], options: PasskeyCreationOptions(
                rp: .init(id: config.passkeyRPID, name: config.passkeyRPName),
                user: .init(id: Base64URL.encode(userHandle), name: name, displayName: name),
                challenge: Base64URL.encode(challenge), pubKeyCredParams: [.init(alg: Int(ES256PublicKey.algorithm))],
                timeout: config.passkeyTimeoutSeconds * 1000, excludeCredentials: registered,
                authenticatorSelection: .init(residentKey: "required", requireResidentKey: true, userVerification: "required"),
                attestation: "none"))
        }
    }

    func registerFinish(_ params: AuthPasskeyRegisterFinish.Params) async throws -> AuthPasskeyRegisterFinish.Result {
        let credential = params.credential
        let credentialID = try Self.credentialID(credential.id, credential.rawId, credential.type)
        let clientData = try PlatformAuthenticator.binary(credential.response.clientDataJSON, field: "credential.response.clientDataJSON", bytes: 1...16_384)
        let attestation = try PlatformAuthenticator.binary(credential.response.attestationObject, field: "credential.response.attestationObject",
                                                           bytes: 1...CBOR.maxInput)
        // The session must hold before the flow is used up, and the flow must be this account's.
        let account = try await sessions.withSession(params.session) { _, session in session.accountID }
        let flow = try await consumeFlow(params.flow, purpose: "register")
        guard flow.account == account else { throw Self.flowInvalid }
        let verified: RelyingPartyVerifier.NewCredential
        do {
            verified = try RelyingPartyVerifier.verifyRegistration(clientDataJSON: clientData, attestationObject: attestation,
                                                                   credentialID: credentialID, expected: expectation(flow.challenge))
        } catch {
            throw Self.invalid(error)
        }
        let now = seconds
        let publicKey = try verified.publicKey.encoded()
        try await sessions.withSession(params.session) { database, session in
            guard session.accountID == account else { throw Self.flowInvalid }
            // §7.1 step 26: a credential id registered to anyone is refused.
            guard try database.queryOne("SELECT 1 FROM account_passkeys WHERE credential_id = ?", [.blob(credentialID)], row: { _ in true }) == nil else {
                throw RPCError.failure(.passkeyExcluded, "This passkey is already registered.")
            }
            try database.execute(
                """
                INSERT INTO account_passkeys (credential_id, account_id, public_key, sign_count, uv_initialized, backup_eligible, backup_state, created_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [.blob(credentialID), .text(account), .blob(publicKey), .integer(Int64(verified.signCount)), .integer(verified.userVerified ? 1 : 0),
                 .integer(verified.backupEligible ? 1 : 0), .integer(verified.backupState ? 1 : 0), .integer(now)])
        }
        return .init(id: Base64URL.encode(credentialID), createdAt: Timestamp.rfc3339(epochSeconds: now))
    }

    // MARK: sign-in

    func loginBegin(_ params: AuthPasskeyLoginBegin.Params) async throws -> AuthPasskeyLoginBegin.Result {
        let config = config.current
        let now = seconds
        let challenge = try OpenSSL.randomBytes(32)
        let login = try params.login.map { login throws(RPCError) in
            do { return try Login.normalizeLogin(login, region: params.region) } catch {
                throw RPCError.invalidParams("Parameter 'login' must be a phone number or an email address.", field: "login")
            }
        }
        // A login with no passkey gets a stand-in id derived from it, the same every time, so
        // the answer does not tell which logins have accounts or passkeys.
        let decoy = try login.map { try OpenSSL.hmacSHA256(key: decoyKey, data: Array("passkey decoy \($0.column) \($0.value)".utf8)) }
        let (flow, allowed) = try await store.transaction { database in
            var account: String?
            var allowed: [PasskeyDescriptor] = []
            if let login {
                account = try database.queryOne("SELECT id FROM accounts WHERE \(login.column) = ? AND deactivated_at IS NULL", [.text(login.value)]) { $0.text(0) }
                if let account {
                    allowed = try database.query("SELECT credential_id FROM account_passkeys WHERE account_id = ? ORDER BY created_at", [.text(account)]) {
                        PasskeyDescriptor(id: Base64URL.encode($0.blob(0)))
                    }
                }
                if allowed.isEmpty, let decoy { allowed = [PasskeyDescriptor(id: Base64URL.encode(decoy))] }
            }
            return (try newFlow(in: database, purpose: "login", account: account, loginGiven: login != nil, challenge: challenge, now: now), allowed)
        }
        return .init(flow: flow, origin: config.passkeyOrigins[0], options: PasskeyRequestOptions(
            challenge: Base64URL.encode(challenge), timeout: config.passkeyTimeoutSeconds * 1000, rpId: config.passkeyRPID,
            allowCredentials: login == nil ? nil : allowed, userVerification: "required"))
    }

    private struct Registered: Sendable {
        let account: String
        let publicKey: [UInt8]
        let signCount: Int64
        let backupEligible: Bool
        let userHandle: [UInt8]?
    }

    func loginFinish(_ params: AuthPasskeyLoginFinish.Params, context: RequestContext) async throws -> SignedIn {
        let credential = params.credential
        let response = credential.response
        let credentialID = try Self.credentialID(credential.id, credential.rawId, credential.type)
        let clientData = try PlatformAuthenticator.binary(response.clientDataJSON, field: "credential.response.clientDataJSON", bytes: 1...16_384)
        let authenticatorData = try PlatformAuthenticator.binary(response.authenticatorData, field: "credential.response.authenticatorData",
                                                                 bytes: 37...CBOR.maxInput)
        let signature = try PlatformAuthenticator.binary(response.signature, field: "credential.response.signature", bytes: 1...72)
        let userHandle = try response.userHandle.map { handle throws(RPCError) in
            try PlatformAuthenticator.binary(handle, field: "credential.response.userHandle", bytes: 1...64)
        }
        let device = try SessionStore.DeviceIdentity.resolve(params.device)
        let flow = try await consumeFlow(params.flow, purpose: "login")

        // §7.2 steps 5–6: the credential is registered, to the account the sign-in named (if it
        // named one), and the user handle, when given, is that account's.
        let registered = try await store.read { database in
            try database.queryOne(
                """
                SELECT p.account_id, p.public_key, p.sign_count, p.backup_eligible, a.webauthn_user_id
                FROM account_passkeys p JOIN accounts a ON a.id = p.account_id
                WHERE p.credential_id = ? AND a.deactivated_at IS NULL
                """, [.blob(credentialID)]) {
                Registered(account: $0.text(0), publicKey: $0.blob(1), signCount: $0.int64(2), backupEligible: $0.int(3) != 0, userHandle: $0.optionalBlob(4))
            }
        }
        guard let registered, !flow.loginGiven || flow.account == registered.account else {
            throw Self.invalid("credential", "this passkey is not registered to the account signing in")
        }
        if let userHandle {
            guard let stored = registered.userHandle, OpenSSL.constantTimeEquals(userHandle, stored) else {
                throw Self.invalid("user_handle", "the user handle is not the account's")
            }
        } else if !flow.loginGiven {
            throw Self.invalid("user_handle", "a sign-in without a login needs the user handle")
        }
        let stored: ES256PublicKey
        do { stored = try ES256PublicKey(cose: try CBOR.decode(registered.publicKey)) } catch {
            throw CryptoError(operation: "passkey public key", detail: "the stored key does not parse")
        }
        let verified: RelyingPartyVerifier.VerifiedAssertion
        do {
            verified = try RelyingPartyVerifier.verifyAssertion(
                clientDataJSON: clientData, authenticatorData: authenticatorData, signature: signature,
                stored: .init(publicKey: stored, signCount: UInt32(clamping: registered.signCount), backupEligible: registered.backupEligible),
                expected: expectation(flow.challenge))
        } catch {
            if error.check == "sign_count" {
                logger.notice("a passkey's signature counter did not grow: the authenticator may be cloned",
                              [("AUTHD_ACCOUNT", registered.account), ("AUTHD_CALLER_UID", String(context.caller.uid))])
            }
            throw Self.invalid(error)
        }
        let config = config.current
        let now = seconds
        let signedIn = try await store.transaction { database -> SignedIn in
            // The counter moves only from the value checked: two sign-ins with one assertion
            // (or racing clones) cannot both pass.
            try database.execute(
                """
                UPDATE account_passkeys SET sign_count = ?, backup_state = ?, uv_initialized = uv_initialized | ?, last_used_at = ?
                WHERE credential_id = ? AND sign_count = ?
                """,
                [.integer(Int64(verified.signCount)), .integer(verified.backupState ? 1 : 0), .integer(verified.userVerified ? 1 : 0), .integer(now),
                 .blob(credentialID), .integer(registered.signCount)])
            guard database.changes == 1 else { throw Self.invalid("sign_count", "the passkey was used by another sign-in at the same time") }
            let session = try SessionStore.create(in: database, account: registered.account, device: device, amr: Self.amr, limit: config.deviceLimit,
                                                  policy: config.devicePolicy, idle: Int64(config.sessionIdleSeconds), now: now,
                                                  lifetime: Int64(config.sessionLifetimeSeconds))
            guard let account = try SessionStore.accountInfo(in: database, where: "id", is: registered.account) else { throw Self.flowInvalid }
            return SignedIn(account: account, session: session)
        }
        try await lock.remember(context.caller.uid, account: signedIn.account.id, device: signedIn.session.deviceID, proof: .passkey)
        return signedIn
    }

    // MARK: the account's passkeys

    func list(_ params: AuthPasskeyList.Params) async throws -> AuthPasskeyList.Result {
        try await sessions.withSession(params.session) { database, session in
            AuthPasskeyList.Result(passkeys: try database.query(
                """
                SELECT credential_id, sign_count, backup_eligible, backup_state, created_at, last_used_at
                FROM account_passkeys WHERE account_id = ? ORDER BY created_at DESC, rowid DESC
                """, [.text(session.accountID)]) {
                AccountPasskey(id: Base64URL.encode($0.blob(0)), signCount: $0.int(1), backupEligible: $0.int(2) != 0, backupState: $0.int(3) != 0,
                               createdAt: Timestamp.rfc3339(epochSeconds: $0.int64(4)), lastUsedAt: $0.optionalInt64(5).map { Timestamp.rfc3339(epochSeconds: $0) })
            })
        }
    }

    func remove(_ params: AuthPasskeyRemove.Params) async throws -> PasskeyDelete.Result {
        let id = try PlatformAuthenticator.binary(params.id, field: "id", bytes: 1...AuthenticatorData.maxCredentialIDLength)
        return try await sessions.withSession(params.session) { database, session in
            try database.execute("DELETE FROM account_passkeys WHERE credential_id = ? AND account_id = ?", [.blob(id), .text(session.accountID)])
            guard database.changes == 1 else { throw RPCError.failure(.passkeyNone, "The account has no passkey with that id.") }
            return PasskeyDelete.Result(id: params.id, deleted: true)
        }
    }
}
