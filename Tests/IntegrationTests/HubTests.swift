import Foundation
import Glibc
import Protocol
import Testing

/// Hub and devices as real authd processes over TLS on loopback (see HubRig).
@Suite("Hub and devices")
struct HubTests {
    @Test("a device links to its hub; an account method called on the device is served by the hub, a machine method stays on the device")
    func forwarding() throws {
        let rig = try HubRig()
        let device = try rig.startDevice()
        let client = try device.connect()
        let status = try client.result("hub.status")
        #expect(status["role"] == "device")
        #expect(status["link"]?["state"] == "connected")
        let deviceID = try #require(status["device_id"]?.stringValue)
        #expect(try client.result("device.id")["device_id"]?.stringValue == deviceID, "device.id and hub.status agree")
        #expect(deviceID.split(separator: "-").count == 13 && deviceID.split(separator: "-").allSatisfy { $0.count == 4 })

        // Registration is the account's: the code is sent by the hub, and the account lives there.
        let registered = try rig.register(on: device)
        #expect(registered["account"]?["id"]?.stringValue?.isEmpty == false)
        let hubAdmin = try rig.hub.connect()
        #expect(try hubAdmin.result("admin.accounts.list")["accounts"]?.arrayValue?.count == 1, "the account is in the hub's store")
        #expect(try device.connect().call("admin.accounts.list").errorReason == "auth.forbidden",
                "a device's admin does not administer the hub's accounts")
        // The hub audited it with the device and the process on it.
        let audit = String(decoding: try WireCodec.encodeJSON(try hubAdmin.result("admin.audit.tail", ["limit": 20])), as: UTF8.self)
        #expect(audit.contains("device:\(deviceID)"), "\(audit)")

        // A machine method answers on the device, from the device's own keys.
        let local = try client.result("auth.local", ["aud": "app"])
        #expect(local["token"]?.stringValue != nil)
        let hubStatus = try hubAdmin.result("hub.status")
        #expect(hubStatus["role"] == "hub")
        #expect(hubStatus["hub"]?["devices_connected"] == 1)
    }

    @Test("the device limit counts machines: registered on A, signed in on B, a third machine is refused in words, listing the two, with nothing created; replace_oldest ends the oldest machine's sessions")
    func deviceLimitAcrossMachines() throws {
        let rig = try HubRig()
        let (a, b, c) = (try rig.startDevice(), try rig.startDevice(), try rig.startDevice())
        let clientA = try a.connect()
        let flow = try #require(try clientA.result("account.register.start", ["phone": "+37251234567"])["flow"])
        let code = try RegistrationTests.spooledCode(rig.hub, to: "+37251234567")
        // The request's own device description does not count: through a device, the machine is the device.
        let onA = try clientA.result("account.register.verify", ["flow": flow, "code": .string(code), "password": "a long enough passphrase",
                                                                  "device": ["key": "app-chosen", "name": "whatever"]])
        let login: JSONValue = ["login": "+37251234567", "password": "a long enough passphrase", "device": ["key": "app-chosen"]]
        let onB = try b.connect().result("auth.login", login)
        #expect(onB["session"]?["token"]?.stringValue != nil)

        let idA = try a.connect().result("device.id")["device_id"]
        let idB = try b.connect().result("device.id")["device_id"]
        let refused = try c.connect().call("auth.login", login)
        #expect(refused.errorReason == "device.limit_reached", "\(refused)")
        let data = refused["error"]?["data"]
        #expect(data?["limit"] == 2)
        let listed = Set((data?["devices"]?.arrayValue ?? []).compactMap { $0["device_id"] })
        #expect(listed == Set([idA, idB].compactMap { $0 }), "the refusal names the two machines: \(String(describing: data))")
        let words = try #require(refused["error"]?["message"]?.stringValue)
        #expect(words.contains("replace_oldest") && words.contains("authctl devices revoke"), "\(words)")
        let cliRefusal = try c.authctl(["login", "--password-fd", "0", "+37251234567"], stdin: "a long enough passphrase\n")
        #expect(cliRefusal.status != 0)
        #expect(cliRefusal.stderr.contains("may be signed in on 2 devices"), "\(cliRefusal.stderr)")

        // Nothing was made for the refused machine, at the hub or on it.
        let devices = try clientA.result("device.list", ["session": onA["session"]!["token"]!])
        #expect(devices["devices"]?.arrayValue?.count == 2)
        #expect(devices["devices"]?.arrayValue?.contains { $0["current"] == true && $0["device_id"] == idA } == true, "A sees itself marked")
        let hubAudit = String(decoding: try WireCodec.encodeJSON(try rig.hub.connect().result("admin.audit.tail", ["limit": 50])), as: UTF8.self)
        #expect(hubAudit.contains("device.limit_reached"))

        // The account's policy makes room: the least recently used machine is signed out. Use A
        // once more in a later second than B's last use (the store counts use in seconds), so B
        // is that machine whatever the timing.
        let lastUseOfB = Int(Date().timeIntervalSince1970)
        while Int(Date().timeIntervalSince1970) <= lastUseOfB { usleep(20_000) }
        _ = try clientA.result("session.get", ["session": onA["session"]!["token"]!])
        let account = try #require(onA["account"]?["id"])
        _ = try rig.hub.connect().result("admin.accounts.set", ["account": account, "device_policy": "replace_oldest"])
        let eventsOnB = try b.connect()
        _ = try eventsOnB.result("events.subscribe")
        let onC = try c.connect().result("auth.login", login)
        #expect(onC["session"]?["token"]?.stringValue != nil)
        let told = try #require(try eventsOnB.readJSON(), "B is told")
        #expect(told["params"]?["type"] == "session.ended")
        #expect(told["params"]?["ended"]?["cause"] == "replace_oldest", "\(told)")
        #expect(told["params"]?["ended"]?["session"] == onB["session"]?["id"])
        #expect(try b.connect().call("session.get", ["session": onB["session"]!["token"]!]).errorReason == "session.invalid", "B's session ended")
        #expect(try clientA.result("session.get", ["session": onA["session"]!["token"]!])["account"] != nil, "A's is untouched")
    }

    @Test("a session works only from its own machine; a machine removed from the account gets device.revoked until it signs in again")
    func sessionsBelongToTheirMachine() throws {
        let rig = try HubRig()
        let (a, b) = (try rig.startDevice(), try rig.startDevice())
        let clientA = try a.connect(), clientB = try b.connect()
        let onA = try rig.register(on: a)
        let tokenA = try #require(onA["session"]?["token"])
        // A's token, carried to B, is worth nothing there (B never signed in: it may only sign in).
        let stolen = try clientB.call("session.get", ["session": tokenA])
        #expect(stolen.errorReason == "session.invalid", "\(stolen)")
        #expect(try clientA.result("session.get", ["session": tokenA])["account"] != nil, "A's own use still works")

        let login: JSONValue = ["login": "+37251234567", "password": "a long enough passphrase"]
        let tokenB = try #require(try clientB.result("auth.login", login)["session"]?["token"])
        let machineB = try #require(try clientB.result("device.list", ["session": tokenB])["devices"]?.arrayValue?.first { $0["current"] == true }?["id"])
        #expect(try clientA.result("device.revoke", ["session": tokenA, "id": machineB])["revoked"] == true)
        let revoked = try clientB.call("session.get", ["session": tokenB])
        #expect(revoked.errorReason == "device.revoked", "\(revoked)")
        // Signing in again brings B back, and counts against the limit again.
        let again = try #require(try clientB.result("auth.login", login)["session"]?["token"])
        #expect(try clientB.result("session.get", ["session": again])["account"] != nil)
    }

    @Test("a machine removed from the account: on it, whoami and token account exit 7 like any ended session, and logout removes the session file")
    func removedMachineExitsSeven() throws {
        let rig = try HubRig()
        let (a, b) = (try rig.startDevice(), try rig.startDevice())
        let onA = try rig.register(on: a)
        let tokenA = try #require(onA["session"]?["token"])
        let file = ["--session-file", b.directory + "/cli-session"]
        let login = try b.authctl(["login", "+37251234567", "--password-fd", "0"] + file, stdin: "a long enough passphrase\n")
        #expect(login.status == 0, "\(login.stderr)")
        let machineB = try #require(try a.connect().result("device.list", ["session": tokenA])["devices"]?.arrayValue?.first { $0["current"] != true }?["id"])
        #expect(try a.authctl(["--json", "whoami", "--session-file", a.directory + "/none"]).status == 7, "no session file at all is 7 too")
        _ = try a.connect().result("device.revoke", ["session": tokenA, "id": machineB])

        let whoami = try b.authctl(["whoami"] + file)
        #expect(whoami.status == 7 && whoami.stderr.contains("(device.revoked)"), "\(whoami.status) \(whoami.stderr)")
        let token = try b.authctl(["token", "account", "--aud", "org.example.bank"] + file)
        #expect(token.status == 7, "\(token.status) \(token.stderr)")
        let logout = try b.authctl(["logout"] + file)
        #expect(logout.status == 0, "\(logout.stderr)")
        #expect(!FileManager.default.fileExists(atPath: b.directory + "/cli-session"), "logout removed the ended session's file")
    }

    @Test("sync watch on a machine removed from the account ends at once, saying why, with exit 7")
    func watchEndsWhenTheMachineIsRemoved() throws {
        let rig = try HubRig()
        let (a, b) = (try rig.startDevice(), try rig.startDevice())
        let onA = try rig.register(on: a)
        let tokenA = try #require(onA["session"]?["token"])
        let file = b.directory + "/cli-session"
        #expect(try b.authctl(["login", "+37251234567", "--password-fd", "0", "--session-file", file], stdin: "a long enough passphrase\n").status == 0)
        let watch = try TerminalSession([DaemonHarness.authctlPath, "--socket", b.socketPath, "sync", "watch", "--session-file", file],
                                        environment: ["PATH": "/usr/bin:/bin", "HOME": b.directory])
        try watch.expect("Waiting for events")
        let machineB = try #require(try a.connect().result("device.list", ["session": tokenA])["devices"]?.arrayValue?.first { $0["current"] != true }?["id"])
        _ = try a.connect().result("device.revoke", ["session": tokenA, "id": machineB])
        #expect(try watch.finish(seconds: 10) == 7, "\(watch.transcript)")
        #expect(watch.transcript.contains("the stream ended") && watch.transcript.contains("(device.revoked)"), "\(watch.transcript)")
    }

    @Test("machines have names: device name NAME names this one (kept across restarts), and the device-limit refusal lists the names")
    func machineNames() throws {
        let rig = try HubRig()
        let (a, b, c) = (try rig.startDevice(), try rig.startDevice(), try rig.startDevice())
        let named = try a.authctl(["device", "name", "laptop"])
        #expect(named.status == 0 && named.stdout.hasPrefix("this machine is now called laptop"), "\(named)")
        #expect(try b.authctl(["device", "name", "desktop"]).status == 0)
        #expect(try c.authctl(["device", "name", " "]).status == 2, "an empty name is refused")
        _ = try rig.register(on: a)
        let login: JSONValue = ["login": "+37251234567", "password": "a long enough passphrase"]
        _ = try b.connect().result("auth.login", login)
        let refused = try c.connect().call("auth.login", login)
        let message = refused["error"]?["message"]?.stringValue ?? ""
        #expect(refused.errorReason == "device.limit_reached" && message.contains("laptop (") && message.contains("desktop ("), "\(refused)")
        try a.terminate()
        try a.start()
        #expect(try a.authctl(["device", "id"]).stdout.hasSuffix("  laptop\n"), "the name is kept in the machine's store")
    }

    @Test("a locked device says what unlocks it, and still answers session.locked while its hub is away")
    func lockedDeviceWithoutHub() throws {
        let rig = try HubRig()
        let device = try rig.startDevice()
        _ = try rig.register(on: device)
        let client = try device.connect()
        _ = try client.result("lock")
        let locked = try client.call("auth.local", ["aud": "app"])
        #expect(locked.errorReason == "session.locked" && (locked["error"]?["message"]?.stringValue ?? "").contains("(password)"), "\(locked)")
        try rig.hub.terminate()
        let deadline = Date().addingTimeInterval(10)
        while try client.result("hub.status")["link"]?["state"] == "connected", Date() < deadline { usleep(20_000) }
        let away = try client.call("auth.local", ["aud": "app"])
        #expect(away.errorReason == "session.locked", "never the hub's failure: \(away)")
    }

    @Test("admin sms last on a device says the codes go to the hub's spool, and how to read them")
    func smsLastOnADevice() throws {
        let rig = try HubRig()
        let device = try rig.startDevice()
        _ = try device.connect().result("account.register.start", ["phone": "+37251234567"])
        let last = try device.authctl(["admin", "sms", "last"])
        #expect(last.status == 1 && last.stderr.contains("(sms.at_hub)") && last.stderr.contains("127.0.0.1:\(rig.port)"), "\(last)")
        #expect(try rig.hub.authctl(["admin", "sms", "last"]).stdout.contains("+37251234567"), "the hub's spool has it")
    }

    @Test("login on a device whose hub is away says so before asking for the password")
    func loginChecksTheLinkFirst() throws {
        let rig = try HubRig()
        let device = try rig.startDevice()
        _ = try rig.register(on: device)
        try rig.hub.terminate()
        let client = try device.connect()
        let deadline = Date().addingTimeInterval(10)
        while try client.result("hub.status")["link"]?["state"] == "connected", Date() < deadline { usleep(20_000) }
        let login = try TerminalSession([DaemonHarness.authctlPath, "--socket", device.socketPath, "login", "+37251234567"],
                                        environment: ["PATH": "/usr/bin:/bin", "HOME": device.directory])
        #expect(try login.finish(seconds: 10) == 1, "\(login.transcript)")
        #expect(login.transcript.contains("(hub.unavailable)") && !login.transcript.contains("Password"), "\(login.transcript)")
    }

    @Test("revocation is pushed: a session revoked from A is told to B's local user at once; removing B tells it, closes its link, and its next call is device.revoked; a deactivation is told too")
    func revocationIsPushed() throws {
        let rig = try HubRig()
        let (a, b) = (try rig.startDevice(), try rig.startDevice())
        let clientA = try a.connect(), clientB = try b.connect()
        let onA = try rig.register(on: a)
        let tokenA = try #require(onA["session"]?["token"])
        let login: JSONValue = ["login": "+37251234567", "password": "a long enough passphrase"]
        let first = try clientB.result("auth.login", login)["session"]
        let second = try clientB.result("auth.login", login)["session"]
        let events = try b.connect()
        _ = try events.result("events.subscribe")

        // One of B's two sessions revoked from A: B's user hears it; B keeps its other session and its link.
        var started = ContinuousClock.now
        _ = try clientA.result("session.revoke", ["session": tokenA, "id": first!["id"]!])
        let revoked = try #require(try events.readJSON())
        #expect(ContinuousClock.now - started < .seconds(1), "heard within a second")
        #expect(revoked["params"]?["type"] == "session.ended")
        #expect(revoked["params"]?["ended"]?["cause"] == "session.revoke")
        #expect(revoked["params"]?["ended"]?["session"] == first?["id"])
        #expect(revoked["params"]?["ended"]?["machine_unlinked"] == false)
        #expect(try clientB.call("session.get", ["session": first!["token"]!]).errorReason == "session.invalid")
        #expect(try clientB.result("session.get", ["session": second!["token"]!])["account"] != nil)
        #expect(!b.log.contains("is down"), "B keeps its link while it holds a session")

        // B removed from A: told at once, its link closed, its next account call refused.
        let machineB = try #require(try clientB.result("device.list", ["session": second!["token"]!])["devices"]?.arrayValue?.first { $0["current"] == true }?["id"])
        started = ContinuousClock.now
        _ = try clientA.result("device.revoke", ["session": tokenA, "id": machineB])
        let removed = try #require(try events.readJSON())
        #expect(ContinuousClock.now - started < .seconds(1), "heard within a second")
        #expect(removed["params"]?["ended"]?["cause"] == "device.revoke")
        #expect(removed["params"]?["ended"]?["session"] == second?["id"])
        #expect(removed["params"]?["ended"]?["machine_unlinked"] == true)
        let deadline = Date().addingTimeInterval(5)
        while !b.log.contains("is down: the hub closed the link") && Date() < deadline { usleep(20_000) }
        #expect(b.log.contains("is down: the hub closed the link"), "the hub closed B's link:\n\(b.log)")
        try HubRig.waitForLink(b, state: "connected")
        #expect(try clientB.call("session.get", ["session": second!["token"]!]).errorReason == "device.revoked")

        // Signed in again (a new place under the limit), then the account deactivated at the hub: told too.
        let again = try clientB.result("auth.login", login)["session"]
        _ = try rig.hub.connect().result("admin.accounts.deactivate", ["account": onA["account"]!["id"]!])
        let deactivated = try #require(try events.readJSON())
        #expect(deactivated["params"]?["ended"]?["cause"] == "account.deactivated")
        #expect(deactivated["params"]?["ended"]?["session"] == again?["id"])
    }

    @Test("slowloris on the hub's port: a TLS client that trickles an unfinished line is closed at the idle timeout, while a device's quiet link stays up and is served")
    func slowlorisOnTheHubPort() throws {
        let rig = try HubRig(hubConfig: "[server]\nidle_timeout = 1s")
        let device = try rig.startDevice()
        try HubRig.openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj", "/CN=slow",
                            "-keyout", rig.directory + "/slow.key", "-out", rig.directory + "/slow.pem"])
        // One byte of a request every 100 ms, never a whole line; prints the seconds until the hub closed it.
        let script = """
            import socket, ssl, sys, time
            port, ca, directory = int(sys.argv[1]), sys.argv[2], sys.argv[3]
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.load_verify_locations(ca)
            context.load_cert_chain(directory + "/slow.pem", directory + "/slow.key")
            s = context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10), server_hostname="127.0.0.1")
            started = time.monotonic()
            line = b'{"jsonrpc":"2.0","id":1,"method":"link.ping","params":{"padding":"' + b"x" * 1000
            try:
                for byte in line:
                    s.sendall(bytes([byte]))
                    s.settimeout(0.1)
                    try:
                        if s.recv(1) == b"":
                            break
                    except socket.timeout:
                        pass
                    except (ssl.SSLError, OSError):
                        break
            except OSError:
                pass
            print(round(time.monotonic() - started, 1))
            """
        let slow = try DaemonHarness.run(["/usr/bin/timeout", "60", "/usr/bin/python3", "-c", script, String(rig.port), rig.caFile, rig.directory])
        let seconds = try #require(Double(slow.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), "\(slow.stdout)\(slow.stderr)")
        #expect(seconds < 5, "closed after one to two idle timeouts, not after the whole trickle: \(seconds) s")
        // Three more idle timeouts of a quiet link: heartbeats every 5 s would have let the hub close it.
        usleep(3_000_000)
        // The device's link was quiet all along (heartbeats only) and is still the same link.
        #expect(try device.connect().result("hub.status")["link"]?["state"] == "connected")
        #expect(!device.log.contains("is down"), "the device's link stayed up:\n\(device.log)")
        #expect(try device.connect().result("account.register.start", ["phone": "+37251234567"])["flow"] != nil)
    }

    @Test("an account token asked for on a device is the hub's (it verifies against the hub's keys, not the device's); auth.local stays the device's")
    func accountTokensAreTheHubs() throws {
        let rig = try HubRig()
        let device = try rig.startDevice()
        let client = try device.connect()
        let registered = try rig.register(on: device)
        let account = try #require(try client.result("auth.token", ["session": registered["session"]!["token"]!, "aud": "https://rp.example"])["token"])
        let hub = try rig.hub.connect()
        #expect(try hub.result("token.verify", ["token": account, "aud": "https://rp.example"])["claims"]?["sub"] == registered["account"]?["id"])
        let onDevice = try client.result("token.verify", ["token": account, "aud": "https://rp.example"])
        #expect(onDevice["claims"]?["sub"] == registered["account"]?["id"], "token.verify on the device verifies the hub's account token with the hub's keys")
        let deviceKeys = try client.result("keys.jwks")["keys"]?.arrayValue ?? []
        #expect(deviceKeys.contains { $0["kid"] == onDevice["header"]?["kid"] }, "the key it verified with is in the device's JWKS")
        let local = try #require(try client.result("auth.local", ["aud": "app"])["token"])
        #expect(try client.result("token.verify", ["token": local, "aud": "app"])["claims"] != nil, "auth.local is signed by the device")
        #expect(try hub.call("token.verify", ["token": local, "aud": "app"]).errorReason != nil)
        // The device's JWKS publishes both signers: the hub's keys and its own.
        let kids = { (set: JSONValue) in Set((set["keys"]?.arrayValue ?? []).compactMap { $0["kid"]?.stringValue }) }
        let hubKids = kids(try hub.result("keys.jwks"))
        let deviceKids = kids(try client.result("keys.jwks"))
        #expect(!hubKids.isEmpty && hubKids.isSubset(of: deviceKids) && deviceKids.count > hubKids.count, "\(hubKids) in \(deviceKids)")
    }

    @Test("hub down: account methods answer hub.unavailable at once while auth.local works; the hub back on its port, the link comes back by itself")
    func hubDownAndBack() throws {
        let rig = try HubRig()
        let device = try rig.startDevice()
        let client = try device.connect()
        // Acknowledged before the kill: the account must be there after it.
        let flow = try #require(try client.result("account.register.start", ["phone": "+37251234500"])["flow"])
        let code = try RegistrationTests.spooledCode(rig.hub, to: "+37251234500")
        _ = try client.result("account.register.verify", ["flow": flow, "code": .string(code), "password": "a long enough passphrase"])
        try rig.hub.kill9()
        try HubRig.waitForLink(device, state: "unreachable")
        let started = ContinuousClock.now
        let refused = try client.call("account.register.start", ["phone": "+37251234567"])
        let elapsed = ContinuousClock.now - started
        #expect(refused.errorReason == "hub.unavailable", "\(refused)")
        #expect((refused["error"]?["data"]?["retry_after"]?.integerValue ?? 0) >= 1)
        #expect(elapsed < .milliseconds(100), "answered in \(elapsed)")
        #expect(try client.result("auth.local", ["aud": "app"])["token"]?.stringValue != nil, "machine methods keep working")
        let words = try device.authctl(["status"])
        #expect(words.stdout.contains("unreachable since"), "\(words.stdout)")

        _ = try rig.startHub(port: rig.port, harness: rig.hub)
        try HubRig.waitForLink(device, state: "connected", seconds: 40)
        #expect(try client.result("account.register.start", ["phone": "+37251234567"])["flow"] != nil)
        let login = try client.result("auth.login", ["login": "+37251234500", "password": "a long enough passphrase"])
        #expect(login["session"]?["token"]?.stringValue != nil, "the account registered before the kill signs in after it")
    }

    @Test("a hub whose certificate is from another CA, or whose key is not the pinned one, is hub.untrusted; the pinned key links")
    func untrustedHub() throws {
        let rig = try HubRig()
        try HubRig.makeCA(in: rig.directory, name: "other")
        let wrongCA = try rig.startDevice(trust: "ca_file = \(rig.directory)/other.pem", waitForLink: false)
        try HubRig.waitForLink(wrongCA, state: "untrusted")
        let refused = try wrongCA.connect().call("account.register.start", ["phone": "+37251234567"])
        #expect(refused.errorReason == "hub.untrusted", "\(refused)")

        let pin = try HubRig.pin(ofKey: rig.keyFile)
        let wrongPin = try rig.startDevice(trust: "pin = sha256//" + Data(repeating: 7, count: 32).base64EncodedString(), waitForLink: false)
        try HubRig.waitForLink(wrongPin, state: "untrusted")
        let pinned = try rig.startDevice(trust: "pin = sha256//" + pin)
        #expect(try pinned.connect().result("hub.status")["link"]?["state"] == "connected")
    }

    @Test("plain TCP, garbage, and a TLS client that never finishes its handshake do not disturb a device; the stalled one is dropped at handshake_timeout")
    func hostileClientsOnTheHubPort() throws {
        let rig = try HubRig(hubConfig: "handshake_timeout = 1s")
        let device = try rig.startDevice()
        let garbage = try TCPClient(port: rig.port)
        garbage.send(Array("GET / HTTP/1.1\r\nHost: hub\r\n\r\n".utf8))
        let silent = try TCPClient(port: rig.port)
        let started = Date()
        #expect(garbage.waitForClose(seconds: 5), "garbage ends the connection")
        #expect(silent.waitForClose(seconds: 5), "a client that never handshakes is dropped")
        #expect(Date().timeIntervalSince(started) < 4)
        #expect(try device.connect().result("hub.status")["link"]?["state"] == "connected")
        #expect(try device.connect().result("account.register.start", ["phone": "+37251234567"])["flow"] != nil)
    }

    @Test("the authd(8) recipe: openssl s_client with a self-made certificate speaks the protocol to the hub by hand")
    func opensslRecipe() throws {
        let rig = try HubRig()
        let machine = try rig.handMadeMachine()
        let lines = try machine.exchange([
            #"{"jsonrpc":"2.0","id":1,"method":"link.ping"}"#,
            #"{"jsonrpc":"2.0","id":2,"method":"link.forward","params":{"method":"account.register.start","params":{"phone":"+37251234567"},"caller":{"uid":1000}}}"#,
            #"{"jsonrpc":"2.0","id":3,"method":"link.forward","params":{"method":"auth.local","params":{"aud":"x"},"caller":{"uid":1000}}}"#,
        ])
        // Answers come as each request finishes, not in order: match them by id.
        var answers: [JSONValue: JSONValue] = [:]
        for line in lines {
            let answer = try WireCodec.decode(JSONValue.self, from: Data(line.utf8))
            answers[answer["id"] ?? .null] = answer
        }
        #expect(answers[1]?["result"]?["ok"] == true, "\(lines)")
        #expect(answers[2]?["result"]?["flow"]?.stringValue != nil, "an account method is served: \(lines)")
        #expect(answers[3]?["error"]?["data"]?["reason"] == "auth.forbidden", "a machine method is not: \(lines)")
    }

    @Test("a forwarded caller no process could be is refused, naming the field, and nothing is stored: a 600 KB exe (which would make every push of its event a line the account's other machines drop their link for), a long user or machine name, a control character")
    func oversizedForwardedCaller() throws {
        let rig = try HubRig()
        let machine = try rig.handMadeMachine()
        // Signed in: no longer a newcomer, its lines may be 1 MiB.
        let signedIn = try rig.register(on: machine, phone: "+37251234567")
        let session = try #require(signedIn["session"]?["token"])
        let before = try rig.hub.storeRows("SELECT count(*), max(length(exe)) FROM sync_events")
        // A read marker is a write any signed-in machine may make, end-to-end encryption or not.
        let read: JSONValue = ["session": session, "conversation": "c", "up_to": 1]
        for (caller, field) in [
            (["uid": 1000, "exe": .string("/" + String(repeating: "x", count: 600_000))], "caller.exe"),
            (["uid": 1000, "exe": .string("/" + String(repeating: "x", count: 4096))], "caller.exe"),
            (["uid": 1000, "username": .string(String(repeating: "u", count: 257))], "caller.username"),
            (["uid": 1000, "machine": .string(String(repeating: "m", count: 256))], "caller.machine"),
            (["uid": 1000, "exe": "/usr/bin/app\n{\"jsonrpc\":\"2.0\"}"], "caller.exe"),
        ] as [(JSONValue, String)] {
            let answer = try machine.forward("sync.read", read, caller: caller)
            #expect(answer["error"]?["data"]?["reason"] == "rpc.invalid_params" && answer["error"]?["data"]?["field"] == .string(field),
                    "\(field): \(String(describing: answer["error"] ?? answer["result"]))")
        }
        #expect(try rig.hub.storeRows("SELECT count(*), max(length(exe)) FROM sync_events") == before, "nothing was stored")
        // Within the limits the same call is served.
        let fitting = try machine.forward("sync.read", read, caller: ["uid": 1000, "exe": .string("/" + String(repeating: "x", count: 4095))])
        #expect(fitting["result"]?["moved"] == true, "\(fitting)")
    }

    @Test("strangers cannot starve the hub: machines that have not signed in get a few connections per address, a pool of their own, short lines and a short time; signed-in machines and local users are served")
    func strangersCannotStarveTheHub() throws {
        let rig = try HubRig(hubConfig: "max_devices = 2\nnewcomers_per_address = 3\nmax_newcomers = 12\nnewcomer_timeout = 6s")
        let a = try rig.startDevice()
        _ = try rig.register(on: a)
        // 24 throwaway identities from six addresses of the loopback network, five tries each
        // address; 200 handshakes in a row first (a stall shows as a handshake timeout).
        let script = """
            import datetime, json, socket, ssl, sys, time, os
            from cryptography import x509
            from cryptography.hazmat.primitives import hashes, serialization
            from cryptography.hazmat.primitives.asymmetric import ec
            from cryptography.x509.oid import NameOID
            port, ca, work = int(sys.argv[1]), sys.argv[2], sys.argv[3]
            now = datetime.datetime.now(datetime.timezone.utc)
            contexts = []
            for i in range(30):
                key = ec.generate_private_key(ec.SECP256R1())
                name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"stranger {i}")])
                cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                        .serial_number(i + 1).not_valid_before(now - datetime.timedelta(days=1))
                        .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
                path = os.path.join(work, f"{i}.pem")
                with open(path, "wb") as f:
                    f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
                    f.write(cert.public_bytes(serialization.Encoding.PEM))
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                context.load_verify_locations(ca)
                context.load_cert_chain(path)
                contexts.append(context)
            def handshake(i, source):
                s = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
                return contexts[i % len(contexts)].wrap_socket(s, server_hostname="127.0.0.1")
            def alive(s):
                try:
                    s.settimeout(5)
                    s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"link.ping"}\\n')
                    return b'"result"' in s.recv(4096)
                except Exception:
                    return False
            for i in range(200):
                handshake(i, "127.0.0.20").close()
            held, n = [], 0
            for address in range(2, 8):
                for _ in range(5):
                    # Each connection's ping is answered (or it is closed) before the next one
                    # comes: the hub has decided about it, and about whom it let go for it.
                    s = handshake(n, f"127.0.0.{address}")
                    alive(s)
                    held.append((address, s))
                    n += 1
            living = [(a, s) for a, s in held if alive(s)]
            per_address = max([sum(1 for a, _ in living if a == address) for address in range(2, 8)])
            # A stranger's line is short: 100 KB unfinished ends its connection.
            _, long = living.pop()
            long.settimeout(5)
            cut = False
            try:
                # The hub may close it before all of it is written: that is the cut too.
                long.sendall(b"x" * 100_000)
                while long.recv(4096):
                    pass
                cut = True
            except socket.timeout:
                pass
            except Exception:
                cut = True
            print(json.dumps({"alive": len(living) + 1, "per_address": per_address, "long_line_cut": cut}), flush=True)
            sys.stdin.readline()
            started = time.monotonic()
            dropped = 0
            for _, s in living:
                s.settimeout(max(0.1, 15 - (time.monotonic() - started)))
                try:
                    while s.recv(4096):
                        pass
                    dropped += 1
                except Exception:
                    dropped += 1 if time.monotonic() - started < 15 else 0
            print(json.dumps({"dropped": dropped, "of": len(living), "seconds": time.monotonic() - started}), flush=True)
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/timeout")
        let strangers = rig.hub.directory + "/strangers"
        try FileManager.default.createDirectory(atPath: strangers, withIntermediateDirectories: false)
        process.arguments = ["120", "/usr/bin/python3", "-c", script, String(rig.port), rig.caFile, strangers]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        // What the script says when it fails (a traceback), for the failure's message.
        let errors = rig.hub.directory + "/strangers.err"
        _ = FileManager.default.createFile(atPath: errors, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: errors)
        try process.run()
        defer {
            try? input.fileHandleForWriting.close()
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
        let said: [String]
        do {
            said = try HubRig.readLines(output.fileHandleForReading.fileDescriptor, count: 1, seconds: 90)
        } catch {
            throw HarnessError("\(error); the script's errors: \((try? String(contentsOfFile: errors, encoding: .utf8)) ?? "")")
        }
        let filled = try WireCodec.decode(JSONValue.self, from: Data(said[0].utf8))
        #expect(filled["alive"] == 12, "max_newcomers holds (the oldest give way): \(filled)")
        #expect(filled["per_address"] == 3, "newcomers_per_address holds: \(filled)")
        #expect(filled["long_line_cut"] == true, "\(filled)")

        // With the newcomers' pool full, a new machine still links (an old stranger gives way),
        // signs in and is served; the strangers never counted against max_devices.
        let c = try rig.startDevice()
        let login: JSONValue = ["login": "+37251234567", "password": "a long enough passphrase"]
        let onC = try #require(try c.connect().result("auth.login", login)["session"]?["token"])
        #expect(try c.connect().result("session.get", ["session": onC])["account"] != nil)
        // The hub's own users are served beside them: a 300 KB request is answered, not reset.
        let big = try rig.hub.connect().call("hello", ["padding": .string(String(repeating: "p", count: 300_000))])
        #expect(big["jsonrpc"] == "2.0", "\(big)")

        try input.fileHandleForWriting.write(contentsOf: Data("go\n".utf8))
        let outcome = try WireCodec.decode(JSONValue.self, from: Data(try HubRig.readLines(output.fileHandleForReading.fileDescriptor, count: 1, seconds: 30)[0].utf8))
        #expect(outcome["dropped"] == outcome["of"], "every stranger is let go at newcomer_timeout: \(outcome)")
        // The signed-in machines stay: members are never timed out.
        let status = try rig.hub.connect().result("hub.status")
        #expect(status["hub"]?["devices_connected"] == 2, "\(status)")
        #expect(status["hub"]?["newcomers_connected"] == 0, "\(status)")
        #expect(try a.connect().result("hub.status")["link"]?["state"] == "connected")
        #expect(try c.connect().result("session.get", ["session": onC])["account"] != nil)
    }

    @Test("a store that holds accounts refuses to start as a device, saying how many and which line",
          .disabled(if: PostgreSQLCluster.isSelected, "the accounts are in this authd's own SQLite store only on the SQLite pass"))
    func accountsBlockTheDeviceRole() throws {
        let rig = try HubRig()
        let standalone = try DaemonHarness()
        try standalone.start()
        _ = try LoginTests.register(standalone, standalone.connect(), phone: "+37251234567", password: "a long enough passphrase")
        try standalone.terminate()
        try "[hub]\nurl = 127.0.0.1:\(rig.port)\nca_file = \(rig.caFile)\n".write(toFile: standalone.configPath, atomically: true, encoding: .utf8)
        #expect(throws: HarnessError.self) { try standalone.start() }
        #expect(standalone.log.contains("holds 1 account(s)"), "\(standalone.log)")
        #expect(standalone.log.contains("hub.url"))
    }
}

extension HubRig {
    /// `sha256//` pin material of a key file: base64 SHA-256 of its SubjectPublicKeyInfo.
    static func pin(ofKey keyFile: String) throws -> String {
        let spki = keyFile + ".spki"
        try openssl(["pkey", "-in", keyFile, "-pubout", "-outform", "DER", "-out", spki])
        let digest = try DaemonHarness.run(["/usr/bin/openssl", "dgst", "-sha256", "-binary", "-out", spki + ".sha256", spki])
        guard digest.status == 0 else { throw HarnessError("openssl dgst failed") }
        return try Data(contentsOf: URL(fileURLWithPath: spki + ".sha256")).base64EncodedString()
    }
}

/// A raw TCP client to the hub's port, for what a well-behaved device would not send.
final class TCPClient {
    let fd: Int32

    init(port: UInt16) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw HarnessError("connect to the hub port failed: \(errno)") }
    }

    deinit { close(fd) }

    func send(_ bytes: [UInt8]) { _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } }

    /// Whether the hub closes the connection within `seconds` (what it sends before is read and dropped).
    func waitForClose(seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while Date() < deadline {
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 100) == 1 else { continue }
            let count = recv(fd, &buffer, buffer.count, 0)
            if count <= 0 { return true }
        }
        return false
    }
}
