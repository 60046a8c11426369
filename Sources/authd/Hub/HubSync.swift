import FoundationEssentials
import Protocol

/// On a device: a subscriber reads the account's log at the hub, as the local process that
/// subscribed (the hub checks the session is this machine's, as for any forwarded call).
struct HubSyncSource: SyncSource {
    let link: HubLink
    /// Opens what the hub relays sealed, before a subscriber sees it.
    let cipher: SyncCipher

    func events(_ params: SyncEvents.Params, for caller: CallerIdentity) async throws -> SyncEvents.Result {
        var result = try await link.forward(SyncEvents.self, params, caller: ForwardedCaller(caller))
        result.events = await cipher.open(result.events, account: result.account)
        return result
    }

    /// `sync.history` as the hub answers it, sealed bodies opened here.
    func history(_ params: SyncHistory.Params, for caller: CallerIdentity) async throws -> SyncHistory.Result {
        var result = try await link.forward(SyncHistory.self, params, caller: ForwardedCaller(caller))
        if let account = result.account { result.events = await cipher.open(result.events, account: account) }
        return result
    }

    func isTransient(_ error: any Error) -> Bool { error is HubLinkFailure }
}

extension HubState {
    /// At a hub: sends committed events to every linked machine that holds a live session of
    /// their account, over their links, at once, naming the local users there who signed in.
    func push(_ events: [(account: String, event: SyncEvent)], directory: any LinkedMachines, connections: ConnectionRegistry) async {
        guard role == .hub, !events.isEmpty, let holders = try? await directory.sessionHolders(of: Set(events.map(\.account))) else { return }
        let links = connections.connections(of: Set(holders.values.joined().compactMap(\.machine)))
        for (account, event) in events {
            var users: [DeviceID: Set<UInt32>] = [:]
            for holder in holders[account] ?? [] {
                guard let machine = holder.machine else { continue }
                users[machine, default: []].formUnion(holder.user.map { [$0] } ?? [])
            }
            // One line for each set of users: machines where the same users signed in (the
            // same uid on every desktop of a person) get the same bytes.
            var lines: [[UInt32]: Data] = [:]
            for (machine, machineUsers) in users {
                guard let connected = links[machine], !connected.isEmpty else { continue }
                let sorted = machineUsers.sorted()
                guard let line = try? lines[sorted] ?? WireCodec.notificationLine(method: LinkSyncEvent.name,
                                                                                  params: LinkSyncEvent.Params(account: account, event: event, users: sorted))
                else { continue }
                lines[sorted] = line
                for connection in connected { connection.enqueue(line) }
            }
        }
    }
}

extension MethodTable {
    /// At a hub: each linked machine's cursor of the logs of the accounts it holds.
    mutating func registerLinkSyncMethods(log: SyncLog, keyBook: DeviceKeyBook, directory: any LinkedMachines) {
        register(LinkE2EEPublish.self, home: .link, access: .anyone) { params, machine in
            // Only a machine of some account: a stranger's certificate would otherwise add a row
            // for every key it made, for ever. A device whose link comes up before it signs in
            // tells its key again after the sign-in (`SyncCipher.signedIn`).
            try await directory.requireLiveSession(on: machine)
            guard let spki = Base64URL.decode(params.spki) else { throw InvalidParameter("Parameter 'spki' must be base64url.", field: "spki") }
            try await keyBook.publish(machine: machine, spki: spki, statement: params.statement)
            return Acknowledged()
        }
        register(LinkE2EEKeys.self, home: .link, access: .anyone) { params, machine in
            _ = try await directory.signedInDevice(of: machine, account: params.account)
            let (mode, keys) = try await keyBook.keys(account: params.account)
            return LinkE2EEKeys.Result(account: params.account, e2ee: mode, devices: keys.map {
                LinkE2EEKeys.Device(deviceID: $0.deviceID, name: $0.name, spki: Base64URL.encode($0.spki), statement: $0.statement, revoked: $0.revoked)
            })
        }
        register(LinkSyncAck.self, home: .link, access: .anyone) { params, machine in
            _ = try await directory.signedInDevice(of: machine, account: params.account)
            try await log.acknowledge(account: params.account, machine: DeviceIdentity.key(ofMachine: machine), position: params.position)
            return Acknowledged()
        }
        register(LinkSyncResume.self, home: .link, access: .anyone) { params, machine in
            let limit = try SyncService.limit(params.limit, default: 500, most: 1000)
            var cursors: [(account: String, cursor: Int64, users: [UInt32])] = []
            for (account, users) in try await directory.accounts(heldBy: machine) {
                cursors.append((account, try await log.cursor(account: account, machine: DeviceIdentity.key(ofMachine: machine)), users))
            }
            // One answer for every account, within the line the device takes.
            return LinkSyncResume.Result(accounts: try await log.catchUp(cursors, limit: limit).map(LinkSyncResume.Account.init))
        }
    }
}

/// On a device: how far this machine has taken each account's log, told to the hub (at most
/// once a second), and what it missed while the link was down, read back from its cursor when
/// the link returns and handed to this machine's bus (whose readers drop what they already had).
actor SyncCursors {
    private let link: HubLink
    private let cipher: SyncCipher
    private let bus: SyncBus
    private let logger: Logger
    private var taken: [String: Int64] = [:]
    private var told: [String: Int64] = [:]
    private var telling = false

    init(link: HubLink, cipher: SyncCipher, bus: SyncBus, logger: Logger) {
        self.link = link
        self.cipher = cipher
        self.bus = bus
        self.logger = logger
    }

    /// An event the hub pushed was handed to this machine's bus.
    func took(_ position: Int64, account: String) {
        taken[account] = max(taken[account] ?? 0, position)
        guard !telling else { return }
        telling = true
        Task {
            try? await Task.sleep(for: .seconds(1))
            await tell()
        }
    }

    private func tell() async {
        telling = false
        for (account, position) in taken where position > told[account] ?? 0 {
            do {
                _ = try await link.call(LinkSyncAck.name, LinkSyncAck.Params(account: account, position: position)).get()
                told[account] = max(told[account] ?? 0, position)
            } catch {
                // Told again with the next event, or read back on the next resume.
                logger.debug("sync: the hub did not take this machine's cursor: \(error)")
            }
        }
    }

    /// The link is back: what this machine missed, from its cursors, page by page.
    func resume() async {
        for _ in 0..<1000 {
            guard case .success(let value)? = try? await link.call(LinkSyncResume.name, LinkSyncResume.Params(limit: 500)),
                  let missed = try? value.decode(LinkSyncResume.Result.self) else { return }
            var more = false
            for account in missed.accounts {
                told[account.account] = max(told[account.account] ?? 0, account.cursor)
                for event in await cipher.open(account.events, account: account.account) {
                    bus.publish(event, account: account.account, users: account.users ?? [])
                    taken[account.account] = max(taken[account.account] ?? 0, event.position)
                }
                more = more || (account.more ?? (account.events.count == 500))
            }
            await tell()
            if !more { return }
        }
    }
}
