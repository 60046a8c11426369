@testable import authd
import Testing

@Suite("Fingerprint policy (pure values)")
struct BiometricPolicyTests {
    @Test("fprintd's VerifyStatus results map to match, no-match, retry or failure", arguments: [
        ("verify-match", true, ScanStatus.match),
        ("verify-no-match", true, .noMatch),
        ("verify-disconnected", true, .failed(result: "verify-disconnected")),
        ("verify-unknown-error", true, .failed(result: "verify-unknown-error")),
        ("something-new", true, .failed(result: "something-new")),
    ])
    func finalStatuses(result: String, done: Bool, expected: ScanStatus) {
        let status = ScanStatus(result: result, done: done)
        #expect(status == expected)
        #expect(status.isFinal)
    }

    @Test("retry results (done = false) ask the user to try again and are not final",
          arguments: ["verify-retry-scan", "verify-swipe-too-short", "verify-finger-not-centered", "verify-remove-and-retry", "anything"])
    func retries(result: String) {
        let status = ScanStatus(result: result, done: false)
        guard case .retry(let message) = status else { Issue.record("\(result) is not a retry"); return }
        #expect(!message.isEmpty)
        #expect(!status.isFinal)
    }

    @Test("five no-matches in a row cut fingerprints off; a match or the password starts the count again")
    func gate() {
        var gate = BiometricGate(enabled: true)
        for expectedLeft in [4, 3, 2, 1] {
            gate.record(.noMatch)
            #expect(gate.attemptsLeft == expectedLeft)
            #expect(!gate.cutOff)
        }
        for outcome in [ScanOutcome.failed("x"), .timeout, .cancelled] {
            gate.record(outcome)
            #expect(gate.failures == 4, "\(outcome) says nothing about who is there")
        }
        gate.record(.noMatch)
        #expect(gate.cutOff)
        gate.record(.noMatch)
        #expect(gate.failures == BiometricGate.failureLimit)
        gate.passwordProved()
        #expect(!gate.cutOff && gate.failures == 0)
        gate.record(.noMatch)
        gate.record(.match)
        #expect(gate.failures == 0)
    }

    @Test("fingerprint-released PIN1: a refused PIN1 suspends it, a new PIN1 lifts the suspension")
    func pin1Release() {
        #expect(PIN1Release.fingerprint.afterCardRefusedPIN1() == .suspended)
        #expect(PIN1Release.off.afterCardRefusedPIN1() == .off)
        #expect(PIN1Release.suspended.afterPIN1Saved() == .fingerprint)
        #expect(PIN1Release.off.afterPIN1Saved() == .off)
        #expect(PIN1Release.fingerprint.afterPIN1Saved() == .fingerprint)
    }

    @Test("only plain login names reach fprintd, which builds a path from them")
    func userNames() {
        for good in ["alice", "bob.smith", "svc_1", "a-b"] { #expect(FingerprintUser.validated(good) == good) }
        for bad in [nil, "", "..", ".hidden", "-x", "a/b", "../etc", "al ice", "ä", String(repeating: "a", count: 65)] {
            #expect(FingerprintUser.validated(bad) == nil)
        }
    }
}

@Suite("What opens the local lock (pure values)")
struct UnlockMethodsTests {
    static let phone = "+37251234567"

    @Test("the order unlock asks in, and whether the lock may close at all", arguments: [
        // finger on, password, phone → can open, secret without --sms, secret with --sms, names
        (true, true, true, true, UnlockMethods.Secret.password, UnlockMethods.Secret?.some(.code(phone: phone)), ["fingerprint", "password", "sms"]),
        (false, true, false, true, .password, nil, ["password"]),
        (false, false, true, true, .code(phone: phone), .code(phone: phone), ["sms"]),
        (true, false, true, true, .code(phone: phone), .code(phone: phone), ["fingerprint", "sms"]),
    ])
    func order(finger: Bool, password: Bool, phone: Bool, canOpen: Bool, secret: UnlockMethods.Secret, bySMS: UnlockMethods.Secret?, names: [String]) {
        let methods = UnlockMethods(fingerprint: finger, password: password, phone: phone ? Self.phone : nil)
        #expect(methods.canOpen == canOpen)
        #expect(methods.secret(codeAsked: false) == secret)
        #expect(methods.secret(codeAsked: true) == bySMS)
        #expect(methods.names == names)
    }

    @Test("no password and no phone: nothing opens the lock, not even a finger, whose cut-off only a password or code lifts")
    func nothingOpens() {
        for finger in [false, true] {
            let methods = UnlockMethods(fingerprint: finger, password: false, phone: nil)
            #expect(!methods.canOpen)
            #expect(methods.secret(codeAsked: false) == nil)
            #expect(methods.names == [])
        }
    }

    @Test("a finger counts only while fingerprint unlock is on and not cut off")
    func fingerFromGate() {
        let credentials = LockCredentials(hasPassword: true, verifiedPhone: nil)
        #expect(UnlockMethods(gate: BiometricGate(enabled: true), credentials: credentials).fingerprint)
        #expect(!UnlockMethods(gate: BiometricGate(enabled: false), credentials: credentials).fingerprint)
        #expect(!UnlockMethods(gate: BiometricGate(enabled: true, failures: BiometricGate.failureLimit), credentials: credentials).fingerprint)
    }
}
