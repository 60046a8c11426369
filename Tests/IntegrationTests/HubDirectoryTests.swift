import Foundation
import Glibc
import Protocol
import Testing

/// A device's machine capabilities (fingerprints, the lock, PAM) reach the account data at its
/// hub, which answers only for accounts the machine is signed in to. Real hub and devices over
/// TLS (HubRig), with the fprintd stand-in (FprintdRig) on the device.
@Suite("Account data for a device's machine capabilities", .serialized)
struct HubDirectoryTests {
    static let phone = "+37251234567"
    static let password = "a long enough passphrase"

    /// Registers an account through `device` (the hub sends the code); the registration's result.
    static func register(_ rig: HubRig, on device: DaemonHarness, phone: String = phone) throws -> JSONValue {
        try rig.register(on: device, phone: phone, password: password)
    }

    /// The hub's recent audit records, as one text.
    static func hubAudit(_ rig: HubRig) throws -> String {
        String(decoding: try WireCodec.encodeJSON(try rig.hub.connect().result("admin.audit.tail", ["limit": 100])), as: UTF8.self)
    }

    @Test("a sign-in forwarded to the hub is remembered on the device; a fingerprint fast sign-in there makes a session at the hub for that machine, seen from another machine")
    func fingerprintFastSignInOnADevice() throws {
        let rig = try HubRig()
        let fprintd = try FprintdRig(enrolled: [FingerprintFixture.user: FingerprintFixture.finger])
        let a = try rig.startDevice(environment: fprintd.environment)
        let b = try rig.startDevice()
        let registered = try Self.register(rig, on: a)
        let account = try #require(registered["account"]?["id"])
        let clientA = try a.connect()
        // The lock of A's local user remembers the account the hub signed in.
        let lock = try clientA.result("lock.status")
        #expect(lock["account"] == account, "\(lock)")
        #expect(lock["unlock_methods"]?.arrayValue?.contains("password") == true, "the hub says the account has a password: \(lock)")

        try fprintd.setScript([.match])
        #expect(try clientA.exchange("biometric.enable").result?["enabled"] == true)
        try fprintd.setScript([.match])
        let fast = try clientA.exchange("auth.fast")
        let session = try #require(fast.result?["session"], "\(fast.response)\n\(a.log)")
        #expect(fast.result?["account"]?["id"] == account)
        #expect(session["device_id"] == registered["session"]?["device_id"], "the same machine's device at the hub")
        // The new session is the hub's: it works on A, and another machine of the account sees it.
        #expect(try clientA.result("session.get", ["session": session["token"]!])["amr"] == ["fpt"])
        let onB = try b.connect().result("auth.login", ["login": .string(Self.phone), "password": .string(Self.password)])
        let sessions = try b.connect().result("session.list", ["session": onB["session"]!["token"]!])["sessions"]?.arrayValue ?? []
        #expect(sessions.contains { $0["id"] == session["id"] }, "B lists A's fingerprint session: \(sessions)")
        let machineA = try clientA.result("device.id")["device_id"]
        let devices = try b.connect().result("device.list", ["session": onB["session"]!["token"]!])["devices"]?.arrayValue ?? []
        #expect(devices.contains { $0["device_id"] == machineA && $0["id"] == session["device_id"] }, "\(devices)")
    }

    @Test("the hub checks a resumed sign-in itself: a machine that logged out learns no new credential stamp, and a resume without the stamp it remembered, with one it made up, or with one from before a password change makes no session")
    func resumeNeedsTheRememberedStamp() throws {
        let rig = try HubRig()
        let a = try rig.startDevice()
        let registered = try Self.register(rig, on: a)
        let account = try #require(registered["account"]?["id"])
        // A machine of the account, by hand: whoever holds its key speaks for it.
        var machine = try rig.handMadeMachine(name: "laptop")
        func call(_ method: String, _ params: JSONValue) throws -> JSONValue { try machine.call(method, params) }
        let caller: JSONValue = ["uid": 1000, "machine": "laptop"]
        let login = try machine.forward("auth.login", ["login": .string(Self.phone), "password": .string(Self.password)], caller: caller)
        let session = try #require(login["result"]?["session"], "\(login)")
        let device = try #require(session["device_id"])
        let stamp = try #require(try call("link.account", ["account": account])["result"]?["credential_stamp"], "signed in, the machine is given the stamp")
        func resume(_ stamp: JSONValue?) throws -> JSONValue {
            var params: [String: JSONValue] = ["account": account, "device_id": device, "amr": ["fpt"]]
            params["stamp"] = stamp
            return try call("link.signin.resume", .object(params))
        }
        func resumed(_ answer: JSONValue) -> Bool { answer["result"]?["signed_in"]?["session"] != nil }

        _ = try machine.forward("auth.logout", ["session": session["token"]!], caller: caller)
        // Left without a session, its link is closed; it links again with the same key.
        machine.close()
        machine = try rig.handMadeMachine(name: "laptop")
        let account1 = try call("link.account", ["account": account])
        #expect(account1["result"]?["record"] != nil && account1["result"]?["credential_stamp"] == nil, "logged out, no stamp: \(account1)")
        let without = try resume(nil)
        #expect(without["result"] != nil && !resumed(without), "no stamp, no session: \(without)")
        #expect(!resumed(try resume("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")), "a stamp made up")
        #expect(resumed(try resume(stamp)), "the stamp it remembered, the password unchanged: a remembered sign-in")

        let onA = try #require(registered["session"]?["token"])
        _ = try a.connect().result("account.profile.set", ["session": onA, "password": "another long passphrase", "current_password": .string(Self.password)])
        #expect(!resumed(try resume(stamp)), "the stamp from before the password changed")
        #expect(try call("link.account", ["account": account])["result"]?["credential_stamp"] != stamp)
    }

    @Test("the fingerprint second step on a device: the hub opens it for a machine signed in to the account, the machine scans, the hub makes the session; a flow of one machine is refused to another")
    func fingerprintSecondStepOnADevice() throws {
        let rig = try HubRig()
        let fprintd = try FprintdRig(enrolled: [FingerprintFixture.user: FingerprintFixture.finger])
        let a = try rig.startDevice(environment: fprintd.environment)
        let b = try rig.startDevice()
        let registered = try Self.register(rig, on: a)
        let clientA = try a.connect()
        try fprintd.setScript([.match])
        let on = try clientA.exchange("twofactor.fingerprint.enable", ["session": registered["session"]!["token"]!])
        #expect(on.result?["enabled"] == true, "\(on.response)")
        let login: JSONValue = ["login": .string(Self.phone), "password": .string(Self.password)]
        let step = try clientA.result("auth.login", login)
        #expect(step["next"] == "fingerprint", "\(step)")
        let flow = try #require(step["flow"])
        // Another machine cannot use A's flow: to it the flow does not exist, and A's stays.
        let stolen = try b.connect().call("auth.login.fingerprint", ["flow": flow])
        #expect(stolen.errorReason == "auth.failed", "\(stolen)")
        try fprintd.setScript([.match])
        let signed = try clientA.exchange("auth.login.fingerprint", ["flow": flow])
        let token = try #require(signed.result?["session"]?["token"], "\(signed.response)")
        #expect(try clientA.result("session.get", ["session": token])["amr"] == ["pwd", "fpt"])
        #expect(try clientA.call("auth.login.fingerprint", ["flow": flow]).errorReason == "auth.failed", "a flow completes once")
        // B has no finger step for the account: its password sign-in makes the session at once.
        #expect(try b.connect().result("auth.login", login)["session"]?["token"]?.stringValue != nil)
    }

    @Test("unlock by password on a device checks the hub's password: a wrong one refused and counted at the hub, the right one opens")
    func unlockChecksTheHubsPassword() throws {
        let rig = try HubRig()
        let device = try rig.startDevice()
        let registered = try Self.register(rig, on: device)
        let client = try device.connect()
        #expect(try client.result("lock")["locked"] == true)
        // A code by SMS would be sent and checked by this machine alone: not offered on a device.
        #expect(try client.result("lock.status")["unlock_methods"] == ["password"])
        let byCode = try client.call("unlock", ["sms": true])
        #expect(byCode.errorReason == "hub.not_on_device", "\(byCode)")
        let wrong = try client.call("unlock", ["password": "not the password"])
        #expect(wrong.errorReason == "auth.failed", "\(wrong)")
        #expect(try client.result("lock.status")["locked"] == true)
        let audit = try Self.hubAudit(rig)
        #expect(audit.contains("link.credential.confirm") && audit.contains("auth.failed"), "the hub counted the wrong password: \(audit)")
        // Counted against the account's lockout at the hub: enough wrong passwords lock it there.
        for _ in 0..<4 { _ = try client.call("unlock", ["password": "not the password"]) }
        let record = try rig.hub.connect().result("admin.accounts.show", ["account": registered["account"]!["id"]!])
        #expect(record["locked_until"]?.stringValue != nil, "five wrong passwords on the device locked the account at the hub: \(record)")
        let locked = try client.call("unlock", ["password": .string(Self.password)])
        #expect(locked.errorReason == "account.locked", "the hub's lockout holds for the right password too: \(locked)")
        _ = try rig.hub.connect().result("admin.accounts.unlock", ["account": registered["account"]!["id"]!])
        #expect(try client.result("unlock", ["password": .string(Self.password)])["locked"] == false)

        // The hub away: the lock still answers and machine methods work; the password cannot be checked.
        #expect(try rig.hub.terminate() == 0)
        try HubRig.waitForLink(device, state: "unreachable")
        #expect(try client.result("lock.status")["locked"] == false)
        #expect(try client.result("auth.local", ["aud": "app"])["token"]?.stringValue != nil)
        #expect(try client.result("lock")["locked"] == true, "the lock arms while the hub is away")
        let started = ContinuousClock.now
        let offline = try client.call("unlock", ["password": .string(Self.password)])
        #expect(offline.errorReason == "hub.unavailable", "\(offline)")
        #expect(ContinuousClock.now - started < .milliseconds(500), "refused at once")
    }

    @Test("a machine asking the hub about an account it is not signed in to is refused and audited; one signed in gets it")
    func accountOfAnotherMachineRefused() throws {
        let rig = try HubRig()
        let (a, c) = (try rig.startDevice(), try rig.startDevice())
        let registered = try Self.register(rig, on: a)
        let account = try #require(registered["account"]?["id"])
        let user = FingerprintFixture.user
        // C never signed in to the account: linking it to a Unix user there needs the account's
        // state from the hub, which refuses.
        let refused = try c.connect().call("pam.link.account", ["user": .string(user), "account": account])
        #expect(refused.errorReason == "hub.not_signed_in", "\(refused)")
        let machineC = try #require(try c.connect().result("device.id")["device_id"]?.stringValue)
        let audit = try Self.hubAudit(rig)
        #expect(audit.contains("link.account") && audit.contains("hub.not_signed_in") && audit.contains(machineC), "\(audit)")
        // A, signed in, may.
        let linked = try a.connect().call("pam.link.account", ["user": .string(user), "account": account])
        #expect(linked.errorReason == nil, "\(linked)")
        #expect(try a.connect().result("pam.account", ["user": .string(user), "service": "login"])["account"] == account)
        // Deactivated at the hub: A is no longer signed in to it, and PAM refuses rather than abstains.
        _ = try rig.hub.connect().result("admin.accounts.deactivate", ["account": account])
        let gone = try a.connect().call("pam.account", ["user": .string(user), "service": "login"])
        #expect(gone.errorReason == "pam.account_deactivated", "\(gone)")
    }

    // MARK: Federated sign-in

    static let federation = "[federation]\nlogin_timeout = 20s\nhttp_timeout = 5s\n"

    /// `federation.login` (code flow) on `client`; the test plays the browser.
    static func federatedLogin(_ oidc: OIDCRig, on client: LineClient) throws -> PromptedCall {
        try client.exchange("federation.login", [:]) { prompt in
            guard prompt["kind"] == "browser", let url = prompt["url"]?.stringValue else { return .ignore }
            _ = try? oidc.followAuthorize(url)
            return .ignore
        }
    }

    @Test("federated sign-in on a device: the hub validates the ID token and makes the link, which another machine's sign-in finds; a provider the hub does not know makes nothing")
    func federatedSignInOnADevice() throws {
        let oidc = try OIDCRig()
        let rig = try HubRig(hubConfig: Self.federation + oidc.configSection())
        let (a, b) = (try rig.startDevice(extra: Self.federation + oidc.configSection()), try rig.startDevice(extra: Self.federation + oidc.configSection()))
        let first = try Self.federatedLogin(oidc, on: try a.connect())
        let result = try #require(first.result, "\(first.response)")
        #expect(result["created"] == true && result["subject"] == "alice")
        let hub = try rig.hub.connect()
        let accounts = try hub.result("admin.accounts.list")["accounts"]?.arrayValue ?? []
        #expect(accounts.map { $0["id"] } == [result["account"]?["id"]], "the account and its link are the hub's: \(accounts)")
        #expect(try a.connect().result("session.get", ["session": result["session"]!["token"]!])["amr"] == ["fed"])
        // The remote tokens stay on the machine that signed in.
        #expect(try a.connect().result("remote.token")["access_token"]?.stringValue != nil)
        #expect(try b.connect().call("remote.token").errorReason == "federation.not_signed_in")

        // Another machine, the same identity: the hub finds the link it made.
        let second = try #require(try Self.federatedLogin(oidc, on: try b.connect()).result)
        #expect(second["created"] == false && second["account"]?["id"] == result["account"]?["id"])

        // The vault's status on A reads the identity's email at the hub; signing out on A ends
        // A's sessions from the provider at the hub, not B's.
        let status = try a.connect().result("federation.status")["providers"]?.arrayValue?.first
        #expect(status?["email"] == "alice@example.test", "\(String(describing: status))")
        let signedOut = try a.connect().result("federation.logout")
        #expect(signedOut["sessions_ended"] == 1, "\(signedOut)")
        #expect(try a.connect().call("session.get", ["session": result["session"]!["token"]!]).errorReason == "session.invalid")
        #expect(try b.connect().result("session.get", ["session": second["session"]!["token"]!])["account"] != nil, "B's session stays")

        // A device that has a provider the hub does not: the hub refuses, nothing is made.
        let stray = try rig.startDevice(extra: Self.federation + oidc.configSection(name: "elsewhere"))
        let refused = try Self.federatedLogin(oidc, on: try stray.connect())
        #expect(refused.reason == "federation.unknown_provider", "\(refused.response)")
        #expect(refused.response["error"]?["message"]?.stringValue?.contains("the hub's configuration") == true)
        #expect(try hub.result("admin.accounts.list")["accounts"]?.arrayValue?.count == 1)
        #expect(try stray.connect().call("remote.token").errorReason == "federation.not_signed_in", "no tokens kept for a refused sign-in")
        let audit = try Self.hubAudit(rig)
        #expect(audit.contains("link.signin.federated") && audit.contains("federation.unknown_provider"), "\(audit)")
    }

    @Test("an ID token signs in once: another machine that presents the one a device used gets federation.id_token_invalid (replay) and no session")
    func replayedIDTokenIsRefused() throws {
        let oidc = try OIDCRig()
        let rig = try HubRig(hubConfig: Self.federation + oidc.configSection())
        let device = try rig.startDevice(extra: Self.federation + oidc.configSection())
        let signedIn = try Self.federatedLogin(oidc, on: try device.connect())
        #expect(signedIn.result?["created"] == true, "\(signedIn.response)")
        // What the device sent its hub: the ID token, and the nonce inside it.
        let idToken = try #require(try oidc.lastIDToken())
        let claims = try #require(Base64URL.decode(String(idToken.split(separator: ".")[1])))
        let nonce = try #require(try WireCodec.decode(JSONValue.self, from: Data(claims))["nonce"])

        let intruder = try rig.handMadeMachine(name: "intruder")
        let answer = try intruder.call("link.signin.federated", ["provider": "test", "id_token": .string(idToken), "nonce": nonce, "device_name": "intruder"])
        #expect(answer["error"]?["data"]?["reason"] == "federation.id_token_invalid", "\(answer)")
        #expect(answer["error"]?["data"]?["check"] == "replay", "\(answer)")
        #expect(answer["result"] == nil, "no session for the intruder: \(answer)")
        let devices = try rig.hub.storeRows("SELECT count(*) FROM devices")
        #expect(devices == ["1"], "only the device that signed in is the account's: \(devices)")
    }

    @Test("the hub checks the ID token with its own settings: a token the device accepts but the hub's provider entry does not (another client id) is refused by the hub")
    func hubValidatesTheIDTokenItself() throws {
        let oidc = try OIDCRig()
        let hubSection = oidc.configSection().replacingOccurrences(of: "client_id = \(oidc.clientID)", with: "client_id = another-client")
        let rig = try HubRig(hubConfig: Self.federation + hubSection)
        let device = try rig.startDevice(extra: Self.federation + oidc.configSection())
        let refused = try Self.federatedLogin(oidc, on: try device.connect())
        #expect(refused.reason == "federation.id_token_invalid", "\(refused.response)")
        #expect(refused.data?["check"] == "aud", "\(refused.response)")
        #expect(try rig.hub.connect().result("admin.accounts.list")["accounts"]?.arrayValue?.isEmpty == true, "no account, no link at the hub")
    }
}
