import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// The secrets of one sign-in attempt: `state` (CSRF, RFC 6749 §10.12), `nonce` (ID token
/// replay, OIDC Core §3.1.2.1) and the PKCE verifier (RFC 7636), each 256 random bits.
struct AuthorizationAttempt: Sendable {
    let state: String
    let nonce: String
    let verifier: String

    init(state: String, nonce: String, verifier: String) {
        self.state = state
        self.nonce = nonce
        self.verifier = verifier
    }

    init() throws {
        state = Base64URL.encode(try OpenSSL.randomBytes(32))
        nonce = Base64URL.encode(try OpenSSL.randomBytes(32))
        verifier = Base64URL.encode(try OpenSSL.randomBytes(32))
    }

    /// RFC 7636 §4.2: BASE64URL(SHA256(ASCII(code_verifier))).
    var challenge: String { Base64URL.encode(OpenSSL.sha256(Array(verifier.utf8))) }

    func authorizationURL(endpoint: String, clientID: String, redirectURI: String, scopes: [String]) -> String {
        let query = FormEncoding.encode([
            ("response_type", "code"), ("client_id", clientID), ("redirect_uri", redirectURI), ("scope", scopes.joined(separator: " ")),
            ("state", state), ("nonce", nonce), ("code_challenge", challenge), ("code_challenge_method", "S256"),
        ])
        return endpoint + (endpoint.contains("?") ? "&" : "?") + query
    }
}

/// RFC 8628 §3.4–3.5 polling, as a value: what to do after each token endpoint answer.
struct DevicePoll: Equatable, Sendable {
    private(set) var interval: Int

    enum Next: Equatable, Sendable {
        case wait(seconds: Int)
        case denied(String)
        case expired
    }

    init(interval: Int) { self.interval = interval }

    mutating func next(after error: String) -> Next {
        switch error {
        case "authorization_pending": return .wait(seconds: interval)
        case "slow_down":
            // §3.5: the interval grows by 5 seconds for this and all later requests.
            interval += 5
            return .wait(seconds: interval)
        case "expired_token": return .expired
        default: return .denied(error)
        }
    }
}

/// `federation.login`: runs the authorization code + PKCE flow (loopback redirect) or the device
/// grant, validates the ID token, then links or registers the account and creates the session
/// (in the account directory) and fills the vault (clearing a logged-out state). Any failure
/// leaves no session behind.
struct FederatedSignIn: Sendable {
    let directory: any MachineAccounts
    let config: ConfigHolder
    let providers: ProviderDirectory
    let vault: TokenVault
    let logger: Logger
    let now: @Sendable () -> Date

    private var seconds: Int64 { Int64(now().timeIntervalSince1970) }

    func login(_ params: FederationLogin.Params, context: RequestContext) async throws -> FederationLogin.Result {
        let provider = try providers.provider(named: params.provider)
        let device = try DeviceIdentity.resolve(params.device, caller: .local(context.caller))
        let attempt = try AuthorizationAttempt()
        let deadline = ContinuousClock.now + .seconds(config.current.federationLoginTimeoutSeconds)
        let tokens: TokenSet
        let nonce: String?
        switch params.flow ?? "code" {
        case "code":
            tokens = try await codeFlow(provider, attempt, context: context, deadline: deadline)
            nonce = attempt.nonce
        case "device":
            tokens = try await deviceFlow(provider, context: context, deadline: deadline)
            // The device grant has no authorization request to carry a nonce.
            nonce = nil
        default:
            throw InvalidParameter("Parameter 'flow' must be code or device.", field: "flow")
        }
        guard let idToken = tokens.idToken else {
            throw FederationFailure.providerError(provider: provider.settings.name, detail: "the token endpoint returned no ID token (is openid among the scopes?)")
        }
        let claims = try await provider.validate(idToken: idToken, nonce: nonce)
        return try await commit(provider.settings, claims: claims, proof: FederatedProof(idToken: idToken, nonce: nonce, expiresAt: claims.expiresAt), tokens: tokens,
                                device: device, uid: context.caller.uid)
    }

    private func codeFlow(_ provider: OpenIDProvider, _ attempt: AuthorizationAttempt, context: RequestContext,
                          deadline: ContinuousClock.Instant) async throws -> TokenSet {
        let metadata = try await provider.metadata()
        let redirect = try LoopbackRedirect()
        let url = attempt.authorizationURL(endpoint: metadata.authorizationEndpoint, clientID: provider.settings.clientID,
                                           redirectURI: redirect.redirectURI, scopes: provider.settings.scopes)
        let prompts = context.prompts
        let promptID = prompts.progress { redirect.cancel() }
        defer { prompts.finish(promptID) }
        prompts.notify(id: promptID, kind: .browser,
                       message: "Open this address in a web browser to sign in with \(provider.settings.name)",
                       secondsLeft: config.current.federationLoginTimeoutSeconds, url: url)
        let code: String
        switch await redirect.wait(state: attempt.state, until: deadline) {
        case .code(let value): code = value
        case .error(let error): throw denied(provider, error)
        case .timedOut: throw timedOut(provider)
        case .cancelled:
            try Task.checkCancellation()
            throw FederationFailure.cancelled(provider: provider.settings.name)
        }
        do {
            return try await provider.token([
                ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirect.redirectURI), ("code_verifier", attempt.verifier),
            ])
        } catch let refused as TokenEndpointError {
            throw denied(provider, refused.code)
        }
    }

    private func deviceFlow(_ provider: OpenIDProvider, context: RequestContext, deadline: ContinuousClock.Instant) async throws -> TokenSet {
        let authorization = try await provider.startDeviceAuthorization(scopes: provider.settings.scopes)
        let cancelled = CancelFlag()
        let prompts = context.prompts
        let promptID = prompts.progress { cancelled.set() }
        defer { prompts.finish(promptID) }
        prompts.notify(id: promptID, kind: .deviceCode,
                       message: "On a device with a browser, open \(authorization.verificationURI) and enter the code \(authorization.userCode)",
                       secondsLeft: authorization.expiresIn, url: authorization.verificationURIComplete ?? authorization.verificationURI,
                       userCode: authorization.userCode)
        let end = min(deadline, ContinuousClock.now + .seconds(authorization.expiresIn))
        var poll = DevicePoll(interval: authorization.interval)
        var wait = poll.interval
        while true {
            // Sleep in short steps so prompt.cancel ends the wait at once.
            let wake = ContinuousClock.now + .seconds(wait)
            while ContinuousClock.now < wake {
                if cancelled.isSet { throw FederationFailure.cancelled(provider: provider.settings.name) }
                if ContinuousClock.now >= end { throw timedOut(provider) }
                try await Task.sleep(for: .milliseconds(100))
            }
            do {
                return try await provider.token([("grant_type", "urn:ietf:params:oauth:grant-type:device_code"), ("device_code", authorization.deviceCode)])
            } catch let answer as TokenEndpointError {
                switch poll.next(after: answer.code) {
                case .wait(let seconds): wait = seconds
                case .expired: throw timedOut(provider)
                case .denied(let error): throw denied(provider, error)
                }
            }
        }
    }

    private func denied(_ provider: OpenIDProvider, _ error: String) -> FederationFailure {
        .denied(provider: provider.settings.name, error: error)
    }

    private func timedOut(_ provider: OpenIDProvider) -> FederationFailure {
        .timedOut(provider: provider.settings.name)
    }

    /// Links or registers the account and signs it in (in the account directory), then fills the
    /// vault (a machine change). When the vault cannot take the tokens, the new session ends
    /// again, so a sign-in either completes or leaves no session behind; an account a first
    /// sign-in registered stays, linked, and the next sign-in finds it.
    private func commit(_ provider: Config.FederationProvider, claims: IDTokenClaims, proof: FederatedProof, tokens: TokenSet, device: DeviceIdentity,
                        uid: UInt32) async throws -> FederationLogin.Result {
        let identity = FederatedIdentity(provider: provider.name, issuer: provider.issuer, subject: claims.subject, email: claims.email, name: claims.name)
        let result = try await directory.signIn(federated: identity, proof: proof, device: device)
        let session = result.signedIn.session
        do {
            try await vault.storeSignIn(uid: uid, provider: provider, account: result.signedIn.account.id, subject: claims.subject, tokens: tokens,
                                        now: seconds)
        } catch {
            do {
                _ = try await directory.endSession(.local(session.token))
            } catch {
                logger.error("a federated sign-in's session could not be ended after its tokens could not be stored: \(error)",
                             [("AUTHD_PROVIDER", provider.name), ("AUTHD_ACCOUNT", result.signedIn.account.id), ("AUTHD_SESSION", session.id)])
            }
            throw error
        }
        logger.notice(result.created ? "federated sign-in registered an account" : "federated sign-in",
                      [("AUTHD_PROVIDER", provider.name), ("AUTHD_ACCOUNT", result.signedIn.account.id), ("AUTHD_UID", String(uid))])
        return FederationLogin.Result(account: result.signedIn.account, session: session, provider: provider.name, subject: claims.subject,
                                      created: result.created)
    }
}
