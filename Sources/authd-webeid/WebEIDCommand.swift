import FoundationEssentials
import Protocol

/// A Web eID command as the extension sends it (`{"command": …, "arguments": {…}}`), checked
/// argument by argument before anything is asked of authd or the person. Pure.
enum WebEIDCommand: Equatable, Sendable {
    case authenticate(challengeNonce: String, origin: String)
    case getSigningCertificate(origin: String)
    case sign(hash: [UInt8], hashFunction: HashFunction, certificate: [UInt8], origin: String)
    case quit

    /// The hash functions a document's hash may be made with, as Web eID names them; authd's
    /// `card.sign` takes these three.
    enum HashFunction: String, CaseIterable, Sendable {
        case sha256 = "SHA-256", sha384 = "SHA-384", sha512 = "SHA-512"
        var length: Int {
            switch self {
            case .sha256: 32
            case .sha384: 48
            case .sha512: 64
            }
        }
    }

    /// Web eID's other hash names: valid in the protocol, but not signed here.
    static let unsupportedHashFunctions: Set<String> = ["SHA-224", "SHA3-224", "SHA3-256", "SHA3-384", "SHA3-512"]

    static let maximumOriginLength = 255

    /// The command in `text`, or why it is refused (`ERR_WEBEID_NATIVE_FATAL`).
    static func parse(_ text: [UInt8]) -> Result<WebEIDCommand, WebEIDError> {
        if let violation = StrictJSON.check(text) { return .failure(.invalid("the message is not JSON: \(violation.problem)")) }
        guard let message = try? JSONDecoder().decode(JSONValue.self, from: Data(text)), let members = message.objectValue else {
            return .failure(.invalid("the message is not a JSON object"))
        }
        if let extra = members.keys.first(where: { $0 != "command" && $0 != "arguments" }) {
            return .failure(.invalid("unknown member \"\(printable(extra))\""))
        }
        guard let command = members["command"]?.stringValue else { return .failure(.invalid("command must be a string")) }
        guard let arguments = members["arguments"]?.objectValue else { return .failure(.invalid("arguments must be an object")) }
        do throws(WebEIDError) {
            switch command {
            case "authenticate":
                let checked = try Arguments(arguments, required: ["challengeNonce", "origin"], optional: ["lang"])
                let nonce = checked["challengeNonce"]!
                guard (44...128).contains(nonce.count), nonce.unicodeScalars.allSatisfy({ (0x21...0x7E).contains($0.value) }) else {
                    throw .invalid("challengeNonce must be 44–128 printable ASCII characters")
                }
                return .success(.authenticate(challengeNonce: nonce, origin: try origin(checked["origin"]!)))
            case "get-signing-certificate":
                let checked = try Arguments(arguments, required: ["origin"], optional: ["lang"])
                return .success(.getSigningCertificate(origin: try origin(checked["origin"]!)))
            case "sign":
                let checked = try Arguments(arguments, required: ["hash", "hashFunction", "certificate", "origin"], optional: ["lang"])
                let name = checked["hashFunction"]!
                guard let function = HashFunction(rawValue: name) else {
                    throw .invalid(unsupportedHashFunctions.contains(name) ? "hashFunction \(name) is not supported" : "hashFunction is not a known hash function")
                }
                guard let hash = Data(base64Encoded: checked["hash"]!), hash.count == function.length else {
                    throw .invalid("hash must be the base64 \(function.rawValue) digest (\(function.length) bytes)")
                }
                guard let certificate = Data(base64Encoded: checked["certificate"]!), !certificate.isEmpty else {
                    throw .invalid("certificate must be base64 DER")
                }
                return .success(.sign(hash: Array(hash), hashFunction: function, certificate: Array(certificate), origin: try origin(checked["origin"]!)))
            case "quit":
                _ = try Arguments(arguments, required: [], optional: [])
                return .success(.quit)
            default:
                return .failure(.invalid("unknown command \"\(printable(command))\""))
            }
        } catch {
            return .failure(error)
        }
    }

    /// Exactly the arguments a command takes: each a non-empty string; none other.
    struct Arguments {
        private let values: [String: String]

        init(_ arguments: [String: JSONValue], required: Set<String>, optional: Set<String>) throws(WebEIDError) {
            var values: [String: String] = [:]
            for (name, value) in arguments {
                guard required.contains(name) || optional.contains(name) else { throw .invalid("unknown argument \"\(printable(name))\"") }
                guard let text = value.stringValue else { throw .invalid("\(name) must be a string") }
                guard !text.isEmpty else { throw .invalid("\(name) is empty") }
                values[name] = text
            }
            if let missing = required.sorted().first(where: { values[$0] == nil }) { throw .invalid("\(missing) is missing") }
            if let lang = values["lang"], lang.count > 35 || !lang.unicodeScalars.allSatisfy({ $0.properties.isAlphabetic && $0.isASCII || $0 == "-" || $0 == "_" }) {
                throw .invalid("lang must be a language tag")
            }
            self.values = values
        }

        subscript(name: String) -> String? { values[name] }
    }

    /// An origin as a browser writes one: `https://` or `wss://`, a lower-case host name, an
    /// IPv4 address or a bracketed IPv6 address, an optional port; no path, query, fragment or
    /// user; at most 255 characters.
    static func origin(_ text: String) throws(WebEIDError) -> String {
        guard text.count <= maximumOriginLength else { throw .invalid("origin is longer than \(maximumOriginLength) characters") }
        let rest: Substring
        if text.hasPrefix("https://") { rest = text.dropFirst(8) } else if text.hasPrefix("wss://") { rest = text.dropFirst(6) } else {
            throw .invalid("origin must start with https:// or wss://")
        }
        var host = rest
        var port: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw .invalid("origin's IPv6 address has no closing bracket") }
            host = rest[...close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw .invalid("origin must be scheme://host[:port] with nothing after it") }
                port = after.dropFirst()
            }
            guard host.dropFirst().dropLast().unicodeScalars.allSatisfy({ $0 == ":" || $0 == "." || ("0"..."9").contains($0) || ("a"..."f").contains($0) }),
                  host.count > 2 else { throw .invalid("origin's IPv6 address is not valid") }
        } else {
            if let colon = rest.firstIndex(of: ":") {
                host = rest[..<colon]
                port = rest[rest.index(after: colon)...]
            }
            let labels = host.split(separator: ".", omittingEmptySubsequences: false)
            guard !host.isEmpty, labels.allSatisfy({ label in
                !label.isEmpty && label.count <= 63 && label.first != "-" && label.last != "-"
                    && label.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "-" }
            }) else { throw .invalid("origin must be scheme://host[:port] with a lower-case host name and nothing after it") }
        }
        if let port {
            guard let number = Int(port), (1...65535).contains(number), String(number) == port else {
                throw .invalid("origin's port must be 1–65535")
            }
        }
        return text
    }

    /// A name from the message as it may appear in an error: printable, short.
    static func printable(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.prefix(40).map { (0x20...0x7E).contains($0.value) ? $0 : "?" }))
    }
}
