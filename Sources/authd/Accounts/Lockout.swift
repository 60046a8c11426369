/// The soft lock against password guessing, as a pure rule: after
/// `threshold` consecutive failures the account locks for `baseSeconds`, doubling with each
/// further failure up to `maximumSeconds`. A success resets the count.
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
