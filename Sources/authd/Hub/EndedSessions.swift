import FoundationEssentials
import Protocol

extension HubState {
    /// At the hub, after a call ended sessions (a device removed, a session revoked, a logout,
    /// `replace_oldest`, a deactivation): tells each linked machine that held one which of its
    /// sessions ended and why, over its link, at once. A machine left without any session of any
    /// account is unlinked: its link is closed once what it asked is answered, and its
    /// certificate may only sign in again.
    func tell(_ ended: [EndedSession], connections: ConnectionRegistry, now: Date, logger: Logger) {
        guard role == .hub else { return }
        let byMachine = Dictionary(grouping: ended.compactMap { session in
            DeviceIdentity.machine(ofKey: session.deviceKey).map { (machine: DeviceID(description: $0), session: session) }
        }, by: \.machine)
        guard !byMachine.isEmpty else { return }
        let links = connections.connections(of: Set(byMachine.keys))
        for (machine, sessions) in byMachine {
            let unlinked = sessions.contains { $0.session.machineUnlinked }
            let cause = sessions[0].session.cause
            let params = LinkSessionsEnded.Params(
                sessions: sessions.map { LinkSessionsEnded.EndedSession(id: $0.session.id, account: $0.session.account, uid: $0.session.machineUser) },
                cause: cause.rawValue, unlinked: unlinked, at: Timestamp.rfc3339(now))
            guard let line = try? WireCodec.notificationLine(method: LinkSessionsEnded.name, params: params) else { continue }
            let linked = links[machine] ?? []
            for connection in linked {
                connection.enqueue(line)
                if unlinked { connection.closeWhenAnswered() }
            }
            logger.info("hub: \(sessions.count) session(s) of device \(machine) ended (\(cause.rawValue))"
                        + (unlinked ? "; it holds none now, its link is closed" : "") + (linked.isEmpty ? "; it is not connected" : ""),
                        [("AUTHD_CALLER_DEVICE", machine.description)])
        }
    }
}

extension HubState {
    /// At a hub replica: what another replica committed, as read back from the log. Its
    /// `session.ended` events (authd's own kind, which no app can send) name the sessions it
    /// ended; it told the machines linked to it, and the machines linked here that held one are
    /// told now, as `tell` tells them. Who held each, and whether its machine holds any session
    /// left, is read again from the store: the event names only the session, the cause and the
    /// machine.
    func tellEndedElsewhere(_ events: [(account: String, event: SyncEvent)], directory: any LinkedMachines, connections: ConnectionRegistry,
                            now: Date, logger: Logger) async {
        guard role == .hub else { return }
        let named = events.compactMap { _, event -> (id: String, cause: EndedSession.Cause, machine: DeviceID)? in
            guard event.kind == "session.ended", case .object(let body) = event.body, case .string(let id)? = body["session"],
                  case .string(let cause)? = body["cause"], let cause = EndedSession.Cause(rawValue: cause), case .string(let machine)? = body["device_id"]
            else { return nil }
            return (id, cause, DeviceID(description: machine))
        }
        guard !named.isEmpty else { return }
        let here = connections.connections(of: Set(named.map(\.machine))).filter { !$0.value.isEmpty }
        let ended = named.filter { here[$0.machine] != nil }
        guard !ended.isEmpty else { return }
        do {
            // One notice per cause: what one read brings may be several changes (a logout, then a removal).
            let read = try await directory.endedSessions(ended.map { ($0.id, $0.cause) })
            for sessions in Dictionary(grouping: read, by: \.cause).values { tell(sessions, connections: connections, now: now, logger: logger) }
        } catch {
            logger.warning("hub: cannot read the \(ended.count) session(s) another replica ended; their machines learn of it at their next call: \(error)")
        }
    }
}

extension EventBus {
    /// On a device: the hub said sessions of this machine ended. Each local user who signed one
    /// in hears it as a `session.ended` event on their `events.subscribe` streams (no other user
    /// does); their next account call answers `session.invalid` or `device.revoked`.
    func hear(_ ended: LinkSessionsEnded.Params) {
        for session in ended.sessions {
            guard let uid = session.uid else { continue }
            publish(Event(type: "session.ended", ended: SessionEndedEvent(account: session.account, session: session.id, cause: ended.cause,
                                                                           machineUnlinked: ended.unlinked, at: ended.at)), to: uid)
        }
    }
}
