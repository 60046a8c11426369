import FoundationEssentials
import Protocol
import Synchronization

/// Per-caller rate limits: a token bucket per (caller, action), in memory — a local user, or a
/// machine asking over the hub link. A restart forgets them, which is fine: they only slow down bursts, while the per-account
/// lockout and the per-number send limits (both in the store) bound guessing and SMS.
final class RateLimiter: Sendable {
    enum Action: String, Sendable, CaseIterable {
        case registerStart = "account.register.start"
        case otpStart = "auth.otp.start"
        case login = "auth.login"
        /// An `unlock` that sends a code by SMS.
        case unlockCode = "unlock"
        /// A change of an account's email address, limited per account: each answer tells
        /// whether an address is taken, which must not become a way to list them.
        case emailChange = "account.profile.set"
        /// A lookup of another person by email address (`friends.add`), limited per account so
        /// the directory cannot be harvested.
        case friendLookup = "friends.add"

        /// Email changes an account may make per hour.
        static let emailChangesPerHour = 3

        /// Burst size, which is also the sustained rate per `window` (`[accounts]
        /// starts_per_minute`, `logins_per_minute`).
        func capacity(_ config: Config) -> Double {
            switch self {
            case .registerStart, .otpStart, .unlockCode: Double(config.startsPerMinute)
            case .login: Double(config.loginsPerMinute)
            case .emailChange: Double(Self.emailChangesPerHour)
            case .friendLookup: Double(config.presenceLookupsPerHour)
            }
        }

        /// Seconds in which a full bucket refills.
        var window: Double { self == .emailChange || self == .friendLookup ? 3600 : 60 }
    }

    private struct Bucket { var tokens: Double; var updated: Double }
    private let buckets = Mutex<[String: Bucket]>([:])
    private let now: @Sendable () -> Date
    private let config: ConfigHolder

    init(config: ConfigHolder, now: @escaping @Sendable () -> Date) {
        self.config = config
        self.now = now
    }

    /// Takes one token for `caller`, or refuses with `rate.limited` and the seconds to wait.
    func take(_ action: Action, caller: Caller) throws(AccountFailure) {
        try take(action, key: caller.limitKey)
    }

    /// Takes one token for `account` (limits that follow the account, whoever asks).
    func take(_ action: Action, account: String) throws(AccountFailure) {
        try take(action, key: "account:" + account)
    }

    private func take(_ action: Action, key limitKey: String) throws(AccountFailure) {
        let time = now().timeIntervalSince1970
        let capacity = action.capacity(config.current)
        let perSecond = capacity / action.window
        let wait: Double? = buckets.withLock { buckets in
            let key = "\(limitKey):\(action.rawValue)"
            var bucket = buckets[key] ?? Bucket(tokens: capacity, updated: time)
            bucket.tokens = min(capacity, bucket.tokens + (time - bucket.updated) * perSecond)
            bucket.updated = time
            defer {
                buckets[key] = bucket
                if buckets.count > 10_000 { buckets = buckets.filter { $0.value.tokens < capacity } }
            }
            guard bucket.tokens >= 1 else { return (1 - bucket.tokens) / perSecond }
            bucket.tokens -= 1
            return nil
        }
        if let wait {
            let seconds = Int64(wait.rounded(.up))
            throw .rateLimited(action: action.rawValue, retryAfter: seconds)
        }
    }
}
