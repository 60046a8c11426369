import Foundation
import Glibc
import Protocol
import Testing

/// The checks every call passes before it is served or forwarded, and the binding of sessions and
/// sign-in flows to the machine (and local user) they belong to: a hub and devices as real authd
/// processes over TLS (HubRig).
@Suite("The gate: lock, sessions and flows bound to their machine")
struct GateTests {
    static let password = "a long enough passphrase"

    @Test("a locked local user on a device gets no account token, no password check, no profile change and no new PIN: the lock is checked before a call is forwarded")
    func lockGuardsForwardedCalls() throws {
        let rig = try HubRig()
        let device = try rig.startDevice()
        let client = try device.connect()
        let token = try #require(try rig.register(on: device)["session"]?["token"])
        // The sign-in is remembered by this local user: the lock has something to open it with.
        #expect(try client.result("lock")["locked"] == true)

        let guarded: [(String, JSONValue)] = [
            ("auth.token", ["session": token, "aud": "app.example"]),
            ("account.password.check", ["session": token, "password": .string(Self.password)]),
            ("account.profile.set", ["session": token, "email": "someone@example.org", "current_password": .string(Self.password)]),
            // A fresh session sets a PIN without the old one, and the PIN confirms a passkey signature.
            ("twofactor.pin.enable", ["session": token, "pin": "135790", "confirm": "135790"]),
        ]
        for (method, params) in guarded {
            let answer = try client.call(method, params)
            #expect(answer.errorReason == "session.locked", "\(method) on a locked device: \(answer)")
        }
        // Nothing reached the hub: its audit log has no such call from this machine.
        let audit = String(decoding: try WireCodec.encodeJSON(try rig.hub.connect().result("admin.audit.tail", ["limit": 100])), as: UTF8.self)
        #expect(!audit.contains("\"auth.token\"") && !audit.contains("account.profile.set") && !audit.contains("twofactor.pin.enable"), "\(audit)")
        // A method that issues nothing still goes through, and the password opens the lock.
        #expect(try client.result("session.get", ["session": token])["account"] != nil)
        #expect(try client.result("unlock", ["password": .string(Self.password)])["locked"] == false)
        #expect(try client.result("auth.token", ["session": token, "aud": "app.example"])["token"]?.stringValue != nil)
    }

    @Test("a session bound to a linked machine is refused on the hub's own socket, and one made on the hub's socket is refused from a machine")
    func sessionsAreBoundForEveryCaller() throws {
        let rig = try HubRig()
        let device = try rig.startDevice()
        let tokenA = try #require(try rig.register(on: device)["session"]?["token"])
        let onHub = try rig.hub.connect()
        let stolen: [(String, JSONValue)] = [
            ("session.get", ["session": tokenA]),
            ("sync.history", ["session": tokenA]),
            ("auth.token", ["session": tokenA, "aud": "app.example"]),
            ("device.list", ["session": tokenA]),
        ]
        for (method, params) in stolen {
            let answer = try onHub.call(method, params)
            #expect(answer.errorReason == "session.invalid", "\(method) with machine A's token on the hub's socket: \(answer)")
        }
        #expect(try device.connect().result("session.get", ["session": tokenA])["account"] != nil, "A's own use still works")

        // A session made on the hub's socket is the hub machine's: worth nothing through a device.
        let login: JSONValue = ["login": "+37251234567", "password": .string(Self.password)]
        let tokenHub = try #require(try onHub.result("auth.login", login)["session"]?["token"])
        #expect(try onHub.result("session.get", ["session": tokenHub])["account"] != nil)
        #expect(try device.connect().call("session.get", ["session": tokenHub]).errorReason == "session.invalid")
    }

    @Test("a process on the hub cannot name a linked machine as its device: device: keys belong to the link", arguments: ["auth.login", "auth.otp.verify"])
    func deviceKeysBelongToTheLink(method: String) throws {
        let rig = try HubRig()
        let device = try rig.startDevice()
        _ = try rig.register(on: device)
        let machine = try #require(try device.connect().result("device.id")["device_id"]?.stringValue)
        let onHub = try rig.hub.connect()
        let params: JSONValue = method == "auth.login"
            ? ["login": "+37251234567", "password": .string(Self.password), "device": ["key": .string("device:" + machine)]]
            : ["flow": "otp_none", "code": "123456", "device": ["key": .string("device:" + machine)]]
        let refused = try onHub.call(method, params)
        #expect(refused.errorReason == "rpc.invalid_params", "\(refused)")
        #expect(refused["error"]?["data"]?["field"] == "device.key", "\(refused)")
        // Nothing was made: the account still has one device, machine A's.
        let token = try #require(try device.connect().result("auth.login", ["login": "+37251234567", "password": .string(Self.password)])["session"]?["token"])
        #expect(try device.connect().result("device.list", ["session": token])["devices"]?.arrayValue?.count == 1)
    }

    @Test("a password sign-in waiting for its PIN is finished only by the machine and local user that opened it")
    func flowsBelongToTheirOpener() throws {
        let rig = try HubRig()
        let (a, x) = (try rig.startDevice(), try rig.startDevice())
        let token = try #require(try rig.register(on: a)["session"]?["token"])
        _ = try a.connect().result("twofactor.pin.enable", ["session": token, "pin": "480913", "confirm": "480913"])
        let login: JSONValue = ["login": "+37251234567", "password": .string(Self.password)]
        let step = try a.connect().result("auth.login", login)
        #expect(step["next"] == "pin")
        let flow = try #require(step["flow"])

        // Another machine, with the right PIN, gets nothing; so does the hub's own socket.
        #expect(try x.connect().call("auth.login.pin", ["flow": flow, "pin": "480913"]).errorReason == "auth.failed")
        #expect(try rig.hub.connect().call("auth.login.pin", ["flow": flow, "pin": "480913"]).errorReason == "auth.failed")
        // The opener's own attempt still works: the flow was left as it was.
        let signedIn = try a.connect().result("auth.login.pin", ["flow": flow, "pin": "480913"])
        #expect(signedIn["session"]?["token"]?.stringValue != nil)
        // X holds no session of the account: the device list shows A alone.
        let devices = try a.connect().result("device.list", ["session": signedIn["session"]!["token"]!])
        #expect(devices["devices"]?.arrayValue?.count == 1, "\(devices)")
    }

    @Test("a passkey ceremony begun by one caller cannot be finished by another; the owner's ceremony stays")
    func passkeyCeremoniesBelongToTheirOpener() throws {
        let rig = try HubRig()
        let (a, x) = (try rig.startDevice(), try rig.startDevice())
        _ = try rig.register(on: a)
        let begun = try a.connect().result("auth.passkey.login.begin", ["login": "+37251234567"])
        let flow = try #require(begun["flow"])
        // Any assertion will do: the ceremony must be refused before it is looked at.
        let credential: JSONValue = ["id": "AAAA", "rawId": "AAAA", "type": "public-key",
                                     "response": ["clientDataJSON": "e30", "authenticatorData": .string(String(repeating: "A", count: 52)),
                                                  "signature": "MEUCIQ"], "clientExtensionResults": [:]]
        let fromX = try x.connect().call("auth.passkey.login.finish", ["flow": flow, "credential": credential])
        #expect(fromX.errorReason == "passkey.flow_invalid", "\(fromX)")
        // The owner's ceremony was not used up by X: A's attempt reaches the credential check.
        let fromA = try a.connect().call("auth.passkey.login.finish", ["flow": flow, "credential": credential])
        #expect(fromA.errorReason != "passkey.flow_invalid", "\(fromA)")
        #expect(fromA.errorReason != nil)
    }

    @Test("a registration and a sign-in by SMS code are finished only by the machine that started them, even with the right code")
    func codeFlowsBelongToTheirOpener() throws {
        let rig = try HubRig()
        let (a, x) = (try rig.startDevice(), try rig.startDevice())
        let flow = try #require(try a.connect().result("account.register.start", ["phone": "+37251234567"])["flow"])
        let code = try RegistrationTests.spooledCode(rig.hub, to: "+37251234567")
        let verify: JSONValue = ["flow": flow, "code": .string(code), "password": .string(Self.password)]
        #expect(try x.connect().call("account.register.verify", verify).errorReason == "otp.unknown_flow")
        #expect(try rig.hub.connect().call("account.register.verify", verify).errorReason == "otp.unknown_flow")
        #expect(try x.connect().call("account.register.resend", ["flow": flow]).errorReason == "otp.unknown_flow")
        #expect(try a.connect().result("account.register.verify", verify)["session"]?["token"]?.stringValue != nil, "A's flow was left as it was")

        let otp = try #require(try a.connect().result("auth.otp.start", ["phone": "+37251234567"])["flow"])
        let otpCode = try RegistrationTests.spooledCode(rig.hub, to: "+37251234567")
        #expect(try x.connect().call("auth.otp.verify", ["flow": otp, "code": .string(otpCode)]).errorReason == "otp.unknown_flow")
        #expect(try a.connect().result("auth.otp.verify", ["flow": otp, "code": .string(otpCode)])["session"]?["token"]?.stringValue != nil)
    }
}
