import FoundationEssentials
import Protocol
import Synchronization

/// How fast events may be added to accounts' logs: each write counts against the local user who
/// made it (`[sync] writes_per_minute`) and against the machine they are on, all its users
/// together (`machine_writes_per_minute`). Per user, so one person's flood does not spend what the
/// other users of a shared machine may write; per machine, so a machine's many users (or its
/// authd itself) cannot add without bound. A refusal says which of the two it was.
///
/// A pure rule over two token buckets; ``SyncWriteLimiter`` keeps the buckets.
struct SyncWriteLimit: Sendable, Equatable {
    enum Scope: String, Sendable, Equatable { case user, machine }

    /// Tokens left, and when they were counted (seconds since 1970). A bucket refills to its
    /// capacity in a minute: a burst of as many as the rate, then that rate.
    struct Bucket: Sendable, Equatable {
        var tokens: Double
        var updated: Double

        func refilled(at time: Double, capacity: Double) -> Bucket {
            Bucket(tokens: min(capacity, tokens + max(0, time - updated) * capacity / SyncWriteLimit.window), updated: time)
        }
    }

    static let window = 60.0

    var perUser: Int
    var perMachine: Int

    enum Decision: Sendable, Equatable {
        /// The write may go; the buckets as they are after it.
        case taken(user: Bucket?, machine: Bucket)
        /// Refused by `scope`'s bucket; nothing was taken from either.
        case refused(Scope, retryAfter: Int64)
    }

    /// One write at `time`, by a user (nil: a machine itself, counted only as the machine).
    /// Both buckets must hold a token, or neither is spent: a user refused does not use up the
    /// machine's share, nor the reverse.
    func take(user: Bucket?, counted hasUser: Bool, machine: Bucket?, at time: Double) -> Decision {
        let userCapacity = Double(perUser), machineCapacity = Double(perMachine)
        let machine = (machine ?? Bucket(tokens: machineCapacity, updated: time)).refilled(at: time, capacity: machineCapacity)
        let user = hasUser ? (user ?? Bucket(tokens: userCapacity, updated: time)).refilled(at: time, capacity: userCapacity) : nil
        if let user, user.tokens < 1 { return .refused(.user, retryAfter: Self.wait(user, capacity: userCapacity)) }
        if machine.tokens < 1 { return .refused(.machine, retryAfter: Self.wait(machine, capacity: machineCapacity)) }
        return .taken(user: user.map { Bucket(tokens: $0.tokens - 1, updated: time) }, machine: Bucket(tokens: machine.tokens - 1, updated: time))
    }

    /// Whole seconds until `bucket` holds a token again (at least 1).
    private static func wait(_ bucket: Bucket, capacity: Double) -> Int64 {
        max(1, Int64(((1 - bucket.tokens) * window / capacity).rounded(.up)))
    }
}

/// The buckets of ``SyncWriteLimit``, in memory: a restart forgets them, which only lets a burst
/// through again (the limit slows floods; nothing depends on it for safety).
final class SyncWriteLimiter: Sendable {
    private let buckets = Mutex<[String: SyncWriteLimit.Bucket]>([:])
    private let limit: @Sendable () -> SyncWriteLimit
    private let now: @Sendable () -> Date

    init(config: ConfigHolder, now: @escaping @Sendable () -> Date) {
        limit = { SyncWriteLimit(perUser: config.current.syncWritesPerMinute, perMachine: config.current.syncMachineWritesPerMinute) }
        self.now = now
    }

    /// The buckets a caller's writes count against: its user's (a local user here, or a user of
    /// the machine that forwarded the call), and its machine's.
    static func keys(of caller: Caller) -> (user: String?, machine: String) {
        switch caller {
        case .local(let peer): ("uid:\(peer.uid)", "this")
        case .forwarded(let machine, let process): ("device:\(machine):uid:\(process.uid)", "device:\(machine)")
        case .device(let machine): (nil, "device:\(machine)")
        }
    }

    /// Takes one write for `caller`, or refuses with the scope that ran out and the wait.
    func take(_ caller: Caller) throws(SyncFailure) {
        let (userKey, machineKey) = Self.keys(of: caller)
        let limit = limit()
        let time = now().timeIntervalSince1970
        let decision = buckets.withLock { buckets in
            let decision = limit.take(user: userKey.flatMap { buckets[$0] }, counted: userKey != nil, machine: buckets[machineKey], at: time)
            if case .taken(let user, let machine) = decision {
                buckets[machineKey] = machine
                if let userKey, let user { buckets[userKey] = user }
                // Forget buckets untouched for a window: full again, the same as none.
                if buckets.count > 10_000 { buckets = buckets.filter { time - $0.value.updated < SyncWriteLimit.window } }
            }
            return decision
        }
        if case .refused(let scope, let seconds) = decision { throw .rateLimited(scope: scope, retryAfter: seconds) }
    }
}
