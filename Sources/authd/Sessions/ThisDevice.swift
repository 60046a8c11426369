import FoundationEssentials
import OpenSSLCrypto
import Protocol

extension DeviceIdentity {
    /// The device a sign-in names (`params.device`), or this machine: a key derived from
    /// /etc/machine-id and the host name.
    static func resolve(_ description: DeviceDescription?) throws(InvalidParameter) -> DeviceIdentity {
        for (field, value) in [("device.key", description?.key), ("device.name", description?.name)] {
            if let value {
                guard (1...128).contains(value.count), !value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
                    throw InvalidParameter("Parameter '\(field)' must be 1–128 printable characters.", field: field)
                }
            }
        }
        return DeviceIdentity(key: description?.key ?? "machine:\(machineKey)", name: description?.name ?? hostName,
                              nameGiven: description?.name != nil)
    }

    /// A hash of /etc/machine-id (never the id itself: it is meant to stay on the machine).
    private static let machineKey: String = {
        let id = (try? Syscalls.readFile("/etc/machine-id", limit: 4096)) ?? nil
        return Base64URL.encode(OpenSSL.sha256((id ?? Array(hostName.utf8)) + Array("authd device".utf8)).prefix(12))
    }()

    private static let hostName: String = Syscalls.hostName() ?? "this computer"
}
