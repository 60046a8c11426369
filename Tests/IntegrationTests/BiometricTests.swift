import Foundation
import Glibc
import Protocol
import Synchronization
import Testing

/// Lock, unlock and fingerprints against the fprintd mock on a private bus
/// (`FprintdRig`): the daemon's verifier, its fallbacks, the cut-off, and that every
/// fingerprint session ends with Release. More in BiometricFlowTests.swift (ID card PIN1,
/// fast-forward login, the fingerprint sign-in step, authctl).
@Suite("Lock and fingerprints", .serialized)
struct BiometricTests {
    typealias Step = FprintdRig.Step

    // MARK: Lock

    @Test("lock needs a remembered account; while locked every guarded method answers session.locked; the password opens it")
    func lockGuards() throws {
        let f = try FingerprintFixture()
        #expect(try f.client.call("lock").errorReason == "lock.no_account")
        #expect(try f.authLocalReason() == nil, "nothing to lock yet: auth.local works")
        try f.register()
        let locked = try f.client.result("lock")
        #expect(locked["locked"] == true)
        #expect(locked["account"] == f.accountID)
        let status = try f.client.result("lock.status")
        #expect(status["locked"] == true)
        #expect(status["account"] == f.accountID)
        #expect(status["idle_seconds"] == 900, "the default auto-lock")

        let guarded: [(String, JSONValue)] = [
            ("auth.local", ["aud": "app.example"]),
            ("auth.token", ["session": f.token, "aud": "app.example"]),
            ("card.read", [:]), ("card.login", ["aud": "app.example"]), ("card.sign", [:]), ("card.can.get", [:]),
            ("biometric.enable", [:]), ("card.biometric.enable", [:]),
            // A link is a way in to the Unix login: someone at the locked keyboard must not add theirs.
            ("pam.link.card", [:]), ("pam.link.account", [:]),
        ]
        for (method, params) in guarded {
            #expect(try f.client.call(method, params).errorReason == "session.locked", "\(method)")
        }
        #expect(try f.calls("Claim") == 0, "biometric.enable was refused before touching the reader")
        // Methods that issue nothing still answer.
        #expect(try f.client.result("session.get", ["session": f.token])["account"]?["id"] == f.accountID)
        #expect(try f.status()["available"] == true)

        #expect(try f.client.call("unlock", ["password": "not the password"]).errorReason == "auth.failed")
        #expect(try f.isLocked(), "a wrong password leaves it locked")
        #expect(try f.client.call("unlock.biometric").errorReason == "biometric.not_enabled")
        #expect(try f.isLocked())
        let unlocked = try f.client.result("unlock", ["password": .string(FingerprintFixture.password)])
        #expect(unlocked == ["locked": false, "method": "password", "account": f.accountID])
        #expect(try !f.isLocked())
        #expect(try f.authLocalReason() == nil)
        #expect(try f.client.result("auth.token", ["session": f.token, "aud": "app.example"])["token"]?.stringValue != nil)
    }

    @Test("the lock survives a restart and kill -9")
    func lockSurvivesRestart() throws {
        let f = try FingerprintFixture()
        try f.register()
        try f.lock()
        try f.restart()
        #expect(try f.isLocked(), "locked after SIGTERM and a new start")
        #expect(try f.authLocalReason() == "session.locked")
        try f.restart(kill9: true)
        #expect(try f.isLocked(), "locked after kill -9 and a new start")
        #expect(try f.authLocalReason() == "session.locked")
        _ = try f.client.result("unlock", ["password": .string(FingerprintFixture.password)])
        try f.restart()
        #expect(try !f.isLocked(), "unlocked stays unlocked too")
        #expect(try f.authLocalReason() == nil)
    }

    @Test("auto-lock: idle past [lock] idle locks, and it sticks until unlock")
    func idleAutoLock() throws {
        // The lock counts whole seconds; 3 s leaves room for a slow machine between registering
        // and the first call, and 4.5 s of waiting is past the idle time whatever the rounding.
        let f = try FingerprintFixture(config: "[lock]\nidle = 3\n")
        try f.register()
        #expect(try f.authLocalReason() == nil, "just signed in: open")
        #expect(try f.client.result("lock.status")["idle_seconds"] == 3)
        usleep(4_500_000)
        #expect(try f.isLocked(), "idle for longer than 3 s")
        #expect(try f.authLocalReason() == "session.locked")
        #expect(try f.client.call("auth.token", ["session": f.token, "aud": "a"]).errorReason == "session.locked")
        try f.restart()
        #expect(try f.isLocked(), "an idle lock is kept like an explicit one")
        #expect(try f.client.result("unlock", ["password": .string(FingerprintFixture.password)])["locked"] == false)
        #expect(try f.authLocalReason() == nil)
    }

    /// Registers an account of someone else's at `f`'s keyboard (their phone, their password),
    /// then signs in to it with its password; its phone number.
    @discardableResult
    static func anotherAccount(_ f: FingerprintFixture) throws -> String {
        let other = "+37251234568"
        let flow = try #require(try RegistrationTests.start(f.client, other)["result"]?["flow"])
        let code = try RegistrationTests.spooledCode(f.daemon, to: other)
        _ = try f.client.result("account.register.verify", ["flow": flow, "code": .string(code), "password": "someone else's passphrase",
                                                             "device": ["key": "other", "name": "Other"]])
        _ = try f.client.result("auth.login", ["login": .string(other), "password": "someone else's passphrase", "device": ["key": "other"]])
        return other
    }

    @Test("while locked, signing in to another account neither opens the lock nor lifts the fingerprint cut-off")
    func signInElsewhereKeepsLock() throws {
        let f = try FingerprintFixture()
        try f.register()
        try f.enableFingerprint()
        try f.lock()
        for _ in 0..<5 {
            try f.rig.setScript([.noMatch])
            _ = try f.client.exchange("unlock.biometric")
        }
        #expect(try f.status()["cut_off"] == true)
        // Someone at the keyboard registers an account of their own (their phone), then signs in to it with its password.
        try Self.anotherAccount(f)
        let lock = try f.client.result("lock.status")
        let authLocal = try f.authLocalReason()
        let cutOff = try f.status()["cut_off"]
        #expect(lock["locked"] == true, "the lock is still closed")
        #expect(authLocal == "session.locked")
        #expect(lock["account"] == f.accountID, "the remembered account did not change while locked")
        #expect(cutOff == true, "another account's password proves nothing about this user")
    }

    @Test("unlocked too, while fingerprints are cut off a sign-in to another account neither lifts the cut-off nor changes the remembered account; its own password lifts it; once it is deactivated, another account takes its place and lifts it")
    func signInElsewhereKeepsCutOff() throws {
        let f = try FingerprintFixture()
        try f.register()
        try f.enableFingerprint()
        try f.rig.setScript(Array(repeating: .noMatch, count: 5))
        #expect(try f.client.exchange("auth.fast").reason == "biometric.cut_off")
        #expect(try !f.isLocked())
        // Someone at the unlocked keyboard registers an account of their own, then signs in to it with its password.
        let other = try Self.anotherAccount(f)
        #expect(try f.status()["cut_off"] == true, "another account's password proves nothing about this user")
        #expect(try f.client.result("lock.status")["account"] == f.accountID, "nor does it become the account the lock opens with")
        _ = try f.client.result("auth.login", ["login": .string(FingerprintFixture.phone), "password": .string(FingerprintFixture.password)])
        #expect(try f.status()["cut_off"] == false, "the remembered account's own password")

        // Cut off again, and the remembered account deactivated: nothing of it could lift the cut-off now.
        try f.rig.setScript(Array(repeating: .noMatch, count: 5))
        #expect(try f.client.exchange("auth.fast").reason == "biometric.cut_off")
        _ = try f.client.result("account.deactivate", ["session": f.token, "password": .string(FingerprintFixture.password)])
        _ = try f.client.result("auth.login", ["login": .string(other), "password": "someone else's passphrase", "device": ["key": "other"]])
        #expect(try f.client.result("lock.status")["account"] != f.accountID, "the other account is remembered now")
        let unlocked = try f.client.exchange("unlock", answers: ["password": "someone else's passphrase"])
        #expect(unlocked.result?["method"] == "password", "\(unlocked.response)")
        #expect(try f.status()["cut_off"] == false, "its password lifts the cut-off")
    }

    // MARK: Fingerprint unlock

    @Test("biometric.enable takes one matching scan; unlock.biometric on a match opens the lock; the reader is released")
    func unlockMatch() throws {
        let f = try FingerprintFixture()
        try f.register()
        let before = try f.status()
        #expect(before["enabled"] == false)
        #expect(before["available"] == true)
        #expect(before["reader"] == "authd mock reader")
        #expect(before["fingers"] == ["right-index-finger"])
        #expect(before["failures"] == 0)
        #expect(before["cut_off"] == false)
        #expect(before["card_pin1"] == "off")
        #expect(try f.client.call("unlock.biometric").errorReason == "biometric.not_enabled")

        try f.rig.setScript([.match])
        let enable = try f.client.exchange("biometric.enable")
        #expect(enable.result?["enabled"] == true, "\(enable.response)")
        #expect(enable.fingerprintMessages.first?.hasPrefix("Touch the fingerprint reader") == true, "\(enable.prompts)")
        try f.expectReleased("after biometric.enable")

        try f.lock()
        try f.rig.setScript([.match])
        let unlock = try f.client.exchange("unlock.biometric")
        #expect(unlock.result == ["locked": false, "method": "fingerprint", "account": f.accountID], "\(unlock.response)")
        let prompt = try #require(unlock.prompts.first)
        #expect(unlock.prompts.count == 1)
        #expect(prompt["kind"] == "fingerprint")
        #expect(prompt["expects_answer"] == false)
        #expect(prompt["seconds_left"] == 30, "the default [biometric] timeout")
        #expect(prompt["message"] == "Touch the fingerprint reader to unlock authd")
        #expect(try !f.isLocked())
        #expect(try f.authLocalReason() == nil)
        let counts = try f.rig.callCounts()
        #expect(counts["VerifyStart"] == 2 && counts["VerifyStop"] == 2 && counts["Claim"] == 2, "\(counts)")
        try f.expectReleased("after unlock.biometric")
        #expect(f.rig.mockLog.contains("Claim \"\(FingerprintFixture.user)\""), "claimed for the caller's login name:\n\(f.rig.mockLog)")
    }

    @Test("a finger that does not match: biometric.no_match with the attempts left, still locked; the next match resets the count")
    func unlockNoMatch() throws {
        let f = try FingerprintFixture()
        try f.register()
        try f.enableFingerprint()
        try f.lock()
        try f.rig.setScript([.noMatch])
        let first = try f.client.exchange("unlock.biometric")
        #expect(first.reason == "biometric.no_match", "\(first.response)")
        #expect(first.data?["attempts_left"] == 4)
        #expect(try f.isLocked())
        #expect(try f.status()["failures"] == 1)
        try f.expectReleased("after a no-match")

        try f.rig.setScript([.noMatch])
        #expect(try f.client.exchange("unlock.biometric").data?["attempts_left"] == 3, "the count goes on across requests")
        try f.rig.setScript([.match])
        #expect(try f.client.exchange("unlock.biometric").result?["method"] == "fingerprint")
        #expect(try f.status()["failures"] == 0, "a match starts the count again")
        try f.expectReleased()
    }

    @Test("retry statuses become fingerprint prompts of the same verification, then the match unlocks")
    func retryStatuses() throws {
        let f = try FingerprintFixture()
        try f.register()
        try f.enableFingerprint()
        try f.lock()
        let startsBefore = try f.calls("VerifyStart")
        try f.rig.setScript([.retry("verify-retry-scan"), .retry("verify-swipe-too-short"), .retry("verify-finger-not-centered"),
                             .retry("verify-remove-and-retry"), .match])
        let unlock = try f.client.exchange("unlock")
        #expect(unlock.result?["method"] == "fingerprint", "\(unlock.response)")
        #expect(unlock.fingerprintMessages == [
            "Touch the fingerprint reader to unlock authd",
            "The scan did not work; touch the fingerprint reader again",
            "The swipe was too short; swipe your finger again",
            "Your finger was not centred; touch the reader again",
            "Lift your finger and touch the reader again",
        ])
        #expect(Set(unlock.prompts.compactMap { $0["prompt_id"] }).count == 1, "one prompt, updated")
        #expect(unlock.ofKind("password").isEmpty)
        #expect(try f.calls("VerifyStart") == startsBefore + 1, "retries are fprintd's own rescans")
        #expect(try f.status()["failures"] == 0, "retries are not failures")
        try f.expectReleased()
    }

    @Test("unlock without a password: a finger that does not match is asked again, then a match unlocks")
    func unlockRetriesAfterNoMatch() throws {
        let f = try FingerprintFixture()
        try f.register()
        try f.enableFingerprint()
        try f.lock()
        try f.rig.setScript([.noMatch, .noMatch, .match])
        let unlock = try f.client.exchange("unlock")
        #expect(unlock.result?["method"] == "fingerprint", "\(unlock.response)")
        #expect(unlock.fingerprintMessages == [
            "Touch the fingerprint reader to unlock authd",
            "Not recognised; touch the reader again (4 tries left)",
            "Not recognised; touch the reader again (3 tries left)",
        ])
        #expect(unlock.ofKind("password").isEmpty)
        #expect(try f.status()["failures"] == 0)
        try f.expectReleased()
    }

    @Test("reader errors: verify-unknown-error and verify-disconnected → biometric.failed, not counted as failures")
    func readerErrors() throws {
        let f = try FingerprintFixture()
        try f.register()
        try f.enableFingerprint()
        try f.lock()
        for step in [Step.unknownError, Step.disconnected] {
            try f.rig.setScript([.retry(), step])
            let outcome = try f.client.exchange("unlock.biometric")
            #expect(outcome.reason == "biometric.failed", "\(outcome.response)")
            #expect(outcome.data?["detail"]?.stringValue?.contains(step.result) == true, "\(outcome.response)")
            try f.expectReleased(step.result)
        }
        #expect(try f.isLocked())
        let status = try f.status()
        #expect(status["failures"] == 0, "a broken reader says nothing about who is there")
        #expect(status["enabled"] == true)
    }

    @Test("unlock falls back to a password prompt when the reader fails; the answer unlocks with method password")
    func fallbackToPassword() throws {
        let f = try FingerprintFixture()
        try f.register()
        try f.enableFingerprint()
        try f.lock()
        try f.rig.setScript([.unknownError])
        let wrong = try f.client.exchange("unlock", answers: ["password": "not the password"])
        #expect(wrong.reason == "auth.failed", "\(wrong.response)")
        #expect(try f.isLocked())
        try f.expectReleased()

        try f.rig.setScript([.unknownError])
        let unlock = try f.client.exchange("unlock", answers: ["password": FingerprintFixture.password])
        #expect(unlock.result == ["locked": false, "method": "password", "account": f.accountID], "\(unlock.response)")
        #expect(unlock.kinds == ["fingerprint", "password"])
        let password = try #require(unlock.ofKind("password").first)
        #expect(password["expects_answer"] == true)
        #expect(password["message"]?.stringValue?.contains("verify-unknown-error") == true, "the prompt says why: \(password)")
        #expect(password["message"]?.stringValue?.hasSuffix("Enter the account password to unlock authd") == true)
        #expect(try !f.isLocked())
        try f.expectReleased()

        // Fingerprint unlock off: straight to the password, the reader untouched.
        _ = try f.client.result("biometric.disable")
        try f.lock()
        let starts = try f.calls("VerifyStart")
        let plain = try f.client.exchange("unlock", answers: ["password": FingerprintFixture.password])
        #expect(plain.result?["method"] == "password")
        #expect(plain.kinds == ["password"])
        #expect(try f.calls("VerifyStart") == starts)
    }

    @Test("cancelling the fingerprint prompt means 'use the password': the scan stops at once and the reader is released")
    func cancelFingerprintPrompt() throws {
        let f = try FingerprintFixture()
        try f.register()
        try f.enableFingerprint()
        try f.lock()
        try f.rig.setScript([])  // no finger ever: only the cancel ends this scan (the timeout is 30 s)
        let started = Date()
        let unlock = try f.client.exchange("unlock") { prompt in
            switch prompt["kind"]?.stringValue {
            case "fingerprint": .cancel
            case "password": .answer(FingerprintFixture.password)
            default: .ignore
            }
        }
        #expect(Date().timeIntervalSince(started) < 15, "ended by the cancel, not the 30 s timeout")
        #expect(unlock.result?["method"] == "password", "\(unlock.response)")
        #expect(unlock.kinds == ["fingerprint", "password"])
        #expect(unlock.ofKind("password").first?["message"] == "Enter the account password to unlock authd")
        #expect(try f.calls("VerifyStop") == f.calls("VerifyStart"))
        #expect(try f.status()["failures"] == 0, "a cancel is not a failure")
        try f.expectReleased()

        // unlock.biometric has no fallback: the cancel ends it with user.cancelled.
        try f.lock()
        let cancelled = try f.client.exchange("unlock.biometric") { $0["kind"] == "fingerprint" ? .cancel : .ignore }
        #expect(cancelled.reason == "user.cancelled", "\(cancelled.response)")
        #expect(try f.isLocked())
        try f.expectReleased()
    }

    @Test("no finger within [biometric] timeout → biometric.timeout, released; unlock then asks for the password")
    func timeout() throws {
        let f = try FingerprintFixture(config: "[biometric]\ntimeout = 2\n")
        try f.register()
        try f.enableFingerprint()
        try f.lock()
        try f.rig.setScript([])
        let started = Date()
        let outcome = try f.client.exchange("unlock.biometric")
        let elapsed = Date().timeIntervalSince(started)
        #expect(outcome.reason == "biometric.timeout", "\(outcome.response)")
        #expect(outcome.data?["timeout_s"] == 2)
        #expect(outcome.prompts.first?["seconds_left"] == 2)
        #expect(elapsed >= 1.9, "waited the configured time: \(elapsed)")
        #expect(try f.isLocked())
        #expect(try f.status()["failures"] == 0, "a timeout is not a failure")
        try f.expectReleased("after a timeout")

        let unlock = try f.client.exchange("unlock", answers: ["password": FingerprintFixture.password])
        #expect(unlock.result?["method"] == "password", "\(unlock.response)")
        #expect(unlock.kinds == ["fingerprint", "password"])
        #expect(unlock.ofKind("password").first?["message"]?.stringValue?.contains("within 2 s") == true)
        try f.expectReleased("after the fallback")
    }

    // MARK: The reader goes away

    @Test("the reader vanishing mid-verify → biometric.failed; the reader is gone, unlock falls back; a new reader works")
    func deviceVanishes() throws {
        let f = try FingerprintFixture()
        try f.register()
        try f.enableFingerprint()
        try f.lock()
        try f.rig.setScript([.retry(), .vanish.after(50)])
        let outcome = try f.client.exchange("unlock.biometric")
        #expect(outcome.reason == "biometric.failed", "\(outcome.response)")
        #expect(outcome.data?["detail"] == "the fingerprint reader was disconnected")
        #expect(outcome.fingerprintMessages.count == 2, "the retry before the unplug was shown: \(outcome.prompts)")
        #expect(try f.rig.claimedBy() == "")
        #expect(try f.isLocked())
        let status = try f.status()
        #expect(status["available"] == false)
        #expect(status["unavailable_reason"] == "no fingerprint reader is connected")

        let unlock = try f.client.exchange("unlock", answers: ["password": FingerprintFixture.password])
        #expect(unlock.result?["method"] == "password", "\(unlock.response)")
        #expect(unlock.kinds == ["password"], "no reader, no fingerprint prompt")
        #expect(unlock.prompts.first?["message"]?.stringValue?.contains("no fingerprint reader is connected") == true)

        // The reader is plugged in again (a new fprintd with the device).
        f.rig.stopMock()
        try f.rig.startMock(enrolled: [FingerprintFixture.user: FingerprintFixture.finger], script: [.match])
        try f.lock()
        #expect(try f.client.exchange("unlock.biometric").result?["method"] == "fingerprint")
        try f.expectReleased()
    }

    @Test("fprintd quitting mid-verify → biometric.failed; a restarted fprintd works")
    func fprintdQuits() throws {
        let f = try FingerprintFixture()
        try f.register()
        try f.enableFingerprint()
        try f.lock()
        try f.rig.setScript([.retry(), .quit.after(50)])
        let outcome = try f.client.exchange("unlock.biometric")
        #expect(outcome.reason == "biometric.failed", "\(outcome.response)")
        #expect(outcome.data?["detail"] == "fprintd stopped")
        #expect(f.rig.mockExits(within: .seconds(5)))
        #expect(try f.status()["unavailable_reason"] == "fprintd is not running or not installed")
        #expect(try f.isLocked())

        try f.rig.startMock(enrolled: [FingerprintFixture.user: FingerprintFixture.finger], script: [.match])
        #expect(try f.client.exchange("unlock.biometric").result?["method"] == "fingerprint")
        try f.expectReleased()
    }

    @Test("fprintd absent (ServiceUnknown): unavailable everywhere, unlock goes to the password at once")
    func fprintdAbsent() throws {
        let f = try FingerprintFixture(startMock: false)
        try f.register()
        let status = try f.status()
        #expect(status["available"] == false)
        #expect(status["unavailable_reason"] == "fprintd is not running or not installed")
        #expect(status["fingers"] == [])
        let enable = try f.client.exchange("biometric.enable")
        #expect(enable.reason == "biometric.unavailable", "\(enable.response)")
        #expect(enable.data?["detail"] == "fprintd is not running or not installed")
        #expect(enable.prompts.isEmpty, "no 'touch the reader' without a reader")

        // Enabled while fprintd ran, then it went away.
        try f.rig.startMock(enrolled: [FingerprintFixture.user: FingerprintFixture.finger])
        try f.enableFingerprint()
        f.rig.stopMock()
        try f.lock()
        let once = try f.client.exchange("unlock.biometric")
        #expect(once.reason == "biometric.unavailable", "\(once.response)")
        #expect(once.data?["detail"] == "fprintd is not running or not installed")
        let unlock = try f.client.exchange("unlock", answers: ["password": FingerprintFixture.password])
        #expect(unlock.result?["method"] == "password", "\(unlock.response)")
        #expect(unlock.kinds == ["password"])
        #expect(unlock.prompts.first?["message"]?.stringValue?.contains("fprintd is not running") == true)
        #expect(try f.client.exchange("auth.fast").reason == "biometric.unavailable")
        #expect(try f.status()["failures"] == 0)
    }

    @Test("no reader, no enrolled finger, a reader in use: biometric.unavailable with the reason, nothing claimed")
    func unavailableReasons() throws {
        let noDevice = try FingerprintFixture(device: false)
        try noDevice.register()
        #expect(try noDevice.status()["unavailable_reason"] == "no fingerprint reader is connected")
        let refused = try noDevice.client.exchange("biometric.enable")
        #expect(refused.reason == "biometric.unavailable")
        #expect(refused.data?["detail"] == "no fingerprint reader is connected")
        #expect(try noDevice.calls("Claim") == 0)

        let f = try FingerprintFixture()
        try f.register()
        try f.enableFingerprint()
        try f.rig.setEnrolled([:])
        let status = try f.status()
        #expect(status["available"] == false)
        #expect(status["unavailable_reason"] == "no finger is enrolled for this user (fprintd-enroll)")
        try f.lock()
        let claims = try f.calls("Claim")
        let noFinger = try f.client.exchange("unlock.biometric")
        #expect(noFinger.reason == "biometric.unavailable")
        #expect(noFinger.data?["detail"] == "no finger is enrolled for this user (fprintd-enroll)")
        #expect(try f.calls("Claim") == claims, "checked before claiming")

        // Another program holds the reader.
        try f.rig.setEnrolled([FingerprintFixture.user: FingerprintFixture.finger])
        try f.rig.call(FprintdRig.busName, FprintdRig.devicePath, "net.reactivated.Fprint.Device", "Claim", ["s", "someone-else"])
        let busy = try f.client.exchange("unlock.biometric")
        #expect(busy.reason == "biometric.unavailable", "\(busy.response)")
        #expect(busy.data?["detail"] == "the fingerprint reader is in use by another program")
        #expect(try f.rig.claimedBy() == "someone-else", "authd did not release a claim that is not its own")
        try f.rig.call(FprintdRig.busName, FprintdRig.devicePath, "net.reactivated.Fprint.Device", "Release")
        // (The mock counts failed calls too, so from here on count the difference.)
        let before = try f.rig.callCounts()
        try f.rig.setScript([.match])
        #expect(try f.client.exchange("unlock.biometric").result?["method"] == "fingerprint")
        let after = try f.rig.callCounts()
        #expect(after["Claim", default: 0] - before["Claim", default: 0] == 1)
        #expect(after["Release", default: 0] - before["Release", default: 0] == 1)
        #expect(try f.rig.claimedBy() == "")
    }

    // MARK: The cut-off

    @Test("five fingers in a row that do not match (across requests and a restart) cut fingerprints off until a password unlock")
    func cutOff() throws {
        let f = try FingerprintFixture()
        try f.register()
        try f.enableFingerprint()
        try f.lock()
        var left: [JSONValue?] = []
        for round in 0..<5 {
            if round == 2 {
                try f.restart()  // the count is kept in the store
                #expect(try f.status()["failures"] == 2)
            }
            try f.rig.setScript([.noMatch])
            let outcome = try f.client.exchange("unlock.biometric")
            left.append(outcome.reason == "biometric.no_match" ? outcome.data?["attempts_left"] : .string(outcome.reason ?? "?"))
            try f.expectReleased("round \(round)")
        }
        #expect(left == [4, 3, 2, 1, "biometric.cut_off"])
        let status = try f.status()
        #expect(status["cut_off"] == true)
        #expect(status["failures"] == 5)
        #expect(status["enabled"] == true, "still chosen, only suspended")

        // Cut off: no fingerprint use reaches the reader.
        try f.rig.setScript([.match])
        let counts = try f.rig.callCounts()
        #expect(try f.client.exchange("unlock.biometric").reason == "biometric.cut_off")
        let fast = try f.client.exchange("auth.fast")
        #expect(fast.reason == "biometric.cut_off", "\(fast.response)")
        #expect(fast.prompts.isEmpty)
        try f.restart()
        #expect(try f.client.exchange("unlock.biometric").reason == "biometric.cut_off", "the cut-off survives a restart")
        let unlock = try f.client.exchange("unlock", answers: ["password": FingerprintFixture.password])
        #expect(unlock.result?["method"] == "password", "\(unlock.response)")
        #expect(unlock.kinds == ["password"], "no fingerprint prompt while cut off")
        #expect(unlock.prompts.first?["message"]?.stringValue?.hasPrefix("Fingerprints are off") == true)
        let after = try f.rig.callCounts()
        #expect(after["VerifyStart"] == counts["VerifyStart"] && after["Claim"] == counts["Claim"], "no scan while cut off: \(counts) → \(after)")

        // The password lifted it.
        let lifted = try f.status()
        #expect(lifted["cut_off"] == false)
        #expect(lifted["failures"] == 0)
        try f.lock()
        #expect(try f.client.exchange("unlock.biometric").result?["method"] == "fingerprint")
        try f.expectReleased()
    }

    @Test("concurrent requests cannot scan past the cut-off: requests queued for the reader are refused once it trips")
    func cutOffHoldsUnderConcurrency() throws {
        let f = try FingerprintFixture()
        try f.register()
        try f.enableFingerprint()
        try f.lock()
        let starts = try f.calls("VerifyStart")
        // Eight requests at once, one scan each; the reader takes them in turn. Only the first
        // five may scan: the match behind them must never be reached.
        try f.rig.setScript(Array(repeating: Step.noMatch.after(100), count: 7) + [.match])
        let socket = f.daemon.socketPath
        let reasons = Mutex<[String]>([])
        let errors = onThreads(8) { _ in
            let client = try LineClient(socketPath: socket, receiveTimeoutSeconds: 30)
            let outcome = try client.exchange("unlock.biometric")
            reasons.withLock { $0.append(outcome.result?["method"]?.stringValue ?? outcome.reason ?? "?") }
        }
        #expect(errors.isEmpty, "\(errors)")
        let seen = reasons.withLock { $0 }
        #expect(seen.filter { $0 == "biometric.no_match" }.count == 4, "\(seen)")
        #expect(seen.filter { $0 == "biometric.cut_off" }.count == 4, "\(seen)")
        #expect(try f.calls("VerifyStart") - starts == 5, "five scans, not one more")
        #expect(try f.isLocked())
        let status = try f.status()
        #expect(status["cut_off"] == true && status["failures"] == 5, "\(status)")
        try f.expectReleased()
    }

    @Test("unlock without a password: five non-matching fingers in one request cut off, then the password prompt follows")
    func cutOffWithinOneUnlock() throws {
        let f = try FingerprintFixture()
        try f.register()
        try f.enableFingerprint()
        try f.lock()
        let starts = try f.calls("VerifyStart")
        try f.rig.setScript(Array(repeating: .noMatch, count: 6))
        let unlock = try f.client.exchange("unlock", answers: ["password": FingerprintFixture.password])
        #expect(unlock.result?["method"] == "password", "\(unlock.response)")
        #expect(unlock.fingerprintMessages == [
            "Touch the fingerprint reader to unlock authd",
            "Not recognised; touch the reader again (4 tries left)",
            "Not recognised; touch the reader again (3 tries left)",
            "Not recognised; touch the reader again (2 tries left)",
            "Not recognised; touch the reader again (1 try left)",
        ])
        #expect(try f.calls("VerifyStart") == starts + 5, "exactly five scans")
        #expect(unlock.prompts.last?["kind"] == "password")
        #expect(unlock.prompts.last?["message"]?.stringValue?.hasPrefix("Fingerprints are off") == true)
        #expect(try f.status()["failures"] == 0, "the password that followed lifted the cut-off")
        try f.expectReleased()
    }
}
