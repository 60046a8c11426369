import Foundation
import Protocol

// authctl friends / groups / hotspots / presence / admin hotspots: friends, the groups you share
// with, the places that count, and what you share.
extension Command {
    static let friends = Command(
        path: ["friends"], synopsis: "add|remove|block|unblock EMAIL | list",
        abstract: """
            Your friends: add someone by email address (they join your group "friends" and are told; adding shows
            them nothing until you share with a group of theirs), remove them from all your groups, block someone
            who added you (their pings never reach you), or list who you added and who added you.
            """,
        options: [sessionFileOption], positionals: 1...2
    ) { invocation throws(CLIError) in
        let action = try invocation.action(of: "friends", among: ["add", "list", "remove", "block", "unblock"])
        let token = try SessionFile.load(invocation)
        let connection = try invocation.connect()
        if action == "list" {
            guard invocation.positionals.count == 1 else { throw .usage("friends list takes no EMAIL") }
            let list = try connection.call(FriendsList.self, .init(session: token))
            if invocation.global.json { Output.json(list); return .ok }
            for friend in list.friends { Output.line("\(friend.email ?? friend.account)  groups: \(friend.groups.joined(separator: ", "))") }
            for person in list.addedMe { Output.line("\(person.email ?? person.account)  added you\(person.blocked ? " (blocked)" : "")") }
            return .ok
        }
        guard invocation.positionals.count == 2 else { throw .usage("friends \(action) needs EMAIL") }
        let email = invocation.positionals[1]
        switch action {
        case "add":
            let added = try connection.call(FriendsAdd.self, .init(session: token, email: email))
            if invocation.global.json { Output.json(added) } else {
                Output.line(added.added ? "added \(email) to your group \"friends\"" : "\(email) is a friend already")
            }
        case "remove":
            let removed = try connection.call(FriendsRemove.self, .init(session: token, email: email))
            if invocation.global.json { Output.json(removed) } else { Output.line("removed \(email) from your friends and groups") }
        case "block", "unblock":
            let blocked = try connection.call(FriendsBlock.self, .init(session: token, email: email, blocked: action == "block"))
            if invocation.global.json { Output.json(blocked) } else { Output.line(blocked.blocked ? "blocked \(email)" : "unblocked \(email)") }
        default: preconditionFailure("an action checked above")
        }
        return .ok
    }

    static let groups = Command(
        path: ["groups"], synopsis: "list | create|delete NAME | rename NAME NEW | add|remove NAME EMAIL",
        abstract: "Your groups: each is an audience you may share your presence with. \"friends\" holds everyone you added.",
        options: [sessionFileOption], positionals: 1...3
    ) { invocation throws(CLIError) in
        let words = invocation.positionals
        _ = try invocation.action(of: "groups", among: ["list", "create", "rename", "delete", "add", "remove"])
        let token = try SessionFile.load(invocation)
        let connection = try invocation.connect()
        func show(_ group: PresenceGroup) {
            let members = group.members.map { $0.email ?? $0.account }
            Output.line("\(group.name): \(members.isEmpty ? "(nobody)" : members.joined(separator: ", "))")
        }
        func arity(_ count: Int, _ usage: String) throws(CLIError) {
            guard words.count == count else { throw .usage("groups \(words[0]) \(usage)") }
        }
        let result: GroupResult
        switch words[0] {
        case "list":
            try arity(1, "takes nothing more")
            let list = try connection.call(GroupsList.self, .init(session: token))
            if invocation.global.json { Output.json(list) } else { list.groups.forEach(show) }
            return .ok
        case "delete":
            try arity(2, "needs NAME")
            let deleted = try connection.call(GroupsDelete.self, .init(session: token, name: words[1]))
            if invocation.global.json { Output.json(deleted) } else { Output.line("deleted \(words[1])") }
            return .ok
        case "create":
            try arity(2, "needs NAME")
            result = try connection.call(GroupsCreate.self, .init(session: token, name: words[1]))
        case "rename":
            try arity(3, "needs NAME NEW")
            result = try connection.call(GroupsRename.self, .init(session: token, name: words[1], to: words[2]))
        case "add":
            try arity(3, "needs NAME EMAIL")
            result = try connection.call(GroupsAdd.self, .init(session: token, name: words[1], email: words[2]))
        case "remove":
            try arity(3, "needs NAME EMAIL")
            result = try connection.call(GroupsRemove.self, .init(session: token, name: words[1], email: words[2]))
        default: preconditionFailure("an action checked above")
        }
        if invocation.global.json { Output.json(result) } else { show(result.group) }
        return .ok
    }

    static let hotspots = Command(
        path: ["hotspots"], synopsis: "list | add NAME [--circle LAT,LON,RADIUS_M] [--bssid B]... [--beacon A,LAT,LON]... | remove ID",
        abstract: """
            Hotspots: the named places where your machine tells your friends you are (shared ones an admin made, and
            your own). A place is a circle (radius 10 m – 5 km) and/or Wi-Fi access points; your machine matches
            them itself and sends only "entered" or "left". Bluetooth beacons at points inside the circle give a
            precise point to those whose presence precise is beacon.
            """,
        options: HotspotText.options + [sessionFileOption],
        positionals: 1...2
    ) { invocation throws(CLIError) in
        _ = try invocation.action(of: "hotspots", among: ["list", "add", "remove"])
        let token = try SessionFile.load(invocation)
        let connection = try invocation.connect()
        switch (invocation.positionals[0], invocation.positionals.count) {
        case ("list", 1):
            let list = try connection.call(HotspotsList.self, .init(session: token))
            if invocation.global.json { Output.json(list) } else { Output.list(list.hotspots, none: "hotspots", HotspotText.line) }
        case ("add", 2):
            let added = try connection.call(HotspotsAdd.self, .init(session: token, name: invocation.positionals[1], circle: try HotspotText.circle(invocation),
                                                                    bssids: HotspotText.bssids(invocation), beacons: try HotspotText.beacons(invocation)))
            if invocation.global.json { Output.json(added) } else { Output.line(HotspotText.line(added.hotspot)) }
        case ("remove", 2):
            let removed = try connection.call(HotspotsRemove.self, .init(session: token, id: invocation.positionals[1]))
            if invocation.global.json { Output.json(removed) } else { Output.line("removed \(invocation.positionals[1])") }
        default: throw .usage("hotspots: list, add NAME [--circle …] [--bssid …] [--beacon …], or remove ID")
        }
        return .ok
    }

    static let adminHotspots = Command(
        path: ["admin", "hotspots"], synopsis: "list | add NAME [--circle LAT,LON,RADIUS_M] [--bssid B]... [--beacon A,LAT,LON]... | remove ID",
        abstract: "Shared hotspots, which everyone's machines match (admins, where the accounts live).",
        options: HotspotText.options,
        positionals: 1...2
    ) { invocation throws(CLIError) in
        let connection = try invocation.connect()
        switch (invocation.positionals[0], invocation.positionals.count) {
        case ("list", 1):
            let list = try connection.call(AdminHotspotsList.self, NoParams())
            if invocation.global.json { Output.json(list) } else { Output.list(list.hotspots, none: "shared hotspots", HotspotText.line) }
        case ("add", 2):
            let added = try connection.call(AdminHotspotsAdd.self, .init(name: invocation.positionals[1], circle: try HotspotText.circle(invocation),
                                                                         bssids: HotspotText.bssids(invocation), beacons: try HotspotText.beacons(invocation)))
            if invocation.global.json { Output.json(added) } else { Output.line(HotspotText.line(added.hotspot)) }
        case ("remove", 2):
            let removed = try connection.call(AdminHotspotsRemove.self, .init(id: invocation.positionals[1]))
            if invocation.global.json { Output.json(removed) } else { Output.line("removed \(invocation.positionals[1])") }
        default: throw .usage("admin hotspots: list, add NAME [--circle …] [--bssid …] [--beacon …], or remove ID")
        }
        return .ok
    }

    static let presence = Command(
        path: ["presence"], synopsis: "status|on|off|nearby|audience | mode ask|auto | precise manual|beacon | share [GROUP...] [--for D] | pin LAT LON | answer HOTSPOT [GROUP]",
        abstract: """
            What you share of where you are: status; on, or off (your presence is deleted at the hub and nothing more
            is sent); mode ask (asked on entering a hotspot whom to tell) or auto (your shared groups are told);
            precise manual (a precise point only by pin) or beacon (also the point of a hotspot's Bluetooth beacon
            your machine sees);
            share GROUP... (for --for D: 90m, 2h, 1d; none: share with nobody); nearby (friends who share with you and
            are in a hotspot now); audience (exactly who can see you); pin a point inside your hotspot; answer the
            question of ask mode (tell GROUP that you entered HOTSPOT, or without GROUP nobody).
            """,
        options: [OptionSpec(name: "for", value: "D", help: "share: only this long (60s – 30d), ended by the hub"), sessionFileOption],
        positionals: 1...9
    ) { invocation throws(CLIError) in
        let words = invocation.positionals
        _ = try invocation.action(of: "presence", among: ["status", "on", "off", "mode", "precise", "share", "nearby", "audience", "pin", "answer"])
        let token = try SessionFile.load(invocation)
        let connection = try invocation.connect()
        func show(_ settings: PresenceSettingsState) {
            if invocation.global.json { Output.json(settings); return }
            let groups = settings.groups.isEmpty ? "nobody" : settings.groups.joined(separator: ", ")
            Output.line("presence \(settings.enabled ? "on" : "off"), mode \(settings.mode), precise \(settings.precise), shared with \(groups)"
                        + (settings.until.map { " until \($0)" } ?? ""))
        }
        func place(_ place: PresencePlace) -> String {
            "\(place.hotspot.name) since \(place.since)" + (place.pinned.map { " at \($0.latitude),\($0.longitude)" } ?? "")
        }
        func single() throws(CLIError) {
            guard words.count == 1 else { throw .usage("presence \(words[0]) takes nothing more") }
        }
        switch words[0] {
        case "status":
            try single()
            let status = try connection.call(PresenceStatus.self, .init(session: token))
            let machine = try connection.call(PresenceMachine.self, .init(session: token))
            if invocation.global.json { Output.json(PresenceStatusOutput(account: status, machine: machine)); return .ok }
            show(status.settings)
            Output.line(status.place.map { "in " + place($0) } ?? "in no hotspot")
            Output.line("this machine: \(machine.state)" + (machine.detail.map { " (\($0))" } ?? "")
                        + (machine.inside.isEmpty ? "" : ", in " + machine.inside.joined(separator: ", ")))
        case "on": try single(); show(try connection.call(PresenceOn.self, .init(session: token)))
        case "off": try single(); show(try connection.call(PresenceOff.self, .init(session: token)))
        case "mode":
            guard words.count == 2 else { throw .usage("presence mode needs ask or auto") }
            show(try connection.call(PresenceSettings.self, .init(session: token, mode: words[1])))
        case "precise":
            guard words.count == 2 else { throw .usage("presence precise needs manual or beacon") }
            show(try connection.call(PresenceSettings.self, .init(session: token, precise: words[1])))
        case "share":
            let seconds = try invocation.value("for").map { text throws(CLIError) in
                guard let seconds = DurationText.seconds(text) else { throw .usage("--for needs a duration such as 90m, 2h or 1d") }
                return seconds
            }
            var groups = Array(words.dropFirst())
            if groups.contains("none") {
                guard groups == ["none"] else { throw .usage("presence share takes GROUP... or none (share with nobody), not both") }
                groups = []
            }
            show(try connection.call(PresenceSettings.self, .init(session: token, groups: groups, forSeconds: seconds)))
        case "nearby":
            try single()
            let nearby = try connection.call(PresenceNearby.self, .init(session: token))
            if invocation.global.json { Output.json(nearby); return .ok }
            if nearby.friends.isEmpty { Output.line("no friend shares a hotspot with you now") }
            for friend in nearby.friends { Output.line("\(friend.email ?? friend.account)  \(place(friend.place))\(friend.here ? "  (here)" : "")") }
        case "audience":
            try single()
            let audience = try connection.call(PresenceAudience.self, .init(session: token))
            if invocation.global.json { Output.json(audience); return .ok }
            if audience.audience.isEmpty { Output.line("nobody can see you now") }
            for person in audience.audience { Output.line("\(person.email ?? person.account)  through \(person.groups.joined(separator: ", "))") }
            if let until = audience.until { Output.line("until \(until)") }
        case "answer":
            guard (2...3).contains(words.count) else { throw .usage("presence answer needs HOTSPOT and, to tell someone, GROUP") }
            let told = try connection.call(PresenceAnswer.self, .init(session: token, hotspot: words[1], group: words.count == 3 ? words[2] : nil))
            if invocation.global.json { Output.json(told) } else { Output.line(words.count == 3 ? "told \(told.told)" : "told nobody") }
        case "pin":
            guard words.count == 3, let latitude = Double(words[1]), let longitude = Double(words[2]) else { throw .usage("presence pin needs LAT LON (degrees)") }
            let pinned = try connection.call(PresencePin.self, .init(session: token, latitude: latitude, longitude: longitude))
            if invocation.global.json { Output.json(pinned) } else { Output.line("pinned in " + place(pinned)) }
        default: preconditionFailure("an action checked above")
        }
        return .ok
    }
}

/// `presence status --json`: what the account's home holds, and what this machine does.
struct PresenceStatusOutput: Encodable {
    let account: PresenceStatus.Result
    let machine: PresenceMachine.Result
}

/// Hotspots in one line, and the hotspot options.
enum HotspotText {
    static let options = [
        OptionSpec(name: "circle", value: "LAT,LON,RADIUS_M", help: "add: the circle (degrees, degrees, metres)"),
        OptionSpec(name: "bssid", value: "B", help: "add: an access point (aa:bb:cc:dd:ee:ff); repeatable"),
        OptionSpec(name: "beacon", value: "ADDRESS,LAT,LON", help: "add: a Bluetooth beacon at a point inside the circle; repeatable"),
    ]

    static func line(_ hotspot: Hotspot) -> String {
        var parts = ["\(hotspot.id)  \(hotspot.name)"]
        if let circle = hotspot.circle { parts.append("circle \(circle.latitude),\(circle.longitude) r=\(Int(circle.radius)) m") }
        if let bssids = hotspot.bssids { parts.append("\(bssids.count) access point(s)") }
        if let beacons = hotspot.beacons { parts.append("\(beacons.count) beacon(s)") }
        if hotspot.shared { parts.append("(shared)") }
        return parts.joined(separator: "  ")
    }

    static func circle(_ invocation: Invocation) throws(CLIError) -> Hotspot.Circle? {
        guard let text = invocation.value("circle") else { return nil }
        let numbers = text.split(separator: ",").compactMap { Double($0) }
        guard numbers.count == 3 else { throw .usage("--circle needs LAT,LON,RADIUS_M (for example 59.437,24.7536,150)") }
        return Hotspot.Circle(latitude: numbers[0], longitude: numbers[1], radius: numbers[2])
    }

    static func bssids(_ invocation: Invocation) -> [String]? {
        let given = invocation.values("bssid")
        return given.isEmpty ? nil : given
    }

    /// `--beacon ADDRESS,LAT,LON`, each; the address is checked by authd.
    static func beacons(_ invocation: Invocation) throws(CLIError) -> [Hotspot.Beacon]? {
        var beacons: [Hotspot.Beacon] = []
        for text in invocation.values("beacon") {
            let parts = text.split(separator: ",", omittingEmptySubsequences: false)
            guard parts.count == 3, let latitude = Double(parts[1]), let longitude = Double(parts[2]) else {
                throw .usage("--beacon needs ADDRESS,LAT,LON (for example AA:BB:CC:DD:EE:FF,59.4371,24.7537)")
            }
            beacons.append(Hotspot.Beacon(address: String(parts[0]), latitude: latitude, longitude: longitude))
        }
        return beacons.isEmpty ? nil : beacons
    }
}

/// Durations as people write them: 90, 90s, 15m, 2h, 1d.
enum DurationText {
    static func seconds(_ text: String) -> Int? {
        let units: [Character: Int] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        if let unit = text.last.flatMap({ units[$0] }) { return Int(text.dropLast()).flatMap { $0 >= 0 ? $0 * unit : nil } }
        return Int(text).flatMap { $0 >= 0 ? $0 : nil }
    }
}
