import Protocol

/// Why a federated sign-in, a remote token or a remote request did not happen. Each case is one
/// stable wire reason; `provider` is the `[federation.NAME]` name.
enum FederationFailure: WireErrorConvertible, Equatable {
    /// No provider is configured at all in `file`.
    case noProviderConfigured(file: String)
    /// Several are configured, none is the default, and the request named none.
    case noDefaultProvider(choices: [String], file: String)
    case unknownProvider(String, file: String)
    /// Discovery, JWKS or token endpoint unusable; `detail` says which and why.
    case providerError(provider: String, detail: String)
    case idTokenInvalid(provider: String, IDTokenFailure)
    case denied(provider: String, error: String)
    case timedOut(provider: String)
    case cancelled(provider: String)
    /// The account linked to the provider's identity is deactivated.
    case accountDeactivated(provider: String)
    /// Nothing in the vault for the provider; `suggestSignIn` adds how to sign in.
    case notSignedIn(provider: String, suggestSignIn: Bool)
    /// The provider's issuer changed since the sign-in the vault holds.
    case issuerChanged(provider: String)
    /// A 401 logged the user out of the provider (persistent until the next sign-in).
    case loggedOut(provider: String, source: String?, at: Int64?)
    case tokenExpired(provider: String, refreshable: Bool)
    case originNotAllowed(provider: String, origin: String, file: String)
    /// The token endpoint could not be reached.
    case tokenEndpointUnreachable(provider: String, detail: String)
    case refreshRefused(provider: String, code: String)
    case requestFailed(provider: String, origin: String, detail: String)

    var rpcError: RPCError {
        switch self {
        case .noProviderConfigured(let file):
            .failure(.federationUnknownProvider, "No OpenID provider is configured: add a [federation.NAME] section to \(file).",
                     details: ["config": .string(file)])
        case .noDefaultProvider(let choices, let file):
            .failure(.federationUnknownProvider,
                     "Several OpenID providers are configured in \(file) and none is the default ([federation] default); name one (\(choices.joined(separator: ", "))).",
                     details: ["config": .string(file)])
        case .unknownProvider(let name, let file):
            .failure(.federationUnknownProvider, "No OpenID provider is configured under that name in \(file).",
                     details: ["provider": .string(Redaction.printable(name, limit: 64)), "config": .string(file)])
        case .providerError(let provider, let detail):
            .failure(.federationProviderError, "The OpenID provider '\(provider)' could not be used: \(detail).",
                     details: ["provider": .string(provider), "detail": .string(detail)])
        case .idTokenInvalid(let provider, let failure):
            .failure(.federationIDTokenInvalid, "The provider's ID token was refused: \(failure.description). Nothing was signed in.",
                     details: ["provider": .string(provider), "check": .string(failure.check)])
        case .denied(let provider, let error):
            .failure(.federationDenied, "\(provider) did not sign you in (\(error)).", details: ["provider": .string(provider), "error": .string(error)])
        case .timedOut(let provider):
            .failure(.federationTimeout, "The sign-in with \(provider) was not completed in time.", details: ["provider": .string(provider)])
        case .cancelled(let provider):
            .failure(.userCancelled, "The sign-in with \(provider) was cancelled.")
        case .accountDeactivated(let provider):
            .failure(.forbidden, "The account linked to this \(provider) identity is deactivated.")
        case .notSignedIn(let provider, let suggestSignIn):
            .failure(.federationNotSignedIn, "You are not signed in with \(provider) on this machine" + (suggestSignIn ? " (authctl federation login)." : "."),
                     details: ["provider": .string(provider)])
        case .issuerChanged(let provider):
            .failure(.federationNotSignedIn, "The issuer of \(provider) changed since you signed in; sign in again.", details: ["provider": .string(provider)])
        case .loggedOut(let provider, let source, let at):
            .failure(.sessionLoggedOut, "You were logged out of \(provider): its server refused the sign-in. Sign in again (authctl federation login).",
                     details: Self.loggedOutDetails(provider: provider, source: source, at: at))
        case .tokenExpired(let provider, let refreshable):
            .failure(.remoteTokenExpired, refreshable
                     ? "The access token for \(provider) expired; sign in again."
                     : "The access token for \(provider) expired and the provider gave no refresh token; sign in again.",
                     details: ["provider": .string(provider)])
        case .originNotAllowed(let provider, let origin, let file):
            .failure(.remoteOriginNotAllowed,
                     "authd sends the \(provider) token only to the origins in [federation.\(provider)] api of \(file), and this URL is not one of them.",
                     details: ["provider": .string(provider), "origin": .string(origin), "config": .string(file)])
        case .tokenEndpointUnreachable(let provider, let detail):
            .failure(.remoteUnavailable, "The provider's token endpoint could not be reached: \(detail).",
                     details: ["provider": .string(provider), "detail": .string(detail)])
        case .refreshRefused(let provider, let code):
            .failure(.remoteUnavailable, "The provider \(provider) did not refresh the token (\(code)); try again later.",
                     details: ["provider": .string(provider), "detail": .string(code)])
        case .requestFailed(let provider, let origin, let detail):
            .failure(.remoteUnavailable, "The request to \(origin) failed: \(detail).", details: ["provider": .string(provider), "detail": .string(detail)])
        }
    }

    private static func loggedOutDetails(provider: String, source: String?, at: Int64?) -> [String: JSONValue] {
        var details: [String: JSONValue] = ["provider": .string(provider)]
        if let source { details["source"] = .string(source) }
        if let at { details["at"] = .string(Timestamp.rfc3339(epochSeconds: at)) }
        return details
    }
}
