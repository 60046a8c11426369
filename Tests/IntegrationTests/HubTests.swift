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
        let flow = try #require(try client.result("account.register.start", ["phone": "+37251234567"])["flow"])
        let code = try RegistrationTests.spooledCode(rig.hub, to: "+37251234567")
        let registered = try client.result("account.register.verify", ["flow": flow, "code": .string(code), "password": "a long enough passphrase"])
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

    @Test("a store that holds accounts refuses to start as a device, saying how many and which line")
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
