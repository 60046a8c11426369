import FoundationEssentials

/// The origin of a URL that may carry a credential: `https://`, or `http://` only to a loopback
/// address (local relays and tests). Anything else — other schemes, user info, spaces, control
/// characters, over-long URLs — is not an origin authd sends a secret to.
struct WebOrigin: Equatable, Sendable {
    let scheme: String
    let host: String
    let port: Int?
    /// The path of the URL it was parsed from (`/` when empty).
    let path: String

    /// `scheme://host[:port]`, lower case, the form `[federation.NAME] api` compares.
    var serialized: String { "\(scheme)://\(host)" + (port.map { ":\($0)" } ?? "") }

    /// nil unless `text` is such a URL; `allowPath: false` also refuses a path other than `/`,
    /// a query and a fragment.
    init?(_ text: String, allowPath: Bool) {
        guard text.utf8.count < 2048, text.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7f }),
              let url = URL(string: text), let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased(), !host.isEmpty,
              url.user == nil, url.password == nil
        else { return nil }
        // Lower-case schemes and plain hosts only: URLSession refuses what it cannot parse the
        // same way (an upper-case scheme, an IPv6 literal, 127.0.0.01), so authd refuses it first.
        guard text.hasPrefix(scheme + "://"), !host.contains(":"), !host.contains("[") else { return nil }
        guard scheme == "https" || (scheme == "http" && WebOrigin.isLoopback(host)) else { return nil }
        if !allowPath {
            guard url.path.isEmpty || url.path == "/", url.query == nil, url.fragment == nil else { return nil }
        }
        let defaultPort = scheme == "https" ? 443 : 80
        self.scheme = scheme
        self.host = host
        self.port = url.port.flatMap { $0 == defaultPort ? nil : $0 }
        self.path = url.path.isEmpty ? "/" : url.path
    }

    /// `localhost`, or 127.x.y.z written canonically (no leading zeros).
    static func isLoopback(_ host: String) -> Bool {
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return host == "localhost"
            || (parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0).map(String.init) == String($0) })
    }
}
