import Protocol

/// A hub whose account database is away answers `hub.unavailable`, as a device whose hub is
/// away does: the caller tries again; nothing was changed that it was not told of.
extension PostgreSQLError: WireErrorConvertible {
    var rpcError: RPCError {
        if isUnavailable {
            return .failure(.hubUnavailable, "The hub's account database cannot be reached; account methods work again when it is back.",
                             details: ["retry_after": .integer(Int64(PostgreSQLConnection.reconnectPause.components.seconds + 1))])
        }
        if isTimeout {
            return .failure(.hubUnavailable, "The hub's account database did not answer in time; try again.",
                            details: ["retry_after": .integer(1)])
        }
        return .internalError
    }
}
