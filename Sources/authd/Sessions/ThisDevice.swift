import FoundationEssentials
import OpenSSLCrypto
import Protocol

extension DeviceIdentity {
    /// The device a sign-in binds the session to. Made through a device of this hub: that machine,
    /// by its device id (whatever the request says: the limit counts machines). Otherwise the
    /// device the request names (`params.device`), or this machine: a key derived from
    /// /etc/machine-id (or the host name), named by `MachineName`.
    static func resolve(_ description: DeviceDescription?, caller: Caller) throws(InvalidParameter) -> DeviceIdentity {
        if case .forwarded(let machine, let process) = caller {
            let name = process.machine.map { Redaction.printable($0, limit: 128) } ?? "device \(machine.description.prefix(9))"
            return DeviceIdentity(key: key(ofMachine: machine), name: name, nameGiven: true, machineUser: process.uid)
        }
        for (field, value) in [("device.key", description?.key), ("device.name", description?.name)] {
            if let value {
                guard (1...128).contains(value.count), !value.containsControlCharacter else {
                    throw InvalidParameter("Parameter '\(field)' must be 1–128 printable characters.", field: field)
                }
            }
        }
        // `device:` keys name linked machines, and only the link may name one: a process that
        // could would bind a session to any machine, which then gets the account's events.
        if let key = description?.key, machine(ofKey: key) != nil {
            throw InvalidParameter("Parameter 'device.key' may not start with '\(machineKeyPrefix)': that names a machine linked to a hub.",
                                   field: "device.key")
        }
        var user: UInt32?
        if case .local(let process) = caller { user = process.uid }
        return DeviceIdentity(key: description?.key ?? "machine:\(machineKey)", name: description?.name ?? MachineName.current,
                              nameGiven: description?.name != nil, machineUser: user)
    }

    /// How a machine linked to this hub is keyed among an account's devices: `device:` and its id.
    static let machineKeyPrefix = "device:"

    static func key(ofMachine machine: DeviceID) -> String { machineKeyPrefix + machine.description }

    /// The device id of a machine's device key; nil for a device an application described.
    static func machine(ofKey key: String) -> String? {
        key.hasPrefix(machineKeyPrefix) ? String(key.dropFirst(machineKeyPrefix.count)) : nil
    }

    /// A hash of /etc/machine-id (never the id itself: it is meant to stay on the machine).
    private static let machineKey: String = {
        let id = (try? Syscalls.readFile("/etc/machine-id", limit: 4096)) ?? nil
        return Base64URL.encode(OpenSSL.sha256((id ?? Array((Syscalls.hostName() ?? "this computer").utf8)) + Array("authd device".utf8)).prefix(12))
    }()
}
