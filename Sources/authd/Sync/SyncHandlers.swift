import Protocol

extension MethodTable {
    /// The account's log (account methods, served where the account lives) and this machine's
    /// stream of it (`sync.subscribe`). On a device (`hub` set) the events an app reads or
    /// follows come through the hub's log, their sealed bodies opened here (``SyncCipher``), and
    /// `sync.send` is the machine's: through its `outbox`, which forwards it or keeps it while
    /// the hub is away.
    mutating func registerSyncMethods(_ service: SyncService, hub: HubSyncSource?, bus: SyncBus, outbox: SyncOutbox?) {
        announce("sync")
        let source: any SyncSource = hub ?? LocalSyncSource(service: service)
        if let outbox {
            register(SyncSend.self, home: .machine, access: .anyone) { params, context in try await outbox.send(params, caller: context.caller) }
        } else {
            register(SyncSend.self, home: .account, access: .anyone) { params, context in try await service.send(params, caller: context.caller) }
        }
        if let hub {
            register(SyncEvents.self, home: .machine, access: .anyone) { params, context in try await hub.events(params, for: context.caller) }
            register(SyncHistory.self, home: .machine, access: .anyone) { params, context in try await hub.history(params, for: context.caller) }
        } else {
            register(SyncEvents.self, home: .account, access: .anyone) { params, context in try await service.events(params, caller: context.caller) }
            register(SyncHistory.self, home: .account, access: .anyone) { params, context in try await service.history(params, caller: context.caller) }
        }
        register(SyncRead.self, home: .account, access: .anyone) { params, context in try await service.read(params, caller: context.caller) }
        register(SyncUnread.self, home: .account, access: .anyone) { params, context in try await service.unread(params, caller: context.caller) }
        register(SyncDismiss.self, home: .account, access: .anyone) { params, context in try await service.dismiss(params, caller: context.caller) }

        register(SyncSubscribe.self, home: .machine, access: .anyone) { params, context in
            for kind in params.kinds ?? [] where !SyncService.allKinds.contains(kind) {
                throw InvalidParameter("Parameter 'kinds' may hold \(SyncService.allKinds.sorted().joined(separator: ", ")).", field: "kinds")
            }
            if let conversation = params.conversation { try SyncService.checkName(conversation, field: "conversation") }
            if let since = params.since, since < 0 { throw InvalidParameter("Parameter 'since' must be 0 or more.", field: "since") }
            // Who the session is, and where the log stands, before the first hint can arrive.
            let opening = try await source.events(SyncEvents.Params(session: params.session, after: .max, limit: 1), for: context.caller)
            let follower = SyncFollower(source: source, caller: context.caller, session: params.session, kinds: params.kinds.map(Set.init),
                                        conversation: params.conversation)
            let (id, signals) = bus.subscribe(account: opening.account)
            do {
                let subscription = try context.streams.open(onDrop: { bus.unsubscribe(id) }) { sink in
                    await follower.run(after: params.since ?? opening.head, signals: signals, sink: sink)
                    bus.unsubscribe(id)
                }
                return SyncSubscribe.Result(subscription: subscription, account: opening.account, head: opening.head)
            } catch {
                bus.unsubscribe(id)
                throw error
            }
        }
    }
}
