import Protocol

/// In a system authd with `[sync] desktop_notifications = yes`: each `notification` and `dismiss`
/// event goes to the local users who hold a live session of its account on this machine (the hub
/// names them for what it pushes; a hub's or a standalone authd's own directory knows its own),
/// as `sync.notification` and `sync.dismiss` on their `events.subscribe` streams, where their
/// `authd --desktop` shows it. No other user hears of it.
struct DesktopDelivery: Sendable {
    /// The accounts' home, to ask who holds a session of an event's account; nil on a device,
    /// whose hub names the users with each event it pushes.
    let directory: (any LinkedMachines)?
    let events: EventBus
    let logger: Logger

    func start(sync: SyncBus, config: ConfigHolder) {
        let observed = sync.observe { config.current.syncDesktopNotifications && DesktopNotifications.kinds.contains($0.event.kind) }
        Task { [self] in
            for await item in observed {
                await deliver(item)
            }
        }
    }

    private func deliver(_ item: SyncBus.Observed) async {
        var users = item.users
        if users == nil {
            guard let directory else {
                logger.warning("sync: cannot tell whose desktop shows an event of account \(item.account): its hub did not say")
                return
            }
            do {
                users = try await directory.sessionHolders(of: [item.account])[item.account, default: []].filter { $0.machine == nil }.compactMap(\.user)
            } catch {
                logger.warning("sync: cannot tell whose desktop shows an event of account \(item.account): \(error)")
                return
            }
        }
        let event = EventBus.Event(type: "sync." + item.event.kind, sync: SyncDesktopEvent(account: item.account, event: item.event))
        for uid in Set(users ?? []) { await events.publish(event, to: uid) }
    }
}
