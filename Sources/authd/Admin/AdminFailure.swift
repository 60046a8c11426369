import Protocol

/// Why an admin action did not happen. Each case is one stable wire reason.
enum AdminFailure: WireErrorConvertible, Equatable {
    /// `admin.reload` found the file invalid; the running configuration stays in force.
    case configInvalid(ConfigError)
    /// `admin.backup` could not write its file; nothing was left at `path`.
    case backupFailed(message: String, path: String)
    /// `admin.sms.last` with a backend that sends messages instead of spooling them.
    case smsNotSpooled(backend: String)
    /// `admin.sms.last` found no message (to the number given, shown redacted).
    case smsNoneSpooled(redactedNumber: String?)
    /// On a device: the hub sends the account's SMS, into its own spool.
    case smsAtHub(hub: String)

    var rpcError: RPCError {
        switch self {
        case .configInvalid(let error):
            .failure(.configInvalid, "The configuration was not reloaded: \(error). The running configuration stays in force.",
                     details: ["file": .string(error.file), "line": .integer(Int64(error.line)), "problem": .string(error.reason)])
        case .backupFailed(let message, let path):
            .failure(.backupFailed, message, details: ["path": .string(Redaction.printable(path, limit: 4096))])
        case .smsNotSpooled(let backend):
            .failure(.smsNotSpooled, "SMS are sent through the \(backend) backend, which keeps no copy; only [sms] backend = spool keeps them.",
                     details: ["backend": .string(backend)])
        case .smsAtHub(let hub):
            .failure(.smsAtHub, "This authd is a device of the hub \(hub): the hub sends the account's SMS (registration and sign-in codes) "
                        + "and spools them itself. Read the newest on the hub's machine: authctl admin sms last (with the hub's --socket).",
                     details: ["hub": .string(hub)])
        case .smsNoneSpooled(let number):
            .failure(.smsNoneSpooled, "No SMS \(number.map { "to \($0) " } ?? "")is in the spool (messages are deleted after a day).")
        }
    }
}
