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
        register(DeviceName.self, home: .machine, access: .admin, audit: { params, _ in ["name": .string(params.name)] }) { params, _ in
            DeviceIdentify.Result(deviceID: hub.identity.id.description, name: try await MachineName.set(params.name, store: services.store))
        }
        register(HubStatus.self, home: .machine, access: .anyone) { _, _ in 
            hub.status(devicesConnected: services.connections.deviceCount, newcomersConnected: services.connections.newcomerCount)
        }
        register(LinkPing.self, home: .link, access: .anyone) { _, _ in LinkPing.Result(idleTimeout: services.config.current.idleTimeoutSeconds) }
        register(LinkJWKS.self, home: .link, access: .anyone) { _, _ in
            LinkJWKS.Result(issuer: services.config.current.tokenIssuer, keys: services.keys.jwks(now: services.now()).keys)
        }
    }
}
