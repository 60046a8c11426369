import FoundationEssentials
import Protocol
import Synchronization

/// What a provider's discovery document says (OpenID Connect Discovery 1.0 §3).
struct ProviderMetadata: Sendable {
    let issuer: String
    let authorizationEndpoint: String
    let tokenEndpoint: String
    let jwksURI: String
    let deviceAuthorizationEndpoint: String?
    let revocationEndpoint: String?
    let signingAlgorithms: [String]
}

/// A successful token endpoint answer (RFC 6749 §5.1). Holds secrets: never logged.
struct TokenSet: Sendable {
    let accessToken: String
    let tokenType: String
    let expiresIn: Int64?
    let refreshToken: String?
    let idToken: String?
}

/// A token endpoint error (RFC 6749 §5.2, RFC 8628 §3.5): the OAuth `error` and the HTTP status.
struct TokenEndpointError: Error, Sendable {
    let code: String
    let status: Int
}

/// One configured OpenID provider: discovery and JWKS (cached), and the token, device and
/// revocation endpoints. Every exchange goes through `HTTPClient`; the client secret is read from
/// its file for each request and never kept.
final class OpenIDProvider: Sendable {
    let settings: Config.FederationProvider
    private let http: HTTPClient
    private let timeout: @Sendable () -> Int
    private let now: @Sendable () -> Date

    private struct Cache {
        var metadata: (ProviderMetadata, Date)?
        var keys: (IDTokenValidator.KeySet, Date)?
    }
    private let cache = Mutex(Cache())
    private static let cacheLifetime: TimeInterval = 3600
    /// A token naming an unknown key refetches the JWKS, but not more often than this.
    private static let keyRefetchInterval: TimeInterval = 60

    init(settings: Config.FederationProvider, http: HTTPClient, timeout: @escaping @Sendable () -> Int, now: @escaping @Sendable () -> Date) {
        self.settings = settings
        self.http = http
        self.timeout = timeout
        self.now = now
    }

    private func fail(_ detail: String) -> FederationFailure { .providerError(provider: settings.name, detail: detail) }

    /// GET of a JSON object; a transport failure or a non-JSON answer is a provider error.
    private func getJSON(_ url: String, what: String) async throws -> [String: JSONValue] {
        let response: HTTPResponse
        do {
            response = try await http.send("GET", url, headers: ["Accept": "application/json"], timeoutSeconds: timeout())
        } catch {
            throw fail("\(what): \(error)")
        }
        guard response.status == 200 else { throw fail("\(what) answered HTTP \(response.status)") }
        guard case .object(let object)? = try? WireCodec.decode(JSONValue.self, from: Data(response.body)) else {
            throw fail("\(what) is not a JSON object")
        }
        return object
    }

    func metadata() async throws -> ProviderMetadata {
        if let (cached, at) = cache.withLock({ $0.metadata }), now().timeIntervalSince(at) < Self.cacheLifetime { return cached }
        let base = settings.issuer.hasSuffix("/") ? String(settings.issuer.dropLast()) : settings.issuer
        let document = try await getJSON(base + "/.well-known/openid-configuration", what: "the discovery document")
        // Discovery §4.3: the issuer in the document must be exactly the configured one.
        guard document["issuer"]?.stringValue == settings.issuer else { throw fail("the discovery document names another issuer") }
        func endpoint(_ name: String, required: Bool) throws -> String? {
            guard let value = document[name]?.stringValue else {
                if required { throw fail("the discovery document has no \(name)") }
                return nil
            }
            guard WebOrigin(value, allowPath: true) != nil else { throw fail("\(name) is not an https URL") }
            return value
        }
        let metadata = ProviderMetadata(
            issuer: settings.issuer,
            authorizationEndpoint: try endpoint("authorization_endpoint", required: true)!,
            tokenEndpoint: try endpoint("token_endpoint", required: true)!,
            jwksURI: try endpoint("jwks_uri", required: true)!,
            deviceAuthorizationEndpoint: try endpoint("device_authorization_endpoint", required: false),
            revocationEndpoint: try endpoint("revocation_endpoint", required: false),
            signingAlgorithms: document["id_token_signing_alg_values_supported"]?.arrayValue?.compactMap(\.stringValue) ?? [])
        cache.withLock { $0.metadata = (metadata, now()) }
        return metadata
    }

    /// The provider's keys; `refresh` fetches them again (a token named a key we lack), at most
    /// once a minute.
    func keys(refresh: Bool = false) async throws -> IDTokenValidator.KeySet {
        if let (cached, at) = cache.withLock({ $0.keys }) {
            let age = now().timeIntervalSince(at)
            if age < Self.cacheLifetime && (!refresh || age < Self.keyRefetchInterval) { return cached }
        }
        let metadata = try await metadata()
        let keys = IDTokenValidator.KeySet.parse(.object(try await getJSON(metadata.jwksURI, what: "the JWKS")))
        cache.withLock { $0.keys = (keys, now()) }
        return keys
    }

    /// Validates an ID token, fetching the JWKS again once when it names a key not yet known.
    func validate(idToken: String, nonce: String?) async throws -> IDTokenClaims {
        let metadata = try await metadata()
        var keys = try await keys()
        if IDTokenValidator.namesUnknownKey(idToken, in: keys) { keys = try await self.keys(refresh: true) }
        let expected = IDTokenValidator.Expectation(issuer: settings.issuer, clientID: settings.clientID, nonce: nonce,
                                                    algorithms: metadata.signingAlgorithms)
        do {
            return try IDTokenValidator.validate(idToken, keys: keys, expecting: expected, now: Int64(now().timeIntervalSince1970))
        } catch {
            throw FederationFailure.idTokenInvalid(provider: settings.name, error)
        }
    }

    /// Client authentication (RFC 6749 §2.3.1): HTTP Basic with the secret from its file for a
    /// confidential client, `client_id` in the form for a public one.
    private func clientAuthentication() throws -> (fields: [(String, String)], headers: [String: String]) {
        guard !settings.clientSecretFile.isEmpty else { return ([("client_id", settings.clientID)], [:]) }
        guard let secret = HTTPClient.credential(fromFile: settings.clientSecretFile) else {
            throw fail("cannot read the client secret from client_secret_file")
        }
        let credentials = FormEncoding.escape(settings.clientID) + ":" + FormEncoding.escape(secret)
        return ([], ["Authorization": "Basic " + Data(credentials.utf8).base64EncodedString()])
    }

    /// A POST to the token endpoint. Answers the token set, or throws `TokenEndpointError` for an
    /// OAuth error answer, or `federation.provider_error` when there was no usable answer.
    func token(_ fields: [(String, String)]) async throws -> TokenSet {
        let metadata = try await metadata()
        let client = try clientAuthentication()
        let response: HTTPResponse
        do {
            response = try await http.postForm(metadata.tokenEndpoint, fields: fields + client.fields, headers: client.headers, timeoutSeconds: timeout())
        } catch {
            throw FederationFailure.tokenEndpointUnreachable(provider: settings.name, detail: error.description)
        }
        let object = (try? WireCodec.decode(JSONValue.self, from: Data(response.body)))?.objectValue
        guard response.status == 200 else {
            // RFC 6749 §5.2: 400 (or 401 for client authentication) with an `error` code.
            throw TokenEndpointError(code: object?["error"] == nil ? "http_\(response.status)" : OAuthErrorCode.sanitized(object?["error"]?.stringValue),
                                     status: response.status)
        }
        guard let object, let access = object["access_token"]?.stringValue, !access.isEmpty, access.utf8.count <= 16384,
              let type = object["token_type"]?.stringValue, type.lowercased() == "bearer"
        else { throw fail("the token endpoint's answer has no bearer access token") }
        return TokenSet(accessToken: access, tokenType: "Bearer", expiresIn: object["expires_in"]?.integerValue,
                        refreshToken: object["refresh_token"]?.stringValue.flatMap { $0.isEmpty || $0.utf8.count > 16384 ? nil : $0 },
                        idToken: object["id_token"]?.stringValue)
    }

    /// RFC 8628 §3.1–3.2.
    struct DeviceAuthorization: Sendable {
        let deviceCode: String
        let userCode: String
        let verificationURI: String
        let verificationURIComplete: String?
        let expiresIn: Int
        let interval: Int
    }

    func startDeviceAuthorization(scopes: [String]) async throws -> DeviceAuthorization {
        let metadata = try await metadata()
        guard let endpoint = metadata.deviceAuthorizationEndpoint else {
            throw fail("it does not offer the device authorization grant (no device_authorization_endpoint)")
        }
        let client = try clientAuthentication()
        let response: HTTPResponse
        do {
            response = try await http.postForm(endpoint, fields: [("scope", scopes.joined(separator: " "))] + client.fields,
                                               headers: client.headers, timeoutSeconds: timeout())
        } catch {
            throw fail("the device authorization endpoint: \(error)")
        }
        let object = (try? WireCodec.decode(JSONValue.self, from: Data(response.body)))?.objectValue
        guard response.status == 200, let object,
              let deviceCode = object["device_code"]?.stringValue, let userCode = object["user_code"]?.stringValue,
              let uri = object["verification_uri"]?.stringValue, WebOrigin(uri, allowPath: true) != nil,
              userCode.count <= 64, let expiresIn = object["expires_in"]?.integerValue, expiresIn > 0
        else {
            throw fail("the device authorization endpoint answered HTTP \(response.status)" + (object?["error"] == nil ? "" : " (\(OAuthErrorCode.sanitized(object?["error"]?.stringValue)))"))
        }
        let complete = object["verification_uri_complete"]?.stringValue.flatMap { WebOrigin($0, allowPath: true) != nil ? $0 : nil }
        let interval = Int(object["interval"]?.integerValue ?? 5)
        return DeviceAuthorization(deviceCode: deviceCode, userCode: userCode, verificationURI: uri, verificationURIComplete: complete,
                                   expiresIn: Int(min(expiresIn, 3600)), interval: min(max(interval, 1), 60))
    }

    /// RFC 7009: asks the provider to revoke a token. True when it confirmed (HTTP 200).
    func revoke(_ token: String, hint: String) async -> Bool {
        guard let metadata = try? await metadata(), let endpoint = metadata.revocationEndpoint,
              let client = try? clientAuthentication(),
              let response = try? await http.postForm(endpoint, fields: [("token", token), ("token_type_hint", hint)] + client.fields,
                                                      headers: client.headers, timeoutSeconds: timeout())
        else { return false }
        return response.status == 200
    }
}
