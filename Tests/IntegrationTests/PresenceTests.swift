import Foundation
import Glibc
import Protocol
import Testing

/// Friends, groups, hotspots and presence through real daemons: a hub and devices over TLS
/// (HubRig), each person on a machine of their own.
@Suite("Friends and presence")
struct PresenceTests {
    static let password = "a long enough passphrase"

    /// Alice on machine A, Bob on machine B and Carol on machine C, three accounts at one hub.
    struct People {
        let rig: HubRig
        let a: DaemonHarness, b: DaemonHarness, c: DaemonHarness
        let alice: JSONValue, bob: JSONValue, carol: JSONValue
        let aliceAccount: JSONValue, bobAccount: JSONValue

        init(environmentA: [String: String] = [:], extraA: String = "", hubConfig: String = "") throws {
            rig = try HubRig(hubConfig: hubConfig)
            (a, b, c) = (try rig.startDevice(extra: extraA, environment: environmentA), try rig.startDevice(), try rig.startDevice())
            let registeredA = try rig.register(on: a, phone: "+37251234567", email: "alice@example.org")
            let registeredB = try rig.register(on: b, phone: "+37251234568", email: "bob@example.org")
            alice = try #require(registeredA["session"]?["token"])
            bob = try #require(registeredB["session"]?["token"])
            carol = try #require(try rig.register(on: c, phone: "+37251234569", email: "carol@example.org")["session"]?["token"])
            aliceAccount = try #require(registeredA["account"]?["id"])
            bobAccount = try #require(registeredB["account"]?["id"])
        }
    }

    @Test("presence share none shares with nobody, and presence status names the setting that turns this machine's presence on")
    func shareNoneAndDisabled() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        _ = try LoginTests.register(daemon, try daemon.connect(), phone: "+37251234567", password: Self.password)
        let file = ["--session-file", daemon.directory + "/cli-session"]
        #expect(try daemon.authctl(["login", "+37251234567", "--password-fd", "0"] + file, stdin: Self.password + "\n").status == 0)
        let none = try daemon.authctl(["presence", "share", "none"] + file)
        #expect(none.status == 0 && none.stdout.contains("shared with nobody"), "\(none)")
        #expect(try daemon.authctl(["presence", "share", "none", "friends"] + file).status == 2)
        let status = try daemon.authctl(["presence", "status"] + file)
        #expect(status.stdout.contains("this machine: disabled") && status.stdout.contains("enabled = yes in [presence]"), "\(status)")
    }

    @Test("friends across machines: Alice on A adds Bob by email and Bob's stream on B hears it; an unknown address is friend.not_found; groups and sharing settings are checked field by field")
    func friendsAcrossMachines() throws {
        let people = try People()
        let (watchB, _) = try SyncTests.subscribe(people.b, session: people.bob, ["kinds": ["friend.added"]])
        let clientA = try people.a.connect()
        let added = try clientA.result("friends.add", ["session": people.alice, "email": "Bob@Example.org"])
        #expect(added["added"] == true && added["friend"]?["groups"] == ["friends"], "\(added)")
        let heard = try SyncTests.next(watchB)
        #expect(heard["params"]?["event"]?["kind"] == "friend.added" && heard["params"]?["event"]?["body"]?["email"] == "alice@example.org", "\(heard)")

        #expect(try clientA.call("friends.add", ["session": people.alice, "email": "dave@example.org"]).errorReason == "friend.not_found")
        #expect(try clientA.call("friends.add", ["session": people.alice, "email": "alice@example.org"]).errorReason == "friend.self")
        let listB = try people.b.connect().result("friends.list", ["session": people.bob])
        #expect(listB["added_me"]?.arrayValue?.first?["email"] == "alice@example.org" && listB["friends"] == [], "\(listB)")

        let family = try clientA.result("groups.create", ["session": people.alice, "name": "family"])
        #expect(family["group"]?["members"] == [])
        #expect(try clientA.call("groups.create", ["session": people.alice, "name": "family"]).errorReason == "group.exists")
        #expect(try clientA.call("groups.rename", ["session": people.alice, "name": "friends", "to": "pals"]).errorReason == "group.default")
        #expect(try clientA.result("groups.add", ["session": people.alice, "name": "family", "email": "bob@example.org"])["group"]?["members"]?.arrayValue?.first?["email"]
                == "bob@example.org")
        let badMode = try clientA.call("presence.settings", ["session": people.alice, "mode": "always"])
        #expect(badMode.errorReason == "rpc.invalid_params" && badMode["error"]?["data"]?["field"] == "mode", "\(badMode)")
        let badFor = try clientA.call("presence.settings", ["session": people.alice, "groups": ["family"], "for": 5])
        #expect(badFor["error"]?["data"]?["field"] == "for", "\(badFor)")
        let shared = try clientA.result("presence.settings", ["session": people.alice, "mode": "auto", "groups": ["family"], "for": 7200])
        #expect(shared["groups"] == ["family"] && shared["until"]?.stringValue != nil, "\(shared)")
        let audience = try clientA.result("presence.audience", ["session": people.alice])
        #expect(audience["audience"]?.arrayValue?.first?["email"] == "bob@example.org" && audience["audience"]?.arrayValue?.first?["groups"] == ["family"], "\(audience)")
        _ = try people.b.connect().result("friends.block", ["session": people.bob, "email": "alice@example.org"])
        #expect(try clientA.result("presence.audience", ["session": people.alice])["audience"] == [], "Bob blocked Alice: her pings never reach him")
        withExtendedLifetime(people) {}
    }

    @Test("a machine's presence reports are writes of that machine: past [sync] machine_writes_per_minute one is rate.limited and Bob's log does not grow; and they need a live session, so once Alice's session there ends a report for her is hub.not_signed_in though the machine is still her device")
    func reportsAreLimited() throws {
        let rig = try HubRig(hubConfig: "[sync]\nmachine_writes_per_minute = 3")
        let office = try #require(try rig.hub.connect().result("admin.hotspots.add", [
            "name": "Office", "circle": ["lat": .double(Self.office.latitude), "lon": .double(Self.office.longitude), "radius_m": .double(Self.office.radius)],
        ])["hotspot"]?["id"])
        let machine = try rig.handMadeMachine(name: "alice")
        let signedIn = try rig.register(on: machine, phone: "+37251234567")
        let (alice, aliceAccount) = (try #require(signedIn["session"]?["token"]), try #require(signedIn["account"]?["id"]))
        // Another account on the same machine: its link stays up when Alice's session ends.
        _ = try rig.register(on: machine, phone: "+37251234569")
        let b = try rig.startDevice()
        let bobAccount = try #require(try rig.register(on: b, phone: "+37251234568", email: "bob@example.org")["account"]?["id"]?.stringValue)
        #expect(try machine.forward("friends.add", ["session": alice, "email": "bob@example.org"])["result"]?["added"] == true)
        #expect(try machine.forward("presence.settings", ["session": alice, "mode": "auto", "groups": ["friends"]])["result"]?["mode"] == "auto")
        let pings = "SELECT count(*) FROM sync_events WHERE account_id = '\(bobAccount)' AND kind = 'presence'"

        // In, out, in: each tells Bob. The fourth report is one write too many.
        func report(entered: Bool) throws -> JSONValue {
            try machine.call("link.presence.report", ["account": aliceAccount, "hotspot": office, "entered": .bool(entered)])
        }
        for entered in [true, false, true] {
            #expect(try report(entered: entered)["result"]?["told"] == 1)
        }
        #expect(try rig.hub.storeRows(pings) == ["3"])
        for entered in [false, true, false] {
            let flooded = try report(entered: entered)
            #expect(flooded["error"]?["data"]?["reason"] == "rate.limited" && flooded["error"]?["data"]?["scope"] == "machine"
                    && (flooded["error"]?["data"]?["retry_after"]?.integerValue ?? 0) >= 1, "\(flooded)")
        }
        #expect(try rig.hub.storeRows(pings) == ["3"], "refused reports write nothing")

        // Alice signs out there: the machine is still her device, but holds no session of hers.
        #expect(try machine.forward("auth.logout", ["session": alice])["result"] != nil)
        let ended = try report(entered: false)
        #expect(ended["error"]?["data"]?["reason"] == "hub.not_signed_in", "\(ended)")
        #expect(try rig.hub.storeRows(pings) == ["3"])
    }
}

/// GeoClue2 for one machine: the project's python-dbusmock template
/// (Tests/IntegrationTests/Python/geoclue_mock.py) on a private system bus of its own.
final class GeoClueStandIn {
    let bus: FprintdRig
    private var mock: pid_t?
    static let template = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Python/geoclue_mock.py").path

    /// What a machine needs to find this GeoClue2.
    var environment: [String: String] { ["DBUS_SYSTEM_BUS_ADDRESS": bus.address] }
    var log: String { (try? String(contentsOfFile: bus.directory + "/geoclue.log", encoding: .utf8)) ?? "" }

    /// With `running` false the bus has no GeoClue2 at all.
    init(running: Bool = true, refuse method: String? = nil) throws {
        bus = try FprintdRig(startMock: false)
        guard running else { return }
        let parameters = method.map { #"{"refuse": {"method": "\#($0)", "name": "org.freedesktop.DBus.Error.AccessDenied", "message": "'authd' disallowed, no agent for UID 0"}}"# } ?? "{}"
        mock = try ChildProcess.spawn(["/usr/bin/python3", "-m", "dbusmock", "--template", Self.template, "-p", parameters],
                                      environment: ["DBUS_SYSTEM_BUS_ADDRESS=\(bus.address)", "PATH=/usr/bin:/bin", "PYTHONUNBUFFERED=1"],
                                      stdout: .file(bus.directory + "/geoclue.log"))
        let deadline = Date().addingTimeInterval(20)
        while try !owned() {
            guard Date() < deadline else { throw HarnessError("the GeoClue2 stand-in did not start within 20 s:\n\(log)") }
            usleep(50_000)
        }
    }

    deinit { if let mock { ChildProcess.reap(mock) } }

    private func owned() throws -> Bool {
        try bus.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameHasOwner", ["s", "org.freedesktop.GeoClue2"],
                     returning: Bool.self)
    }

    /// Moves the machine; true when an active client was told.
    @discardableResult
    func move(_ latitude: Double, _ longitude: Double, accuracy: Double = 20) throws -> Bool {
        try bus.call("org.freedesktop.GeoClue2", "/org/freedesktop/GeoClue2/Manager", "org.freedesktop.GeoClue2.Mock", "SetLocation",
                     ["ddd", String(latitude), String(longitude), String(accuracy)], returning: Bool.self)
    }

    /// The GeoClue2 methods answered so far, in order.
    func calls() throws -> [String] {
        try bus.call("org.freedesktop.GeoClue2", "/org/freedesktop/GeoClue2/Manager", "org.freedesktop.GeoClue2.Mock", "Calls", returning: [String].self)
    }
}

extension PresenceTests {
    /// The office: a shared hotspot, 150 m around (59.437, 24.7536).
    static let office = (latitude: 59.437, longitude: 24.7536, radius: 150.0)

    /// Alice's machine A reads where it is from `geoClue`; an admin made the Office hotspot at the
    /// hub; Bob is Alice's friend.
    struct Located {
        let people: People
        let geoClue: GeoClueStandIn
        let office: JSONValue

        init(geoClue: GeoClueStandIn, hubConfig: String = "") throws {
            self.geoClue = geoClue
            people = try People(environmentA: geoClue.environment, extraA: "[presence]\nenabled = yes\n[sync]\nwrites_per_minute = 100000", hubConfig: hubConfig)
            let hubClient = try people.rig.hub.connect()
            office = try #require(try hubClient.result("admin.hotspots.add", [
                "name": "Office", "circle": ["lat": .double(PresenceTests.office.latitude), "lon": .double(PresenceTests.office.longitude),
                                             "radius_m": .double(PresenceTests.office.radius)],
            ])["hotspot"]?["id"])
            _ = try people.a.connect().result("friends.add", ["session": people.alice, "email": "bob@example.org"])
        }

        /// Waits until A's `presence.machine` for Alice says `state`.
        func machine(is state: String, seconds: Double = 15) throws -> JSONValue {
            let client = try people.a.connect()
            let deadline = Date().addingTimeInterval(seconds)
            var last: JSONValue = .null
            while Date() < deadline {
                last = try client.result("presence.machine", ["session": people.alice])
                if last["state"]?.stringValue == state { return last }
                usleep(50_000)
            }
            throw HarnessError("A's presence.machine did not say \(state) within \(seconds) s: \(last)\n\(people.a.log)\n\(geoClue.log)")
        }

        /// The next `presence` event on `watch`.
        func nextPing(_ watch: LineClient) throws -> JSONValue {
            while true {
                let line = try SyncTests.next(watch)
                if line["params"]?["event"]?["kind"] == "presence" { return try #require(line["params"]?["event"]?["body"]) }
            }
        }
    }

    @Test("auto mode end to end: A's GeoClue2 moves Alice into the Office and out again; Bob on B, in the group she shares with, hears entered and left through the sync stream and sees her nearby, Carol on C, a friend outside it, hears nothing until Alice shares with all her friends; a pin only inside; presence.off deletes her place in the hub's store and A stops reading GeoClue2")
    func autoMode() throws {
        let located = try Located(geoClue: try GeoClueStandIn())
        let (people, geoClue) = (located.people, located.geoClue)
        let clientA = try people.a.connect(), clientB = try people.b.connect(), clientC = try people.c.connect()
        _ = try clientA.result("friends.add", ["session": people.alice, "email": "carol@example.org"])
        _ = try clientA.result("groups.create", ["session": people.alice, "name": "close"])
        _ = try clientA.result("groups.add", ["session": people.alice, "name": "close", "email": "bob@example.org"])
        #expect(try clientA.result("presence.settings", ["session": people.alice, "mode": "auto", "groups": ["close"]])["mode"] == "auto")
        _ = try located.machine(is: "reading")
        let (watchB, _) = try SyncTests.subscribe(people.b, session: people.bob, ["kinds": ["presence"]])
        let (watchC, _) = try SyncTests.subscribe(people.c, session: people.carol, ["kinds": ["presence"]])

        try geoClue.move(Self.office.latitude + 0.0005, Self.office.longitude)  // 56 m from the centre
        let entered = try located.nextPing(watchB)
        #expect(entered["state"] == "entered" && entered["hotspot"]?["name"] == "Office" && entered["email"] == "alice@example.org", "\(entered)")
        #expect(entered["lat"] == nil && "\(entered)".contains("59.437") == false, "no coordinates leave A: \(entered)")
        let nearby = try clientB.result("presence.nearby", ["session": people.bob])["friends"]?.arrayValue ?? []
        #expect(nearby.first?["email"] == "alice@example.org" && nearby.first?["place"]?["hotspot"]?["name"] == "Office", "\(nearby)")
        #expect(try clientC.result("presence.nearby", ["session": people.carol])["friends"] == [], "Carol is a friend, but not in the group Alice shares with")
        #expect(try located.machine(is: "reading")["inside"] == ["Office"])

        // A point outside the circle is refused; one inside is shared with Bob.
        #expect(try clientA.call("presence.pin", ["session": people.alice, "lat": .double(59.45), "lon": .double(24.7536)]).errorReason == "presence.pin_outside")
        _ = try clientA.result("presence.pin", ["session": people.alice, "lat": .double(59.4371), "lon": .double(24.7537)])
        #expect(try located.nextPing(watchB)["state"] == "pinned")

        // Two fixes well outside: left.
        try geoClue.move(59.45, 24.78)
        try geoClue.move(59.4501, 24.78)
        #expect(try located.nextPing(watchB)["state"] == "left")
        #expect(try clientB.result("presence.nearby", ["session": people.bob])["friends"] == [])

        // Shared with all her friends, back in: now Carol hears it too, and it is the first ping
        // her stream has (none of the earlier ones reached her).
        _ = try clientA.result("presence.settings", ["session": people.alice, "groups": ["friends"]])
        try geoClue.move(Self.office.latitude, Self.office.longitude)
        #expect(try located.nextPing(watchB)["state"] == "entered")
        let carolsFirst = try located.nextPing(watchC)
        #expect(carolsFirst["state"] == "entered" && carolsFirst["email"] == "alice@example.org", "\(carolsFirst)")
        let carolsLog = try clientC.result("sync.events", ["session": people.carol, "after": 0])["events"]?.arrayValue ?? []
        #expect(carolsLog.filter { $0["kind"] == "presence" }.count == 1, "the only ping in Carol's log: \(carolsLog)")

        // Off: the hub's store holds nothing of her, and A lets GeoClue2 go.
        _ = try clientA.result("presence.off", ["session": people.alice])
        let places = try DaemonHarness.run(["/usr/bin/python3", "-c", "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT count(*) FROM presence_places').fetchone()[0])",
                                            people.rig.hub.stateDirectory + "/authd.db"])
        #expect(places.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "0", "\(places.stdout) \(places.stderr)")
        #expect(try clientB.result("presence.nearby", ["session": people.bob])["friends"] == [])
        _ = try located.machine(is: "off")
        let deadline = Date().addingTimeInterval(10)
        while try !geoClue.calls().contains("Stop") && Date() < deadline { usleep(50_000) }
        let calls = try geoClue.calls()
        #expect(calls.contains("Stop"), "A stopped its GeoClue2 client: \(calls)")
        withExtendedLifetime(located) {}
    }

    @Test("a report the hub limits is kept on the machine and sent once retry_after has passed: with A's writes used up, Bob still hears that Alice entered the Office")
    func limitedReportIsKept() throws {
        let located = try Located(geoClue: try GeoClueStandIn(), hubConfig: "[sync]\nmachine_writes_per_minute = 12")
        let (people, geoClue) = (located.people, located.geoClue)
        let clientA = try people.a.connect()
        _ = try clientA.result("presence.settings", ["session": people.alice, "mode": "auto", "groups": ["friends"]])
        _ = try located.machine(is: "reading")
        let (watchB, _) = try SyncTests.subscribe(people.b, session: people.bob, ["kinds": ["presence"]])
        // A's writes at the hub used up (its sync sends count against the same budget).
        var limited: JSONValue?
        for n in 0..<40 where limited == nil {
            let sent = try clientA.call("sync.send", ["session": people.alice, "kind": "message", "conversation": "c", "body": ["n": .integer(Int64(n))]])
            if sent.errorReason == "rate.limited" { limited = sent }
        }
        #expect(limited?["error"]?["data"]?["scope"] == "machine", "\(String(describing: limited))")

        try geoClue.move(Self.office.latitude, Self.office.longitude)
        let entered = try located.nextPing(watchB)
        #expect(entered["state"] == "entered" && entered["email"] == "alice@example.org", "\(entered)")
        withExtendedLifetime(located) {}
    }

    @Test("ask mode: entering asks the person on A (presence.ask on their event stream); an answer tells the group, declining tells nobody")
    func askMode() throws {
        let located = try Located(geoClue: try GeoClueStandIn())
        let (people, geoClue) = (located.people, located.geoClue)
        let clientA = try people.a.connect(), clientB = try people.b.connect()
        _ = try clientA.result("presence.settings", ["session": people.alice, "mode": "ask", "groups": ["friends"]])
        _ = try located.machine(is: "reading")
        let events = try people.a.connect()
        _ = try events.result("events.subscribe", [:])

        func question() throws -> JSONValue? {
            while let line = try events.readJSON() {
                if line["method"] == "event", line["params"]?["type"] == "presence.ask" { return line["params"]?["presence"] }
            }
            return nil
        }
        try geoClue.move(Self.office.latitude, Self.office.longitude)
        let asked = try question()
        #expect(asked?["hotspot"]?["name"] == "Office" && asked?["groups"] == ["friends"], "\(String(describing: asked))")
        #expect(try clientB.result("presence.nearby", ["session": people.bob])["friends"] == [], "nothing told before the answer")
        let told = try clientA.result("presence.answer", ["session": people.alice, "hotspot": located.office, "group": "friends"])
        #expect(told["told"] == 1)
        #expect(try clientB.result("presence.nearby", ["session": people.bob])["friends"]?.arrayValue?.count == 1)
        #expect(try clientA.call("presence.answer", ["session": people.alice, "hotspot": located.office]).errorReason == "presence.not_asked",
                "answered already")

        // Out (Bob hears it), in again, and this time she tells nobody.
        let (watchB, _) = try SyncTests.subscribe(people.b, session: people.bob, ["kinds": ["presence"]])
        try geoClue.move(59.45, 24.78)
        try geoClue.move(59.4501, 24.78)
        #expect(try located.nextPing(watchB)["state"] == "left")
        try geoClue.move(Self.office.latitude, Self.office.longitude)
        #expect(try question()?["hotspot"]?["name"] == "Office")
        #expect(try clientA.result("presence.answer", ["session": people.alice, "hotspot": located.office])["told"] == 0)
        #expect(try clientB.result("presence.nearby", ["session": people.bob])["friends"] == [], "declined: nobody sees her")
        #expect(try clientA.result("presence.status", ["session": people.alice])["place"] == nil, "and the hub keeps nothing")
        withExtendedLifetime(located) {}
    }

    @Test("GeoClue2 refusing or absent: the machine says so with a clear reason and shares nothing")
    func geoClueUnavailable() throws {
        for geoClue in [try GeoClueStandIn(refuse: "Start"), try GeoClueStandIn(running: false)] {
            let located = try Located(geoClue: geoClue)
            _ = try located.people.a.connect().result("presence.settings", ["session": located.people.alice, "mode": "auto", "groups": ["friends"]])
            let machine = try located.machine(is: "unavailable")
            #expect(machine["detail"]?.stringValue?.contains("GeoClue") == true, "\(machine)")
            #expect(try located.people.b.connect().result("presence.nearby", ["session": located.people.bob])["friends"] == [])
            withExtendedLifetime(located) {}
        }
    }
}

/// BlueZ for one machine: python-dbusmock's `bluez5` template on the bus of a `GeoClueStandIn`,
/// with one adapter, hci0.
final class BlueZStandIn {
    let bus: FprintdRig
    private let mock: pid_t
    static let adapter = "/org/bluez/hci0"

    var log: String { (try? String(contentsOfFile: bus.directory + "/bluez.log", encoding: .utf8)) ?? "" }

    init(on geoClue: GeoClueStandIn) throws {
        bus = geoClue.bus
        mock = try ChildProcess.spawn(["/usr/bin/python3", "-m", "dbusmock", "--template", "bluez5"],
                                      environment: ["DBUS_SYSTEM_BUS_ADDRESS=\(bus.address)", "PATH=/usr/bin:/bin", "PYTHONUNBUFFERED=1"],
                                      stdout: .file(bus.directory + "/bluez.log"))
        let deadline = Date().addingTimeInterval(20)
        while try !bus.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameHasOwner", ["s", "org.bluez"],
                            returning: Bool.self) {
            guard Date() < deadline else { throw HarnessError("the BlueZ stand-in did not start within 20 s:\n\(log)") }
            usleep(50_000)
        }
        _ = try bus.call("org.bluez", "/", "org.bluez.Mock", "AddAdapter", ["ss", "hci0", "machine-a"], returning: String.self)
        // The template's Start/StopDiscovery read a DiscoveryFilter property only
        // SetDiscoveryFilter creates: an empty one, BlueZ's default, lets them work.
        try bus.call("org.bluez", Self.adapter, "org.freedesktop.DBus.Mock", "AddProperty", ["ssv", "org.bluez.Adapter1", "DiscoveryFilter", "a{sv}", "0"])
    }

    deinit { ChildProcess.reap(mock) }

    /// A device hci0 sees now (with an RSSI); returns its path.
    @discardableResult
    func addDevice(_ address: String) throws -> String {
        try bus.call("org.bluez", "/", "org.bluez.Mock", "AddDevice", ["sss", "hci0", address, "beacon"], returning: String.self)
    }

    func removeDevice(_ path: String) throws {
        try bus.call("org.bluez", Self.adapter, "org.bluez.Adapter1", "RemoveDevice", ["o", path])
    }

    /// The methods the stand-in's object at `path` answered so far, in order.
    func calls(_ path: String) throws -> [String] {
        try bus.call("org.bluez", path, "org.freedesktop.DBus.Mock", "GetCalls", returning: [MockCall].self).map(\.method)
    }

    /// Whether some client asked hci0 to discover (and it has not stopped).
    func discovering() throws -> Bool {
        struct Value: Decodable { let data: Bool }
        return try bus.call("org.bluez", Self.adapter, "org.freedesktop.DBus.Properties", "Get", ["ss", "org.bluez.Adapter1", "Discovering"],
                            returning: Value.self).data
    }
}

/// One entry of python-dbusmock's call log, `(t time, s method, av arguments)`: the method.
struct MockCall: Decodable {
    let method: String

    init(from decoder: any Decoder) throws {
        var fields = try decoder.unkeyedContainer()
        _ = try fields.decode(UInt64.self)
        method = try fields.decode(String.self)
    }
}

/// NetworkManager for one machine: python-dbusmock's `networkmanager` template on the bus of a
/// `GeoClueStandIn`, with one Wi-Fi device that sees no access point. Presence asks its
/// GetDevices first in every poll, so its call log counts the machine's polls.
final class NetworkManagerStandIn {
    let bus: FprintdRig
    private let mock: pid_t

    var log: String { (try? String(contentsOfFile: bus.directory + "/networkmanager.log", encoding: .utf8)) ?? "" }

    init(on geoClue: GeoClueStandIn) throws {
        bus = geoClue.bus
        mock = try ChildProcess.spawn(["/usr/bin/python3", "-m", "dbusmock", "--template", "networkmanager"],
                                      environment: ["DBUS_SYSTEM_BUS_ADDRESS=\(bus.address)", "PATH=/usr/bin:/bin", "PYTHONUNBUFFERED=1"],
                                      stdout: .file(bus.directory + "/networkmanager.log"))
        let deadline = Date().addingTimeInterval(20)
        while try !bus.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameHasOwner",
                            ["s", "org.freedesktop.NetworkManager"], returning: Bool.self) {
            guard Date() < deadline else { throw HarnessError("the NetworkManager stand-in did not start within 20 s:\n\(log)") }
            usleep(50_000)
        }
        // 100: NM_DEVICE_STATE_ACTIVATED.
        _ = try bus.call("org.freedesktop.NetworkManager", "/org/freedesktop/NetworkManager", "org.freedesktop.DBus.Mock", "AddWiFiDevice",
                         ["ssi", "wlan0", "wlan0", "100"], returning: String.self)
    }

    deinit { ChildProcess.reap(mock) }

    /// How many polls the machine has begun.
    func polls() throws -> Int {
        try bus.call("org.freedesktop.NetworkManager", "/org/freedesktop/NetworkManager", "org.freedesktop.DBus.Mock", "GetCalls",
                     returning: [MockCall].self).filter { $0.method == "GetDevices" }.count
    }

    /// Waits until `count` polls that began after this call have ended (the one after them has
    /// begun, and a poll reports what it saw before the next begins), at most `seconds`: the
    /// ordering marker behind "nothing happened in those polls".
    func pollsPass(_ count: Int, seconds: Double) throws {
        let begun = try polls()
        let deadline = Date().addingTimeInterval(seconds)
        while try polls() < begun + count + 1 {
            guard Date() < deadline else { throw HarnessError("\(count) polls did not pass within \(seconds) s after \(begun):\n\(log)") }
            usleep(100_000)
        }
    }
}

extension PresenceTests {
    @Test("a beacon pins automatically only with precise beacon: with manual, A never turns to BlueZ and Bob hears only the person's own pin; with beacon, the Office's beacon appearing reaches Bob's stream as pinned at the beacon's point")
    func beaconPin() throws {
        let geoClue = try GeoClueStandIn()
        let bluez = try BlueZStandIn(on: geoClue)
        let networkManager = try NetworkManagerStandIn(on: geoClue)
        let located = try Located(geoClue: geoClue)
        let (people, office) = (located.people, Self.office)
        let beacon = (address: "C0:FF:EE:00:00:01", latitude: 59.4371, longitude: 24.7537)
        let hubClient = try people.rig.hub.connect()
        let added = try hubClient.result("admin.hotspots.add", [
            "name": "Office with a beacon", "circle": ["lat": .double(office.latitude), "lon": .double(office.longitude + 0.01), "radius_m": .double(150)],
            "beacons": [["address": "c0:ff:ee:00:00:01", "lat": .double(beacon.latitude), "lon": .double(beacon.longitude + 0.01)]],
        ])
        #expect(added["hotspot"]?["beacons"]?.arrayValue?.first?["address"] == "C0:FF:EE:00:00:01", "stored in upper case: \(added)")
        let outside = try hubClient.call("admin.hotspots.add", [
            "name": "Bad", "circle": ["lat": .double(office.latitude), "lon": .double(office.longitude), "radius_m": 50],
            "beacons": [["address": .string(beacon.address), "lat": .double(59.44), "lon": .double(beacon.longitude)]],
        ])
        #expect(outside.errorReason == "rpc.invalid_params" && outside["error"]?["data"]?["field"] == "beacons", "\(outside)")
        #expect(!"\(outside)".contains("C0:FF") && !"\(outside)".contains("59.44"), "no location data in the error: \(outside)")
        // The Office itself gets the beacon too: a second admin hotspot shows the storage, this one the machine.
        _ = try hubClient.result("admin.hotspots.remove", ["id": located.office])
        let withBeacon = try #require(try hubClient.result("admin.hotspots.add", [
            "name": "Office", "circle": ["lat": .double(office.latitude), "lon": .double(office.longitude), "radius_m": .double(office.radius)],
            "beacons": [["address": .string(beacon.address), "lat": .double(beacon.latitude), "lon": .double(beacon.longitude)]],
        ])["hotspot"]?["id"])

        let clientA = try people.a.connect()
        let settings = try clientA.result("presence.settings", ["session": people.alice, "mode": "auto", "groups": ["friends"]])
        #expect(settings["precise"] == "manual", "manual by default: \(settings)")
        let badPrecise = try clientA.call("presence.settings", ["session": people.alice, "precise": "always"])
        #expect(badPrecise["error"]?["data"]?["field"] == "precise", "\(badPrecise)")
        _ = try located.machine(is: "reading")
        let (watchB, _) = try SyncTests.subscribe(people.b, session: people.bob, ["kinds": ["presence"]])

        // Manual: the beacon is in range, yet A leaves BlueZ alone and pins nothing: two of A's
        // polls (5 s each) pass inside the Office, counted by A's NetworkManager (the ordering
        // marker), and Alice's own pin is the next thing Bob hears.
        let desk = try bluez.addDevice(beacon.address)
        try geoClue.move(office.latitude, office.longitude)
        let entered = try located.nextPing(watchB)
        #expect(entered["state"] == "entered" && entered["hotspot"]?["id"] == withBeacon, "\(entered)")
        try networkManager.pollsPass(2, seconds: 30)
        #expect(try bluez.discovering() == false, "manual: A never asked BlueZ to discover\n\(bluez.log)")
        // (The log also holds the test's own AddAdapter and AddDevice.)
        let asked = try (bluez.calls("/") + bluez.calls(BlueZStandIn.adapter)).filter { !["AddAdapter", "AddDevice"].contains($0) }
        #expect(asked.isEmpty, "manual: A never asked BlueZ anything: \(asked)")
        _ = try clientA.result("presence.pin", ["session": people.alice, "lat": .double(59.4369), "lon": .double(24.7535)])
        let ownPin = try located.nextPing(watchB)
        #expect(ownPin["state"] == "pinned" && ownPin["pinned"] == ["lat": .double(59.4369), "lon": .double(24.7535)], "\(ownPin)")

        // Beacon: once A has the setting it discovers; the beacon appearing pins its point.
        try bluez.removeDevice(desk)
        // Through authctl, as a person would.
        let sessionFile = people.a.directory + "/alice-session"
        try #require(people.alice.stringValue).write(toFile: sessionFile, atomically: true, encoding: .utf8)
        chmod(sessionFile, 0o600)
        let precise = try people.a.authctl(["presence", "precise", "beacon", "--session-file", sessionFile])
        #expect(precise.status == 0 && precise.stdout.contains("precise beacon"), "\(precise.stdout)\(precise.stderr)")
        let own = try people.a.authctl(["hotspots", "add", "Desk", "--circle", "59.5,24.8,50", "--beacon", "c0:ff:ee:00:00:09,59.5001,24.8001",
                                        "--session-file", sessionFile])
        #expect(own.status == 0 && own.stdout.contains("Desk") && own.stdout.contains("1 beacon(s)"), "\(own.stdout)\(own.stderr)")
        let badBeacon = try people.a.authctl(["hotspots", "add", "Far", "--circle", "59.5,24.8,50", "--beacon", "c0:ff:ee:00:00:09,59.6,24.8",
                                              "--session-file", sessionFile])
        #expect(badBeacon.status != 0 && badBeacon.stderr.contains("beacons") && !badBeacon.stderr.contains("59.6"), "\(badBeacon.stderr)")
        let deadline = Date().addingTimeInterval(20)
        while try !bluez.discovering(), Date() < deadline { usleep(100_000) }
        #expect(try bluez.discovering(), "A discovers inside the Office once Alice's precise is beacon\n\(people.a.log)\n\(bluez.log)")
        try bluez.addDevice(beacon.address)
        let beaconPin = try located.nextPing(watchB)
        #expect(beaconPin["state"] == "pinned" && beaconPin["hotspot"]?["name"] == "Office"
                && beaconPin["pinned"] == ["lat": .double(beacon.latitude), "lon": .double(beacon.longitude)], "\(beaconPin)")
        let place = try clientA.result("presence.status", ["session": people.alice])["place"]
        #expect(place?["pinned"] == ["lat": .double(beacon.latitude), "lon": .double(beacon.longitude)], "\(String(describing: place))")
        #expect(!people.a.log.contains(beacon.address) && !people.rig.hub.log.contains(beacon.address), "no beacon address in the logs")
        withExtendedLifetime((located, bluez)) {}
    }
}
