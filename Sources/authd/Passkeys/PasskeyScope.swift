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

    /// The RP ID `origin` may use: `rpID` when given and allowed, else the origin's host.
    /// Without a public suffix list no parent domain is allowed: an RP ID must then equal the
    /// origin's host. Throws `passkey.bad_origin`.
    static func rpID(_ rpID: String?, for originText: String, suffixes: PublicSuffixList? = .latest) throws(PasskeyFailure) -> (Origin, String) {
        guard let origin = Origin(originText) else { throw .badOrigin }
        let id = rpID ?? origin.host
        guard id == origin.host || (isDomain(id) && origin.isWithin(rpID: id) && suffixes.map({ !$0.isPublicSuffix(id) }) == true) else {
            throw .rpIDNotAllowed(rpID: id, origin: origin.serialized)
        }
        return (origin, id)
    }
}
