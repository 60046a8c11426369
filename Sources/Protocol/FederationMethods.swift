// Federated sign-in over OpenID Connect, the remote-token vault, remote API calls and the
// event stream.

/// `federation.login` — signs in through an OpenID provider configured in `[federation.NAME]`.
/// `flow` `code` (default): authorization code with PKCE; authd listens on 127.0.0.1 for the one
/// redirect and sends a `prompt` of kind `browser` whose `url` the user opens. `flow` `device`:
/// the device authorization grant; the `prompt` has kind `device_code`, `url` (where to go) and
/// `user_code` (what to type there). Both prompts take no answer; `prompt.cancel` ends the
/// sign-in with `user.cancelled`. The first sign-in with an identity (`iss` + `sub`) registers
/// a local account linked to it; later ones sign in to that account. Clears a persistent
/// logged-out state for the provider.
public enum FederationLogin: RPCMethod {
    public static let name = "federation.login"
    public struct Params: Codable, Sendable, Equatable {
        /// The provider's name; may be left out when exactly one is configured or
        /// `[federation] default` names one.
        public var provider: String?
        /// `code` or `device`.
        public var flow: String?
        public var device: DeviceDescription?
        public init(provider: String? = nil, flow: String? = nil, device: DeviceDescription? = nil) {
            self.provider = provider
            self.flow = flow
            self.device = device
        }
    }
    public struct Result: Codable, Sendable, Equatable {
        public var account: AccountInfo
        public var session: SessionToken
        public var provider: String
        /// The provider's `sub` for this user.
        public var subject: String
        /// True when this sign-in registered the account.
        public var created: Bool
        public init(account: AccountInfo, session: SessionToken, provider: String, subject: String, created: Bool) {
            self.account = account
            self.session = session
            self.provider = provider
            self.subject = subject
            self.created = created
        }
    }
}

/// `federation.status` — every configured provider and the calling local user's state with it.
public enum FederationStatus: RPCMethod {
    public static let name = "federation.status"
    public typealias Params = NoParams
    public struct Result: Codable, Sendable, Equatable {
        public var providers: [FederationProviderState]
        public init(providers: [FederationProviderState]) { self.providers = providers }
    }
}

public struct FederationProviderState: Codable, Sendable, Equatable {
    public var name: String
    public var issuer: String
    public var isDefault: Bool
    /// `signed_in`, `logged_out` (a 401 ended it; sign in again) or `signed_out`.
    public var state: String
    public var account: String?
    public var subject: String?
    public var email: String?
    /// RFC 3339: when the access token in the vault expires.
    public var accessExpiresAt: String?
    public var hasRefreshToken: Bool
    /// For `logged_out`: when, and what answered 401: `api` (remote.fetch), `refresh` (the token
    /// endpoint refused the refresh token) or `reported` (remote.unauthorized).
    public var loggedOutAt: String?
    public var loggedOutBy: String?

    public init(name: String, issuer: String, isDefault: Bool, state: String, account: String? = nil, subject: String? = nil,
                email: String? = nil, accessExpiresAt: String? = nil, hasRefreshToken: Bool = false,
                loggedOutAt: String? = nil, loggedOutBy: String? = nil) {
        self.name = name
        self.issuer = issuer
        self.isDefault = isDefault
        self.state = state
        self.account = account
        self.subject = subject
        self.email = email
        self.accessExpiresAt = accessExpiresAt
        self.hasRefreshToken = hasRefreshToken
        self.loggedOutAt = loggedOutAt
        self.loggedOutBy = loggedOutBy
    }

    enum CodingKeys: String, CodingKey {
        case name, issuer, state, account, subject, email
        case isDefault = "default", accessExpiresAt = "access_expires_at", hasRefreshToken = "has_refresh_token"
        case loggedOutAt = "logged_out_at", loggedOutBy = "logged_out_by"
    }
}

/// `federation.logout` — the user signs out of the provider on this machine: the tokens are
/// revoked at the provider when it offers revocation, deleted from the vault, and the sessions
/// that came from it end. Not the persistent logged-out state: nothing was refused.
public enum FederationLogout: RPCMethod {
    public static let name = "federation.logout"
    public struct Params: Codable, Sendable, Equatable {
        public var provider: String?
        public init(provider: String? = nil) { self.provider = provider }
    }
    public struct Result: Codable, Sendable, Equatable {
        public var provider: String
        /// Sessions ended.
        public var sessionsEnded: Int
        /// Whether the provider confirmed the revocation (RFC 7009); false when it has no
        /// revocation endpoint or did not answer.
        public var revoked: Bool
        public init(provider: String, sessionsEnded: Int, revoked: Bool) {
            self.provider = provider
            self.sessionsEnded = sessionsEnded
            self.revoked = revoked
        }
        enum CodingKeys: String, CodingKey { case provider, revoked, sessionsEnded = "sessions_ended" }
    }
}

/// `remote.token` — a valid access token for the provider, from the vault. Refreshed first when
/// it has less than 30 s left; concurrent callers share one refresh. `session.logged_out` after
/// a 401, until the next successful `federation.login`.
public enum RemoteToken: RPCMethod {
    public static let name = "remote.token"
    public struct Params: Codable, Sendable, Equatable {
        public var provider: String?
        public init(provider: String? = nil) { self.provider = provider }
    }
    public struct Result: Codable, Sendable, Equatable {
        public var provider: String
        /// The bearer token. Keep it secret.
        public var accessToken: String
        public var tokenType: String
        /// RFC 3339.
        public var expiresAt: String
        public var refreshed: Bool
        public init(provider: String, accessToken: String, tokenType: String, expiresAt: String, refreshed: Bool) {
            self.provider = provider
            self.accessToken = accessToken
            self.tokenType = tokenType
            self.expiresAt = expiresAt
            self.refreshed = refreshed
        }
        enum CodingKeys: String, CodingKey {
            case provider, refreshed
            case accessToken = "access_token", tokenType = "token_type", expiresAt = "expires_at"
        }
    }
}

/// `remote.fetch` — authd performs an HTTP request to one of the provider's API origins
/// (`[federation.NAME] api`) with the access token as bearer, and returns the answer. A 401
/// logs the user out of the provider (see `remote.unauthorized`) and answers
/// `session.logged_out`. Redirects are returned, never followed.
public enum RemoteFetch: RPCMethod {
    public static let name = "remote.fetch"
    public struct Params: Codable, Sendable, Equatable {
        public var provider: String?
        /// GET (default), HEAD, POST, PUT, PATCH or DELETE.
        public var method: String?
        public var url: String
        /// Request headers; `Authorization` is authd's to set.
        public var headers: [String: String]?
        /// The body as UTF-8 text, or `body_base64` for bytes (not both).
        public var body: String?
        public var bodyBase64: String?
        public init(provider: String? = nil, method: String? = nil, url: String, headers: [String: String]? = nil,
                    body: String? = nil, bodyBase64: String? = nil) {
            self.provider = provider
            self.method = method
            self.url = url
            self.headers = headers
            self.body = body
            self.bodyBase64 = bodyBase64
        }
        enum CodingKeys: String, CodingKey { case provider, method, url, headers, body, bodyBase64 = "body_base64" }
    }
    public struct Result: Codable, Sendable, Equatable {
        public var status: Int
        /// Header names in lower case.
        public var headers: [String: String]
        /// The body as text when it is valid UTF-8, else `body_base64`.
        public var body: String?
        public var bodyBase64: String?
        public init(status: Int, headers: [String: String], body: String?, bodyBase64: String?) {
            self.status = status
            self.headers = headers
            self.body = body
            self.bodyBase64 = bodyBase64
        }
        enum CodingKeys: String, CodingKey { case status, headers, body, bodyBase64 = "body_base64" }
    }
}

/// `remote.unauthorized` — a client reports that the provider's API answered 401 to the token
/// it got from `remote.token`. authd logs the user out of the provider exactly as for a 401
/// seen by `remote.fetch`.
public enum RemoteUnauthorized: RPCMethod {
    public static let name = "remote.unauthorized"
    public struct Params: Codable, Sendable, Equatable {
        public var provider: String?
        public init(provider: String? = nil) { self.provider = provider }
    }
    public typealias Result = LoggedOutEvent
}

/// `events.subscribe` — the response acknowledges with a subscription id; then an `event`
/// notification arrives for each event of the calling local user until `subscription.cancel`
/// or the connection closes. Events: `session.logged_out` (a provider ended a federated
/// sign-in) and `session.ended` (on a device: the hub ended a session of this machine).
public enum EventsSubscribe: RPCMethod {
    public static let name = "events.subscribe"
    public typealias Params = NoParams
    public struct Result: Codable, Sendable, Equatable {
        public var subscription: String
        public init(subscription: String) { self.subscription = subscription }
    }
}

/// The `event` notification of an `events.subscribe` stream.
public enum EventNotification: RPCNotification {
    public static let name = "event"
    public struct Params: Codable, Sendable, Equatable {
        public var subscription: String
        /// `session.logged_out`, `session.ended`, `presence.ask` (ask mode: the person entered a
        /// hotspot), or (with `[sync] desktop_notifications` in a system authd)
        /// `sync.notification` and `sync.dismiss`.
        public var type: String
        public var loggedOut: LoggedOutEvent?
        public var ended: SessionEndedEvent?
        public var sync: SyncDesktopEvent?
        public var presence: PresenceAskEvent?
        public init(subscription: String, type: String, loggedOut: LoggedOutEvent?, ended: SessionEndedEvent? = nil, sync: SyncDesktopEvent? = nil,
                    presence: PresenceAskEvent? = nil) {
            self.subscription = subscription
            self.type = type
            self.loggedOut = loggedOut
            self.ended = ended
            self.sync = sync
            self.presence = presence
        }
        enum CodingKeys: String, CodingKey { case subscription, type, loggedOut = "logged_out", ended, sync, presence }
    }
}

/// A persistent logout from a provider: what was refused, and what authd ended.
public struct LoggedOutEvent: Codable, Sendable, Equatable {
    public var provider: String
    public var account: String?
    /// `api` (remote.fetch saw 401), `refresh` (the token endpoint refused the refresh token:
    /// 401 or `invalid_grant`) or `reported` (remote.unauthorized).
    public var source: String
    /// RFC 3339.
    public var at: String
    public var sessionsEnded: Int
    public init(provider: String, account: String?, source: String, at: String, sessionsEnded: Int) {
        self.provider = provider
        self.account = account
        self.source = source
        self.at = at
        self.sessionsEnded = sessionsEnded
    }
    enum CodingKeys: String, CodingKey { case provider, account, source, at, sessionsEnded = "sessions_ended" }
}
