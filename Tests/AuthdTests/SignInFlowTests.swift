@testable import authd
import Testing

@Suite("Sign-in second steps (SignInFlow)")
struct SignInFlowTests {
    private static let device = DeviceIdentity(key: "k", name: "n")

    private static func flow(_ step: SignInFlow.Step) -> SignInFlow {
        .open(id: "login_1", account: "acc", device: device, step: step, now: 1000)
    }

    @Test("the step after a right password", arguments: [
        (true, true, SignInFlow.Step.fingerprint), (true, false, .fingerprint), (false, true, .pin), (false, false, nil),
    ] as [(Bool, Bool, SignInFlow.Step?)])
    func stepAfterPassword(fingerprintHere: Bool, hasPIN: Bool, step: SignInFlow.Step?) {
        #expect(SignInFlow.stepAfterPassword(fingerprintHere: fingerprintHere, hasPIN: hasPIN) == step)
    }

    @Test("events in, decisions out", arguments: [
        (SignInFlow.Step.pin, SignInFlow.Event.pin(correct: true), 1100, SignInFlow.Decision.signIn(amr: ["pwd", "pin"]), SignInFlow.Step.pin),
        (.pin, .pin(correct: false), 1100, .retry, .pin),
        (.pin, .fingerprint(matched: true, accountHasPIN: true), 1100, .refuse, .pin),
        (.fingerprint, .fingerprint(matched: true, accountHasPIN: false), 1100, .signIn(amr: ["pwd", "fpt"]), .fingerprint),
        (.fingerprint, .fingerprint(matched: false, accountHasPIN: true), 1100, .continueWithPIN, .pin),
        (.fingerprint, .fingerprint(matched: false, accountHasPIN: false), 1100, .end, .fingerprint),
        (.fingerprint, .pin(correct: true), 1100, .refuse, .fingerprint),
        // Expired: whatever happens is refused and changes nothing.
        (.pin, .pin(correct: true), 1300, .refuse, .pin),
        (.fingerprint, .fingerprint(matched: false, accountHasPIN: true), 1300, .refuse, .fingerprint),
    ] as [(SignInFlow.Step, SignInFlow.Event, Int64, SignInFlow.Decision, SignInFlow.Step)])
    func transitions(step: SignInFlow.Step, event: SignInFlow.Event, now: Int64, decision: SignInFlow.Decision, after: SignInFlow.Step) {
        var flow = Self.flow(step)
        #expect(flow.handle(event, now: now) == decision)
        #expect(flow.step == after)
    }

    @Test("a flow lives for five minutes")
    func lifetime() {
        #expect(Self.flow(.pin).expiresAt == 1000 + 300)
        var flow = Self.flow(.pin)
        #expect(flow.handle(.pin(correct: true), now: 1299) == .signIn(amr: ["pwd", "pin"]))
        var late = Self.flow(.pin)
        #expect(late.handle(.pin(correct: true), now: 1300) == .refuse)
    }
}
