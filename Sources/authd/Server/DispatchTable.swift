import Protocol

/// The one place that lists every method authd serves (like ssh-agent's dispatch switch).
/// Each capability contributes its methods from its own folder.
enum DispatchTable {
    /// Capabilities announced by `hello`.
    static let features = ["auth.local", "token.verify", "keys.jwks", "admin", "audit.follow", "subscriptions", "accounts.register", "sessions"]

    static func make(_ services: Services) -> MethodTable {
        var table = MethodTable()
        table.registerCoreMethods(services, features: features)
        table.registerTokenMethods(TokenService(keys: services.keys, config: services.config, now: services.now))
        table.registerAdminMethods(services)
        table.registerAccountMethods(Registration(
            store: services.store, config: services.config, codeKey: services.codeKey,
            stateDirectory: services.options.stateDirectory, logger: services.logger, now: services.now))
        table.registerSessionMethods(store: services.store, config: services.config, now: services.now)
        return table
    }
}
