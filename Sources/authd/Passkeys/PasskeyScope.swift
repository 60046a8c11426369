import FoundationEssentials
import Protocol

/// Which origins may use which RP IDs (WebAuthn L3 §4 "RP ID", §5.1.3/§5.1.4 step "rpId"):
/// the scheme is https, or http for `localhost`; the RP ID is the origin's host, or a parent
/// domain of it that is not a public suffix (HTML's "registrable domain suffix"). authd plays
/// the browser's part for local callers, which only *claim* an origin, so it applies this rule
/// before it makes or uses a passkey.
enum PasskeyScope {
    /// A valid domain in the form authd compares: lower-case ASCII labels of letters, digits
    /// and hyphens (IDNs as `xn--`), no trailing dot, not an IPv4 address.
    static func isDomain(_ text: String) -> Bool {
        guard (1...253).contains(text.utf8.count) else { return false }
        let labels = text.split(separator: ".", omittingEmptySubsequences: false)
        guard labels.allSatisfy({ label in
            (1...63).contains(label.utf8.count) && !label.hasPrefix("-") && !label.hasSuffix("-")
                && label.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D }
        }) else { return false }
        // A last label of digits only is an IPv4 address, never an RP ID.
        return !labels.last!.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }

    /// A web origin as WebAuthn serializes it (RFC 6454): `https://host[:port]`, or
    /// `http://localhost[:port]`. Only the exact serialization is accepted: no path, no
    /// trailing slash, no default port, lower case.
    struct Origin: Equatable, Sendable {
        let host: String
        let serialized: String

        init?(_ text: String) {
            guard let parsed = WebOrigin(text, allowPath: false), parsed.serialized == text, PasskeyScope.isDomain(parsed.host),
                  parsed.scheme == "https" || parsed.host == "localhost"
            else { return nil }
            host = parsed.host
            serialized = text
        }

        /// The host is `rpID` or one of its subdomains (the public-suffix rule aside).
        func isWithin(rpID: String) -> Bool { host == rpID || host.hasSuffix("." + rpID) }
    }

    static let publicSuffixListPath = "/usr/share/publicsuffix/public_suffix_list.dat"

    /// The public suffix list (Debian `publicsuffix`), read once. When the file cannot be read,
    /// no parent domain is allowed: an RP ID must then equal the origin's host.
    static let publicSuffixes: PublicSuffixList? = {
        guard let bytes = (try? Syscalls.readFile(publicSuffixListPath, limit: 8 << 20)) ?? nil else { return nil }
        return PublicSuffixList(String(decoding: bytes, as: UTF8.self))
    }()

    /// The RP ID `origin` may use: `rpID` when given and allowed, else the origin's host.
    /// Throws `passkey.bad_origin`.
    static func rpID(_ rpID: String?, for originText: String, suffixes: PublicSuffixList? = publicSuffixes) throws(PasskeyFailure) -> (Origin, String) {
        guard let origin = Origin(originText) else { throw .badOrigin }
        let id = rpID ?? origin.host
        guard id == origin.host || (isDomain(id) && origin.isWithin(rpID: id) && suffixes.map({ !$0.isPublicSuffix(id) }) == true) else {
            throw .rpIDNotAllowed(rpID: id, origin: origin.serialized)
        }
        return (origin, id)
    }
}

/// The rules of the public suffix list (publicsuffix.org format): plain rules, wildcards
/// (`*.ck`) and exceptions (`!www.ck`); the implicit rule `*` makes every single label a
/// public suffix.
struct PublicSuffixList: Sendable {
    private var rules: Set<String> = []
    private var wildcards: Set<String> = []
    private var exceptions: Set<String> = []

    init(_ text: String) {
        for line in text.split(whereSeparator: \.isNewline) {
            guard let rule = line.split(separator: " ").first, !rule.hasPrefix("//") else { continue }
            if rule.hasPrefix("!") {
                if let ascii = Self.ascii(rule.dropFirst()) { exceptions.insert(ascii) }
            } else if rule.hasPrefix("*.") {
                if let ascii = Self.ascii(rule.dropFirst(2)) { wildcards.insert(ascii) }
            } else if let ascii = Self.ascii(rule) {
                rules.insert(ascii)
            }
        }
    }

    /// The list writes internationalised rules in Unicode (`个人.hk`); RP IDs are compared in
    /// their ASCII form (`xn--ciqpn.hk`). The list's labels are already lower case and
    /// normalised, so each non-ASCII label is Punycode with the `xn--` prefix (RFC 3490 ToASCII
    /// without the mapping step).
    private static func ascii(_ rule: Substring) -> String? {
        var labels: [String] = []
        for label in rule.split(separator: ".", omittingEmptySubsequences: false) {
            if label.utf8.allSatisfy({ $0 < 0x80 }) {
                labels.append(String(label))
            } else {
                guard let encoded = Punycode.encode(label) else { return nil }
                labels.append("xn--" + encoded)
            }
        }
        return labels.joined(separator: ".")
    }

    func isPublicSuffix(_ domain: String) -> Bool {
        if exceptions.contains(domain) { return false }
        if rules.contains(domain) { return true }
        guard let dot = domain.firstIndex(of: ".") else { return true }
        return wildcards.contains(String(domain[domain.index(after: dot)...]))
    }
}

/// Punycode (RFC 3492 §6.3), the encoder only: the IDN rules of the public suffix list in the
/// form RP IDs use. authd's only IDNA need, and no system library on the list provides it
/// without pulling ICU into the daemon.
enum Punycode {
    private static let base = 36, tMin = 1, tMax = 26, skew = 38, damp = 700

    private static func adapt(_ delta: Int, _ points: Int, _ first: Bool) -> Int {
        var delta = first ? delta / damp : delta / 2
        delta += delta / points
        var k = 0
        while delta > ((base - tMin) * tMax) / 2 {
            delta /= base - tMin
            k += base
        }
        return k + (base - tMin + 1) * delta / (delta + skew)
    }

    private static func digit(_ value: Int) -> Character {
        Character(Unicode.Scalar(UInt8(value < 26 ? 0x61 + value : 0x30 + value - 26)))
    }

    /// nil for input too long to be a DNS label.
    static func encode(_ text: Substring) -> String? {
        let input = text.unicodeScalars.map { Int($0.value) }
        guard input.count <= 63 else { return nil }
        var output = String(String.UnicodeScalarView(text.unicodeScalars.filter { $0.value < 0x80 }))
        let basic = output.unicodeScalars.count
        if basic > 0 { output.append("-") }
        var n = 0x80, delta = 0, bias = 72, handled = basic
        while handled < input.count {
            let m = input.filter { $0 >= n }.min()!
            delta += (m - n) * (handled + 1)
            n = m
            for c in input {
                if c < n { delta += 1 }
                guard c == n else { continue }
                var q = delta
                var k = base
                while true {
                    let t = k <= bias ? tMin : (k >= bias + tMax ? tMax : k - bias)
                    if q < t { break }
                    output.append(digit(t + (q - t) % (base - t)))
                    q = (q - t) / (base - t)
                    k += base
                }
                output.append(digit(q))
                bias = adapt(delta, handled + 1, handled == basic)
                delta = 0
                handled += 1
            }
            delta += 1
            n += 1
        }
        return output
    }
}
