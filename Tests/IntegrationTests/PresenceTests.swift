import Foundation
import Glibc
import Protocol
import Testing

/// Friends, groups, hotspots and presence through real daemons: a hub and devices over TLS
/// (HubRig), each person on a machine of their own.
@Suite("Friends and presence")
struct PresenceTests {
    static let password = "a long enough passphrase"

    /// Alice on machine A and Bob on machine B, accounts at one hub.
    struct People {
        let rig: HubRig
        let a: DaemonHarness, b: DaemonHarness
        let alice: JSONValue, bob: JSONValue
        let aliceAccount: JSONValue, bobAccount: JSONValue

        init(extra: String = "") throws {
            rig = try HubRig()
            (a, b) = (try rig.startDevice(extra: extra), try rig.startDevice(extra: extra))
            let registeredA = try rig.register(on: a, phone: "+37251234567", email: "alice@example.org")
            let registeredB = try rig.register(on: b, phone: "+37251234568", email: "bob@example.org")
            alice = try #require(registeredA["session"]?["token"])
            bob = try #require(registeredB["session"]?["token"])
            aliceAccount = try #require(registeredA["account"]?["id"])
            bobAccount = try #require(registeredB["account"]?["id"])
        }
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

        #expect(try clientA.call("friends.add", ["session": people.alice, "email": "carol@example.org"]).errorReason == "friend.not_found")
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
}
