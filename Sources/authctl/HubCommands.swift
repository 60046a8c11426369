import Foundation
import Protocol

extension Command {
    static let deviceID = Command(
        path: ["device", "id"], synopsis: "",
        abstract: "Print this machine's device id, as its hub lists it, so you can compare the two."
    ) { invocation throws(CLIError) in
        let identity = try invocation.connect().call(DeviceIdentify.self, NoParams())
        if invocation.global.json { Output.json(identity); return .ok }
        Output.line("\(identity.deviceID)  \(identity.name)")
        return .ok
    }

    static let deviceName = Command(
        path: ["device", "name"], synopsis: "NAME",
        abstract: "Name this machine in your account's device lists (its host name until you do), from the next sign-in on.",
        positionals: 1...1
    ) { invocation throws(CLIError) in
        let named = try invocation.connect().call(DeviceName.self, .init(name: invocation.positionals[0]))
        if invocation.global.json { Output.json(named) } else { Output.line("this machine is now called \(named.name) (device id \(named.deviceID))") }
        return .ok
    }

    static let hubStatus = Command(
        path: ["hub", "status"], synopsis: "",
        abstract: "Show this machine's role (standalone, hub or device) and its link: connected since when, the round trip, the last error."
    ) { invocation throws(CLIError) in
        let status = try invocation.connect().call(HubStatus.self, NoParams())
        if invocation.global.json { Output.json(status); return .ok }
        for line in HubStatusText.lines(status) { Output.line(line) }
        // A device whose hub cannot be reached (or is not trusted) is not well.
        return status.link.map { $0.state == "connected" } ?? true ? .ok : .failure
    }
}

/// `hub status` in words, also the hub line of `authctl status`.
enum HubStatusText {
    static func lines(_ status: HubStatus.Result) -> [String] {
        var lines = ["role: \(status.role)", "device id: \(status.deviceID)"]
        if let link = status.link { lines.append(linkLine(link)) }
        if let hub = status.hub {
            lines.append("hub: listening on \(hub.listen), \(hub.devicesConnected) device(s) connected, \(hub.newcomersConnected ?? 0) not signed in")
        }
        return lines
    }

    static func linkLine(_ link: HubStatus.Link) -> String {
        switch link.state {
        case "connected":
            return "hub: \(address(link)), connected since \(link.since)" + (link.roundTripMs.map { String(format: ", round trip %.1f ms", $0) } ?? "")
        case "connecting":
            return "hub: \(address(link)), connecting"
        default:
            return "hub: \(address(link)), \(link.state) since \(link.since)" + (link.lastError.map { " (\($0))" } ?? "")
        }
    }

    /// The address the link's state is about, and all of the hub's when it has several:
    /// `hub2.example.org:7443 (of hub1.example.org:7443, hub2.example.org:7443)`.
    static func address(_ link: HubStatus.Link) -> String {
        guard let all = link.urls, all.count > 1 else { return link.url }
        return "\(link.url) (of \(all.joined(separator: ", ")))"
    }
}
