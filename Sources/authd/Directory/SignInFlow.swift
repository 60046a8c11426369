/// A sign-in that waits for its second step, as a pure value in the shape of `OTPChallenge`:
/// events in, decisions out, no I/O (the directory persists it; table-tested). A right password
/// opens it; the step is the account's PIN, or, on the machine where the account chose it, a
/// finger. A finger that does not do hands over to the PIN when the account has one, and ends
/// the sign-in otherwise (the way out is then an SMS code).
struct SignInFlow: Sendable, Equatable {
    enum Step: String, Sendable {
        case pin, fingerprint
    }

    let id: String
    let account: String
    let device: DeviceIdentity
    private(set) var step: Step
    let expiresAt: Int64

    /// How long a sign-in waits for its second step.
    static let lifetime: Int64 = 300

    init(id: String, account: String, device: DeviceIdentity, step: Step, expiresAt: Int64) {
        self.id = id
        self.account = account
        self.device = device
        self.step = step
        self.expiresAt = expiresAt
    }

    /// What follows a right password: the finger when the account chose it on this machine,
    /// else its PIN, else nothing (the password signs in alone).
    static func stepAfterPassword(fingerprintHere: Bool, hasPIN: Bool) -> Step? {
        fingerprintHere ? .fingerprint : hasPIN ? .pin : nil
    }

    static func open(id: String, account: String, device: DeviceIdentity, step: Step, now: Int64) -> SignInFlow {
        SignInFlow(id: id, account: account, device: device, step: step, expiresAt: now + lifetime)
    }

    enum Event: Sendable, Equatable {
        /// A PIN was checked (the PIN's lock and counters are the account's business).
        case pin(correct: Bool)
        /// The machine scanned a finger for this sign-in.
        case fingerprint(matched: Bool, accountHasPIN: Bool)
    }

    enum Decision: Sendable, Equatable {
        /// Sign in with these methods (RFC 8176 `amr`); the flow is used up.
        case signIn(amr: [String])
        /// A wrong PIN: the flow stays for another try.
        case retry
        /// The finger did not do: the same flow continues with the PIN.
        case continueWithPIN
        /// The finger did not do and there is no PIN: the flow ends.
        case end
        /// Expired, or not the step this flow waits for: refused like a wrong secret, nothing changes.
        case refuse
    }

    /// One event. The caller persists the new state (or deletes the flow) in the same change
    /// that acts on the decision.
    mutating func handle(_ event: Event, now: Int64) -> Decision {
        guard now < expiresAt else { return .refuse }
        switch (step, event) {
        case (.pin, .pin(let correct)):
            return correct ? .signIn(amr: ["pwd", "pin"]) : .retry
        case (.fingerprint, .fingerprint(true, _)):
            return .signIn(amr: ["pwd", "fpt"])
        case (.fingerprint, .fingerprint(false, let hasPIN)):
            guard hasPIN else { return .end }
            step = .pin
            return .continueWithPIN
        case (.pin, .fingerprint), (.fingerprint, .pin):
            return .refuse
        }
    }
}
