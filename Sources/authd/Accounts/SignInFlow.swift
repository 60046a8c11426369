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

/// Who a sign-in in several steps belongs to: the machine it was opened through (nil: the authd
/// that holds the account, for a process on its own socket) and the local user there. Only they
/// take its next step (the PIN, the finger, a passkey's assertion); any other caller is refused
/// as if the flow did not exist, and the flow is left as it was for its owner.
struct FlowOwner: Sendable, Hashable {
    let machine: DeviceID?
    let user: UInt32?

    init(machine: DeviceID?, user: UInt32?) {
        self.machine = machine
        self.user = user
    }

    /// The caller that asks, as the account's home sees it.
    init(_ caller: Caller) {
        switch caller {
        case .local(let process): self.init(machine: nil, user: process.uid)
        case .forwarded(let machine, let process): self.init(machine: machine, user: process.uid)
        case .device(let machine): self.init(machine: machine, user: nil)
        }
    }

    /// The owner a flow recorded through the device its session will be bound to.
    init(device: DeviceIdentity) {
        self.init(machine: DeviceIdentity.machine(ofKey: device.key).map(DeviceID.init(description:)), user: device.machineUser)
    }

    /// How a table that keeps no device keeps the owner: `machine id|uid` (`-` for none).
    var stored: String {
        "\(machine?.description ?? "-")|\(user.map(String.init) ?? "-")"
    }
}

extension SignInFlow {
    /// Whether `owner` may take this flow's next step: the machine and local user that opened it.
    func belongs(to owner: FlowOwner) -> Bool {
        FlowOwner(device: device) == owner
    }
}

/// A session token as a caller presented it, with the machine the call came through (nil: a
/// process on this authd's own socket) — what `SessionBinding` decides on. Made from the call's
/// caller, never from a request's word.
struct PresentedSession: Sendable, Equatable {
    let token: String
    let machine: DeviceID?

    init(_ token: String, machine: DeviceID?) {
        self.token = token
        self.machine = machine
    }

    init(_ token: String, from caller: Caller) {
        self.init(token, machine: caller.machine)
    }

    /// A token a process on this machine presented (a machine method's caller).
    static func local(_ token: String) -> PresentedSession { PresentedSession(token, machine: nil) }
}

/// Which sessions a caller may use (DESIGN §8): a session is bound to the machine it was made on.
/// One made through a linked machine (its device key is `device:` and that machine's id) works
/// only in calls that machine forwards; one made on the hub's own socket (any other key) only
/// for callers on the hub itself. A token carried anywhere else is worth nothing.
enum SessionBinding {
    /// `machine`: the linked machine the call came through, nil for a process on this authd's socket.
    static func permits(sessionDeviceKey key: String, machine: DeviceID?) -> Bool {
        guard let machine else { return DeviceIdentity.machine(ofKey: key) == nil }
        return key == DeviceIdentity.key(ofMachine: machine)
    }
}
