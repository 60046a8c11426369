import Protocol

/// Who sent a request (DESIGN §3, §8), read once per connection.
enum Caller: Sendable, Equatable {
    /// A process on this machine: `SO_PEERCRED` (uid, gid, pid), its user name and
    /// `/proc/PID/exe`.
    case local(CallerIdentity)
    /// Another machine's authd over its hub link, known by its device id.
    case device(DeviceID)
    /// A process on another machine, whose authd forwarded its account call over the hub link.
    case forwarded(DeviceID, ForwardedCaller)

    /// Whether the caller is another machine (directly, or a process on it).
    var isMachine: Bool {
        if case .local = self { false } else { true }
    }

    /// The other machine that asked (directly, or for a process on it); nil for a local process.
    var machine: DeviceID? {
        switch self {
        case .local: nil
        case .device(let id), .forwarded(let id, _): id
        }
    }

    /// The executable that asked, when known: the `azp` of the tokens it gets.
    var executable: String? {
        switch self {
        case .local(let peer): peer.exe
        case .device: nil
        case .forwarded(_, let process): process.exe
        }
    }

    /// Whom per-caller limits count against: a local user, or a machine.
    var limitKey: String {
        switch self {
        case .local(let peer): "uid:\(peer.uid)"
        case .device(let id), .forwarded(let id, _): "device:\(id)"
        }
    }

    /// The journal fields that name the caller.
    var logFields: [(String, String)] {
        switch self {
        case .local(let peer): [("AUTHD_CALLER_UID", String(peer.uid)), ("AUTHD_CALLER_PID", String(peer.pid))]
        case .device(let id): [("AUTHD_CALLER_DEVICE", id.description)]
        case .forwarded(let id, let process):
            [("AUTHD_CALLER_DEVICE", id.description), ("AUTHD_CALLER_DEVICE_UID", String(process.uid))]
        }
    }
}

/// A machine's device id: the SHA-256 of its device key's SubjectPublicKeyInfo (DESIGN §8), in
/// the printable form both sides show so a person can compare them.
struct DeviceID: Hashable, Sendable, CustomStringConvertible {
    let description: String
}
