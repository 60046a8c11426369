import FoundationEssentials
import Protocol

/// On a device: a subscriber reads the account's log at the hub, as the local process that
/// subscribed (the hub checks the session is this machine's, as for any forwarded call).
struct HubSyncSource: SyncSource {
    let link: HubLink
    /// This machine's name, which the hub shows for what it sends.
    let machineName: String

    func events(_ params: SyncEvents.Params, for caller: CallerIdentity) async throws -> SyncEvents.Result {
        let forwarded = LinkForward.Params(method: SyncEvents.name, params: try WireCodec.decode(JSONValue.self, from: WireCodec.encodeJSON(params)),
                                           caller: ForwardedCaller(uid: caller.uid, username: caller.username, exe: caller.exe, machine: machineName))
        let answer = try await link.call(LinkForward.name, forwarded).get()
        return try WireCodec.decode(SyncEvents.Result.self, from: answer)
    }

    func isTransient(_ error: any Error) -> Bool { error is HubLinkFailure }
}

extension HubState {
    /// At a hub: sends a committed event to every linked machine that holds a live session of
    /// its account, over their links, at once.
    func push(_ event: SyncEvent, account: String, directory: any AccountDirectory, connections: ConnectionRegistry) async {
        guard role == .hub, let machines = try? await directory.linkedMachines(of: account), !machines.isEmpty,
              let line = try? WireCodec.notificationLine(method: LinkSyncEvent.name, params: LinkSyncEvent.Params(account: account, event: event))
        else { return }
        let linked = Set(machines)
        for connection in connections.all {
            if case .device(let machine) = connection.caller, linked.contains(machine) { connection.enqueue(line) }
        }
    }
}
