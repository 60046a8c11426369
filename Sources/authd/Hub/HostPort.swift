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
