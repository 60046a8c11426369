import FoundationEssentials
import Protocol
import Synchronization

/// Per-caller rate limits (issue 3, item 9): a token bucket per (uid, action), in memory. A
/// restart forgets them, which is fine: they only slow down bursts, while the per-account
/// lockout and the per-number send limits (both in the store) bound guessing and SMS.
final class RateLimiter: Sendable {
    enum Action: String, Sendable, CaseIterable {
        case registerStart = "account.register.start"
        case otpStart = "auth.otp.start"
        case login = "auth.login"

        /// Burst size and sustained rate per minute.
        var capacity: Double {
            switch self {
            case .registerStart, .otpStart: 10
            case .login: 30
            }
        }
    }

    private struct Bucket { var tokens: Double; var updated: Double }
    private let buckets = Mutex<[String: Bucket]>([:])
    private let now: @Sendable () -> Date

    init(now: @escaping @Sendable () -> Date) { self.now = now }

    /// Takes one token for `uid`, or refuses with `rate.limited` and the seconds to wait.
    func take(_ action: Action, uid: UInt32) throws(RPCError) {
        let time = now().timeIntervalSince1970
        let perSecond = action.capacity / 60
        let wait: Double? = buckets.withLock { buckets in
            let key = "\(uid):\(action.rawValue)"
            var bucket = buckets[key] ?? Bucket(tokens: action.capacity, updated: time)
            bucket.tokens = min(action.capacity, bucket.tokens + (time - bucket.updated) * perSecond)
            bucket.updated = time
            defer {
                buckets[key] = bucket
                if buckets.count > 10_000 { buckets = buckets.filter { $0.value.tokens < action.capacity } }
            }
            guard bucket.tokens >= 1 else { return (1 - bucket.tokens) / perSecond }
            bucket.tokens -= 1
            return nil
        }
        if let wait {
            let seconds = Int64(wait.rounded(.up))
            throw .failure(.rateLimited, "Too many \(action.rawValue) requests from your user; wait \(seconds) s.", details: ["retry_after": .integer(seconds)])
        }
    }
}
