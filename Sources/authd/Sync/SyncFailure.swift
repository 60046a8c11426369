import Protocol

/// Why a sync call was refused.
enum SyncFailure: Error, Equatable, WireErrorConvertible {
    /// The body, encoded, is over `limit` bytes.
    case tooLarge(limit: Int)
    /// The body nests arrays and objects deeper than `limit` levels.
    case tooDeep(limit: Int)
    /// On a device: the send would not fit one line to the hub (`limit` bytes) as it is.
    case unforwardable(limit: Int)
    /// `sync.dismiss` of a position that holds no notification of the account.
    case unknownEvent(Int64)
    /// The account has no log row to allocate from (it vanished under the call).
    case unknownAccount
    /// Writes past `[sync] writes_per_minute` (`scope` user: this local user) or
    /// `machine_writes_per_minute` (`scope` machine: all users of the machine together).
    case rateLimited(scope: SyncWriteLimit.Scope, retryAfter: Int64)
    /// At a hub: a plain-text `message` or `notification` for an account whose sync is
    /// end-to-end encrypted.
    case e2eeRequired
    /// At a hub: an encrypted send whose recipients are not the account's devices now, or for an
    /// account whose sync is not encrypted.
    case recipientsChanged

    var rpcError: RPCError {
        switch self {
        case .tooLarge(let limit):
            .failure(.syncTooLarge, "An event's body may be at most \(limit) bytes of JSON.", details: ["limit": .integer(Int64(limit))])
        case .tooDeep(let limit):
            .failure(.syncTooDeep, "An event's body may nest arrays and objects at most \(limit) levels deep.", details: ["limit": .integer(Int64(limit))])
        case .unforwardable(let limit):
            .failure(.syncUnforwardable, "This event would not fit one \(limit)-byte line to the hub; it was not queued.",
                     details: ["limit": .integer(Int64(limit))])
        case .unknownEvent(let position):
            .failure(.syncUnknownEvent, "Position \(position) holds no notification of this account.", details: ["position": .integer(position)])
        case .unknownAccount:
            .failure(.sessionInvalid, "The session's account is gone.")
        case .e2eeRequired:
            .failure(.syncE2EERequired,
                     "This account's messages and notifications are end-to-end encrypted between its devices: send them from a device linked to this hub, which encrypts them.")
        case .recipientsChanged:
            .failure(.syncRecipientsChanged, "The account's devices changed since this event was encrypted; it was not stored.")
        case .rateLimited(.user, let seconds):
            .failure(.rateLimited, "Too many sync writes from your user on this machine; wait \(seconds) s.",
                     details: ["retry_after": .integer(seconds), "scope": "user"])
        case .rateLimited(.machine, let seconds):
            .failure(.rateLimited, "Too many sync writes from this machine, all its users together; wait \(seconds) s.",
                     details: ["retry_after": .integer(seconds), "scope": "machine"])
        }
    }
}
