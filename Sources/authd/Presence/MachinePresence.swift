import FoundationEssentials
import Protocol

/// What reads where this machine is and says when it enters or leaves a hotspot, or is at one
/// of its beacons (PresenceMonitor, over GeoClue2, NetworkManager and BlueZ).
protocol HotspotWatcher: Sendable {
    /// Starts reading (or goes on, with new definitions), matching against `hotspots`;
    /// `transition` hears each enter, leave and beacon point (`pinned`), in order.
    func watch(_ hotspots: [Hotspot], transition: @escaping @Sendable (HotspotTracker.Transition) async -> Void) async
    /// Stops reading: GeoClue2, NetworkManager and BlueZ are let go.
    func stopWatching() async
    /// `reading`, `unavailable` (with why) or `off`; and the ids of the hotspots it is in now.
    func watchState() async -> (state: String, detail: String?, inside: [String])
}

/// On a machine with `[presence] enabled = yes`: reads where it is for the accounts signed in
/// on it whose presence is on, and tells where each account lives (`PresenceHome`) only
/// "entered / left hotspot H" — at once in `auto` mode; in `ask` mode once the person answered
/// (`presence.ask` on their event streams, `presence.answer`). Coordinates, BSSIDs and beacon
/// addresses stay here; for an account whose `precise` is `beacon`, the point of the hotspot's
/// beacon the machine sees goes with its "entered" (`pinned`), never before the person's answer
/// in ask mode.
/// The accounts and their hotspots are read again when the link comes back, when the person's
/// settings change (a `presence.settings` event), and every `refresh` seconds, when the places it
/// is in are told again so that the home does not let them expire. A report the home could not
/// take waits for the next try; turning presence off drops it.
actor MachinePresence {
    private let home: any PresenceHome
    private let watcher: any HotspotWatcher
    private let events: EventBus
    private let config: ConfigHolder
    private let logger: Logger
    /// Also asks on the desktop (a user-mode authd with desktop notifications).
    private let desktop: (@Sendable (PresenceAskEvent) -> Void)?

    private var accounts: [LinkPresenceAccounts.Account] = []
    private var refresh = 1200
    /// The hotspots this machine is in now.
    private var inside: Set<String> = []
    /// The point of the beacon seen in each hotspot this stay, by hotspot id.
    private var beaconPoints: [String: PresencePlace.Point] = [:]
    /// The beacon point each home took last, by account and hotspot: a refresh carries the
    /// point only until the home has it, so that a pin the person set by hand since is not
    /// overwritten at every refresh.
    private var pointsTaken: [String: PresencePlace.Point] = [:]
    /// Open questions (ask mode), by account: the hotspots entered and not yet answered.
    private var asked: [String: Set<String>] = [:]
    /// Ask mode, by account: the hotspots of this stay whose question the person answered with
    /// a group. They are told again at each refresh, as auto mode's are (a refresh of a place
    /// not held would end the one the home holds).
    private var answered: [String: Set<String>] = [:]
    /// Reports the home did not take yet, by account and hotspot; the newest wins.
    private var unsent: [String: LinkPresenceReport.Params] = [:]
    /// Whether a flush is due after the home said to slow down (`rate.limited`).
    private var retrying = false
    private var started = false

    init(home: any PresenceHome, watcher: any HotspotWatcher, events: EventBus, config: ConfigHolder, logger: Logger,
         desktop: (@Sendable (PresenceAskEvent) -> Void)? = nil) {
        self.home = home
        self.watcher = watcher
        self.events = events
        self.config = config
        self.logger = logger
        self.desktop = desktop
    }

    /// Starts following: now, on every change of settings the sync stream brings, and every
    /// `refresh` seconds.
    func start(sync: SyncBus) {
        guard !started else { return }
        started = true
        let observed = sync.observe { $0.event.kind == "presence.settings" }
        Task { [weak self] in
            for await _ in observed {
                await self?.reload()
            }
        }
        Task { [weak self] in
            while let self {
                await self.reload()
                await self.tellAgain()
                try? await Task.sleep(for: .seconds(await self.refresh))
            }
        }
    }

    /// Reads the accounts and their hotspots again, and starts or stops reading where this
    /// machine is by them.
    func reload() async {
        guard config.current.presenceEnabled else {
            await watcher.stopWatching()
            return
        }
        do {
            let result = try await home.accounts()
            accounts = result.accounts
            refresh = max(result.refresh, 10)
        } catch {
            logger.debug("presence: cannot read this machine's accounts now: \(error)")
            return
        }
        let on = accounts.filter(\.settings.enabled)
        let kept = Set(on.map(\.account))
        asked = asked.filter { kept.contains($0.key) }
        answered = answered.filter { kept.contains($0.key) }
        unsent = unsent.filter { kept.contains($0.value.account) }
        guard !on.isEmpty else {
            inside = []
            await watcher.stopWatching()
            return
        }
        // Beacons only for hotspots of an account that wants its point from them: without one,
        // the monitor never turns Bluetooth on.
        let wanting = Set(on.filter { $0.settings.precise == "beacon" }.flatMap { $0.hotspots.map(\.id) })
        var seen: Set<String> = []
        let hotspots = on.flatMap(\.hotspots).filter { seen.insert($0.id).inserted }.map { hotspot in
            var hotspot = hotspot
            if !wanting.contains(hotspot.id) { hotspot.beacons = nil }
            return hotspot
        }
        await watcher.watch(hotspots) { [weak self] transition in await self?.moved(transition) }
        await flush()
    }

    /// What the watcher saw: told to each account that has the hotspot, by its mode.
    private func moved(_ transition: HotspotTracker.Transition) async {
        let hotspot = transition.hotspot
        switch transition.change {
        case .pinned:
            guard let point = transition.point else { return }
            beaconPoints[hotspot] = point
            await pinned(hotspot, at: point)
            return
        case .entered:
            inside.insert(hotspot)
        case .left:
            inside.remove(hotspot)
        }
        // A stay starts and ends without a point: the next beacon seen gives it.
        beaconPoints[hotspot] = nil
        pointsTaken = pointsTaken.filter { !$0.key.hasSuffix(" " + hotspot) }
        let entered = transition.change == .entered
        for account in accounts where account.settings.enabled {
            guard let place = account.hotspots.first(where: { $0.id == hotspot }) else { continue }
            answered[account.account]?.remove(hotspot)
            if entered && account.settings.mode == "ask" {
                asked[account.account, default: []].insert(hotspot)
                let question = PresenceAskEvent(account: account.account, hotspot: .init(id: place.id, name: place.name), groups: account.settings.groups)
                for user in account.users { await events.publish(EventBus.Event(type: "presence.ask", presence: question), to: user) }
                desktop?(question)
                continue
            }
            if !entered { asked[account.account]?.remove(hotspot) }
            await send(.init(account: account.account, hotspot: hotspot, entered: entered, group: nil))
        }
    }

    /// The machine, in `hotspot`, is at one of its beacons: told to each account that has the
    /// hotspot and wants its point from beacons, unless its question (ask mode) is still open.
    private func pinned(_ hotspot: String, at point: PresencePlace.Point) async {
        for account in accounts where account.settings.enabled && account.settings.precise == "beacon" {
            guard account.hotspots.contains(where: { $0.id == hotspot }), asked[account.account]?.contains(hotspot) != true else { continue }
            // With `entered`: the home pins only inside the place it holds; in ask mode, a
            // person who declined has none, and the report changes nothing there.
            await send(.init(account: account.account, hotspot: hotspot, entered: true, group: nil, pinned: point))
        }
    }

    /// The beacon point to send with `account`'s "entered" in `hotspot`, if it wants one.
    private func beaconPoint(for account: LinkPresenceAccounts.Account, in hotspot: String) -> PresencePlace.Point? {
        account.settings.precise == "beacon" ? beaconPoints[hotspot] : nil
    }

    /// The person's answer to a question: tell `group` (none: nobody).
    func answer(account: String, hotspot: String, group: String?) async throws -> Int {
        guard asked[account]?.remove(hotspot) != nil else { throw PresenceFailure.notAsked }
        guard let group else { return 0 }
        let pinned = accounts.first { $0.account == account }.flatMap { beaconPoint(for: $0, in: hotspot) }
        let told = try await home.report(.init(account: account, hotspot: hotspot, entered: true, group: group, pinned: pinned))
        if let pinned { pointsTaken[account + " " + hotspot] = pinned }
        answered[account, default: []].insert(hotspot)
        return told
    }

    /// Where this machine stands for `account`.
    func state(of account: String) async -> PresenceMachine.Result {
        guard config.current.presenceEnabled else {
            return .init(state: "disabled", detail: "this machine reads no position: set enabled = yes in [presence] of authd.conf, then authctl admin reload",
                         inside: [])
        }
        guard let held = accounts.first(where: { $0.account == account }) else {
            return .init(state: "off", detail: "this machine reads nothing for this account yet", inside: [])
        }
        guard held.settings.enabled else { return .init(state: "off", detail: nil, inside: []) }
        let watched = await watcher.watchState()
        let names = held.hotspots.filter { watched.inside.contains($0.id) }.map(\.name)
        return .init(state: watched.state, detail: watched.detail, inside: names)
    }

    /// Says again where this machine is, so that the home keeps it: in auto mode, every hotspot
    /// it is in; in ask mode, those the person answered with a group.
    func tellAgain() async {
        for account in accounts where account.settings.enabled {
            let told = account.settings.mode == "auto" ? Set(account.hotspots.map(\.id)) : answered[account.account] ?? []
            for hotspot in account.hotspots where inside.contains(hotspot.id) && told.contains(hotspot.id) {
                let point = beaconPoint(for: account, in: hotspot.id)
                await send(.init(account: account.account, hotspot: hotspot.id, entered: true, group: nil,
                                 pinned: point == pointsTaken[account.account + " " + hotspot.id] ? nil : point))
            }
        }
    }

    private func retryAfterLimit() async {
        retrying = false
        await flush()
    }

    /// Sends what could not be sent before (the link came back).
    func flush() async {
        let waiting = unsent
        unsent = [:]
        for report in waiting.values { await send(report) }
    }

    private func send(_ report: LinkPresenceReport.Params) async {
        do {
            _ = try await home.report(report)
            if let pinned = report.pinned { pointsTaken[report.account + " " + report.hotspot] = pinned }
        } catch is HubLinkFailure {
            unsent[report.account + " " + report.hotspot] = report
        } catch let refusal as RPCError where refusal.reason == .rateLimited {
            // This machine wrote too much at once: kept, and sent when the home says (a report
            // that a person left a place must not be lost to the limit).
            unsent[report.account + " " + report.hotspot] = report
            guard !retrying else { return }
            retrying = true
            let seconds = min(max(refusal.details["retry_after"]?.integerValue ?? 1, 1), 3600)
            Task { [weak self] in
                try? await Task.sleep(for: .seconds(seconds))
                await self?.retryAfterLimit()
            }
        } catch {
            logger.warning("presence: the report of account \(report.account) was refused: \(error)")
        }
    }
}
