import Foundation
import Protocol
import Testing

/// A device whose `[hub] url` lists several addresses of its hub: real authd processes over TLS
/// on loopback (see HubRig), with ports where nothing listens taken from the kernel.
@Suite("A hub with several addresses")
struct HubFailoverTests {
    @Test("a device links to the address that answers, whether a dead one is listed before it or after it, and its account calls are served there",
          arguments: [true, false])
    func deadAddressInTheList(deadFirst: Bool) throws {
        let rig = try HubRig()
        let live = "127.0.0.1:\(rig.port)", dead = "127.0.0.1:\(try HubRig.deadPort())"
        let listed = deadFirst ? [dead, live] : [live, dead]
        let device = try rig.startDevice(url: listed.joined(separator: ", "))
        let link = try #require(try device.connect().result("hub.status")["link"])
        #expect(link["state"] == "connected" && link["url"]?.stringValue == live, "\(link)")
        #expect(link["urls"] == .array(listed.map { .string($0) }), "every address, in the order listed: \(link)")
        #expect(device.log.contains("linked to the hub \(live)"), "\(device.log)")

        // A forwarded account call: the code is sent by that hub, and the account lives there.
        let registered = try rig.register(on: device)
        #expect(registered["session"]?["token"]?.stringValue != nil, "\(registered)")
        #expect(try rig.hub.connect().result("admin.accounts.list")["accounts"]?.arrayValue?.count == 1)
        let words = try device.authctl(["hub", "status"])
        #expect(words.status == 0 && words.stdout.contains("hub: \(live) (of \(listed.joined(separator: ", "))), connected since"), "\(words)")
    }

    @Test("when the hub at the first address stops, the link moves to the second, says so, and account calls reach it")
    func failover() throws {
        let rig = try HubRig()
        let first = "127.0.0.1:\(rig.port)"
        // A second hub with the same certificate, as a replica is; its own store, so where a call
        // went shows in whose SMS spool the code is.
        let second = try rig.startHub(port: 0)
        let secondAddress = "127.0.0.1:\(rig.port)"
        let device = try rig.startDevice(url: "\(first), \(secondAddress)")
        try HubRig.waitForLink(device, state: "connected", url: first)

        try rig.hub.terminate()
        try HubRig.waitForLink(device, state: "connected", url: secondAddress)
        let status = try device.connect().result("hub.status")
        #expect(status["link"]?["urls"] == .array([.string(first), .string(secondAddress)]), "\(status)")
        #expect(device.log.contains("the link to the hub \(first) is down"), "\(device.log)")
        #expect(device.log.contains("linked to the hub \(secondAddress)"), "\(device.log)")
        let admin = try device.authctl(["admin", "status"])
        #expect(admin.stdout.contains("hub: \(secondAddress) (of \(first), \(secondAddress)), connected since"), "\(admin)")

        // An account method that needs no session: the second hub sends the code.
        let flow = try device.connect().result("account.register.start", ["phone": "+37251234567"])["flow"]
        #expect(flow?.stringValue != nil)
        #expect(try RegistrationTests.spooledCode(second, to: "+37251234567").count == 6, "the second hub sent it")
    }
}
