import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// authd as the WebAuthn relying party of its own accounts (`auth.passkey.*`): ceremonies with
/// a single-use, expiring challenge kept in the store, checked by `RelyingPartyVerifier`
/// (WebAuthn L3 §7.1/§7.2), credentials kept per account.
struct RelyingParty: Sendable {
    let directory: any RelyingPartyPasskeys & MachineAccounts
    let config: ConfigHolder
    /// Keys the stand-in credential ids of a login with no passkey (see `loginBegin`).
    let decoyKey: SecretBytes
    let logger: Logger

    /// Open ceremonies one account may have; beginning another drops the oldest.
    static let flowsPerAccount = 8
    /// A sign-in with a passkey proves possession of the key and the authenticator's user
    /// verification (RFC 8176 `pop` and `mfa`).
    static let amr = ["pop", "mfa"]

    private static func invalid(_ check: String, _ description: String) -> PasskeyFailure {
        .invalid(WebAuthnFailure(check: check, description: description))
    }

    private func expectation(_ challenge: [UInt8]) -> RelyingPartyExpectation {
        let config = config.current
        return RelyingPartyExpectation(rpID: config.passkeyRPID, origins: config.passkeyOrigins, challenge: challenge, requireUserVerification: true)
    }

    private var timeout: Int64 { Int64(config.current.passkeyTimeoutSeconds) }

    /// The credential id of a response whose `id` and `type` are what WebAuthn requires.
    private static func credentialID(_ id: String, _ rawID: String, _ type: String) throws -> [UInt8] {
        let credentialID = try PlatformAuthenticator.binary(rawID, field: "credential.rawId", bytes: 1...AuthenticatorData.maxCredentialIDLength)
        guard type == "public-key", id == Base64URL.encode(credentialID) else {
            throw invalid("credential", "the credential's type is not public-key, or its id is not its rawId")
        }
        return credentialID
    }

    // MARK: registration

    /// A ceremony is finished only by the machine and local user that began it (`FlowOwner`).
    func registerBegin(_ params: AuthPasskeyRegisterBegin.Params, caller: Caller) async throws -> AuthPasskeyRegisterBegin.Result {
        let session = PresentedSession(params.session, from: caller)
        let config = config.current
        let challenge = try OpenSSL.randomBytes(32)
        let enrolment = try await directory.beginPasskeyRegistration(session, challenge: challenge, newHandle: try OpenSSL.randomBytes(32),
                                                                     owner: FlowOwner(caller), timeout: timeout)
        return .init(flow: enrolment.flow, origin: config.passkeyOrigins[0], options: PasskeyCreationOptions(
            rp: .init(id: config.passkeyRPID, name: config.passkeyRPName),
            user: .init(id: Base64URL.encode(enrolment.userHandle), name: enrolment.name, displayName: enrolment.name),
            challenge: Base64URL.encode(challenge), pubKeyCredParams: [.init(alg: Int(ES256PublicKey.algorithm))],
            timeout: config.passkeyTimeoutSeconds * 1000,
            excludeCredentials: enrolment.registered.map { PasskeyDescriptor(id: Base64URL.encode($0), transports: nil) },
            authenticatorSelection: .init(residentKey: "required", requireResidentKey: true, userVerification: "required"),
            attestation: "none"))
    }

    func registerFinish(_ params: AuthPasskeyRegisterFinish.Params, caller: Caller) async throws -> AuthPasskeyRegisterFinish.Result {
        let session = PresentedSession(params.session, from: caller)
        let credential = params.credential
        let credentialID = try Self.credentialID(credential.id, credential.rawId, credential.type)
        let clientData = try PlatformAuthenticator.binary(credential.response.clientDataJSON, field: "credential.response.clientDataJSON", bytes: 1...16_384)
        let attestation = try PlatformAuthenticator.binary(credential.response.attestationObject, field: "credential.response.attestationObject",
                                                           bytes: 1...CBOR.maxInput)
        // The session must hold before the flow is used up, and the flow must be this account's.
        let account = try await directory.authenticate(session).accountID
        let flow = try await directory.consumePasskeyFlow(params.flow, purpose: .register, owner: FlowOwner(caller))
        guard flow.account == account else { throw PasskeyFailure.flowInvalid }
        let verified: RelyingPartyVerifier.NewCredential
        do {
            verified = try RelyingPartyVerifier.verifyRegistration(clientDataJSON: clientData, attestationObject: attestation,
                                                                   credentialID: credentialID, expected: expectation(flow.challenge))
        } catch {
            throw PasskeyFailure.invalid(error)
        }
        let created = try await directory.addPasskey(session, account: account, credential: verified)
        return .init(id: Base64URL.encode(credentialID), createdAt: Timestamp.rfc3339(epochSeconds: created))
    }

    // MARK: sign-in

    func loginBegin(_ params: AuthPasskeyLoginBegin.Params, caller: Caller) async throws -> AuthPasskeyLoginBegin.Result {
        let config = config.current
        let challenge = try OpenSSL.randomBytes(32)
        let login = try params.login.map { login in
            do { return try Login.normalizeLogin(login, region: params.region) } catch is AccountFailure {
                throw InvalidParameter("Parameter 'login' must be a phone number or an email address.", field: "login")
            }
        }
        // A login with no passkey gets a stand-in id derived from it, the same every time, so
        // the answer does not tell which logins have accounts or passkeys.
        let decoy = try login.map { try OpenSSL.hmacSHA256(key: decoyKey, data: Array("passkey decoy \($0.label)".utf8)) }
        let (flow, allowed) = try await directory.beginPasskeySignIn(login: login, challenge: challenge, decoy: decoy, owner: FlowOwner(caller),
                                                                     timeout: timeout)
        return .init(flow: flow, origin: config.passkeyOrigins[0], options: PasskeyRequestOptions(
            challenge: Base64URL.encode(challenge), timeout: config.passkeyTimeoutSeconds * 1000, rpId: config.passkeyRPID,
            allowCredentials: login == nil ? nil : allowed.map { PasskeyDescriptor(id: Base64URL.encode($0)) }, userVerification: "required"))
    }

    func loginFinish(_ params: AuthPasskeyLoginFinish.Params, context: AccountContext) async throws -> SignedIn {
        let credential = params.credential
        let response = credential.response
        let credentialID = try Self.credentialID(credential.id, credential.rawId, credential.type)
        let clientData = try PlatformAuthenticator.binary(response.clientDataJSON, field: "credential.response.clientDataJSON", bytes: 1...16_384)
        let authenticatorData = try PlatformAuthenticator.binary(response.authenticatorData, field: "credential.response.authenticatorData",
                                                                 bytes: 37...CBOR.maxInput)
        let signature = try PlatformAuthenticator.binary(response.signature, field: "credential.response.signature", bytes: 1...72)
        let userHandle = try response.userHandle.map { handle throws(InvalidParameter) in
            try PlatformAuthenticator.binary(handle, field: "credential.response.userHandle", bytes: 1...64)
        }
        let device = try DeviceIdentity.resolve(params.device, caller: context.caller)
        let flow = try await directory.consumePasskeyFlow(params.flow, purpose: .login, owner: FlowOwner(context.caller))

        // WebAuthn L3 §7.2 steps 5–6: the credential is registered, to the account the sign-in
        // named (if it named one), and the user handle, when given, is that account's.
        guard let registered = try await directory.registeredPasskey(credentialID), !flow.loginGiven || flow.account == registered.account else {
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
                              [("AUTHD_ACCOUNT", registered.account)] + context.caller.logFields)
            }
            throw PasskeyFailure.invalid(error)
        }
        return try await directory.completePasskeySignIn(credentialID, checked: registered, verified: verified, device: device, amr: Self.amr)
    }

    // MARK: the account's passkeys

    func list(_ params: AuthPasskeyList.Params, session: PresentedSession) async throws -> AuthPasskeyList.Result {
        AuthPasskeyList.Result(passkeys: try await directory.passkeys(session))
    }

    func remove(_ params: AuthPasskeyRemove.Params, session: PresentedSession) async throws -> PasskeyDelete.Result {
        let id = try PlatformAuthenticator.binary(params.id, field: "id", bytes: 1...AuthenticatorData.maxCredentialIDLength)
        try await directory.removePasskey(session, id: id)
        return PasskeyDelete.Result(id: params.id, deleted: true)
    }
}
