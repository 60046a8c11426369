import Foundation
import Glibc
import Protocol
import Testing

// The flows a finger completes: the ID card's PIN1 released by a finger, fast-forward
// login, the fingerprint as an account's second step, and authctl. Nested in BiometricTests so
// that `--filter BiometricTests` runs them, serialized with the rest.
extension BiometricTests {
    @Suite("Fingerprint-released PIN1")
    struct CardPIN1 {
        private func verifiedClaims(_ token: String?, card: CardRig, aud: String) throws -> JSONValue {
            let verified = try DaemonHarness.run(["/usr/bin/python3", CardTests.verifier, try #require(token), card.caPath, aud])
            guard verified.status == 0 else { throw HarnessError("independent verification failed: \(verified.stderr)") }
            return try WireCodec.decode(JSONValue.self, from: Data(verified.stdout.utf8))
        }

        @Test("a match releases the saved PIN1 (no PIN1 prompt); a finger that fails or no fprintd leads to a PIN1 prompt saying why")
        func releasedByFinger() throws {
            let card = try CardRig()
            try card.insertCard()
            let f = try FingerprintFixture(environment: card.environment)
            #expect(try f.client.call("card.biometric.enable").errorReason == "card.pin1_not_saved")
            _ = try f.client.result("card.pin1.save", ["pin": "1234"])
            let enabled = try f.client.result("card.biometric.enable")
            #expect(enabled["card_pin1"] == "on")
            #expect(enabled["enabled"] == false, "PIN1 release is on its own, fingerprint unlock stays off")
            #expect(try f.calls("Claim") == 0, "turning it on checks the reader but scans nothing")

            try f.rig.setScript([.match])
            let login = try f.client.exchange("card.login", ["aud": "https://rp.example", "nonce": "n-1"])  // a PIN1 prompt would be cancelled
            let claims = try verifiedClaims(login.result?["token"]?.stringValue, card: card, aud: "https://rp.example")
            #expect(claims["sub"] == "38001085718")
            #expect(claims["nonce"] == "n-1")
            #expect(login.kinds.first == "fingerprint", "the finger first: \(login.kinds)")
            #expect(login.ofKind("pin1").isEmpty, "the finger released the saved PIN1")
            #expect(login.fingerprintMessages.first == "Touch the fingerprint reader to release PIN1 to log in to https://rp.example")
            try f.expectReleased("after the released PIN1")

            // Three fingers that do not match: the PIN1 prompt follows and says why.
            try f.rig.setScript([.noMatch, .noMatch, .noMatch])
            let typed = try f.client.exchange("card.login", ["aud": "https://rp.example"], answers: ["pin1": "1234"])
            #expect(typed.result?["token"]?.stringValue != nil, "\(typed.response)")
            #expect(typed.fingerprintMessages.count == 3, "\(typed.fingerprintMessages)")
            let prompt = try #require(typed.ofKind("pin1").first)
            #expect(prompt["message"]?.stringValue?.hasPrefix("The fingerprint did not match. Enter PIN1") == true, "\(prompt)")
            #expect(try f.status()["failures"] == 3, "they count against the local user like any finger")
            try f.expectReleased("after the PIN1 fallback")

            // fprintd gone: straight to the PIN1 prompt, which says so.
            f.rig.stopMock()
            let gone = try f.client.exchange("card.login", ["aud": "https://rp.example"], answers: ["pin1": "1234"])
            #expect(gone.result?["token"]?.stringValue != nil, "\(gone.response)")
            #expect(!gone.kinds.contains("fingerprint"))
            #expect(gone.ofKind("pin1").first?["message"]?.stringValue?.contains("fprintd is not running") == true, "\(gone.prompts)")

            // Turned off: the saved PIN1 is used as before, without a finger.
            _ = try f.client.result("card.biometric.disable")
            let plain = try f.client.exchange("card.login", ["aud": "https://rp.example"])
            #expect(plain.result?["token"]?.stringValue != nil, "\(plain.response)")
            #expect(!plain.kinds.contains("fingerprint") && !plain.kinds.contains("pin1"))
        }

        @Test("the card refuses the released PIN1: pin.wrong, one retry burned, the PIN1 deleted and fingerprint-PIN1 suspended until a new one is saved")
        func wrongSavedPIN1() throws {
            let card = try CardRig()
            try card.insertCard()
            let f = try FingerprintFixture(environment: card.environment)
            _ = try f.client.result("card.pin1.save", ["pin": "9999"])
            #expect(try f.client.result("card.biometric.enable")["card_pin1"] == "on")
            try f.rig.setScript([.match])
            let refused = try f.client.exchange("card.login", ["aud": "a"])
            #expect(refused.reason == "pin.wrong", "\(refused.response)")
            #expect(refused.data?["retries_left"] == 2)
            #expect(refused.data?["saved_pin_deleted"] == true)
            #expect(refused.ofKind("pin1").isEmpty, "the login is cancelled, not retried by hand")
            #expect(try f.status()["card_pin1"] == "suspended")
            #expect(try f.client.call("card.biometric.enable").errorReason == "card.pin1_not_saved", "the refused PIN1 is gone")
            try f.expectReleased()

            // The next login asks for PIN1 and never for a finger. A wrong PIN typed now leaves 1
            // retry: the card saw exactly one wrong PIN before, nothing was retried behind the user's back.
            let starts = try f.calls("VerifyStart")
            let typedWrong = try f.client.exchange("card.login", ["aud": "a"], answers: ["pin1": "9999"])
            #expect(typedWrong.reason == "pin.wrong")
            #expect(typedWrong.data?["retries_left"] == 1)
            #expect(!typedWrong.kinds.contains("fingerprint"))
            #expect(typedWrong.ofKind("pin1").count == 1)
            let typedRight = try f.client.exchange("card.login", ["aud": "a"], answers: ["pin1": "1234"])
            #expect(typedRight.result?["token"]?.stringValue != nil, "\(typedRight.response)")
            #expect(try f.calls("VerifyStart") == starts, "suspended: no scan")
            #expect(try f.status()["card_pin1"] == "suspended")

            // A new PIN1 lifts the suspension.
            _ = try f.client.result("card.pin1.save", ["pin": "1234"])
            #expect(try f.status()["card_pin1"] == "on")
            try f.rig.setScript([.match])
            let released = try f.client.exchange("card.login", ["aud": "a"])
            #expect(released.result?["token"]?.stringValue != nil, "\(released.response)")
            #expect(released.kinds.contains("fingerprint") && !released.kinds.contains("pin1"))
            try f.expectReleased()
        }
    }

    @Suite("Fast-forward and the fingerprint sign-in step")
    struct SignIn {
        @Test("auth.fast: remembered account + finger → a session with amr [fpt]; retries up to five scans; opens the lock")
        func fastForward() throws {
            let f = try FingerprintFixture()
            let never = try f.client.exchange("auth.fast")
            #expect(never.reason == "auth.remembered_invalid", "no sign-in ever: \(never.response)")
            try f.register()
            #expect(try f.client.exchange("auth.fast").reason == "biometric.not_enabled")
            try f.enableFingerprint()
            try f.lock()
            let starts = try f.calls("VerifyStart")
            try f.rig.setScript([.noMatch, .noMatch, .noMatch, .noMatch, .match])
            let fast = try f.client.exchange("auth.fast")
            let result = try #require(fast.result, "\(fast.response)")
            #expect(result["account"]?["id"] == f.accountID)
            #expect(fast.fingerprintMessages == [
                "Touch the fingerprint reader to sign in",
                "Not recognised; touch the reader again (4 tries left)",
                "Not recognised; touch the reader again (3 tries left)",
                "Not recognised; touch the reader again (2 tries left)",
                "Not recognised; touch the reader again (1 try left)",
            ])
            #expect(try f.calls("VerifyStart") == starts + 5)
            let session = try f.client.result("session.get", ["session": try #require(result["session"]?["token"])])
            #expect(session["amr"] == ["fpt"])
            #expect(session["account"]?["id"] == f.accountID)
            #expect(try f.status()["failures"] == 0)
            #expect(try !f.isLocked(), "the finger proved the user")
            try f.expectReleased()

            // Five that do not match: the cut-off, and the caller falls back to the password.
            try f.rig.setScript(Array(repeating: .noMatch, count: 5))
            let failed = try f.client.exchange("auth.fast")
            #expect(failed.reason == "biometric.cut_off", "\(failed.response)")
            #expect(failed.result == nil)
            try f.expectReleased()
        }

        @Test("auth.fast with stale credentials → auth.remembered_invalid without a scan: password changed, device revoked")
        func staleCredentials() throws {
            let f = try FingerprintFixture()
            try f.register()
            try f.enableFingerprint()
            let newPassword = "another long passphrase"
            _ = try f.client.result("account.profile.set", ["session": f.token, "password": .string(newPassword),
                                                             "current_password": .string(FingerprintFixture.password)])
            let counts = try f.rig.callCounts()
            try f.rig.setScript([.match])
            let changed = try f.client.exchange("auth.fast")
            #expect(changed.reason == "auth.remembered_invalid", "\(changed.response)")
            #expect(changed.prompts.isEmpty)
            #expect(try f.rig.callCounts() == counts, "checked before the reader")

            // Signing in with the new password remembers again; a remembered device that is revoked does not hold.
            let laptop = try f.client.result("auth.login", ["login": .string(FingerprintFixture.phone), "password": .string(newPassword),
                                                            "device": ["key": "device-1"]])
            #expect(try f.client.exchange("auth.fast").result?["account"]?["id"] == f.accountID)
            let phone = try f.client.result("auth.login", ["login": .string(FingerprintFixture.phone), "password": .string(newPassword),
                                                           "device": ["key": "phone", "name": "Phone"]])
            let phoneDevice = try #require(phone["session"]?["device_id"])
            #expect(try f.client.result("device.revoke", ["session": try #require(laptop["session"]?["token"]), "id": phoneDevice])["revoked"] == true)
            let before = try f.calls("VerifyStart")
            try f.rig.setScript([.match])
            let revoked = try f.client.exchange("auth.fast")
            #expect(revoked.reason == "auth.remembered_invalid", "\(revoked.response)")
            #expect(try f.calls("VerifyStart") == before)
            try f.expectReleased()
        }

        @Test("fingerprint as the second step: amr [pwd, fpt]; on failure data.fallback is otp (flow ended) or pin (same flow); its fingers count against the user's cut-off")
        func secondStep() throws {
            let f = try FingerprintFixture()
            try f.register()
            try f.rig.setScript([.match])
            let on = try f.client.exchange("twofactor.fingerprint.enable", ["session": f.token])
            #expect(on.result == ["enabled": true, "user": .string(FingerprintFixture.user)], "\(on.response)")
            let login: JSONValue = ["login": .string(FingerprintFixture.phone), "password": .string(FingerprintFixture.password), "device": ["key": "device-1"]]

            let step = try f.client.result("auth.login", login)
            #expect(step["next"] == "fingerprint")
            #expect(step["session"] == nil)
            let flow = try #require(step["flow"])
            try f.rig.setScript([.retry(), .match])
            let signed = try f.client.exchange("auth.login.fingerprint", ["flow": flow])
            let token = try #require(signed.result?["session"]?["token"], "\(signed.response)")
            #expect(try f.client.result("session.get", ["session": token])["amr"] == ["pwd", "fpt"])
            #expect(signed.fingerprintMessages.first == "Touch the fingerprint reader to sign in")
            #expect(try f.client.call("auth.login.fingerprint", ["flow": flow]).errorReason == "auth.failed", "a flow completes once")
            try f.expectReleased()

            // No PIN: a failing reader ends the flow; sign in with an SMS code instead.
            let second = try #require(try f.client.result("auth.login", login)["flow"])
            try f.rig.setScript([.unknownError])
            let broken = try f.client.exchange("auth.login.fingerprint", ["flow": second])
            #expect(broken.reason == "biometric.failed", "\(broken.response)")
            #expect(broken.data?["fallback"] == "otp")
            #expect(try f.client.call("auth.login.fingerprint", ["flow": second]).errorReason == "auth.failed", "the flow ended")
            #expect(try f.client.call("auth.login.pin", ["flow": second, "pin": "480913"]).errorReason == "auth.failed")
            try f.expectReleased()

            // With a PIN: five fingers that do not match, then the same flow goes on with the PIN.
            #expect(try f.client.result("twofactor.pin.enable", ["session": f.token, "pin": "480913", "confirm": "480913"])["enabled"] == true)
            let third = try f.client.result("auth.login", login)
            #expect(third["next"] == "fingerprint", "the finger comes before the PIN")
            let flow3 = try #require(third["flow"])
            try f.rig.setScript(Array(repeating: .noMatch, count: 5))
            let noMatch = try f.client.exchange("auth.login.fingerprint", ["flow": flow3])
            #expect(noMatch.reason == "biometric.cut_off", "the fifth in a row cuts fingerprints off, as at the lock: \(noMatch.response)")
            #expect(noMatch.data?["fallback"] == "pin")
            #expect(noMatch.fingerprintMessages.count == 5)
            try f.expectReleased()
            // Cut off: the next sign-in's finger step is refused without a scan and goes on with the PIN,
            // whose sign-in (with the remembered account's password) lifts the cut-off.
            let fourth = try #require(try f.client.result("auth.login", login)["flow"])
            let scans = try f.calls("VerifyStart")
            let refused = try f.client.exchange("auth.login.fingerprint", ["flow": fourth])
            #expect(refused.reason == "biometric.cut_off" && refused.data?["fallback"] == "pin", "\(refused.response)")
            #expect(try f.calls("VerifyStart") == scans, "no scan while cut off")
            let pinned = try f.client.result("auth.login.pin", ["flow": fourth, "pin": "480913"])
            #expect(try f.client.result("session.get", ["session": try #require(pinned["session"]?["token"])])["amr"] == ["pwd", "pin"])
            #expect(try f.status()["cut_off"] == false)
        }
    }

    @Suite("authctl lock, unlock, biometric, login --fast")
    struct Authctl {
        @Test("authctl lock / unlock: exit 6 while locked, 5 for a finger that does not match, 4 on timeout; password and finger unlock")
        func lockAndUnlock() throws {
            let f = try FingerprintFixture(config: "[biometric]\ntimeout = 2\n")
            let nothing = try f.daemon.authctl(["lock"])
            #expect(nothing.status == 1)
            #expect(nothing.stderr.contains("(lock.no_account)"), "\(nothing.stderr)")
            try f.register()
            try f.enableFingerprint()

            let lock = try f.daemon.authctl(["lock"])
            #expect(lock.status == 0 && lock.stdout == "locked\n", "\(lock)")
            let status = try f.daemon.authctl(["lock", "--status"])
            #expect(status.stdout == "locked\naccount: \(f.accountID.stringValue ?? "?")\nunlock with: fingerprint, password, SMS code\nauto-lock: after 900 s idle\n",
                    "\(status.stdout)")
            let token = try f.daemon.authctl(["token", "local", "--aud", "myapp"])
            #expect(token.status == 6, "\(token)")
            #expect(token.stderr.contains("(session.locked)"))
            #expect(token.stdout.isEmpty)

            try f.rig.setScript([.noMatch])
            let noMatch = try f.daemon.authctl(["unlock", "--fingerprint"])
            #expect(noMatch.status == 5, "\(noMatch)")
            #expect(noMatch.stderr.contains("Touch the fingerprint reader to unlock authd"))
            #expect(noMatch.stderr.contains("(biometric.no_match)"))
            try f.rig.setScript([])
            let timedOut = try f.daemon.authctl(["unlock", "--fingerprint"])
            #expect(timedOut.status == 4, "\(timedOut)")
            #expect(timedOut.stderr.contains("(biometric.timeout)"))
            try f.expectReleased()

            let wrong = try f.daemon.authctl(["unlock", "--password-fd", "0"], stdin: "not the password\n")
            #expect(wrong.status == 5 && wrong.stderr.contains("(auth.failed)"), "\(wrong)")
            let starts = try f.calls("VerifyStart")
            let password = try f.daemon.authctl(["unlock", "--password-fd", "0"], stdin: FingerprintFixture.password + "\n")
            #expect(password.status == 0 && password.stdout == "unlocked (password)\n", "\(password)")
            #expect(try f.calls("VerifyStart") == starts, "--password-fd skips the finger")
            #expect(try f.daemon.authctl(["token", "local", "--aud", "myapp"]).status == 0)

            #expect(try f.daemon.authctl(["lock"]).status == 0)
            try f.rig.setScript([.retry("verify-swipe-too-short"), .match])
            let finger = try f.daemon.authctl(["unlock"])
            #expect(finger.status == 0 && finger.stdout == "unlocked (fingerprint)\n", "\(finger)")
            #expect(finger.stderr.contains("Touch the fingerprint reader to unlock authd"), "\(finger.stderr)")
            #expect(finger.stderr.contains("The swipe was too short; swipe your finger again"), "\(finger.stderr)")
            #expect(try f.daemon.authctl(["lock", "--status"]).stdout.hasPrefix("unlocked\n"))
            try f.expectReleased()
        }

        @Test("authctl biometric status|enable|disable, card biometric, login --fast with its password fallback, 2fa fingerprint")
        func biometricAndLogin() throws {
            let f = try FingerprintFixture()
            let sessionFile = f.daemon.directory + "/.local/state/authctl/session"
            func sessionAMR() throws -> JSONValue? {
                let token = try String(contentsOfFile: sessionFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
                return try f.client.result("session.get", ["session": .string(token)])["amr"]
            }

            let off = try f.daemon.authctl(["biometric", "status"])
            #expect(off.status == 0)
            #expect(off.stdout == """
                fingerprint unlock: off
                reader:             authd mock reader (right-index-finger)
                failures in a row:  0
                card PIN1:          off

                """, "\(off.stdout)")
            let nobody = try f.daemon.authctl(["login", "--fast"])
            #expect(nobody.status == 2, "nothing remembered and no LOGIN to fall back to: \(nobody)")
            #expect(nobody.stderr.contains("(auth.remembered_invalid)"))

            try f.register()
            try f.rig.setScript([.match])
            let enable = try f.daemon.authctl(["biometric", "enable"])
            #expect(enable.status == 0, "\(enable)")
            #expect(enable.stdout.hasPrefix("fingerprint unlock: on\n"))
            #expect(enable.stderr.contains("Touch the fingerprint reader to turn on fingerprint unlock"), "\(enable.stderr)")

            try f.rig.setScript([.noMatch, .match])
            let fast = try f.daemon.authctl(["login", "--fast"])
            #expect(fast.status == 0, "\(fast)")
            #expect(fast.stdout == "signed in as \(FingerprintFixture.phone) (\(f.accountID.stringValue ?? "?"))\n")
            #expect(fast.stderr.contains("Not recognised; touch the reader again (4 tries left)"), "\(fast.stderr)")
            #expect(try sessionAMR() == ["fpt"])

            try f.rig.setScript([.unknownError])
            let fallback = try f.daemon.authctl(["login", "--fast", FingerprintFixture.phone, "--password-fd", "0"], stdin: FingerprintFixture.password + "\n")
            #expect(fallback.status == 0, "\(fallback)")
            #expect(fallback.stderr.contains("(biometric.failed)") && fallback.stderr.contains("Sign in with the password instead."), "\(fallback.stderr)")
            #expect(try sessionAMR() == ["pwd"])

            let noPIN = try f.daemon.authctl(["card", "biometric", "enable"])
            #expect(noPIN.status == 1 && noPIN.stderr.contains("(card.pin1_not_saved)"), "\(noPIN)")
            #expect(try f.daemon.authctl(["card", "pin1", "save", "--pin-fd", "0"], stdin: "1234\n").status == 0)
            let cardOn = try f.daemon.authctl(["card", "biometric", "enable"])
            #expect(cardOn.status == 0 && cardOn.stdout.contains("card PIN1:          on"), "\(cardOn)")

            try f.rig.setScript([.match])
            let second = try f.daemon.authctl(["2fa", "fingerprint", "enable"])
            #expect(second.status == 0 && second.stdout == "fingerprint second step on\n", "\(second)")
            try f.rig.setScript([.match])
            let twoStep = try f.daemon.authctl(["login", FingerprintFixture.phone, "--password-fd", "0"], stdin: FingerprintFixture.password + "\n")
            #expect(twoStep.status == 0, "\(twoStep)")
            #expect(twoStep.stderr.contains("Touch the fingerprint reader to sign in"), "\(twoStep.stderr)")
            #expect(try sessionAMR() == ["pwd", "fpt"])

            let disabled = try f.daemon.authctl(["biometric", "disable"])
            #expect(disabled.stdout.hasPrefix("fingerprint unlock: off\n") && disabled.stdout.contains("card PIN1:          off"), "\(disabled.stdout)")
            try f.expectReleased()
        }
    }
}
