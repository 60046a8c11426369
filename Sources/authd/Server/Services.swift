import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// Everything handlers share, built once at start by `Daemon`.
struct Services: Sendable {
    let options: DaemonOptions
    let config: ConfigHolder
    let reloader: ConfigReloader
    let logger: Logger
    let store: Store
    /// The store of account data where it lives here: `store` itself, or the account database on
    /// PostgreSQL that several hub replicas share (`[hub] database`).
    let accountStore: Store
    /// What this machine's own capabilities ask of the accounts signed in on it (DESIGN §8):
    /// this authd's own directory, or for a device its hub (`HubAccountDirectory`).
    let machineAccounts: any MachineAccounts
    /// The directory of the accounts this machine is the home of (a standalone authd, a hub);
    /// nil on a device, which forwards account methods to its hub.
    let accountHome: (any AccountDirectory)?
    let keys: KeyRing
    let audit: AuditLog
    let connections: ConnectionRegistry
    let masterKeySource: MasterKeySource
    let sealer: Sealer
    /// HMAC key for one-time codes (HKDF label `otp-code`).
    let codeKey: SecretBytes
    /// Each local user's lock (guarded methods ask it first).
    let localLock: LocalLock
    /// `events.subscribe` streams, per local user.
    let events: EventBus
    /// `sync.subscribe` streams, per account.
    let sync: SyncBus
    /// The accounts' event logs where they live (also where a call's `AccountNotice`s go).
    let syncService: SyncService
    /// On a device: what apps sent while the hub was away.
    let outbox: SyncOutbox?
    /// On a device: seals what its apps send and opens what the hub relays (DESIGN §13).
    let cipher: SyncCipher?
    /// Where this machine is, for the accounts signed in on it (`[presence] enabled`).
    let presence: MachinePresence
    /// Remote tokens of federated sign-ins, per local user.
    let vault: TokenVault
    /// Every HTTP request (SMS gateway, OpenID providers, remote APIs), through `authd-http`.
    let http: HTTPClient
    /// The machine's identity and its role among machines (standalone, hub, device).
    let hub: HubState
    /// Where `prompt: desktop` asks the person, and what they consented to (DESIGN §12).
    let desktop: DesktopPrompts
    let startedAt: Date
    let now: @Sendable () -> Date

    /// Pushes what committed changes announce, whoever made them (a call, or maintenance): a hub
    /// tells the machines whose sessions ended, and the accounts' event logs record the notices.
    func announce(_ announcements: Announcements) async {
        if !announcements.endedSessions.isEmpty {
            hub.tell(announcements.endedSessions, connections: connections, now: now(), logger: logger)
        }
        if !announcements.events.isEmpty { await syncService.committedElsewhere(announcements.events.map { ($0.account, $0.event) }) }
        if !announcements.notices.isEmpty { await syncService.record(announcements.notices) }
    }

    /// At a hub replica: events another replica committed, read back from the log. They are
    /// handed on like this replica's own, and the machines linked here whose sessions they
    /// ended are told.
    func committedByAnotherReplica(_ events: [(account: String, event: SyncEvent)]) async {
        await syncService.committedElsewhere(events)
        if let accountHome { await hub.tellEndedElsewhere(events, directory: accountHome, connections: connections, now: now(), logger: logger) }
    }

    /// Whether the caller is a process of root on this machine (`Access.root`).
    func isRoot(_ caller: Caller) -> Bool {
        guard case .local(let peer) = caller else { return false }
        return peer.uid == 0
    }

    /// Root or the admin group in system mode; the daemon's own user (or root) in user mode.
    /// Never another machine: administration is local.
    func isAdmin(_ caller: Caller) -> Bool {
        guard case .local(let caller) = caller else { return false }
        if caller.uid == 0 { return true }
        switch options.mode {
        case .user:
            return caller.uid == Syscalls.effectiveUserID()
        case .system:
            guard let group = Syscalls.groupID(named: config.current.adminGroup) else { return false }
            return caller.gid == group || caller.groups.contains(group)
        }
    }
}
