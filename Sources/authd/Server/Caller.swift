import Protocol

/// Who sent a request (DESIGN §3, §8), read once per connection.
enum Caller: Sendable, Equatable {
    /// A process on this machine: `SO_PEERCRED` (uid, gid, pid), its user name and
    /// `/proc/PID/exe`.
    case local(CallerIdentity)
    /// Another machine's authd over its hub link, known by its device id.
    case device(DeviceID)

    /// The executable that asked, when known: the `azp` of the tokens it gets.
    var executable: String? {
        switch self {
        case .local(let peer): peer.exe
        case .device: nil
        }
    }

    /// Whom per-caller limits count against: a local user, or a machine.
    var limitKey: String {
        switch self {
        case .local(let peer): "uid:\(peer.uid)"
        case .device(let id): "device:\(id)"
        }
    }

    /// The journal fields that name the caller.
    var logFields: [(String, String)] {
        switch self {
        case .local(let peer): [("AUTHD_CALLER_UID", String(peer.uid)), ("AUTHD_CALLER_PID", String(peer.pid))]
        case .device(let id): [("AUTHD_CALLER_DEVICE", id.description)]
        }
    }
}

/// A machine's device id: the SHA-256 of its device key's SubjectPublicKeyInfo (DESIGN §8), in
/// the printable form both sides show so a person can compare them.
struct DeviceID: Hashable, Sendable, CustomStringConvertible {
    let description: String
}
