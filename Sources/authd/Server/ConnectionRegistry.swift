import Synchronization

/// The open connections, for counting, the connection limits, the output budget and shutdown.
final class ConnectionRegistry: Sendable {
    /// Output the clients of one local user (or one machine) may leave unread, over all their
    /// connections; a connection that pushes its caller past it is closed.
    static let outputPerCaller = 16 << 20
    /// Output all clients together may leave unread.
    static let outputTotal = 128 << 20

    private struct State {
        var connections: [UInt64: Connection] = [:]
        var perCaller: [String: Int] = [:]
        var outputPerCaller: [String: Int] = [:]
        var outputTotal = 0
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

    /// A connection's unread output grew or shrank by `delta` bytes: false when its caller, or
    /// everyone together, is now over budget (growth only; shrinking is always within).
    func outputChanged(of caller: Caller, by delta: Int) -> Bool {
        state.withLock {
            let key = caller.limitKey
            let mine = $0.outputPerCaller[key, default: 0] + delta
            $0.outputPerCaller[key] = mine > 0 ? mine : nil
            $0.outputTotal += delta
            return delta <= 0 || (mine <= Self.outputPerCaller && $0.outputTotal <= Self.outputTotal)
        }
    }

    /// Unread output over all connections (for admin.status).
    var unreadOutput: Int { state.withLock { $0.outputTotal } }

    var count: Int { state.withLock { $0.connections.count } }
    /// Connections one local user, or one machine, holds.
    func count(of caller: Caller) -> Int { state.withLock { $0.perCaller[caller.limitKey] ?? 0 } }
    var all: [Connection] { state.withLock { Array($0.connections.values) } }
}
