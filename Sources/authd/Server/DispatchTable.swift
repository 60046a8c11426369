// Server/ — how a request gets from a socket to a handler: Listener accepts and reads the peer's
// credentials, Connection (a transport over a ByteChannel) performs what ConnectionMachine (pure)
// decides, Dispatcher looks the method up in the table built here — its home, access, audit, lock
// and sign-in flags — and turns a capability's typed error into its wire form (the only place
// that does). Daemon wires it all together at start and stops it.

import Protocol

/// The one place that lists every method authd serves (like ssh-agent's dispatch switch), and
/// builds the capabilities behind them. Each capability registers its methods, with their home
/// (`machine` or `account`), access, audit and lock flags, from its own folder.
enum DispatchTable {
    static func make(_ services: Services) -> MethodTable {
        var table = MethodTable()
        let machineAccounts = services.machineAccounts
        let home = services.accountHome
        let tokens = TokenService(keys: services.keys, config: services.config, now: services.now)
        table.registerTokenMethods(tokens, hubKeys: services.hub.link.map(HubKeys.init))
        table.registerAdminMethods(services)

        // Accounts: registration, sign-in, sessions, settings (account methods).
        let codes = home.map {
            SMSCodes(directory: $0, config: services.config, key: services.codeKey, stateDirectory: services.options.stateDirectory,
                     logger: services.logger, http: services.http, now: services.now)
        }
        let limiter = RateLimiter(config: services.config, now: services.now)
        let fingerprintSteps = FingerprintSteps(store: services.store)
        table.registerAccountMethods(home.flatMap { home in codes.map { Registration(directory: home, codes: $0, logger: services.logger) } },
                                     otp: home.flatMap { home in codes.map { OTPLogin(directory: home, codes: $0) } },
                                     login: home.map { Login(directory: $0, fingerprintSteps: fingerprintSteps) }, fingerprintSteps: fingerprintSteps,
                                     limiter: limiter)
        table.registerSessionMethods(home.map { SessionService(directory: $0, tokens: tokens) })
        table.registerAccountSettingsMethods(home.map { AccountSettings(directory: $0, logger: services.logger, limiter: limiter) },
                                             admin: home.map { AccountAdmin(directory: $0) })

        // The machine: card, fingerprints, lock, federation and its vault, passkeys.
        let biometrics = BiometricService(store: services.store, config: services.config, logger: services.logger, reader: FingerprintReader())
        let cards = CardService(
            readers: CardQueue(), secrets: CardSecrets(store: services.store, sealer: services.sealer, now: services.now),
            biometrics: biometrics, config: services.config, logger: services.logger, now: services.now)
        table.registerCardMethods(cards)
        table.registerLockMethods(Unlocker(lock: services.localLock, directory: machineAccounts, biometrics: biometrics, codes: codes, limiter: limiter))
        let signIn = FingerprintSignIn(directory: machineAccounts, steps: fingerprintSteps, lock: services.localLock, biometrics: biometrics, now: services.now)
        table.registerBiometricMethods(biometrics, signIn: signIn, cards: cards)
        let providers = ProviderDirectory(config: services.config, http: services.http, now: services.now)
        let remote = RemoteAccess(vault: services.vault, providers: providers, events: services.events, logger: services.logger, http: services.http,
                                  config: services.config, now: services.now)
        let federated = FederatedSignIn(directory: machineAccounts, config: services.config, providers: providers, vault: services.vault,
                                        logger: services.logger, now: services.now)
        table.registerFederationMethods(signIn: federated, remote: remote, vault: services.vault, config: services.config, events: services.events)
        if let home { table.registerLinkDirectoryMethods(services, home: home, providers: providers) }
        let authenticator = PlatformAuthenticator(
            store: services.store, sealer: services.sealer,
            verification: PasskeyUserVerification(directory: machineAccounts, lock: services.localLock, biometrics: biometrics),
            now: services.now)
        let relyingParty = home.map { RelyingParty(directory: $0, config: services.config, decoyKey: services.codeKey, logger: services.logger) }
        table.registerPasskeyMethods(authenticator: authenticator, relyingParty: relyingParty, limiter: limiter)
        let pam = PAMAuthenticator(links: PAMLinkStore(store: services.store, now: services.now), cards: cards, biometrics: biometrics,
                                   directory: machineAccounts, config: services.config)
        table.registerPAMMethods(pam, lock: services.localLock, isAdmin: { services.isAdmin($0) })

        // Sync: the account's event log, and this machine's stream of it.
        let sync = services.syncService
        let hubSource = services.hub.link.flatMap { link in services.cipher.map { HubSyncSource(link: link, cipher: $0) } }
        table.registerSyncMethods(sync, hub: hubSource, bus: services.sync, outbox: services.outbox)
        if let home { table.registerLinkSyncMethods(log: sync.log, keyBook: DeviceKeyBook(store: services.accountStore, now: services.now), directory: home) }

        // Friends, groups, hotspots and presence.
        let presence = PresenceBook(store: services.accountStore, config: services.config, now: services.now)
        table.registerPresenceMethods(PresenceService(book: presence, directory: machineAccounts, limiter: limiter))
        if let home { table.registerLinkPresenceMethods(presence, directory: home, limiter: sync.limiter) }
        table.registerMachinePresenceMethods(services.presence, directory: machineAccounts)

        // The person's desktop: prompts authd asks there, and their consents.
        table.registerDesktopMethods(services.desktop)

        table.registerHubMethods(services)
        table.registerCoreMethods(services)
        return table
    }
}
