/// The soft lock against password guessing (issue 3, item 9), as a pure rule: after
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
