import Synchronization

/// The open connections, for counting, the connection limits and shutdown.
final class ConnectionRegistry: Sendable {
    private struct State {
        var connections: [UInt64: Connection] = [:]
        var perCaller: [String: Int] = [:]
    }

    private let state = Mutex(State())
    private let nextID = Atomic<UInt64>(1)

    func makeID() -> UInt64 { nextID.wrappingAdd(1, ordering: .relaxed).oldValue }

    func add(_ connection: Connection) {
        state.withLock {
            $0.connections[connection.id] = connection
            $0.perCaller[connection.caller.limitKey, default: 0] += 1
        }
    }

    func remove(_ connection: Connection) {
        state.withLock {
            guard $0.connections.removeValue(forKey: connection.id) != nil else { return }
            let key = connection.caller.limitKey
            $0.perCaller[key] = ($0.perCaller[key] ?? 1) > 1 ? $0.perCaller[key]! - 1 : nil
        }
    }

    var count: Int { state.withLock { $0.connections.count } }
    /// Connections one local user, or one machine, holds.
    func count(of caller: Caller) -> Int { state.withLock { $0.perCaller[caller.limitKey] ?? 0 } }
    var all: [Connection] { state.withLock { Array($0.connections.values) } }
}
