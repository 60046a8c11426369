import FoundationEssentials
import Protocol
import Synchronization

/// The configured providers, by name, rebuilt when a reload changes one (its caches go with it).
final class ProviderDirectory: Sendable {
    private let config: ConfigHolder
    private let http: HTTPClient
    private let now: @Sendable () -> Date
    private let built = Mutex<[String: OpenIDProvider]>([:])

    init(config: ConfigHolder, http: HTTPClient, now: @escaping @Sendable () -> Date) {
        self.config = config
        self.http = http
        self.now = now
    }

    /// `name`, or the default: the only provider, or `[federation] default`.
    func provider(named name: String?) throws(FederationFailure) -> OpenIDProvider {
        let current = config.current
        guard let chosen = name ?? current.defaultFederationProvider else {
            throw current.federationProviders.isEmpty
                ? .noProviderConfigured(file: config.file)
                : .noDefaultProvider(choices: current.federationProviders.map(\.name), file: config.file)
        }
        guard let settings = current.federationProviders.first(where: { $0.name == chosen }) else {
            throw .unknownProvider(chosen, file: config.file)
        }
        let timeout = config
        return built.withLock { providers in
            if let existing = providers[chosen], existing.settings == settings { return existing }
            let provider = OpenIDProvider(settings: settings, http: http, timeout: { timeout.current.federationHTTPTimeoutSeconds }, now: now)
            providers[chosen] = provider
            return provider
        }
    }
}

/// `remote.token`, `remote.fetch`, `remote.unauthorized` and `federation.logout`: the vault's
/// tokens in use. One refresh per local user and provider at a time; callers arriving during it
/// wait for its outcome instead of starting another (a rotating provider would otherwise see
/// the same refresh token twice and revoke the grant).
actor RemoteAccess {
    private let vault: TokenVault
    private let providers: ProviderDirectory
    private let events: EventBus
    private let logger: Logger
    private let http: HTTPClient
    private let config: ConfigHolder
    private let now: @Sendable () -> Date

    /// A token with less time left than this is refreshed before it is handed out.
    static let refreshMargin: Int64 = 30

    private struct Key: Hashable { let uid: UInt32; let provider: String }
    private var refreshes: [Key: Task<RemoteToken.Result, any Error>] = [:]

    init(vault: TokenVault, providers: ProviderDirectory, events: EventBus, logger: Logger, http: HTTPClient, config: ConfigHolder,
         now: @escaping @Sendable () -> Date) {
        self.vault = vault
        self.providers = providers
        self.events = events
        self.logger = logger
        self.http = http
        self.config = config
        self.now = now
    }

    private var seconds: Int64 { Int64(now().timeIntervalSince1970) }

    /// The vault entry for a usable sign-in, or the error that says why there is none.
    private func signedInEntry(uid: UInt32, provider: OpenIDProvider) async throws -> TokenVault.Entry {
        let name = provider.settings.name
        guard let entry = try await vault.entry(uid: uid, provider: name) else { throw FederationFailure.notSignedIn(provider: name, suggestSignIn: true) }
        if entry.loggedOut { throw FederationFailure.loggedOut(provider: name, source: entry.loggedOutBy, at: entry.loggedOutAt) }
        guard entry.issuer == provider.settings.issuer else { throw FederationFailure.issuerChanged(provider: name) }
        return entry
    }

    /// The vault's access token when it has at least `margin` seconds left.
    private func held(_ entry: TokenVault.Entry, provider name: String, margin: Int64) -> RemoteToken.Result? {
        guard let access = entry.accessToken, let expires = entry.accessExpiresAt, expires - seconds >= margin else { return nil }
        return RemoteToken.Result(provider: name, accessToken: access, tokenType: "Bearer", expiresAt: Timestamp.rfc3339(epochSeconds: expires), refreshed: false)
    }

    func token(uid: UInt32, provider name: String?) async throws -> RemoteToken.Result {
        let provider = try providers.provider(named: name)
        let entry = try await signedInEntry(uid: uid, provider: provider)
        if let held = held(entry, provider: provider.settings.name, margin: Self.refreshMargin) { return held }
        let key = Key(uid: uid, provider: provider.settings.name)
        if let running = refreshes[key] { return try await running.value }
        let task = Task { try await self.refresh(uid: uid, provider: provider) }
        refreshes[key] = task
        defer { refreshes[key] = nil }
        return try await task.value
    }

    private func refresh(uid: UInt32, provider: OpenIDProvider) async throws -> RemoteToken.Result {
        let name = provider.settings.name
        // Read again inside the single flight: a refresh that just finished may have rotated
        // the refresh token the caller saw.
        let entry = try await signedInEntry(uid: uid, provider: provider)
        if let held = held(entry, provider: name, margin: Self.refreshMargin) { return held }
        guard let refreshToken = entry.refreshToken, let usedSealed = entry.refreshSealed else {
            // Nothing to refresh with: the token serves until it expires.
            if let held = held(entry, provider: name, margin: 1) { return held }
            throw FederationFailure.tokenExpired(provider: name, refreshable: false)
        }
        let tokens: TokenSet
        do {
            tokens = try await provider.token([("grant_type", "refresh_token"), ("refresh_token", refreshToken)])
        } catch let refused as TokenEndpointError where refused.status == 401 || refused.code == "invalid_grant" {
            // RFC 6749 §5.2: the grant is gone (revoked, expired, rotated away) or the client is
            // no longer accepted. Final: no retry, the user must sign in again.
            logger.notice("refresh refused", [("AUTHD_PROVIDER", name), ("AUTHD_UID", String(uid)), ("AUTHD_OAUTH_ERROR", refused.code)])
            if case .superseded = try await logOut(uid: uid, provider: name, source: "refresh", refused: .refreshToken(sealed: usedSealed)) {
                return try await current(uid: uid, provider: provider)
            }
            throw FederationFailure.loggedOut(provider: name, source: "refresh", at: seconds)
        } catch let refused as TokenEndpointError {
            throw FederationFailure.refreshRefused(provider: name, code: refused.code)
        }
        guard try await vault.replace(uid: uid, provider: name, issuer: entry.issuer, usedRefreshSealed: usedSealed, tokens: tokens, now: seconds) else {
            // A logout or a new sign-in replaced the row while the refresh ran: that state wins.
            return try await current(uid: uid, provider: provider)
        }
        return RemoteToken.Result(provider: name, accessToken: tokens.accessToken, tokenType: "Bearer",
                                  expiresAt: Timestamp.rfc3339(epochSeconds: TokenVault.expiresAt(tokens, now: seconds)), refreshed: true)
    }

    /// What the vault holds now, after a refresh lost to a newer sign-in or refresh.
    private func current(uid: UInt32, provider: OpenIDProvider) async throws -> RemoteToken.Result {
        let entry = try await signedInEntry(uid: uid, provider: provider)
        guard let held = held(entry, provider: provider.settings.name, margin: .min) else {
            throw FederationFailure.tokenExpired(provider: provider.settings.name, refreshable: true)
        }
        return held
    }

    /// The persistent logout, and its event when it happened.
    private func logOut(uid: UInt32, provider name: String, source: String, refused: TokenVault.RefusedCredential) async throws -> TokenVault.LogoutOutcome {
        let outcome = try await vault.logOut(uid: uid, provider: name, source: source, refused: refused, now: seconds)
        if case .loggedOut(let event) = outcome {
            logger.notice("logged out of a provider", [("AUTHD_PROVIDER", name), ("AUTHD_UID", String(uid)), ("AUTHD_SOURCE", source),
                                                        ("AUTHD_SESSIONS_ENDED", String(event.sessionsEnded))])
            await events.publish(EventBus.Event(type: "session.logged_out", loggedOut: event), to: uid)
        }
        return outcome
    }

    /// `remote.unauthorized`: answers the event, or the logged-out state already recorded.
    func unauthorized(uid: UInt32, provider name: String?) async throws -> LoggedOutEvent {
        let provider = try providers.provider(named: name)
        let providerName = provider.settings.name
        if case .loggedOut(let event) = try await logOut(uid: uid, provider: providerName, source: "reported", refused: .current) { return event }
        guard let entry = try await vault.entry(uid: uid, provider: providerName), entry.loggedOut else {
            throw FederationFailure.notSignedIn(provider: providerName, suggestSignIn: false)
        }
        return LoggedOutEvent(provider: providerName, account: entry.account, source: entry.loggedOutBy ?? "reported",
                              at: Timestamp.rfc3339(epochSeconds: entry.loggedOutAt ?? seconds), sessionsEnded: 0)
    }

    func signOut(uid: UInt32, provider name: String?) async throws -> FederationLogout.Result {
        let provider = try providers.provider(named: name)
        let providerName = provider.settings.name
        guard let (ended, entry) = try await vault.signOut(uid: uid, provider: providerName, now: seconds) else {
            throw FederationFailure.notSignedIn(provider: providerName, suggestSignIn: false)
        }
        // RFC 7009 §2.1: revoking the refresh token ends the grant; the access token may live on
        // until it expires unless revoked too.
        var revoked = false
        if let refresh = entry.refreshToken { revoked = await provider.revoke(refresh, hint: "refresh_token") }
        if let access = entry.accessToken { revoked = await provider.revoke(access, hint: "access_token") || revoked }
        return FederationLogout.Result(provider: providerName, sessionsEnded: ended, revoked: revoked)
    }

    private static let methods: Set<String> = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]
    /// Headers the caller may not set: authd's credential, and what the HTTP layer owns.
    private static let reservedHeaders: Set<String> = ["authorization", "host", "content-length", "transfer-encoding", "connection", "cookie", "proxy-authorization"]

    func fetch(uid: UInt32, _ params: RemoteFetch.Params) async throws -> RemoteFetch.Result {
        let method = (params.method ?? "GET").uppercased()
        guard Self.methods.contains(method) else {
            throw InvalidParameter("Parameter 'method' must be GET, HEAD, POST, PUT, PATCH or DELETE.", field: "method")
        }
        guard let origin = WebOrigin(params.url, allowPath: true) else {
            throw InvalidParameter("Parameter 'url' must be an https:// URL (http:// only to a loopback address).", field: "url")
        }
        var headers: [String: String] = [:]
        for (name, value) in params.headers ?? [:] {
            let lower = name.lowercased()
            guard !name.isEmpty, name.utf8.count <= 256, value.utf8.count <= 8192,
                  name.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7f && $0 != ":" }),
                  value.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7f || $0 == "\t" })
            else { throw InvalidParameter("Parameter 'headers' holds a header name or value that is not allowed.", field: "headers") }
            guard !Self.reservedHeaders.contains(lower) else {
                throw InvalidParameter("Header '\(lower)' is set by authd, not by the caller.", field: "headers")
            }
            headers[name] = value
        }
        guard params.body == nil || params.bodyBase64 == nil else {
            throw InvalidParameter("Give 'body' or 'body_base64', not both.", field: "body")
        }
        var body: [UInt8]?
        if let text = params.body { body = Array(text.utf8) }
        if let encoded = params.bodyBase64 {
            guard let bytes = Data(base64Encoded: encoded) else { throw InvalidParameter("Parameter 'body_base64' is not base64.", field: "body_base64") }
            body = Array(bytes)
        }
        let provider = try providers.provider(named: params.provider)
        let name = provider.settings.name
        guard provider.settings.apiOrigins.contains(origin.serialized) else {
            throw FederationFailure.originNotAllowed(provider: name, origin: origin.serialized, file: config.file)
        }
        let token = try await token(uid: uid, provider: name)
        headers["Authorization"] = "Bearer " + token.accessToken
        let response: HTTPResponse
        do {
            response = try await http.send(method, params.url, headers: headers, body: body, timeoutSeconds: config.current.federationHTTPTimeoutSeconds)
        } catch {
            throw FederationFailure.requestFailed(provider: name, origin: origin.serialized, detail: error.description)
        }
        // RFC 6750 §3.1: the API refused the access token itself. authd does not try a refresh:
        // the token was valid by its expiry, so the grant behind it is gone. Unless the vault
        // already holds a newer token (a sign-in during the request): then the 401 is returned.
        if response.status == 401 {
            switch try await logOut(uid: uid, provider: name, source: "api", refused: .accessToken(token.accessToken)) {
            case .loggedOut, .notSignedIn: throw FederationFailure.loggedOut(provider: name, source: "api", at: seconds)
            case .superseded: break
            }
        }
        let text = String(validating: response.body, as: UTF8.self)
        return RemoteFetch.Result(status: response.status, headers: response.headers, body: text,
                                  bodyBase64: text == nil ? Data(response.body).base64EncodedString() : nil)
    }
}
