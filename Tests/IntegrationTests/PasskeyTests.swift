import Foundation
import Protocol
import Testing

/// One passkey test: authd with an account registered from this local user (the remembered
/// account, whose PIN verifies the user when no finger is set up) and a client. With
/// `fingerprint`, authd runs on a private bus with the fprintd mock (`rig`, this user's finger
/// enrolled) and fingerprint unlock is switched on.
final class PasskeyFixture {
    static let pin = "482915"
    let rig: FprintdRig?
    let daemon: DaemonHarness
    let client: LineClient
    let registered: JSONValue
    var token: JSONValue { registered["session"]?["token"] ?? .null }
    var accountID: JSONValue { registered["account"]?["id"] ?? .null }

    init(config: String? = nil, pin: Bool = true, fingerprint: Bool = false) throws {
        rig = fingerprint ? try FprintdRig(enrolled: [FingerprintFixture.user: FingerprintFixture.finger]) : nil
        daemon = try DaemonHarness(config: config)
        try daemon.start(environment: rig?.environment ?? [:])
        client = try daemon.connect()
        registered = try LoginTests.register(daemon, client, phone: "+37251234567", password: FingerprintFixture.password)
        if pin {
            _ = try client.result("twofactor.pin.enable", ["session": registered["session"]!["token"]!, "pin": .string(Self.pin), "confirm": .string(Self.pin)])
        }
        if let rig {
            try rig.setScript([.match])
            let enabled = try client.exchange("biometric.enable")
            guard enabled.response["result"]?["enabled"] == true else { throw HarnessError("biometric.enable failed: \(enabled.response)") }
        }
    }

    /// `auth.passkey.register.begin` → `passkey.create` (PIN prompt answered) → finish.
    func registerPasskey() throws -> (created: JSONValue, finished: JSONValue) {
        let begun = try client.result("auth.passkey.register.begin", ["session": token])
        guard case .object(var params) = begun["options"]! else { throw HarnessError("no options") }
        params["origin"] = begun["origin"]!
        let created = try client.exchange("passkey.create", .object(params), answers: ["pin": Self.pin])
        guard let credential = created.result else { throw HarnessError("passkey.create failed: \(created.response)") }
        let finished = try client.result("auth.passkey.register.finish", ["session": token, "flow": begun["flow"]!, "credential": credential])
        return (credential, finished)
    }

    /// `auth.passkey.login.begin` → `passkey.get` (PIN prompt answered) → finish; the finish response.
    func loginWithPasskey(login: String? = nil) throws -> JSONValue {
        let begun = try client.result("auth.passkey.login.begin", login.map { ["login": .string($0)] } ?? [:])
        guard case .object(var params) = begun["options"]! else { throw HarnessError("no options") }
        params["origin"] = begun["origin"]!
        let asserted = try client.exchange("passkey.get", .object(params), answers: ["pin": Self.pin])
        guard let credential = asserted.result else { throw HarnessError("passkey.get failed: \(asserted.response)") }
        return try client.call("auth.passkey.login.finish", ["flow": begun["flow"]!, "credential": credential, "device": ["key": "device-1"]])
    }
}

@Suite("Passkeys: authd's authenticator and relying party together")
struct PasskeyTests {
    @Test("register a passkey held by authd, then sign in with it: a session for the same account, amr pop+mfa, counter 1")
    func registerAndLogin() throws {
        let fixture = try PasskeyFixture()
        let (created, finished) = try fixture.registerPasskey()
        #expect(finished["id"] == created["id"])
        #expect(created["response"]?["transports"] == ["internal"])
        let signedIn = try fixture.loginWithPasskey()
        #expect(signedIn["result"]?["account"]?["id"] == fixture.accountID, "\(signedIn)")
        let session = try #require(signedIn["result"]?["session"]?["token"])
        #expect(try fixture.client.result("session.get", ["session": session])["amr"] == ["pop", "mfa"])
        let listed = try fixture.client.result("auth.passkey.list", ["session": fixture.token])
        #expect(listed["passkeys"]?.arrayValue?.first?["sign_count"] == 1)
        let held = try fixture.client.result("passkey.list")
        #expect(held["passkeys"]?.arrayValue?.first?["rp_id"] == "localhost")
        #expect(held["passkeys"]?.arrayValue?.first?["sign_count"] == 1)
    }
}
