import Synchronization

/// The soft lock against password guessing, as a pure rule: after
/// `threshold` consecutive failures the account locks for `baseSeconds`, doubling with each
/// further failure up to `maximumSeconds`. A success resets the count.
///
/// Every check is counted before the secret is checked (`reserve`), in the same change that
/// reads the lock: checks started at once cannot all pass the lock before any of them is
/// counted, so at most `threshold` checks are in progress or done before the lock holds, and a
/// burst locks for exactly as long as the same attempts made one by one. A right secret then
/// withdraws its reservation (the success resets the count).
///
/// The lock a reservation sets is provisional while its check runs: a right secret lifts it. A
/// check refused under such a lock is told `busy` (try again in a moment), not `locked`; only a
/// lock that failures already earned is told as one (`LocksInFlight` says which is which).
struct Lockout: Sendable, Equatable {
    var threshold = 5
    var baseSeconds: Int64 = 60
    var maximumSeconds: Int64 = 3600
    /// What `account.busy` tells to wait, in seconds: about one check's Argon2id work and padding.
    static let busyRetryAfter: Int64 = 1

    /// How long to lock after the `failures`-th consecutive failure (nil: no lock yet).
    func lockSeconds(afterFailures failures: Int) -> Int64? {
        guard failures >= threshold else { return nil }
        let doublings = min(failures - threshold, 30)
        return min(maximumSeconds, baseSeconds << doublings)
    }

    /// What the lock says to one more check, given the consecutive failures counted so far and
    /// the lock as stored.
    enum Reservation: Sendable, Equatable {
        /// Locked until then: the secret is not checked and nothing is counted (a refused
        /// attempt must not lengthen the lock).
        case refused(lockedUntil: Int64)
        /// Locked until then by a check still running (its secret may yet turn out right and
        /// lift the lock): refused and not counted, as under a lock, but told apart, so that
        /// right secrets sent at once hear "try again", not "locked".
        case busy(lockedUntil: Int64)
        /// The check may run; it counts as failure number `failures` from now on, and when
        /// `locksUntil` is set, the account locks until then at once (for every other check)
        /// and stays locked unless the secret turns out right.
        case granted(failures: Int, locksUntil: Int64?)
    }

    /// Reserves one check: refused while the stored lock holds (`busy` when a check still in
    /// progress set it, `lockSetInFlight`), else counted up front.
    func reserve(failures: Int, lockedUntil: Int64?, lockSetInFlight: Bool = false, now: Int64) -> Reservation {
        if let lockedUntil, now < lockedUntil { return lockSetInFlight ? .busy(lockedUntil: lockedUntil) : .refused(lockedUntil: lockedUntil) }
        let counted = failures + 1
        return .granted(failures: counted, locksUntil: lockSeconds(afterFailures: counted).map { now + $0 })
    }
}

/// The locks set by checks still in progress, in this process: a reservation that locks
/// (`Lockout.Reservation.granted` with `locksUntil`) is recorded under its ticket while its
/// secret is checked, and forgotten when the check ends, whatever its outcome. A stored lock
/// equal to one recorded here is provisional (`Lockout.reserve(lockSetInFlight:)`).
///
/// Kept in memory, not in the store: after a restart no check is in progress, and a lock left
/// by one that never finished was counted as a failure, so it is told as a lock.
final class LocksInFlight<Factor: Hashable & Sendable>: Sendable {
    /// One check, from its reservation to its end.
    struct Ticket: Hashable, Sendable { fileprivate let number: UInt64 }

    private struct Lock: Hashable, Sendable {
        let account: String
        let factor: Factor
        let until: Int64
    }

    private let state = Mutex<(next: UInt64, locks: [Ticket: Lock])>((0, [:]))

    init() {}

    /// A ticket for a check about to be reserved; `end` it when the check is over.
    func begin() -> Ticket {
        state.withLock { state in
            state.next += 1
            return Ticket(number: state.next)
        }
    }

    /// Records that the check of `ticket` locked `factor` of `account` until `until`. Called in
    /// the change that stores the lock, so that no later change sees the lock unrecorded.
    func record(_ ticket: Ticket, account: String, factor: Factor, until: Int64) {
        state.withLock { $0.locks[ticket] = Lock(account: account, factor: factor, until: until) }
    }

    /// The check of `ticket` is over (its lock, if any, now stands or was lifted in the store).
    func end(_ ticket: Ticket) {
        _ = state.withLock { $0.locks.removeValue(forKey: ticket) }
    }

    /// Whether `until`, the lock stored for `factor` of `account`, was set by a check still running.
    func isSetInFlight(account: String, factor: Factor, until: Int64) -> Bool {
        state.withLock { $0.locks.values.contains(Lock(account: account, factor: factor, until: until)) }
    }
}

/// Failed credential checks answer no sooner than `delay` after they began (as systemd-homed
/// pads bad-password replies): what little work differs between an unknown account and a wrong
/// password cannot be timed, and guessing is slower.
enum CredentialPadding {
    static let delay: Duration = .milliseconds(300)

    /// Runs `body`; a credential refusal (`authFailed`, `locked`, `busy`) answers no sooner than `delay`
    /// after `body` began.
    static func padded<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        let started = ContinuousClock.now
        do {
            return try await body()
        } catch let failure as AccountFailure where failure.isCredentialRefusal {
            try? await Task.sleep(until: started + delay, clock: .continuous)
            throw failure
        }
    }
}
