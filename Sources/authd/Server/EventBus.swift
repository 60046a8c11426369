import Protocol

/// The events of `events.subscribe`: each goes to the streams of the local user it concerns.
actor EventBus {
    struct Event: Sendable {
        let type: String
        var loggedOut: LoggedOutEvent?
        var ended: SessionEndedEvent?
        var sync: SyncDesktopEvent?
        var presence: PresenceAskEvent?
    }

    private var subscribers: [Int: (uid: UInt32, continuation: AsyncStream<Event>.Continuation)] = [:]
    private var next = 0

    /// A stream of `uid`'s events from now on; end it with `unsubscribe`.
    func subscribe(uid: UInt32) -> (id: Int, events: AsyncStream<Event>) {
        let (stream, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(256))
        next += 1
        subscribers[next] = (uid, continuation)
        return (next, stream)
    }

    func unsubscribe(_ id: Int) {
        subscribers.removeValue(forKey: id)?.continuation.finish()
    }

    func publish(_ event: Event, to uid: UInt32) {
        for subscriber in subscribers.values where subscriber.uid == uid {
            subscriber.continuation.yield(event)
        }
    }
}
