import FoundationEssentials

// The machine's identity and its place among machines (DESIGN §8): standalone, hub or device.

/// A device id as people read and compare it: SHA-256 of the device key's
/// SubjectPublicKeyInfo, base32 (RFC 4648, no padding) in thirteen groups of four.
public enum DeviceIDText {
    public static func of(keySHA256 digest: [UInt8]) -> String {
        let text = Array(Base32.encode(digest))
        return stride(from: 0, to: text.count, by: 4).map { String(text[$0..<min($0 + 4, text.count)]) }.joined(separator: "-")
    }
}

/// `device.id`: this machine's device id, the one its hub shows, so a person can compare them.
public enum DeviceIdentify: RPCMethod {
    public static let name = "device.id"
    public typealias Params = NoParams

    public struct Result: Codable, Sendable, Equatable {
        /// SHA-256 of the device key's SubjectPublicKeyInfo, base32 in groups of four.
        public var deviceID: String
        /// The machine's name (`device.name`, else its host name), as device lists show it.
        public var name: String

        public init(deviceID: String, name: String) {
            self.deviceID = deviceID
            self.name = name
        }

        enum CodingKeys: String, CodingKey {
            case deviceID = "device_id", name
        }
    }
}

/// `device.name`: names this machine in its account's device lists (and at its hub) from the
/// next sign-in on; the host name until then. Admins only.
public enum DeviceName: RPCMethod {
    public static let name = "device.name"

    public struct Params: Codable, Sendable, Equatable {
        /// 1–64 printable characters.
        public var name: String

        public init(name: String) { self.name = name }
    }

    public typealias Result = DeviceIdentify.Result
}

/// `hub.status`: the machine's role and, for a device, its link to the hub; for a hub, the
/// devices connected.
public enum HubStatus: RPCMethod {
    public static let name = "hub.status"
    public typealias Params = NoParams

    public struct Result: Codable, Sendable, Equatable {
        /// `standalone`, `hub` or `device`.
        public var role: String
        public var deviceID: String
        /// A device's link; absent otherwise.
        public var link: Link?
        /// A hub's listener; absent otherwise.
        public var hub: Hub?

        public init(role: String, deviceID: String, link: Link? = nil, hub: Hub? = nil) {
            self.role = role
            self.deviceID = deviceID
            self.link = link
            self.hub = hub
        }

        enum CodingKeys: String, CodingKey {
            case role, deviceID = "device_id", link, hub
        }
    }

    public struct Link: Codable, Sendable, Equatable {
        /// The hub's address `state` is about, `HOST:PORT`: the one the link is on (connected),
        /// the one being tried (connecting), or the one whose attempt failed last (otherwise).
        public var url: String
        /// `connected`, `connecting`, `unreachable` or `untrusted`.
        public var state: String
        /// RFC 3339: since when connected (state `connected`) or not (otherwise).
        public var since: String
        /// The last heartbeat's round trip, in milliseconds, while connected.
        public var roundTripMs: Double?
        /// Why the link went down or could not come up, in words: the failure at `url`.
        public var lastError: String?
        /// Every address of the hub the device is configured with, in the order the link tries
        /// them (the first is the preferred one); `url` is one of them.
        public var urls: [String]?

        public init(url: String, state: String, since: String, roundTripMs: Double? = nil, lastError: String? = nil, urls: [String]? = nil) {
            self.url = url
            self.state = state
            self.since = since
            self.roundTripMs = roundTripMs
            self.lastError = lastError
            self.urls = urls
        }

        enum CodingKeys: String, CodingKey {
            case url, state, since, roundTripMs = "round_trip_ms", lastError = "last_error", urls
        }
    }

    public struct Hub: Codable, Sendable, Equatable {
        /// The address it listens on, `HOST:PORT` (the port the kernel chose for port 0).
        public var listen: String
        /// Connections of other machines, newcomers included.
        public var devicesConnected: Int
        /// Of those, connections of machines that hold no session here (they may only sign in).
        public var newcomersConnected: Int?

        public init(listen: String, devicesConnected: Int, newcomersConnected: Int? = nil) {
            self.listen = listen
            self.devicesConnected = devicesConnected
            self.newcomersConnected = newcomersConnected
        }

        enum CodingKeys: String, CodingKey {
            case listen, devicesConnected = "devices_connected", newcomersConnected = "newcomers_connected"
        }
    }
}

/// `link.forward`, on a device's link only: an account method called by a process on the
/// device, with who called it there (for the hub's audit and the token's `azp`). The result or
/// error is the method's own.
public enum LinkForward: RPCMethod {
    public static let name = "link.forward"

    public struct Params: Codable, Sendable, Equatable {
        public var method: String
        /// As the caller wrote them (see ``RawJSON``).
        public var params: RawJSON?
        public var caller: ForwardedCaller

        public init(method: String, params: RawJSON?, caller: ForwardedCaller) {
            self.method = method
            self.params = params
            self.caller = caller
        }

        enum CodingKeys: String, CodingKey { case caller, method, params }
    }

    public typealias Result = RawJSON
}

// Every account method a device serves goes to its hub in one of these: they write their own
// members (as a pushed event does); `encode(to:)` stays the reference.

extension LinkForward.Params: CompactJSON.Writable {
    public func write(to object: inout CompactJSON.Object) {
        object.member(CodingKeys.caller, caller)
        object.member(CodingKeys.method, method)
        object.member(CodingKeys.params, params)
    }
}

extension ForwardedCaller: CompactJSON.Writable {
    public func write(to object: inout CompactJSON.Object) {
        object.member(CodingKeys.exe, exe)
        object.member(CodingKeys.fingerprintAccounts, fingerprintAccounts)
        object.member(CodingKeys.machine, machine)
        object.member(CodingKeys.uid, uid)
        object.member(CodingKeys.username, username)
    }
}

/// A process on a device, as its authd saw it, and the device's name for people.
///
/// A hub takes one only as large as a real process and machine can make it (``check()``):
/// what it says is kept (`exe` in the account's sync log, as the sender of what the process
/// writes) and sent again inside lines to every machine of the account, which must stay within
/// the 1 MiB a link carries.
public struct ForwardedCaller: Codable, Sendable, Equatable {
    public var uid: UInt32
    /// At most ``maxUsernameBytes``, no control characters.
    public var username: String?
    /// At most ``maxExeBytes``, no control characters.
    public var exe: String?
    /// The machine's name (its host name), which the account's device list shows. At most
    /// ``maxMachineBytes``, no control characters.
    public var machine: String?
    /// With a password sign-in: the accounts whose second step is a finger on this machine
    /// (the finger is scanned there). The hub takes it only for accounts the machine is signed
    /// in to already.
    public var fingerprintAccounts: [String]?

    /// The longest `exe`, in UTF-8 bytes: PATH_MAX, the longest path the kernel names a
    /// program by.
    public static let maxExeBytes = 4096
    /// The longest `username`, in UTF-8 bytes (LOGIN_NAME_MAX is 256 with its NUL).
    public static let maxUsernameBytes = 256
    /// The longest `machine`, in UTF-8 bytes (a DNS name is at most 253).
    public static let maxMachineBytes = 255

    public init(uid: UInt32, username: String?, exe: String?, machine: String?, fingerprintAccounts: [String]? = nil) {
        self.uid = uid
        self.username = username
        self.exe = exe
        self.machine = machine
        self.fingerprintAccounts = fingerprintAccounts
    }

    enum CodingKeys: String, CodingKey {
        case uid, username, exe, machine, fingerprintAccounts = "fingerprint_accounts"
    }

    /// Whether `value` may stand in a field of at most `maxBytes`: no longer in UTF-8, and
    /// with no control character (C0, DEL or C1), which would let it forge a line of a log.
    public static func fits(_ value: String, maxBytes: Int) -> Bool {
        value.utf8.count <= maxBytes && !value.containsControlCharacter
    }

    /// Refuses a caller no process could be, naming the field (`caller.exe`,
    /// `caller.username` or `caller.machine`).
    public func check() throws(RPCError) {
        for (field, value, maxBytes) in [("exe", exe, Self.maxExeBytes), ("username", username, Self.maxUsernameBytes),
                                         ("machine", machine, Self.maxMachineBytes)] {
            guard let value, !Self.fits(value, maxBytes: maxBytes) else { continue }
            throw .invalidParams("Parameter 'caller.\(field)' must be at most \(maxBytes) bytes with no control characters.", field: "caller.\(field)")
        }
    }
}

/// `link.ping`, on a device's link only: the heartbeat that tells both ends the link is alive
/// (and measures its round trip). The hub answers with its idle timeout, so the device's
/// heartbeats come often enough to keep a quiet link open.
public enum LinkPing: RPCMethod {
    public static let name = "link.ping"
    public typealias Params = NoParams

    public struct Result: Codable, Sendable, Equatable {
        public var ok = true
        /// Seconds: the hub closes a connection that sends nothing for between one and two of these.
        public var idleTimeout: Int?

        public init(idleTimeout: Int?) { self.idleTimeout = idleTimeout }

        enum CodingKeys: String, CodingKey { case ok, idleTimeout = "idle_timeout" }
    }
}

/// `link.jwks`, on a device's link only: the hub's published keys and the issuer of its account
/// tokens, which a device adds to its own `keys.jwks` and uses in `token.verify`.
public enum LinkJWKS: RPCMethod {
    public static let name = "link.jwks"
    public typealias Params = NoParams

    public struct Result: Codable, Sendable, Equatable {
        public var issuer: String
        public var keys: [JWK]

        public init(issuer: String, keys: [JWK]) {
            self.issuer = issuer
            self.keys = keys
        }
    }
}

/// `link.sessions_ended`, a notification from the hub on a device's link: sessions bound to that
/// machine ended by someone else's hand (or its own), and why. With `unlinked` the machine holds no
/// session of any account any more and the hub closes the link after this line; the device's
/// certificate may then only sign in again.
public enum LinkSessionsEnded: RPCNotification {
    public static let name = "link.sessions_ended"

    public struct Params: Codable, Sendable, Equatable {
        public var sessions: [EndedSession]
        /// `device.revoke`, `session.revoke`, `logout`, `replace_oldest`, `account.deactivated`
        /// or `provider.logout`.
        public var cause: String
        public var unlinked: Bool
        /// RFC 3339.
        public var at: String

        public init(sessions: [EndedSession], cause: String, unlinked: Bool, at: String) {
            self.sessions = sessions
            self.cause = cause
            self.unlinked = unlinked
            self.at = at
        }
    }

    /// One ended session, with the local user of the machine who signed it in (when known).
    public struct EndedSession: Codable, Sendable, Equatable {
        public var id: String
        public var account: String
        public var uid: UInt32?

        public init(id: String, account: String, uid: UInt32?) {
            self.id = id
            self.account = account
            self.uid = uid
        }
    }
}

/// What an `event` of type `session.ended` carries: a session this machine held for the local
/// user was ended at the hub (by another machine, an admin, the device limit, or a logout).
public struct SessionEndedEvent: Codable, Sendable, Equatable {
    public var account: String
    public var session: String
    /// As `link.sessions_ended` says it: `device.revoke`, `session.revoke`, `logout`,
    /// `replace_oldest`, `account.deactivated`, `provider.logout`.
    public var cause: String
    /// True when this machine holds no session at the hub any more (it was removed, or signed
    /// out of its last account): account methods need a new sign-in.
    public var machineUnlinked: Bool
    /// RFC 3339.
    public var at: String

    public init(account: String, session: String, cause: String, machineUnlinked: Bool, at: String) {
        self.account = account
        self.session = session
        self.cause = cause
        self.machineUnlinked = machineUnlinked
        self.at = at
    }

    enum CodingKeys: String, CodingKey { case account, session, cause, machineUnlinked = "machine_unlinked", at }
}
