/// A callback that one side sets and another reads back, under a lock, again and again: held in
/// a class, so that reading it out of a `Mutex` copies a reference. A bare closure read out with
/// `withLock { $0 }` is re-abstracted on the way out and written back through the same thunks:
/// every read wrapped it two calls deeper, and a device's link, which reads its notice handler
/// for every event the hub pushes, overflowed its thread's stack after some 30,000 events.
final class Callback<Argument>: Sendable {
    let call: @Sendable (Argument) -> Void

    init(_ call: @escaping @Sendable (Argument) -> Void) { self.call = call }
}
