// Presence/ — friends, groups, hotspots and presence (DESIGN §11). Where the account lives
// (a hub, or a standalone authd): PresenceBook keeps friends, groups, hotspots and where people
// are, PresenceService checks and serves the account methods, and the machines of the account
// report over their links (`link.presence.*`). On the machine: LocationSensors (GeoClue2,
// NetworkManager), HotspotTracker (enter/leave, pure) and PresenceMonitor. Errors:
// PresenceFailure.

import Protocol

extension MethodTable {
    /// The account methods, served where the account lives (a device forwards them).
    mutating func registerPresenceMethods(_ service: PresenceService) {
        announce("presence")
        register(FriendsAdd.self, home: .account, access: .anyone, audit: { _, result in ["added": .bool(result.added)] }) { params, context in
            try await service.on(behalfOf: context.caller).addFriend(params)
        }
        register(FriendsList.self, home: .account, access: .anyone) { params, context in try await service.on(behalfOf: context.caller).friends(params) }
        register(FriendsRemove.self, home: .account, access: .anyone, audit: { _, _ in [:] }) { params, context in try await service.on(behalfOf: context.caller).removeFriend(params) }
        register(FriendsBlock.self, home: .account, access: .anyone, audit: { _, _ in [:] }) { params, context in try await service.on(behalfOf: context.caller).block(params) }

        register(GroupsList.self, home: .account, access: .anyone) { params, context in try await service.on(behalfOf: context.caller).groups(params) }
        register(GroupsCreate.self, home: .account, access: .anyone, audit: { _, _ in [:] }) { params, context in try await service.on(behalfOf: context.caller).createGroup(params) }
        register(GroupsRename.self, home: .account, access: .anyone, audit: { _, _ in [:] }) { params, context in try await service.on(behalfOf: context.caller).renameGroup(params) }
        register(GroupsDelete.self, home: .account, access: .anyone, audit: { _, _ in [:] }) { params, context in try await service.on(behalfOf: context.caller).deleteGroup(params) }
        register(GroupsAdd.self, home: .account, access: .anyone, audit: { _, _ in [:] }) { params, context in try await service.on(behalfOf: context.caller).setMember(params, member: true) }
        register(GroupsRemove.self, home: .account, access: .anyone, audit: { _, _ in [:] }) { params, context in
            try await service.on(behalfOf: context.caller).setMember(params, member: false)
        }

        register(PresenceSettings.self, home: .account, access: .anyone, audit: { _, _ in [:] }) { params, context in try await service.on(behalfOf: context.caller).settings(params) }
        register(PresenceOn.self, home: .account, access: .anyone, audit: { _, _ in [:] }) { params, context in try await service.on(behalfOf: context.caller).setEnabled(params, true) }
        register(PresenceOff.self, home: .account, access: .anyone, audit: { _, _ in [:] }) { params, context in try await service.on(behalfOf: context.caller).setEnabled(params, false) }
        register(PresenceStatus.self, home: .account, access: .anyone) { params, context in try await service.on(behalfOf: context.caller).status(params) }
        register(PresenceNearby.self, home: .account, access: .anyone) { params, context in try await service.on(behalfOf: context.caller).nearby(params) }
        register(PresenceAudience.self, home: .account, access: .anyone) { params, context in try await service.on(behalfOf: context.caller).audience(params) }
        register(PresencePin.self, home: .account, access: .anyone, audit: { _, _ in [:] }) { params, context in try await service.on(behalfOf: context.caller).pin(params) }

        register(HotspotsList.self, home: .account, access: .anyone) { params, context in try await service.on(behalfOf: context.caller).hotspots(params) }
        register(HotspotsAdd.self, home: .account, access: .anyone, audit: { _, result in ["hotspot": .string(result.hotspot.id)] }) { params, context in
            try await service.on(behalfOf: context.caller).addHotspot(session: params.session, HotspotDefinition(name: params.name, circle: params.circle, bssids: params.bssids,
                                                                                     beacons: params.beacons))
        }
        register(HotspotsRemove.self, home: .account, access: .anyone, audit: { params, context in ["hotspot": .string(params.id)] }) { params, context in
            try await service.on(behalfOf: context.caller).removeHotspot(session: params.session, id: params.id)
        }
        register(AdminHotspotsList.self, home: .account, access: .admin) { _, _ in HotspotsList.Result(hotspots: try await service.book.hotspots(of: nil)) }
        register(AdminHotspotsAdd.self, home: .account, access: .admin, audit: { _, result in ["hotspot": .string(result.hotspot.id)] }) { params, _ in
            try await service.addHotspot(session: nil, params)
        }
        register(AdminHotspotsRemove.self, home: .account, access: .admin, audit: { params, _ in ["hotspot": .string(params.id)] }) { params, _ in
            try await service.removeHotspot(session: nil, id: params.id)
        }
    }

    /// On the machine: the person's answer to a question (ask mode), and where the machine stands.
    mutating func registerMachinePresenceMethods(_ machine: MachinePresence, directory: any MachineAccounts) {
        register(PresenceAnswer.self, home: .machine, access: .anyone, audit: { _, result in ["told": .integer(Int64(result.told))] }) { params, context in
            let account = try await directory.authenticate(context.session(params.session)).accountID
            if let group = params.group { try PresenceService.checkName(group, field: "group") }
            return LinkPresenceReport.Result(told: try await machine.answer(account: account, hotspot: params.hotspot, group: params.group))
        }
        register(PresenceMachine.self, home: .machine, access: .anyone) { params, context in
            await machine.state(of: try await directory.authenticate(context.session(params.session)).accountID)
        }
    }

    /// At a hub: what the machines of an account ask for it (only for accounts they hold a live
    /// session of). A report that changes where the person is writes to every friend's log, so
    /// each report is a write of its machine (`limiter`, `[sync] machine_writes_per_minute`),
    /// refused with `rate.limited` before anything is written.
    mutating func registerLinkPresenceMethods(_ book: PresenceBook, directory: any LinkedMachines, limiter: SyncWriteLimiter) {
        register(LinkPresenceReport.self, home: .link, access: .anyone, audit: { _, result in ["told": .integer(Int64(result.told))] }) { params, machine in
            try await directory.requireLiveSession(on: machine, of: params.account)
            try limiter.take(.device(machine))
            return LinkPresenceReport.Result(told: try await book.report(params.account, hotspot: params.hotspot, entered: params.entered, group: params.group,
                                                                             pinned: params.pinned))
        }
        register(LinkPresenceAccounts.self, home: .link, access: .anyone) { _, machine in
            try await book.machineAccounts(directory.accounts(heldBy: machine))
        }
    }
}
