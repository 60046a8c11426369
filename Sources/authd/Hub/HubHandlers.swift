import FoundationEssentials
import Protocol

extension MethodTable {
    /// The machine's identity and role, and the link's heartbeat at the hub.
    mutating func registerHubMethods(_ services: Services) {
        announce("device.id", "hub")
        let hub = services.hub
        register(DeviceIdentify.self, home: .machine, access: .anyone) { _, _ in
            DeviceIdentify.Result(deviceID: hub.identity.id.description, name: hub.identity.name)
        }
        register(HubStatus.self, home: .machine, access: .anyone) { _, _ in
            var result = HubStatus.Result(role: hub.role.rawValue, deviceID: hub.identity.id.description)
            if let link = hub.link {
                let status = link.currentStatus
                result.link = HubStatus.Link(url: link.url.description, state: status.state.rawValue, since: Timestamp.rfc3339(status.since),
                                             roundTripMs: status.roundTripMs, lastError: status.lastError)
            }
            if hub.role == .hub, let address = hub.listenAddress {
                result.hub = HubStatus.Hub(listen: address.description, devicesConnected: services.connections.deviceCount)
            }
            return result
        }
        register(LinkPing.self, home: .link, access: .anyone) { _, _ in Acknowledged() }
    }
}
