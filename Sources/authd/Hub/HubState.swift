// Hub/ — one account on many machines (DESIGN §8): the machine's identity (its device key and
// certificate), `[hub]` roles, the hub's TLS port serving devices through the same Connection
// as the Unix socket, and a device's link that forwards account methods to its hub. libssl is
// reached only through OpenSSLCrypto's TLS.swift.

import Protocol
import Synchronization

/// What `[hub]` made this authd at start, for the dispatcher and `hub.status`.
final class HubState: Sendable {
    let role: Config.Role
    let identity: MachineIdentity
    /// A device's link to its hub; nil for a hub or a standalone authd.
    let link: HubLink?
    private let listening = Mutex<HostPort?>(nil)

    init(role: Config.Role, identity: MachineIdentity, link: HubLink?) {
        self.role = role
        self.identity = identity
        self.link = link
    }

    /// A hub's port, once bound (port 0 in the config becomes the kernel's choice here).
    var listenAddress: HostPort? {
        get { listening.withLock { $0 } }
        set { listening.withLock { $0 = newValue } }
    }

    /// What `hub.status` and `admin.status` report.
    func status(devicesConnected: Int, newcomersConnected: Int = 0) -> HubStatus.Result {
        var result = HubStatus.Result(role: role.rawValue, deviceID: identity.id.description)
        if let link {
            let status = link.currentStatus
            result.link = HubStatus.Link(url: status.url.description, state: status.state.rawValue, since: Timestamp.rfc3339(status.since),
                                         roundTripMs: status.roundTripMs, lastError: status.lastError,
                                         urls: link.addresses.map(\.description))
        }
        if role == .hub, let address = listenAddress {
            result.hub = HubStatus.Hub(listen: address.description, devicesConnected: devicesConnected, newcomersConnected: newcomersConnected)
        }
        return result
    }
}

/// The hub's published keys and issuer as this device last fetched them over its link:
/// `keys.jwks` on a device publishes them beside the machine's own, so a relying party verifies
/// both the hub's account tokens and this machine's `auth.local` tokens with one set, and
/// `token.verify` on a device verifies both. While the hub is away, the last set fetched is kept.
final class HubKeys: Sendable {
    struct Published: Sendable {
        let issuer: String
        let jwks: [JWK]
        /// The same keys, ready to verify with.
        let keys: IDTokenValidator.KeySet
    }

    private let link: HubLink
    private let cached = Mutex<Published?>(nil)

    init(link: HubLink) { self.link = link }

    /// The keys last fetched when they hold `kid`; otherwise fetched again first (the hub may
    /// have rotated). A token's check then costs no round trip to the hub.
    func published(with kid: String) async -> Published? {
        if let known = cached.withLock({ $0 }), known.jwks.contains(where: { $0.kid == kid }) { return known }
        return await published()
    }

    /// Fetches the hub's keys when it can be reached; the last ones fetched otherwise (nil: never).
    func published() async -> Published? {
        if case .success(let value)? = try? await link.call(LinkJWKS.name, NoParams()),
           let result = try? value.decode(LinkJWKS.Result.self) {
            let fetched = Published(issuer: result.issuer, jwks: result.keys, keys: IDTokenValidator.KeySet.parse(value.value))
            cached.withLock { $0 = fetched }
        }
        return cached.withLock { $0 }
    }
}
