import Dispatch
import FoundationEssentials
import Glibc
import OpenSSLCrypto
import Protocol

/// Start-up, signal handling, reload and graceful shutdown. `main.swift` only calls `run`.
final class Daemon: @unchecked Sendable {
    // Sendable: set up once in `start` before any signal source is armed, then read-only.
    private let options: DaemonOptions
    private let logger: Logger
    private var services: Services!
    private var dispatcher: Dispatcher!
    private var listener: Listener!
    private var hubListener: HubListener?
    private var maintenance: Task<Void, Never>?
    /// A hub replica's ear for the commits of the others on the same PostgreSQL database.
    private var replicas: HubReplicas?

    private init(options: DaemonOptions, logger: Logger) {
        self.options = options
        self.logger = logger
    }

    /// Runs the daemon until SIGTERM/SIGINT; returns the process exit status.
    static func run(_ options: DaemonOptions) async -> Int32 {
        let warnings = Hardening.apply()
        let config: Config
        do {
            config = try Config.load(path: options.configPath)
        } catch {
            Syscalls.writeStderr("authd: invalid configuration: \(error.report)\n")
            return 1
        }
        if options.checkConfigOnly {
            print("authd: \(options.configPath): configuration is valid")
            return 0
        }
        let logger = Logger(sink: Logger.sink(for: config.logTarget), level: config.logLevel)
        for warning in warnings { logger.warning("hardening: \(warning)") }
        // Signals are caught from here on, before READY=1, so a SIGTERM that arrives while
        // starting is handled (after start-up) instead of killing the process outright.
        let (signals, sources) = catchSignals([SIGTERM, SIGINT, SIGHUP])
        defer { sources.forEach { $0.cancel() } }
        let daemon = Daemon(options: options, logger: logger)
        do {
            try await daemon.start(config: config)
        } catch {
            logger.error("cannot start: \(error)")
            Systemd.notify("STATUS=Failed to start: \(error)")
            return 1
        }
        for await number in signals {
            if number == SIGHUP {
                daemon.reloadOnSignal()
            } else {
                break
            }
        }
        await daemon.shutdown()
        return 0
    }

    private static func catchSignals(_ numbers: [Int32]) -> (AsyncStream<Int32>, [any DispatchSourceSignal]) {
        let (stream, continuation) = AsyncStream.makeStream(of: Int32.self)
        let queue = DispatchQueue(label: "authd.signals")
        let sources = numbers.map { number in
            Syscalls.ignoreSignal(number)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { continuation.yield(number) }
            source.resume()
            return source
        }
        return (stream, sources)
    }

    private func start(config: Config) async throws {
        let started = Date()
        try Syscalls.ensureDirectory(options.stateDirectory, mode: 0o700, exactMode: true)
        // Opened at the first phone number; missing, it is a broken installation, said now. The
        // rest is served meanwhile, and what needs a phone number fails until it is there.
        do {
            _ = try PhoneNumber.Library.locate()
        } catch {
            logger.warning("\(error); until then, requests with a phone number fail")
        }
        let masterKey = try MasterKey.load(environment: ProcessInfo.processInfo.environment, keyFilePath: options.keyFilePath)
        let sealer = try Sealer(masterKey: masterKey)
        let store = try Store(path: options.databasePath)
        let now: @Sendable () -> Date = { Date() }
        let keys = try await KeyRing.open(store: store, sealer: sealer, now: now())
        let holder = ConfigHolder(config, file: options.configPath)
        // Account data: in the same SQLite file, or in the PostgreSQL database several hub
        // replicas share (`[hub] database`). What the machine owns stays in `store` (DESIGN §8).
        let accountStore = config.hubDatabase.isEmpty ? store
            : try await Self.accountDatabase(config.hubDatabase, connections: config.hubDatabaseConnections, leaving: SQLAccountDirectory(store: store, config: holder, logger: logger, now: now), logger: logger)
        let directory = SQLAccountDirectory(store: accountStore, config: holder, logger: logger, now: now)
        let identity = try await MachineIdentity.open(store: store, sealer: sealer, now: now())
        let hub = HubState(role: config.role, identity: identity, link: try await Self.hubLink(config, identity: identity, directory: directory, logger: logger))
        // A device's accounts are at its hub: its machine capabilities reach them over the link.
        let accounts: any MachineAccounts = hub.link.map { HubAccountDirectory(link: $0, machine: identity.id, now: now) } ?? directory
        // Where this machine is the accounts' home; a device is not.
        let accountHome: (any AccountDirectory)? = hub.link == nil ? directory : nil
        let syncBus = SyncBus()
        let cipher = hub.link.map { SyncCipher(identity: identity, link: $0, directory: accounts, logger: logger) }
        let outbox = hub.link.flatMap { link in cipher.map { SyncOutbox(store: store, sealer: sealer, link: link, cipher: $0, bus: syncBus, logger: logger, now: now) } }
        let cursors = hub.link.flatMap { link in cipher.map { SyncCursors(link: link, cipher: $0, bus: syncBus, logger: logger) } }
        let connections = ConnectionRegistry { [logger] machine in
            do { return try await directory.machineHoldsSession(machine) } catch {
                // Unknown is a newcomer: the smaller budget, never a refusal.
                logger.warning("hub: cannot tell whether device \(machine) holds a session: \(error)")
                return false
            }
        }
        let syncService = SyncService(log: SyncLog(store: accountStore, now: now, groupCommit: config.syncGroupCommit), directory: accounts, bus: syncBus, limiter: SyncWriteLimiter(config: holder, now: now),
                                      thisMachine: identity.id, keyBook: config.role == .hub ? DeviceKeyBook(store: accountStore, now: now) : nil) { events in
            await hub.push(events, directory: directory, connections: connections)
        }
        let events = EventBus()
        let desktop = options.mode == .user ? DesktopNotifications(logger: logger) : nil
        let presenceHome: any PresenceHome = if let link = hub.link { HubPresenceHome(link: link) } else {
            LocalPresenceHome(book: PresenceBook(store: accountStore, config: holder, now: now), directory: directory)
        }
        var askOnDesktop: (@Sendable (PresenceAskEvent) -> Void)?
        if let desktop {
            askOnDesktop = { question in if holder.current.syncDesktopNotifications { desktop.ask(question) } }
        }
        let presence = MachinePresence(
            home: presenceHome, watcher: PresenceMonitor(options: .init(bssidAbsenceSeconds: Int64(config.presenceBSSIDAbsenceSeconds)), logger: logger),
            events: events, config: holder, logger: logger, desktop: askOnDesktop)
        services = Services(
            options: options, config: holder, reloader: ConfigReloader(path: options.configPath, holder: holder, logger: logger),
            logger: logger, store: store, accountStore: accountStore, machineAccounts: accounts, accountHome: accountHome, keys: keys, audit: AuditLog(store: accountStore, now: now, bounds: { AuditLog.Bounds(holder.current) }), connections: connections,
            masterKeySource: masterKey.source, sealer: sealer, codeKey: try KeyDerivation.key(masterKey, label: "otp-code"),
            localLock: LocalLock(store: store, directory: accounts, config: holder, now: now), events: events, sync: syncBus, syncService: syncService, outbox: outbox, cipher: cipher,
            presence: presence,
            vault: TokenVault(store: store, sealer: sealer, directory: accounts),
            http: HTTPClient.beside(environment: ProcessInfo.processInfo.environment), hub: hub,
            desktop: Self.desktopPrompts(options: options, config: holder, store: store, notifications: desktop, now: now),
            startedAt: started, now: now)
        dispatcher = Dispatcher(table: DispatchTable.make(services), services: services)

        let (fd, boundPath) = try openListeningSocket()
        listener = Listener(fd: fd, socketPath: boundPath, dispatcher: dispatcher)
        listener.start()
        if let listen = config.hubListen {
            let hubListener = try HubListener(listen: listen, context: try TLSContext.server(certificateFile: config.hubCertFile, keyFile: config.hubKeyFile),
                                              dispatcher: dispatcher)
            hubListener.start()
            hub.listenAddress = hubListener.address
            self.hubListener = hubListener
            logger.notice("hub: serving devices on \(hubListener.address) (TLS 1.3), device id \(identity.id)", [("AUTHD_HUB_LISTEN", hubListener.address.description)])
        }
        // What the hub pushes is opened in the order it came (opening may wait for the account's
        // keys), then handed to this machine's subscribers; on the link's thread, which reads it.
        let (pushedEvents, pushing) = AsyncStream.makeStream(of: LinkSyncEvent.Params.self, bufferingPolicy: .bufferingNewest(SyncBus.bufferedSignals))
        if let cipher {
            Task(executorPreference: hub.link?.taskExecutor) { [sync = services.sync, cursors] in
                for await pushed in pushedEvents {
                    sync.publish(await cipher.open(pushed.event, account: pushed.account), account: pushed.account, users: pushed.users ?? [])
                    await cursors?.took(pushed.event.position, account: pushed.account)
                }
            }
        }
        hub.link?.onNotice { [events = services.events, sync = services.sync, outbox, cursors, cipher, presence, logger] notice in
            switch notice {
            case .sessionsEnded(let ended):
                Task { await events.hear(ended) }
                // Streams of an ended session learn it from the log at once, not at the next event.
                sync.resync()
            case .syncEvent(let pushed):
                pushing.yield(pushed)
            case .linked:
                sync.resync()
                Task {
                    do {
                        try await cipher?.publish()
                    } catch let refusal as RPCError where refusal.reason == .hubNotSignedIn {
                        logger.debug("sync: this machine holds no session at the hub yet; its encryption key is told after its first sign-in")
                    } catch {
                        logger.warning("sync: this machine's encryption key could not be told to the hub (\(error)); it is told again before the next send")
                    }
                    await cursors?.resume()
                    await outbox?.flush()
                    await presence.reload()
                }
            }
        }
        hub.link?.start()
        if let desktop {
            desktop.start(sync: syncBus, config: holder)
        } else {
            DesktopDelivery(directory: accountHome, events: services.events, logger: logger).start(sync: syncBus, config: holder)
        }
        await presence.start(sync: syncBus)
        if config.role == .hub, !config.hubDatabase.isEmpty {
            let replicas = HubReplicas(connectionString: config.hubDatabase,
                                       name: "\(Syscalls.hostName() ?? "hub") \(hub.listenAddress.map(\.description) ?? "")", keys: services.keys, logger: logger)
            replicas.start(log: syncService.log) { [services] in await services.committedByAnotherReplica($0) }
            services.keys.onRotation { replicas.keysRotated() }
            self.replicas = replicas
        }
        maintenance = Maintenance.schedule(directory: directory, vault: services.vault, audit: services.audit, sync: SyncLog(store: accountStore, now: now),
                                           noticeOrigin: syncService.noticeOrigin, config: holder, spoolDirectory: options.smsSpoolDirectory, logger: logger, now: now) { [services] in
            await services.announce($0)
        }
        let elapsed = Date().timeIntervalSince(started)
        logger.notice("authd \(DaemonVersion.string) ready in \(options.mode.rawValue) mode on \(options.socketPath)", [
            ("AUTHD_SOCKET", options.socketPath), ("AUTHD_STATE_DIR", options.stateDirectory),
            ("AUTHD_MASTER_KEY", masterKey.source.description), ("AUTHD_SIGNING_KID", keys.current.kid),
            ("AUTHD_SOCKET_ACTIVATED", boundPath == nil ? "yes" : "no"),
            ("AUTHD_STARTUP_MS", String(Int(elapsed * 1000))),
        ])
        if options.mode == .system && config.smsBackend == .spool {
            logger.warning("sms.backend = spool: verification codes are written to \(options.smsSpoolDirectory), not sent; set [sms] backend for real SMS")
        }
        let helper = services.http.helperPath
        if (config.smsBackend == .http || !config.federationProviders.isEmpty) && !Syscalls.isExecutable(helper) {
            logger.warning("\(helper) is not an executable file: SMS over http and federated sign-in will fail")
        }
        if config.smsBackend == .command && !Syscalls.isExecutable(config.smsCommand) {
            logger.warning("sms.command \(config.smsCommand) is not an executable file: every code will be sms.undeliverable")
        }
        Systemd.notify("READY=1\nSTATUS=Serving on \(options.socketPath)\nMAINPID=\(Syscalls.processID())")
    }

    /// Where `prompt: desktop` asks: the users' desktop agents, and in user mode pinentry run by
    /// authd itself, on its own display and terminal.
    /// Connects to the account database on PostgreSQL, bringing its schema up to date; a
    /// database whose schema is newer than this authd refuses it. A SQLite store that holds
    /// accounts refuses it too: they would be left behind, no longer served.
    private static func accountDatabase(_ connectionString: String, connections: Int, leaving local: SQLAccountDirectory, logger: Logger) async throws -> Store {
        let held = try await local.accounts(limit: 1_000_000).count
        guard held == 0 else {
            throw HubRoleError(description: "this authd's store holds \(held) account(s), and hub.database in the configuration would keep account data "
                               + "in PostgreSQL instead: they would no longer be served. Remove hub.database to keep serving them here")
        }
        do {
            let store = try Store(postgresql: connectionString, connections: connections)
            logger.notice("account data is in PostgreSQL (\(store.dialect.name), schema \(PostgreSQLSchema.latestVersion), \(connections) connection(s))")
            return store
        } catch {
            throw HubRoleError(description: "the account database in hub.database: \(error)")
        }
    }

    private static func desktopPrompts(options: DaemonOptions, config: ConfigHolder, store: Store, notifications: DesktopNotifications?,
                                       now: @escaping @Sendable () -> Date) -> DesktopPrompts {
        var local: PinentryDesk?
        if options.mode == .user {
            let environment = ProcessInfo.processInfo.environment
            var notes: (@Sendable (DeskNote) -> Void)?
            if let notifications { notes = { note in notifications.progress(note) } }
            local = PinentryDesk(config: config, environment: environment, notes: notes)
        }
        return DesktopPrompts(desk: DeskRouter(agents: AgentDesk(), local: local), consents: ConsentBook(store: store, now: now), config: config)
    }

    /// A device's link to its hub (not started yet); nil unless `[hub] url` is set. A store that
    /// already holds accounts cannot become a device: they would be cut off from every call.
    private static func hubLink(_ config: Config, identity: MachineIdentity, directory: SQLAccountDirectory, logger: Logger) async throws -> HubLink? {
        guard !config.hubURLs.isEmpty else { return nil }
        let held = try await directory.accounts(limit: 1_000_000).count
        guard held == 0 else {
            let hub = config.hubURLs.map(\.description).joined(separator: ", ")
            throw HubRoleError(description: "this authd's store holds \(held) account(s), and hub.url in the configuration would make it a device of \(hub): "
                               + "their data would no longer be reachable. Remove hub.url to keep serving them here, or move them to the hub first")
        }
        let trust: TLSTrust = config.hubPin.isEmpty ? .certificateAuthority(file: config.hubCAFile) : .pinnedKey(sha256: config.hubPin)
        let context = try TLSContext.client(certificate: identity.certificate, key: identity.key, trust: trust)
        return try HubLink(addresses: config.hubURLs, context: context, handshakeTimeoutSeconds: config.hubHandshakeTimeoutSeconds, logger: logger)
    }

    /// The listening socket: from systemd socket activation, or bound here.
    private func openListeningSocket() throws -> (Int32, String?) {
        let activated = try Systemd.listenedSockets()
        if activated.count > 1 {
            throw SystemError(call: "socket activation passed \(activated.count) sockets; authd takes exactly one", errno: EINVAL)
        }
        if let fd = activated.first {
            Syscalls.adoptInheritedDescriptor(fd)
            return (fd, nil)
        }
        let directory = Syscalls.directoryName(options.socketPath)
        if let shared = options.sharedRuntimeDirectory { try Syscalls.ensurePrivateDirectory(shared) }
        switch options.mode {
        case .user: try Syscalls.ensureDirectory(directory, mode: 0o700, exactMode: true)
        case .system: try Syscalls.ensureDirectory(directory, mode: 0o755, exactMode: false)
        }
        try Syscalls.removeStaleSocket(options.socketPath)
        let fd = try Syscalls.listenUnix(path: options.socketPath, mode: options.mode == .user ? 0o600 : 0o666)
        return (fd, options.socketPath)
    }

    func reloadOnSignal() {
        Systemd.notify("RELOADING=1")
        _ = try? services.reloader.reload(trigger: "SIGHUP")
        Systemd.notify("READY=1\nSTATUS=Serving on \(options.socketPath)")
    }

    /// Stop accepting, let in-flight requests finish within `shutdown_timeout`, cancel the rest,
    /// close connections, fold the WAL back. Exit status is 0 either way.
    private func shutdown() async {
        Systemd.notify("STOPPING=1\nSTATUS=Stopping")
        maintenance?.cancel()
        logger.notice("stopping: finishing in-flight requests")
        listener.stop()
        hubListener?.stop()
        services.hub.link?.stop()
        let connections = services.connections
        for connection in connections.all { connection.beginDraining() }
        await services.audit.finishFollowers()
        let deadline = ContinuousClock.now + .seconds(services.config.current.shutdownTimeoutSeconds)
        while dispatcher.tracker.inFlight > 0 && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        let unfinished = dispatcher.tracker.inFlight
        if unfinished > 0 {
            logger.warning("shutdown timeout: cancelling \(unfinished) request(s)")
            for connection in connections.all { connection.cancelInFlight() }
            let grace = ContinuousClock.now + .seconds(1)
            while dispatcher.tracker.inFlight > 0 && ContinuousClock.now < grace {
                try? await Task.sleep(for: .milliseconds(10))
            }
        }
        for connection in connections.all { connection.close() }
        let closing = ContinuousClock.now + .milliseconds(500)
        while connections.count > 0 && ContinuousClock.now < closing {
            try? await Task.sleep(for: .milliseconds(5))
        }
        // Counted refusals are written before the store closes.
        await services.audit.closeFloods(all: true)
        replicas?.stop()
        await services.store.checkpoint()
        logger.notice("stopped")
    }
}

/// The configured role cannot be taken with this store.
struct HubRoleError: Error, CustomStringConvertible {
    let description: String
}
