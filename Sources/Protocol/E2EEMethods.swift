// End-to-end encrypted sync (DESIGN §13): each machine's key-agreement key, signed by its device
// key and published at the hub, and the account's setting. The hub relays what it cannot read.

extension Reason {
    /// At a hub: a `message` or `notification` in plain text for an account whose sync is end-to-end
    /// encrypted (`e2ee` required). Send it from a device linked to the hub, which encrypts it.
    public static let syncE2EERequired = Reason("sync.e2ee_required")
    /// At a hub: an encrypted event whose recipients are not the account's devices as they are
    /// now (a device was linked or removed meanwhile), or an account whose sync is not
    /// encrypted. The device reads the account's keys again and encrypts anew.
    public static let syncRecipientsChanged = Reason("sync.recipients_changed")
}

/// Whether an account's messages and notifications are end-to-end encrypted between its devices.
public enum E2EEMode: String, Codable, Sendable, CaseIterable {
    /// Devices encrypt every `message` and `notification`; the hub refuses them in plain text.
    case required
    /// Bodies travel and are kept in plain text at the hub.
    case off
}

/// `link.e2ee.publish` — a device tells its hub its key-agreement key: `statement` is a compact
/// JWS by the device key (`spki`, whose SHA-256 is the device id the link authenticated) over the
/// public key as a JWK.
public enum LinkE2EEPublish: RPCMethod {
    public static let name = "link.e2ee.publish"

    public struct Params: Codable, Sendable, Equatable {
        /// The device key's SubjectPublicKeyInfo, base64url.
        public var spki: String
        public var statement: String

        public init(spki: String, statement: String) {
            self.spki = spki
            self.statement = statement
        }
    }

    public typealias Result = Acknowledged
}

/// `link.e2ee.keys` — an account's devices and their published keys, for a machine that holds a
/// live session of it: whom to encrypt to, and whose signatures to accept. The machine checks
/// each statement against its device id itself; the hub's word is only which devices there are.
public enum LinkE2EEKeys: RPCMethod {
    public static let name = "link.e2ee.keys"

    public struct Params: Codable, Sendable, Equatable {
        public var account: String
        public init(account: String) { self.account = account }
    }

    public struct Device: Codable, Sendable, Equatable {
        public var deviceID: String
        public var name: String
        /// The device key's SubjectPublicKeyInfo, base64url.
        public var spki: String
        public var statement: String
        /// Removed from the account: no longer a recipient, still the signer of what it sent before.
        public var revoked: Bool

        public init(deviceID: String, name: String, spki: String, statement: String, revoked: Bool) {
            self.deviceID = deviceID
            self.name = name
            self.spki = spki
            self.statement = statement
            self.revoked = revoked
        }

        enum CodingKeys: String, CodingKey { case deviceID = "device_id", name, spki, statement, revoked }
    }

    public struct Result: Codable, Sendable, Equatable {
        public var account: String
        public var e2ee: E2EEMode
        public var devices: [Device]

        public init(account: String, e2ee: E2EEMode, devices: [Device]) {
            self.account = account
            self.e2ee = e2ee
            self.devices = devices
        }
    }
}

/// `admin.accounts.e2ee` — turns an account's end-to-end encrypted sync on (`required`) or off.
/// New accounts start with it required.
public enum AdminAccountsE2EE: RPCMethod {
    public static let name = "admin.accounts.e2ee"

    public struct Params: Codable, Sendable, Equatable {
        public var account: String
        public var e2ee: E2EEMode

        public init(account: String, e2ee: E2EEMode) {
            self.account = account
            self.e2ee = e2ee
        }
    }

    public typealias Result = AccountRecord
}
