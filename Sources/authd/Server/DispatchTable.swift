import Protocol

/// The one place that lists every method authd serves (like ssh-agent's dispatch switch).
/// Each capability contributes its methods from its own folder.
enum DispatchTable {
    /// Capabilities announced by `hello`.
    static let features = ["auth.local", "token.verify", "keys.jwks", "admin", "audit.follow", "subscriptions", "accounts.register", "accounts.login", "sessions", "devices", "twofactor.pin", "accounts.otp_login", "accounts.deactivate", "admin.accounts", "card", "card.pace", "card.web-eid", "prompts", "lock", "biometric", "auth.fast", "twofactor.fingerprint", "card.biometric", "federation", "remote", "events", "passkeys", "auth.passkey"]

    static func make(_ services: Services) -> MethodTable {
        var table = MethodTable()
        let tokens = TokenService(keys: services.keys, config: services.config, now: services.now)
        table.registerCoreMethods(services, features: features)
        table.registerTokenMethods(tokens)
        table.registerAdminMethods(services)
        let phones = Registration(
            store: services.store, config: services.config, codeKey: services.codeKey,
            stateDirectory: services.options.stateDirectory, logger: services.logger, http: services.http, now: services.now)
        let limiter = RateLimiter(config: services.config, now: services.now)
        table.registerAccountMethods(phones, limiter: limiter, lock: services.localLock)
        table.registerOTPLoginMethods(OTPLogin(phones: phones), limiter: limiter, lock: services.localLock)
        let sessions = SessionService(store: services.store, config: services.config, tokens: tokens, now: services.now)
        let login = Login(store: services.store, config: services.config, logger: services.logger, now: services.now)
        table.registerSessionMethods(sessions, login: login, limiter: limiter, lock: services.localLock)
        table.registerAccountAdminMethods(AccountAdmin(store: services.store, logger: services.logger, now: services.now), sessions: sessions, login: login)
        let biometrics = BiometricService(store: services.store, config: services.config, logger: services.logger, reader: FingerprintReader())
        let cards = CardService(
            readers: CardQueue(), secrets: CardSecrets(store: services.store, sealer: services.sealer, now: services.now),
            biometrics: biometrics, config: services.config, logger: services.logger, now: services.now)
        table.registerCardMethods(cards)
        table.registerLockMethods(Unlocker(lock: services.localLock, login: login, biometrics: biometrics))
        let signIn = FingerprintSignIn(store: services.store, config: services.config, lock: services.localLock, biometrics: biometrics,
                                       login: login, sessions: sessions, now: services.now)
        table.registerBiometricMethods(biometrics, signIn: signIn, cards: cards)
        let providers = ProviderDirectory(config: services.config, http: services.http, now: services.now)
        let vault = TokenVault(store: services.store, sealer: services.sealer)
        let remote = RemoteAccess(vault: vault, providers: providers, events: services.events, logger: services.logger, http: services.http,
                                  config: services.config, now: services.now)
        let federated = FederatedSignIn(store: services.store, config: services.config, providers: providers, vault: vault,
                                        logger: services.logger, now: services.now)
        table.registerFederationMethods(signIn: federated, remote: remote, vault: vault, config: services.config, events: services.events)
        let authenticator = PlatformAuthenticator(
            store: services.store, sealer: services.sealer,
            verification: PasskeyUserVerification(store: services.store, lock: services.localLock, login: login, biometrics: biometrics),
            now: services.now)
        let relyingParty = RelyingParty(store: services.store, config: services.config, sessions: sessions, lock: services.localLock,
                                        decoyKey: services.codeKey, logger: services.logger, now: services.now)
        table.registerPasskeyMethods(authenticator: authenticator, relyingParty: relyingParty, limiter: limiter)
        return table
    }
}
