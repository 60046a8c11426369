import Protocol

/// A capability's error that knows its one wire form. Each capability throws its own error type
/// (`AccountFailure`, `CardFailure`, …) whose `rpcError` is the only place its cases meet the
/// protocol; the dispatcher is the only caller of `rpcError`, so capabilities never build wire
/// errors themselves.
protocol WireErrorConvertible: Error {
    var rpcError: RPCError { get }
}

/// A parameter that is missing, malformed or out of range, found by a capability's own checks
/// after the params decoded (`rpc.invalid_params`, `data.field` names it). Nothing changed.
struct InvalidParameter: WireErrorConvertible, Equatable {
    let message: String
    let field: String?

    init(_ message: String, field: String?) {
        self.message = message
        self.field = field
    }

    var rpcError: RPCError { .invalidParams(message, field: field) }
}
