import Protocol

/// Why a sync call was refused.
enum SyncFailure: Error, Equatable, WireErrorConvertible {
    /// The body, encoded, is over `limit` bytes.
    case tooLarge(limit: Int)
    /// `sync.dismiss` of a position that holds no notification of the account.
    case unknownEvent(Int64)
    /// The account has no log row to allocate from (it vanished under the call).
    case unknownAccount

    var rpcError: RPCError {
        switch self {
        case .tooLarge(let limit):
            .failure(.syncTooLarge, "An event's body may be at most \(limit) bytes of JSON.", details: ["limit": .integer(Int64(limit))])
        case .unknownEvent(let position):
            .failure(.syncUnknownEvent, "Position \(position) holds no notification of this account.", details: ["position": .integer(position)])
        case .unknownAccount:
            .failure(.sessionInvalid, "The session's account is gone.")
        }
    }
}
