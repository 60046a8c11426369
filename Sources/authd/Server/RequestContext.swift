import Protocol

/// What a handler knows about the request it serves.
struct RequestContext: Sendable {
    /// The peer as read once at accept.
    let caller: CallerIdentity
    let connection: Connection
    /// Identifies the request within its connection (not the JSON-RPC id, which clients choose).
    let requestKey: UInt64

    /// Opens a stream whose notifications start after this request's response. `onDrop` runs
    /// instead of `body` if the stream never starts.
    func openSubscription(onDrop: @escaping @Sendable () -> Void,
                          _ body: @escaping @Sendable (SubscriptionSink) async -> Void) throws(RPCError) -> String {
        try connection.addSubscription(requestKey: requestKey, onDrop: onDrop, body: body)
    }
}
