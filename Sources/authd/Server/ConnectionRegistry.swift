import Synchronization

/// Where a connection stands, which decides the budget it draws on (authd(8), "Budgets").
enum Standing: Sendable, Equatable {
    /// A process on this machine (the Unix socket).
    case local
    /// Another machine that holds a session of some account here: it has signed in.
    case member
    /// Another machine that holds no session: it may only sign in, in a small budget of its own,
    /// for a short time (`[hub] newcomer_timeout`).
    case newcomer
}

/// The open connections, for counting, the connection limits, the memory budget and shutdown.
final class ConnectionRegistry: Sendable {
    /// What the connections of one local user (or one machine) may hold in the daemon's memory
    /// together: answers they have not read and lines they have not finished. A connection that
    /// pushes its caller past it is closed.
    static let bufferedPerCaller = 16 << 20
    /// What all connections together may hold.
    static let bufferedTotal = 128 << 20
    /// What other machines together may hold: the rest is the local users' reserve, which no
    /// remote party can take.
    static let bufferedRemote = 96 << 20
    /// What machines that have not signed in may hold together: a stranger's connections never
    /// take from what serves signed-in machines and local users.
    static let bufferedNewcomers = 4 << 20
    /// The longest line a machine that has not signed in may send: a sign-in is small.
    static let newcomerLineLength = 64 << 10

    /// Bytes connections hold, by direction.
    struct Held: Equatable, Sendable {
        var input = 0
        var output = 0
        var total: Int { input + output }
    }

    private struct State {
        var connections: [UInt64: Connection] = [:]
        /// Other machines' connections by machine (a connection's caller never changes), so a
        /// hub finds the links an event goes to without walking every connection.
        var byMachine: [DeviceID: [UInt64: Connection]] = [:]
        var perCaller: [String: Int] = [:]
        /// Connections of other machines (over the hub's TLS port), apart from local ones.
        var devices = 0
        /// Each connection's standing now (a newcomer that signs in becomes a member).
        var standings: [UInt64: Standing] = [:]
        /// Connections of machines that hold no session, in all and by machine.
        var newcomers = 0
        var newcomerMachines: [String: Int] = [:]
        /// Member connections by machine: how many machines that signed in are connected.
        var memberMachines: [String: Int] = [:]
        var bufferedPerCaller: [String: Int] = [:]
        /// What each connection holds, so a promoted one moves it to the members' pool.
        var heldByConnection: [UInt64: Int] = [:]
        var held = Held()
        var heldRemote = 0
        var heldNewcomers = 0

        mutating func count(_ standing: Standing, of key: String, by step: Int) {
            switch standing {
            case .local: break
            case .member:
                let count = memberMachines[key, default: 0] + step
                memberMachines[key] = count > 0 ? count : nil
            case .newcomer:
                newcomers += step
                let count = newcomerMachines[key, default: 0] + step
                newcomerMachines[key] = count > 0 ? count : nil
            }
        }
    }

    private let state = Mutex(State())
    private let nextID = Atomic<UInt64>(1)
    /// The loops new connections are handed to.
    let loops = EventLoops.shared
    /// At a hub: whether a machine holds a session here (the account store's answer), which
    /// makes it a member rather than a newcomer.
    let holdsSession: @Sendable (DeviceID) async -> Bool

    init(holdsSession: @escaping @Sendable (DeviceID) async -> Bool = { _ in false }) {
        self.holdsSession = holdsSession
    }

    func makeID() -> UInt64 { nextID.wrappingAdd(1, ordering: .relaxed).oldValue }

    func add(_ connection: Connection, standing: Standing = .local) {
        state.withLock {
            $0.connections[connection.id] = connection
            if case .device(let machine) = connection.caller { $0.byMachine[machine, default: [:]][connection.id] = connection }
            $0.perCaller[connection.caller.limitKey, default: 0] += 1
            if connection.caller.isMachine { $0.devices += 1 }
            $0.standings[connection.id] = standing
            $0.count(standing, of: connection.caller.limitKey, by: 1)
        }
    }

    func remove(_ connection: Connection) {
        state.withLock {
            guard $0.connections.removeValue(forKey: connection.id) != nil else { return }
            if case .device(let machine) = connection.caller {
                $0.byMachine[machine]?[connection.id] = nil
                if $0.byMachine[machine]?.isEmpty == true { $0.byMachine[machine] = nil }
            }
            let key = connection.caller.limitKey
            $0.perCaller[key] = ($0.perCaller[key] ?? 1) > 1 ? $0.perCaller[key]! - 1 : nil
            if connection.caller.isMachine { $0.devices -= 1 }
            if let standing = $0.standings.removeValue(forKey: connection.id) { $0.count(standing, of: key, by: -1) }
        }
    }

    /// The standing of connection `id` now; nil once it closed.
    func standing(of id: UInt64) -> Standing? { state.withLock { $0.standings[id] } }

    /// A newcomer machine signed in: its connections become members (its count, its memory, its
    /// line limit), in place. Returns the connections promoted. A machine that would take the
    /// members past `limit` (`[hub] max_devices`) is not promoted: its connections close once
    /// what they asked is answered, as a member arriving past the limit is refused.
    @discardableResult
    func promote(_ caller: Caller, limit: Int) -> [Connection] {
        let (promoted, refused) = state.withLock { state -> ([Connection], [Connection]) in
            let key = caller.limitKey
            let ids = state.standings.filter { $0.value == .newcomer && state.connections[$0.key]?.caller.limitKey == key }.map(\.key)
            if !ids.isEmpty, state.memberMachines[key] == nil, state.memberMachines.count >= limit {
                return ([], ids.compactMap { state.connections[$0] })
            }
            for id in ids {
                state.standings[id] = .member
                state.count(.newcomer, of: key, by: -1)
                state.count(.member, of: key, by: 1)
                state.heldNewcomers -= state.heldByConnection[id, default: 0]
            }
            return (ids.compactMap { state.connections[$0] }, [])
        }
        for connection in promoted { connection.promoted() }
        for connection in refused { connection.closeWhenAnswered() }
        return promoted
    }

    /// What `connection` holds changed by `delta` (unfinished input, unread output): false when
    /// its caller, its standing's pool or everyone together is now over budget (growth only;
    /// shrinking is always within).
    func heldChanged(of connection: Connection, by delta: Held) -> Bool {
        state.withLock { state in
            let held = state.heldByConnection[connection.id, default: 0] + delta.total
            state.heldByConnection[connection.id] = held > 0 ? held : nil
            return Self.change(&state, of: connection.caller, standing: state.standings[connection.id] ?? .local, by: delta)
        }
    }

    /// The same for what a caller of `standing` holds, apart from any connection.
    func heldChanged(of caller: Caller, standing: Standing, by delta: Held) -> Bool {
        state.withLock { Self.change(&$0, of: caller, standing: standing, by: delta) }
    }

    private static func change(_ state: inout State, of caller: Caller, standing: Standing, by delta: Held) -> Bool {
        let key = caller.limitKey
        let mine = state.bufferedPerCaller[key, default: 0] + delta.total
        state.bufferedPerCaller[key] = mine > 0 ? mine : nil
        state.held.input += delta.input
        state.held.output += delta.output
        if standing != .local { state.heldRemote += delta.total }
        if standing == .newcomer { state.heldNewcomers += delta.total }
        guard delta.total > 0 else { return true }
        return mine <= bufferedPerCaller && state.held.total <= bufferedTotal
            && (standing == .local || state.heldRemote <= bufferedRemote)
            && (standing != .newcomer || state.heldNewcomers <= bufferedNewcomers)
    }

    /// What all connections hold (for admin.status).
    var held: Held { state.withLock { $0.held } }
    /// What other machines' connections hold, and of it what newcomers' hold (tests).
    var heldRemote: (all: Int, newcomers: Int) { state.withLock { ($0.heldRemote, $0.heldNewcomers) } }

    var count: Int { state.withLock { $0.connections.count } }
    /// Local connections (the Unix socket's limits count these).
    var localCount: Int { state.withLock { $0.connections.count - $0.devices } }
    /// Connections of other machines over the hub's port.
    var deviceCount: Int { state.withLock { $0.devices } }
    /// Machines that hold a session, connected now (what `[hub] max_devices` counts).
    var memberMachineCount: Int { state.withLock { $0.memberMachines.count } }
    /// Whether `caller` (a machine) has a member connection now.
    func isConnectedMember(_ caller: Caller) -> Bool { state.withLock { $0.memberMachines[caller.limitKey] != nil } }
    /// Whether `caller` (a machine) has a connection that has not signed in.
    func isNewcomer(_ caller: Caller) -> Bool {
        state.withLock { $0.newcomerMachines[caller.limitKey] != nil }
    }
    /// Connections of machines that hold no session.
    var newcomerCount: Int { state.withLock { $0.newcomers } }
    /// Connections one local user, or one machine, holds.
    func count(of caller: Caller) -> Int { state.withLock { $0.perCaller[caller.limitKey] ?? 0 } }
    var all: [Connection] { state.withLock { Array($0.connections.values) } }

    /// The open connections of each of `machines` that has one.
    func connections(of machines: Set<DeviceID>) -> [DeviceID: [Connection]] {
        state.withLock { state in
            var found: [DeviceID: [Connection]] = [:]
            for machine in machines {
                if let open = state.byMachine[machine] { found[machine] = Array(open.values) }
            }
            return found
        }
    }
}
