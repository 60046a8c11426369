import Synchronization

/// The open connections, for counting, the connection limits, the memory budget and shutdown.
final class ConnectionRegistry: Sendable {
    /// What the connections of one local user (or one machine) may hold in the daemon's memory
    /// together: answers they have not read and lines they have not finished. A connection that
    /// pushes its caller past it is closed.
    static let bufferedPerCaller = 16 << 20
    /// What all connections together may hold.
    static let bufferedTotal = 128 << 20

    /// Bytes connections hold, by direction.
    struct Held: Equatable, Sendable {
        var input = 0
        var output = 0
        var total: Int { input + output }
    }

    private struct State {
        var connections: [UInt64: Connection] = [:]
        var perCaller: [String: Int] = [:]
        /// Connections of other machines (over the hub's TLS port), apart from local ones.
        var devices = 0
        var bufferedPerCaller: [String: Int] = [:]
        var held = Held()
    }

    private let state = Mutex(State())
    private let nextID = Atomic<UInt64>(1)
    /// The loops new connections are handed to.
    let loops = EventLoops.shared

    func makeID() -> UInt64 { nextID.wrappingAdd(1, ordering: .relaxed).oldValue }

    func add(_ connection: Connection) {
        state.withLock {
            $0.connections[connection.id] = connection
            $0.perCaller[connection.caller.limitKey, default: 0] += 1
            if connection.caller.isMachine { $0.devices += 1 }
        }
    }

    func remove(_ connection: Connection) {
        state.withLock {
            guard $0.connections.removeValue(forKey: connection.id) != nil else { return }
            let key = connection.caller.limitKey
            $0.perCaller[key] = ($0.perCaller[key] ?? 1) > 1 ? $0.perCaller[key]! - 1 : nil
            if connection.caller.isMachine { $0.devices -= 1 }
        }
    }

    /// What a connection holds changed by `delta` (unfinished input, unread output): false when
    /// its caller, or everyone together, is now over budget (growth only; shrinking is always
    /// within).
    func heldChanged(of caller: Caller, by delta: Held) -> Bool {
        state.withLock {
            let key = caller.limitKey
            let mine = $0.bufferedPerCaller[key, default: 0] + delta.total
            $0.bufferedPerCaller[key] = mine > 0 ? mine : nil
            $0.held.input += delta.input
            $0.held.output += delta.output
            return delta.total <= 0 || (mine <= Self.bufferedPerCaller && $0.held.total <= Self.bufferedTotal)
        }
    }

    /// What all connections hold (for admin.status).
    var held: Held { state.withLock { $0.held } }

    var count: Int { state.withLock { $0.connections.count } }
    /// Local connections (the Unix socket's limits count these).
    var localCount: Int { state.withLock { $0.connections.count - $0.devices } }
    /// Connections of other machines over the hub's port.
    var deviceCount: Int { state.withLock { $0.devices } }
    /// Connections one local user, or one machine, holds.
    func count(of caller: Caller) -> Int { state.withLock { $0.perCaller[caller.limitKey] ?? 0 } }
    var all: [Connection] { state.withLock { Array($0.connections.values) } }
}
