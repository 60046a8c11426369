/// `HOST:PORT` as `[hub] listen` and `url` take it: an IPv4 address, an IPv6 address in
/// brackets (`[::1]:7443`), or a DNS name; and a port.
struct HostPort: Equatable, Sendable, CustomStringConvertible {
    let host: String
    let port: UInt16

    init?(_ text: String, allowPortZero: Bool) {
        let host: Substring
        let port: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            port = text[text.index(close, offsetBy: 2)...]
            guard host.contains(":"), host.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else { return nil }
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            host = text[..<colon]
            port = text[text.index(after: colon)...]
            guard !host.contains(":"), (1...253).contains(host.count),
                  host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == ".") }) else { return nil }
        }
        guard !host.isEmpty, port.allSatisfy(\.isASCII), let number = UInt16(port), number > 0 || allowPortZero else { return nil }
        self.host = String(host)
        self.port = number
    }

    init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

extension HostPort {
    /// Addresses `[hub] url` takes at most: the replicas of one hub, not a directory of hubs.
    static let mostHubAddresses = 16

    /// `[hub] url`: the hub's `HOST:PORT`, or several separated by commas (replicas of one hub,
    /// in the order a device tries them); none twice, at most ``mostHubAddresses``.
    static func hubAddresses(_ value: String) throws(Config.ValueError) -> [HostPort] {
        let example = "such as hub.example.org:7443, or several separated by commas (hub1.example.org:7443, hub2.example.org:7443)"
        var addresses: [HostPort] = []
        for item in value.split(separator: ",", omittingEmptySubsequences: false) {
            let text = String(item.drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
            guard let address = HostPort(text, allowPortZero: false) else {
                throw Config.ValueError(message: "must be the hub's HOST:PORT, \(example), not \(Config.shown(text))")
            }
            // Names are not case-sensitive: Hub.example.org is hub.example.org.
            guard !addresses.contains(where: { $0.host.lowercased() == address.host.lowercased() && $0.port == address.port }) else {
                throw Config.ValueError(message: "names \(Config.shown(text)) twice")
            }
            addresses.append(address)
        }
        guard addresses.count <= mostHubAddresses else {
            throw Config.ValueError(message: "lists \(addresses.count) addresses; at most \(mostHubAddresses)")
        }
        return addresses
    }
}
