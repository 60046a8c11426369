import Foundation
import Protocol
import Synchronization
import Testing
@testable import authd

/// MachinePresence with the beacon point: which definitions keep their beacons, and when a
/// point goes to the home. A home that records reports and a watcher the test drives by hand.
@Suite("Presence: the machine's beacon points")
struct PresenceBeaconMachineTests {
    static let desk = PresencePlace.Point(latitude: 59.4371, longitude: 24.7537)
    static let kitchen = PresencePlace.Point(latitude: 59.4369, longitude: 24.7535)
    static let office = Hotspot(id: "hs_office", name: "Office", circle: .init(latitude: 59.437, longitude: 24.7536, radius: 100), bssids: nil,
                                beacons: [.init(address: "AA:BB:CC:00:00:01", latitude: desk.latitude, longitude: desk.longitude)], shared: true)

    final class Home: PresenceHome {
        let held: [LinkPresenceAccounts.Account]
        private let sent = Mutex<[LinkPresenceReport.Params]>([])
        var reports: [LinkPresenceReport.Params] { sent.withLock { $0 } }
        init(_ held: [LinkPresenceAccounts.Account]) { self.held = held }
        func accounts() async throws -> LinkPresenceAccounts.Result { .init(accounts: held, refresh: 3600) }
        func report(_ params: LinkPresenceReport.Params) async throws -> Int {
            sent.withLock { $0.append(params) }
            return 1
        }
    }

    /// Keeps the definitions and the handler; transitions are given by the test.
    final class Watcher: HotspotWatcher {
        private let state = Mutex<(hotspots: [Hotspot], handler: (@Sendable (HotspotTracker.Transition) async -> Void)?)>(([], nil))
        var hotspots: [Hotspot] { state.withLock { $0.hotspots } }
        func watch(_ hotspots: [Hotspot], transition: @escaping @Sendable (HotspotTracker.Transition) async -> Void) async {
            state.withLock { $0 = (hotspots, $0.handler ?? transition) }
        }
        func stopWatching() async {}
        func watchState() async -> (state: String, detail: String?, inside: [String]) { ("reading", nil, []) }
        func send(_ change: HotspotTracker.Transition.Change, point: PresencePlace.Point? = nil) async {
            await state.withLock { $0.handler }?(.init(hotspot: "hs_office", change: change, time: 1, point: point))
        }
    }

    static func account(_ id: String, mode: String, precise: String) -> LinkPresenceAccounts.Account {
        .init(account: id, users: [1000], settings: .init(enabled: true, mode: mode, groups: ["friends"], until: nil, precise: precise), hotspots: [office])
    }

    static func machine(_ accounts: [LinkPresenceAccounts.Account]) async -> (MachinePresence, Home, Watcher) {
        var config = Config()
        config.presenceEnabled = true
        let (home, watcher) = (Home(accounts), Watcher())
        let machine = MachinePresence(home: home, watcher: watcher, events: EventBus(), config: ConfigHolder(config), logger: Logger(sink: MemorySink()))
        await machine.reload()
        return (machine, home, watcher)
    }

    @Test("with only manual accounts the watcher is given no beacons, and a pinned transition sends nothing")
    func manual() async throws {
        // The machine is held: the watcher's handler holds it only weakly.
        let (machine, home, watcher) = await Self.machine([Self.account("acc_a", mode: "auto", precise: "manual")])
        #expect(watcher.hotspots.map(\.id) == ["hs_office"] && watcher.hotspots.first?.beacons == nil)
        await watcher.send(.entered)
        await watcher.send(.pinned, point: Self.desk)
        #expect(home.reports == [.init(account: "acc_a", hotspot: "hs_office", entered: true, group: nil)])
        withExtendedLifetime(machine) {}
    }

    @Test("auto: the point goes with entered to the beacon account only; a manual account sharing the hotspot gets none")
    func auto() async throws {
        let (machine, home, watcher) = await Self.machine([Self.account("acc_a", mode: "auto", precise: "beacon"),
                                                     Self.account("acc_m", mode: "auto", precise: "manual")])
        #expect(watcher.hotspots.first?.beacons?.count == 1, "one account wants the beacons")
        await watcher.send(.entered)
        await watcher.send(.pinned, point: Self.desk)
        #expect(home.reports.filter { $0.account == "acc_m" }.allSatisfy { $0.pinned == nil })
        #expect(home.reports.filter { $0.account == "acc_a" } == [
            .init(account: "acc_a", hotspot: "hs_office", entered: true, group: nil),
            .init(account: "acc_a", hotspot: "hs_office", entered: true, group: nil, pinned: Self.desk),
        ])
        #expect(home.reports.count == 3)
        withExtendedLifetime(machine) {}
    }

    @Test("ask: nothing goes out while the question is open; the answer carries the point; later points follow")
    func ask() async throws {
        let (machine, home, watcher) = await Self.machine([Self.account("acc_a", mode: "ask", precise: "beacon")])
        await watcher.send(.entered)
        await watcher.send(.pinned, point: Self.desk)
        #expect(home.reports.isEmpty, "nothing before the answer")
        #expect(try await machine.answer(account: "acc_a", hotspot: "hs_office", group: "friends") == 1)
        await watcher.send(.pinned, point: Self.kitchen)
        #expect(home.reports == [.init(account: "acc_a", hotspot: "hs_office", entered: true, group: "friends", pinned: Self.desk),
                                 .init(account: "acc_a", hotspot: "hs_office", entered: true, group: nil, pinned: Self.kitchen)])
    }

    @Test("ask: a place the person told a group is told again at each refresh, so the home keeps it; a question declined or open is not")
    func askRefresh() async throws {
        let (machine, home, watcher) = await Self.machine([Self.account("acc_a", mode: "ask", precise: "manual")])
        await watcher.send(.entered)
        await machine.tellAgain()
        #expect(home.reports.isEmpty, "the question is open")
        _ = try await machine.answer(account: "acc_a", hotspot: "hs_office", group: "friends")
        await machine.tellAgain()
        #expect(home.reports == [.init(account: "acc_a", hotspot: "hs_office", entered: true, group: "friends"),
                                 .init(account: "acc_a", hotspot: "hs_office", entered: true, group: nil)])
        await watcher.send(.left)
        await watcher.send(.entered)
        _ = try await machine.answer(account: "acc_a", hotspot: "hs_office", group: nil)  // declined
        let before = home.reports.count
        await machine.tellAgain()
        #expect(home.reports.count == before, "a declined stay is not told")
    }
}
