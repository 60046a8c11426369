import Protocol
import Synchronization

/// This machine's sync subscribers, by account: each committed event (at a hub or standalone
/// authd, from `SyncService`; on a device, pushed by the hub over the link) is handed to the
/// subscribers of its account. A subscriber that falls behind loses only these hints, never
/// events: it reads what it missed from the log (`SyncFollower`).
final class SyncBus: Sendable {
    enum Signal: Sendable, Equatable {
        case event(SyncEvent)
        /// Events may have been missed (the link to the hub came back): read the log again.
        case resync
        /// On a device: what a session queued in the outbox was sent, or refused.
        case sent(Sent)
    }

    /// An outbox entry's end: its position at the hub, or the hub's refusal.
    struct Sent: Sendable, Equatable {
        /// SHA-256 of the session token that queued it: only that session's streams are told.
        let sessionHash: [UInt8]
        let outboxID: Int64
        let outcome: Result<Int64, RPCError>
    }

    /// Hints a subscriber may have waiting before the oldest are dropped.
    static let bufferedSignals = 1024

    private struct Subscriber {
        let account: String
        let continuation: AsyncStream<Signal>.Continuation
    }

    private let subscribers = Mutex<[Int: Subscriber]>([:])
    /// An event as the desktop hears it: its account, and the local users who hold a live session
    /// of it on this machine when the hub said so (nil: this machine's own directory knows).
    struct Observed: Sendable {
        let account: String
        let event: SyncEvent
        let users: [UInt32]?
    }

    private struct Observer {
        let wanted: @Sendable (Observed) -> Bool
        let continuation: AsyncStream<Observed>.Continuation
    }

    /// Who hears every account's events (the desktop, presence).
    private let observers = Mutex<[Observer]>([])
    private let nextID = Atomic<Int>(0)

    func subscribe(account: String) -> (id: Int, signals: AsyncStream<Signal>) {
        let (stream, continuation) = AsyncStream.makeStream(of: Signal.self, bufferingPolicy: .bufferingNewest(Self.bufferedSignals))
        let id = nextID.wrappingAdd(1, ordering: .relaxed).newValue
        subscribers.withLock { $0[id] = Subscriber(account: account, continuation: continuation) }
        return (id, stream)
    }

    func unsubscribe(_ id: Int) {
        subscribers.withLock { $0.removeValue(forKey: id) }?.continuation.finish()
    }

    /// Every committed event of every account that `wanted` takes, from now on, for the life of
    /// the daemon. `wanted` runs in `publish`, on the publisher's thread (a look at the event's
    /// kind and the configuration, no more): an event it refuses wakes no reader, which matters
    /// at a hub, where every event of every account passes here.
    func observe(where wanted: @escaping @Sendable (Observed) -> Bool) -> AsyncStream<Observed> {
        let (stream, continuation) = AsyncStream.makeStream(of: Observed.self, bufferingPolicy: .bufferingNewest(Self.bufferedSignals))
        observers.withLock { $0.append(Observer(wanted: wanted, continuation: continuation)) }
        return stream
    }

    /// `users`: on a device, the local users the hub named (see ``Observed``).
    func publish(_ event: SyncEvent, account: String, users: [UInt32]? = nil) {
        let observed = Observed(account: account, event: event, users: users)
        for observer in observers.withLock({ $0 }) where observer.wanted(observed) { observer.continuation.yield(observed) }
        for subscriber in subscribers.withLock({ Array($0.values) }) where subscriber.account == account {
            subscriber.continuation.yield(.event(event))
        }
    }

    func resync() {
        for subscriber in subscribers.withLock({ Array($0.values) }) { subscriber.continuation.yield(.resync) }
    }

    /// Every stream hears it; each keeps it only for its own session.
    func sent(_ sent: Sent) {
        for subscriber in subscribers.withLock({ Array($0.values) }) { subscriber.continuation.yield(.sent(sent)) }
    }

    var count: Int { subscribers.withLock { $0.count } }
}
