/// The soft lock against password guessing, as a pure rule: after
/// `threshold` consecutive failures the account locks for `baseSeconds`, doubling with each
/// further failure up to `maximumSeconds`. A success resets the count.
///
/// Every check is counted before the secret is checked (`reserve`), in the same change that
/// reads the lock: checks started at once cannot all pass the lock before any of them is
/// counted, so at most `threshold` checks are in progress or done before the lock holds, and a
/// burst locks for exactly as long as the same attempts made one by one. A right secret then
/// withdraws its reservation (the success resets the count).
struct Lockout: Sendable, Equatable {
    var threshold = 5
    var baseSeconds: Int64 = 60
    var maximumSeconds: Int64 = 3600

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
        /// The check may run; it counts as failure number `failures` from now on, and when
        /// `locksUntil` is set, the account locks until then at once (for every other check)
        /// and stays locked unless the secret turns out right.
        case granted(failures: Int, locksUntil: Int64?)
    }

    /// Reserves one check: refused while the stored lock holds, else counted up front.
    func reserve(failures: Int, lockedUntil: Int64?, now: Int64) -> Reservation {
        if let lockedUntil, now < lockedUntil { return .refused(lockedUntil: lockedUntil) }
        let counted = failures + 1
        return .granted(failures: counted, locksUntil: lockSeconds(afterFailures: counted).map { now + $0 })
    }
}

/// Failed credential checks answer no sooner than `delay` after they began (as systemd-homed
/// pads bad-password replies): what little work differs between an unknown account and a wrong
/// password cannot be timed, and guessing is slower.
enum CredentialPadding {
    static let delay: Duration = .milliseconds(300)

    /// Runs `body`; a credential refusal (`authFailed`, `locked`) answers no sooner than `delay`
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
