@testable import authd
import OpenSSLCrypto
import Protocol
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

/// Password sign-in and its second step against the directory on a real store.
@Suite("Password sign-in in the directory")
struct PasswordSignInTests {
    private static let password = SecretBytes(Array("correct horse battery".utf8))

    /// An account with `password` and, when asked, a PIN; returns its id and a session token.
    private static func account(_ fixture: TestDirectory, pin: Bool) async throws -> (String, String) {
        let signedIn = try await fixture.register()
        _ = try await fixture.directory.updateProfile(signedIn.session.token, email: nil, passwordHash: try await Argon2id.owasp.hashOffPool(password))
        if pin { try await fixture.directory.setPIN(signedIn.session.token, hash: try await Argon2id.owasp.hashOffPool(SecretBytes(Array("480913".utf8)))) }
        return (signedIn.account.id, signedIn.session.token)
    }

    @Test("a right password the device limit refuses changes nothing: the run of wrong ones still locks the account")
    func deviceLimitKeepsTheLockoutCount() async throws {
        var config = Config()
        config.deviceLimit = 1
        let fixture = try TestDirectory(config)
        let (account, _) = try await Self.account(fixture, pin: false)
        let wrong = SecretBytes(Array("not the password".utf8))
        for _ in 0..<3 {
            await #expect(throws: RPCError.failure(.authFailed, "")) {
                try await onTheWire { try await fixture.directory.signIn(password: wrong, login: .id(account), device: .init(key: "laptop", name: "l"), fingerprintAccounts: []) }
            }
        }
        await #expect(throws: RPCError.failure(.deviceLimitReached, "")) {
            try await onTheWire { try await fixture.directory.signIn(password: Self.password, login: .id(account), device: .init(key: "tablet", name: "t"), fingerprintAccounts: []) }
        }
        await #expect(throws: RPCError.failure(.authFailed, "")) {
            try await onTheWire { try await fixture.directory.signIn(password: wrong, login: .id(account), device: .init(key: "laptop", name: "l"), fingerprintAccounts: []) }
        }
        await #expect(throws: RPCError.failure(.accountLocked, ""), "the fifth wrong password in a row locks") {
            try await onTheWire { try await fixture.directory.signIn(password: wrong, login: .id(account), device: .init(key: "laptop", name: "l"), fingerprintAccounts: []) }
        }
    }

    @Test("the fingerprint step is decided as of when it was found waiting: a scan that outlasts the flow still signs in")
    func scanOutlastsTheFlow() async throws {
        let fixture = try TestDirectory()
        let (account, _) = try await Self.account(fixture, pin: true)
        guard case .secondStep(let flow, .fingerprint) = try await fixture.directory.signIn(
            password: Self.password, login: .id(account), device: .init(key: "laptop", name: "l"), fingerprintAccounts: [account]) else {
            Issue.record("no fingerprint step"); return
        }
        let pending = try #require(try await fixture.directory.pendingSignIn(flow))
        fixture.clock.advance(Double(SignInFlow.lifetime) + 10)
        #expect(try await fixture.directory.pendingSignIn(flow) == nil, "expired for a new look")
        guard case .signedIn(let signedIn) = try await fixture.directory.completeSignIn(pending, fingerMatched: true) else {
            Issue.record("the match did not sign in"); return
        }
        #expect(signedIn.account.id == account)
        await #expect(throws: RPCError.failure(.authFailed, ""), "the flow is used up") {
            try await onTheWire { try await fixture.directory.completeSignIn(pending, fingerMatched: true) }
        }
    }
}
