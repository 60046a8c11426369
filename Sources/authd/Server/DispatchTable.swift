import Protocol

/// The one place that lists every method authd serves (like ssh-agent's dispatch switch).
/// Each capability contributes its methods from its own folder.
enum DispatchTable {
    /// Capabilities announced by `hello`.
    static let features = ["auth.local", "token.verify", "keys.jwks", "admin", "audit.follow", "subscriptions", "accounts.register", "accounts.login", "sessions", "devices", "twofactor.pin", "accounts.otp_login", "accounts.deactivate", "admin.accounts", "card", "card.pace", "card.web-eid", "prompts"]

    static func make(_ services: Services) -> MethodTable {
        var table = MethodTable()
        let tokens = TokenService(keys: services.keys, config: services.config, now: services.now)
        table.registerCoreMethods(services, features: features)
        table.registerTokenMethods(tokens)
        table.registerAdminMethods(services)
        let phones = Registration(
            store: services.store, config: services.config, codeKey: services.codeKey,
            stateDirectory: services.options.stateDirectory, logger: services.logger, now: services.now)
        let limiter = RateLimiter(config: services.config, now: services.now)
        table.registerAccountMethods(phones, limiter: limiter)
        table.registerOTPLoginMethods(OTPLogin(phones: phones), limiter: limiter)
        let sessions = SessionService(store: services.store, config: services.config, tokens: tokens, now: services.now)
        let login = Login(store: services.store, config: services.config, logger: services.logger, now: services.now)
        table.registerSessionMethods(sessions, login: login, limiter: limiter)
        table.registerAccountAdminMethods(AccountAdmin(store: services.store, logger: services.logger, now: services.now), sessions: sessions, login: login)
        let cards = CardService(
            readers: CardQueue(), secrets: CardSecrets(store: services.store, sealer: services.sealer, now: services.now),
            config: services.config, logger: services.logger, now: services.now)
        table.registerCardMethods(cards)
        return table
    }
}
