import Synchronization

/// The open connections, for counting, the connection limit and shutdown.
final class ConnectionRegistry: Sendable {
    private let connections = Mutex<[UInt64: Connection]>([:])
    private let nextID = Atomic<UInt64>(1)

    func makeID() -> UInt64 { nextID.wrappingAdd(1, ordering: .relaxed).oldValue }

    func add(_ connection: Connection) { connections.withLock { $0[connection.id] = connection } }
    func remove(_ connection: Connection) { _ = connections.withLock { $0.removeValue(forKey: connection.id) } }
    var count: Int { connections.withLock { $0.count } }
    var all: [Connection] { connections.withLock { Array($0.values) } }
}
