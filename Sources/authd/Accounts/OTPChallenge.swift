/// A one-time-code challenge sent by SMS (registration, OTP login, unlock), as a pure value type:
/// every rule of sign-in codes lives in its mutating methods, which return what happened; the
/// caller persists the new state in the same transaction (no I/O here, table-tested).
struct OTPChallenge: Sendable, Equatable {
    enum Purpose: String, Sendable { case registration, login, unlock }
    enum State: String, Sendable { case open, completed, dead }

    struct Policy: Sendable, Equatable {
        var codeLifetime: Int64 = 600
        var resendDelay: Int64 = 60
        var maxResends = 2
        var maxAttempts = 5
        var maxSendsPerHour = 5
    }

    let id: String
    let purpose: Purpose
    let phone: String
    var codeMAC: [UInt8]
    /// False when the SMS with the current code could not be delivered: that code never works.
    var codeDeliverable: Bool
    let createdAt: Int64
    var expiresAt: Int64
    var resendAfter: Int64
    var resends: Int
    var attemptsLeft: Int
    var state: State

    static func start(id: String, purpose: Purpose, phone: String, codeMAC: [UInt8], now: Int64, policy: Policy) -> OTPChallenge {
        OTPChallenge(id: id, purpose: purpose, phone: phone, codeMAC: codeMAC, codeDeliverable: true, createdAt: now,
                     expiresAt: now + policy.codeLifetime, resendAfter: now + policy.resendDelay, resends: 0,
                     attemptsLeft: policy.maxAttempts, state: .open)
    }

    enum VerifyOutcome: Equatable, Sendable {
        case accepted
        case wrong(attemptsLeft: Int)
        case attemptsExhausted
        case expired
        case alreadyUsed
        case dead
    }

    /// One attempt. `codeMatches` is the constant-time comparison the caller made.
    mutating func verify(codeMatches: Bool, now: Int64) -> VerifyOutcome {
        switch state {
        case .completed: return .alreadyUsed
        case .dead: return .dead
        case .open: break
        }
        guard now < expiresAt else { return .expired }
        if codeMatches && codeDeliverable {
            state = .completed
            return .accepted
        }
        attemptsLeft -= 1
        if attemptsLeft <= 0 {
            state = .dead
            return .attemptsExhausted
        }
        return .wrong(attemptsLeft: attemptsLeft)
    }

    /// The code was right but the registration cannot finish with what came with it (its email
    /// address is taken): the flow opens again for another try, at the cost of an attempt, since
    /// the answer tells whether an address is taken. The last attempt kills it.
    mutating func reopenUsingAnAttempt() {
        attemptsLeft -= 1
        state = attemptsLeft > 0 ? .open : .dead
    }

    enum ResendOutcome: Equatable, Sendable {
        case allowed
        case tooEarly(retryAfter: Int64)
        case tooManyResends
        case closed
    }

    /// Whether a new code may be sent now (expired flows may be resent: that is how a user
    /// recovers from an expired code without starting over).
    func checkResend(now: Int64, policy: Policy) -> ResendOutcome {
        guard state == .open else { return .closed }
        guard resends < policy.maxResends else { return .tooManyResends }
        guard now >= resendAfter else { return .tooEarly(retryAfter: resendAfter - now) }
        return .allowed
    }

    /// Replaces the code after a resend; the old code stops working.
    mutating func replaceCode(mac: [UInt8], now: Int64, policy: Policy) {
        codeMAC = mac
        codeDeliverable = true
        resends += 1
        expiresAt = now + policy.codeLifetime
        resendAfter = now + policy.resendDelay
    }
}
