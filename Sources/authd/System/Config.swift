import FoundationEssentials
import Protocol
import Synchronization

/// authd.conf(5): INI-style `[section]` / `key = value`, `#` or `;` comments on their own line.
/// Every key is known and validated; unknown sections or keys are errors, so a typo is reported
/// instead of silently ignored.
struct Config: Equatable, Sendable {
    var maxConnections = 4096
    /// Connections one uid may hold (root is exempt), so one local user cannot take them all or
    /// pin max_connections × 1 MiB of half-sent lines.
    var maxConnectionsPerUser = 256
    var shutdownTimeoutSeconds = 5
    var logLevel = LogLevel.info
    var logTarget = LogTarget.auto
    var tokenIssuer = "authd"
    var tokenLifetimeSeconds = 300
    var adminGroup = "authd-admin"
    var smsBackend = SMSBackend.spool
    var smsCommand = ""
    var smsTimeoutSeconds = 10
    var smsURL = ""
    var smsTokenFile = ""
    var codeLifetimeSeconds = 600
    var resendDelaySeconds = 60
    var sessionIdleSeconds = 3600
    var sessionLifetimeSeconds = 86400
    var deviceLimit = 2
    var devicePolicy = DevicePolicy.deny
    var startsPerMinute = 10
    var loginsPerMinute = 30
    /// How long a card operation waits for the card to be presented.
    var cardWindowSeconds = 90
    /// Lifetime of card-signed login and signature tokens.
    var cardTokenLifetimeSeconds = 120
    /// Inactivity after which authd locks a local user by itself; 0 = never.
    var lockIdleSeconds = 900
    /// How long one fingerprint scan waits for a finger.
    var biometricTimeoutSeconds = 30
    /// OpenID providers (`[federation.NAME]`), in file order.
    var federationProviders: [FederationProvider] = []
    /// The provider used when a request names none (`[federation] default`).
    var federationDefault = ""
    /// How long a federated sign-in waits for the browser redirect or the device approval.
    var federationLoginTimeoutSeconds = 300
    /// Bound on each HTTP exchange with a provider or a remote API.
    var federationHTTPTimeoutSeconds = 10
    /// authd as WebAuthn relying party (`[passkeys]`): its RP ID, its name for people, the
    /// origins it accepts (exactly), and how long a ceremony may take.
    var passkeyRPID = "localhost"
    var passkeyRPName = "authd"
    var passkeyOrigins = ["http://localhost"]
    var passkeyTimeoutSeconds = 300

    /// The provider a request that names none uses: `[federation] default`, else the only one.
    var defaultFederationProvider: String? {
        federationDefault.isEmpty ? (federationProviders.count == 1 ? federationProviders[0].name : nil) : federationDefault
    }

    /// One `[federation.NAME]` section.
    struct FederationProvider: Equatable, Sendable {
        var name: String
        var issuer = ""
        var clientID = ""
        /// A file holding the client secret (confidential clients); empty for a public client.
        var clientSecretFile = ""
        var scopes = ["openid", "profile", "email", "offline_access"]
        /// Origins (`scheme://host[:port]`) that `remote.fetch` may send the access token to.
        var apiOrigins: [String] = []
    }

    enum LogTarget: String, Sendable { case auto, journal, stderr }
    enum SMSBackend: String, Sendable { case spool, command, http }
    /// What a sign-in on one device too many does: refuse it, or end the least recently used
    /// device's sessions to make room.
    enum DevicePolicy: String, Sendable { case deny, replaceOldest = "replace_oldest" }

    /// The longest lifetime any daemon-signed token may have. Retired signing keys stay in the
    /// JWKS at least this long, so no token outlives the key that verifies it.
    static let maximumTokenLifetimeSeconds = 3600

    /// Reads and validates `path`. A file that does not exist means the defaults.
    static func load(path: String) throws(ConfigError) -> Config {
        let bytes: [UInt8]
        do {
            guard let contents = try Syscalls.readFile(path, limit: 1 << 20) else { return Config() }
            bytes = contents
        } catch {
            throw ConfigError(file: path, line: 0, reason: "cannot read the file: \(error)")
        }
        // A UTF-8 byte-order mark (editors on other systems add one) is not part of the text.
        let body = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? Array(bytes.dropFirst(3)) : bytes
        guard let text = String(validating: body, as: UTF8.self) else {
            throw ConfigError(file: path, line: 0, reason: "the file is not valid UTF-8")
        }
        return try parse(text, file: path)
    }

    static func parse(_ text: String, file: String) throws(ConfigError) -> Config {
        var config = Config()
        var section: String?
        var seen: Set<String> = []
        var backendLine = 0
        // Split on bytes: in Swift "\r\n" is one Character, so CRLF files would not split on "\n".
        let lines = text.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
        for (index, rawLine) in lines.enumerated() {
            let number = index + 1
            let line = trim(rawLine)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") {
                guard line.hasSuffix("]") else { throw ConfigError(file: file, line: number, reason: "a section header must end with ']'") }
                let name = trim(line.dropFirst().dropLast())
                if name.hasPrefix("federation.") {
                    let provider = String(name.dropFirst("federation.".count))
                    guard (1...32).contains(provider.count), provider.allSatisfy({ ($0.isASCII && ($0.isLetter || $0.isNumber)) || $0 == "-" || $0 == "_" }) else {
                        throw ConfigError(file: file, line: number, reason: "a provider name must be 1–32 letters, digits, '-' or '_'")
                    }
                    guard !config.federationProviders.contains(where: { $0.name == provider }) else {
                        throw ConfigError(file: file, line: number, reason: "[\(name)] appears twice")
                    }
                    config.federationProviders.append(FederationProvider(name: provider))
                    section = name
                    continue
                }
                guard schema[name] != nil else {
                    throw ConfigError(file: file, line: number, reason: "unknown section [\(Redaction.printable(name, limit: 40))]; known: \(schema.keys.sorted().joined(separator: ", "))")
                }
                section = name
                continue
            }
            guard let equals = line.firstIndex(of: "=") else {
                throw ConfigError(file: file, line: number, reason: "expected 'key = value'")
            }
            guard let section else { throw ConfigError(file: file, line: number, reason: "a setting must follow a [section] header") }
            let key = trim(line[..<equals])
            let value = trim(line[line.index(after: equals)...])
            if section.hasPrefix("federation.") {
                guard let apply = providerSchema[key] else {
                    throw ConfigError(file: file, line: number, reason: "unknown key '\(Redaction.printable(key, limit: 40))' in [\(section)]; known: \(providerSchema.keys.sorted().joined(separator: ", "))")
                }
                guard seen.insert("\(section).\(key)").inserted else {
                    throw ConfigError(file: file, line: number, reason: "'\(key)' is set twice in [\(section)]")
                }
                do {
                    try apply(&config.federationProviders[config.federationProviders.count - 1], value)
                } catch {
                    throw ConfigError(file: file, line: number, reason: "\(section).\(key): \(error.message)")
                }
                continue
            }
            guard let apply = schema[section]?[key] else {
                let known = schema[section]!.keys.sorted().joined(separator: ", ")
                throw ConfigError(file: file, line: number, reason: "unknown key '\(Redaction.printable(key, limit: 40))' in [\(section)]; known: \(known)")
            }
            guard seen.insert("\(section).\(key)").inserted else {
                throw ConfigError(file: file, line: number, reason: "'\(key)' is set twice in [\(section)]")
            }
            do {
                try apply(&config, value)
            } catch {
                throw ConfigError(file: file, line: number, reason: "\(section).\(key): \(error.message)")
            }
            if section == "sms" && key == "backend" { backendLine = number }
        }
        if config.smsBackend == .command && config.smsCommand.isEmpty {
            throw ConfigError(file: file, line: backendLine, reason: "sms.backend = command needs sms.command (the program to run)")
        }
        if config.smsBackend == .http && config.smsURL.isEmpty {
            throw ConfigError(file: file, line: backendLine, reason: "sms.backend = http needs sms.url (the gateway to POST to)")
        }
        for provider in config.federationProviders where provider.issuer.isEmpty || provider.clientID.isEmpty {
            throw ConfigError(file: file, line: 0, reason: "[federation.\(provider.name)] needs issuer and client_id")
        }
        for origin in config.passkeyOrigins where !(PasskeyScope.Origin(origin)?.isWithin(rpID: config.passkeyRPID) ?? false) {
            throw ConfigError(file: file, line: 0, reason: "passkeys.origins: \(origin) is not \(config.passkeyRPID) or one of its subdomains (passkeys.rp_id)")
        }
        if !config.federationDefault.isEmpty && !config.federationProviders.contains(where: { $0.name == config.federationDefault }) {
            throw ConfigError(file: file, line: 0, reason: "federation.default names '\(config.federationDefault)', but there is no [federation.\(config.federationDefault)]")
        }
        if config.sessionIdleSeconds > config.sessionLifetimeSeconds {
            throw ConfigError(file: file, line: 0, reason: "accounts.session_idle (\(config.sessionIdleSeconds)s) is longer than accounts.session_lifetime (\(config.sessionLifetimeSeconds)s)")
        }
        return config
    }

    /// Without surrounding spaces, tabs and carriage returns.
    private static func trim(_ text: some StringProtocol) -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" }
        return String(text.drop(while: isSpace).reversed().drop(while: isSpace).reversed())
    }

    /// The `section.key` names whose values differ between two configs.
    func changes(from old: Config) -> [String] {
        var changed: [String] = []
        if maxConnections != old.maxConnections { changed.append("server.max_connections") }
        if maxConnectionsPerUser != old.maxConnectionsPerUser { changed.append("server.max_connections_per_user") }
        if shutdownTimeoutSeconds != old.shutdownTimeoutSeconds { changed.append("server.shutdown_timeout") }
        if logLevel != old.logLevel { changed.append("log.level") }
        if logTarget != old.logTarget { changed.append("log.target") }
        if tokenIssuer != old.tokenIssuer { changed.append("tokens.issuer") }
        if tokenLifetimeSeconds != old.tokenLifetimeSeconds { changed.append("tokens.lifetime") }
        if adminGroup != old.adminGroup { changed.append("admin.group") }
        if smsBackend != old.smsBackend { changed.append("sms.backend") }
        if smsCommand != old.smsCommand { changed.append("sms.command") }
        if smsTimeoutSeconds != old.smsTimeoutSeconds { changed.append("sms.timeout") }
        if smsURL != old.smsURL { changed.append("sms.url") }
        if smsTokenFile != old.smsTokenFile { changed.append("sms.token_file") }
        if codeLifetimeSeconds != old.codeLifetimeSeconds { changed.append("accounts.code_lifetime") }
        if resendDelaySeconds != old.resendDelaySeconds { changed.append("accounts.resend_delay") }
        if sessionIdleSeconds != old.sessionIdleSeconds { changed.append("accounts.session_idle") }
        if sessionLifetimeSeconds != old.sessionLifetimeSeconds { changed.append("accounts.session_lifetime") }
        if deviceLimit != old.deviceLimit { changed.append("accounts.device_limit") }
        if devicePolicy != old.devicePolicy { changed.append("accounts.device_policy") }
        if startsPerMinute != old.startsPerMinute { changed.append("accounts.starts_per_minute") }
        if loginsPerMinute != old.loginsPerMinute { changed.append("accounts.logins_per_minute") }
        if cardWindowSeconds != old.cardWindowSeconds { changed.append("card.window") }
        if cardTokenLifetimeSeconds != old.cardTokenLifetimeSeconds { changed.append("card.token_lifetime") }
        if lockIdleSeconds != old.lockIdleSeconds { changed.append("lock.idle") }
        if biometricTimeoutSeconds != old.biometricTimeoutSeconds { changed.append("biometric.timeout") }
        if federationDefault != old.federationDefault { changed.append("federation.default") }
        if federationLoginTimeoutSeconds != old.federationLoginTimeoutSeconds { changed.append("federation.login_timeout") }
        if federationHTTPTimeoutSeconds != old.federationHTTPTimeoutSeconds { changed.append("federation.http_timeout") }
        if passkeyRPID != old.passkeyRPID { changed.append("passkeys.rp_id") }
        if passkeyRPName != old.passkeyRPName { changed.append("passkeys.rp_name") }
        if passkeyOrigins != old.passkeyOrigins { changed.append("passkeys.origins") }
        if passkeyTimeoutSeconds != old.passkeyTimeoutSeconds { changed.append("passkeys.timeout") }
        let names = Set(federationProviders.map(\.name) + old.federationProviders.map(\.name))
        for name in names.sorted() where federationProviders.first(where: { $0.name == name }) != old.federationProviders.first(where: { $0.name == name }) {
            changed.append("federation.\(name)")
        }
        return changed
    }

    struct ValueError: Error { let message: String }
    private typealias Apply = @Sendable (inout Config, String) throws(ValueError) -> Void

    private static let schema: [String: [String: Apply]] = [
        "server": [
            "max_connections": { config, value throws(ValueError) in
                config.maxConnections = try integer(value, in: 16...1_000_000)
            },
            "max_connections_per_user": { config, value throws(ValueError) in
                config.maxConnectionsPerUser = try integer(value, in: 1...1_000_000)
            },
            "shutdown_timeout": { config, value throws(ValueError) in
                config.shutdownTimeoutSeconds = try duration(value, in: 0...300)
            },
        ],
        "log": [
            "level": { config, value throws(ValueError) in
                guard let level = LogLevel(name: value) else {
                    throw ValueError(message: "must be one of \(LogLevel.allCases.map(\.name).joined(separator: ", "))")
                }
                config.logLevel = level
            },
            "target": { config, value throws(ValueError) in
                guard let target = LogTarget(rawValue: value) else { throw ValueError(message: "must be auto, journal or stderr") }
                config.logTarget = target
            },
        ],
        "tokens": [
            "issuer": { config, value throws(ValueError) in
                guard (1...256).contains(value.count), value.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7f }) else {
                    throw ValueError(message: "must be 1–256 printable ASCII characters without spaces")
                }
                config.tokenIssuer = value
            },
            "lifetime": { config, value throws(ValueError) in
                config.tokenLifetimeSeconds = try duration(value, in: 10...maximumTokenLifetimeSeconds)
            },
        ],
        "sms": [
            "backend": { config, value throws(ValueError) in
                guard let backend = SMSBackend(rawValue: value) else {
                    throw ValueError(message: "must be spool, command or http")
                }
                config.smsBackend = backend
            },
            "command": { config, value throws(ValueError) in
                guard value.hasPrefix("/"), value.utf8.count < 4096 else { throw ValueError(message: "must be an absolute path to a program") }
                config.smsCommand = value
            },
            "timeout": { config, value throws(ValueError) in
                config.smsTimeoutSeconds = try duration(value, in: 1...120)
            },
            "url": { config, value throws(ValueError) in
                guard WebOrigin(value, allowPath: true) != nil else {
                    throw ValueError(message: "must be an https:// URL (http:// only to a loopback address: the request carries a bearer token)")
                }
                config.smsURL = value
            },
            "token_file": { config, value throws(ValueError) in
                guard value.hasPrefix("/") else { throw ValueError(message: "must be an absolute path to a file holding the bearer token") }
                config.smsTokenFile = value
            },
        ],
        "accounts": [
            "code_lifetime": { config, value throws(ValueError) in
                config.codeLifetimeSeconds = try duration(value, in: 1...3600)
            },
            "resend_delay": { config, value throws(ValueError) in
                config.resendDelaySeconds = try duration(value, in: 0...3600)
            },
            "session_idle": { config, value throws(ValueError) in
                config.sessionIdleSeconds = try duration(value, in: 1...(30 * 86400))
            },
            "session_lifetime": { config, value throws(ValueError) in
                config.sessionLifetimeSeconds = try duration(value, in: 1...(365 * 86400))
            },
            "device_limit": { config, value throws(ValueError) in
                config.deviceLimit = try integer(value, in: 1...1000)
            },
            "device_policy": { config, value throws(ValueError) in
                guard let policy = DevicePolicy(rawValue: value) else { throw ValueError(message: "must be deny or replace_oldest") }
                config.devicePolicy = policy
            },
            "starts_per_minute": { config, value throws(ValueError) in
                config.startsPerMinute = try integer(value, in: 1...100_000)
            },
            "logins_per_minute": { config, value throws(ValueError) in
                config.loginsPerMinute = try integer(value, in: 1...100_000)
            },
        ],
        "card": [
            "window": { config, value throws(ValueError) in
                config.cardWindowSeconds = try duration(value, in: 1...600)
            },
            "token_lifetime": { config, value throws(ValueError) in
                config.cardTokenLifetimeSeconds = try duration(value, in: 10...3600)
            },
        ],
        "lock": [
            "idle": { config, value throws(ValueError) in
                config.lockIdleSeconds = try duration(value, in: 0...(7 * 86400))
            },
        ],
        "biometric": [
            "timeout": { config, value throws(ValueError) in
                config.biometricTimeoutSeconds = try duration(value, in: 1...300)
            },
        ],
        "federation": [
            "default": { config, value throws(ValueError) in
                config.federationDefault = value
            },
            "login_timeout": { config, value throws(ValueError) in
                config.federationLoginTimeoutSeconds = try duration(value, in: 10...3600)
            },
            "http_timeout": { config, value throws(ValueError) in
                config.federationHTTPTimeoutSeconds = try duration(value, in: 1...120)
            },
        ],
        "passkeys": [
            "rp_id": { config, value throws(ValueError) in
                guard PasskeyScope.isDomain(value) else { throw ValueError(message: "must be a domain name such as example.com (no scheme, no port)") }
                config.passkeyRPID = value
            },
            "rp_name": { config, value throws(ValueError) in
                guard (1...64).contains(value.count), !value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
                    throw ValueError(message: "must be 1–64 printable characters")
                }
                config.passkeyRPName = value
            },
            "origins": { config, value throws(ValueError) in
                let origins = value.split(separator: " ").map(String.init)
                guard !origins.isEmpty, origins.allSatisfy({ PasskeyScope.Origin($0) != nil }) else {
                    throw ValueError(message: "must be space-separated origins such as https://example.com (http:// only for localhost)")
                }
                config.passkeyOrigins = origins
            },
            "timeout": { config, value throws(ValueError) in
                config.passkeyTimeoutSeconds = try duration(value, in: 30...3600)
            },
        ],
        "admin": [
            "group": { config, value throws(ValueError) in
                guard (1...64).contains(value.count), value.allSatisfy({ $0.isLetter || $0.isNumber || "-_.".contains($0) }) else {
                    throw ValueError(message: "must be a group name")
                }
                config.adminGroup = value
            },
        ],
    ]

    private typealias ApplyProvider = @Sendable (inout FederationProvider, String) throws(ValueError) -> Void

    /// The keys of a `[federation.NAME]` section.
    private static let providerSchema: [String: ApplyProvider] = [
        "issuer": { provider, value throws(ValueError) in
            guard WebOrigin(value, allowPath: true) != nil else {
                throw ValueError(message: "must be an https:// URL (http:// only to a loopback address), exactly as the provider's discovery document names it")
            }
            provider.issuer = value
        },
        "client_id": { provider, value throws(ValueError) in
            guard (1...256).contains(value.count), value.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7f }) else {
                throw ValueError(message: "must be 1–256 printable ASCII characters")
            }
            provider.clientID = value
        },
        "client_secret_file": { provider, value throws(ValueError) in
            guard value.hasPrefix("/"), value.utf8.count < 4096 else { throw ValueError(message: "must be an absolute path to a file holding the client secret") }
            provider.clientSecretFile = value
        },
        "scopes": { provider, value throws(ValueError) in
            let scopes = value.split(separator: " ").map(String.init)
            guard scopes.contains("openid"), scopes.allSatisfy({ $0.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value < 0x7f && $0 != "\"" && $0 != "\\" } }) else {
                throw ValueError(message: "must be space-separated OAuth scopes including openid")
            }
            provider.scopes = scopes
        },
        "api": { provider, value throws(ValueError) in
            var origins: [String] = []
            for item in value.split(separator: " ") {
                guard let origin = WebOrigin(String(item), allowPath: false) else {
                    throw ValueError(message: "must be space-separated origins such as https://api.example.com (http:// only to a loopback address)")
                }
                origins.append(origin.serialized)
            }
            provider.apiOrigins = origins
        },
    ]

    private static func integer(_ value: String, in range: ClosedRange<Int>) throws(ValueError) -> Int {
        guard let number = Int(value), range.contains(number) else {
            throw ValueError(message: "must be a whole number from \(range.lowerBound) to \(range.upperBound), not '\(Redaction.printable(value, limit: 40))'")
        }
        return number
    }

    /// Seconds, with an optional `s`, `m`, `h` or `d` suffix (`90`, `90s`, `5m`, `1h`, `1d`).
    static func duration(_ value: String, in range: ClosedRange<Int>) throws(ValueError) -> Int {
        let units: [Character: Int] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        var digits = Substring(value)
        var multiplier = 1
        if let last = value.last, let unit = units[last] {
            digits = value.dropLast()
            multiplier = unit
        }
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), let number = Int(digits), number >= 0,
              number <= Int.max / multiplier, range.contains(number * multiplier)
        else {
            throw ValueError(message: "must be a duration from \(range.lowerBound)s to \(range.upperBound)s (e.g. 90s, 5m, 1h, 1d), not '\(Redaction.printable(value, limit: 40))'")
        }
        return number * multiplier
    }
}

/// The configuration in force; replaced whole on a successful reload.
final class ConfigHolder: Sendable {
    private let value: Mutex<Config>
    init(_ config: Config) { value = Mutex(config) }
    var current: Config {
        get { value.withLock { $0 } }
        set { value.withLock { $0 = newValue } }
    }
}

/// An invalid configuration: where and why. Shown to admins as `file:line: reason`.
struct ConfigError: Error, Equatable, CustomStringConvertible {
    let file: String
    let line: Int
    let reason: String
    var description: String { line > 0 ? "\(file):\(line): \(reason)" : "\(file): \(reason)" }
}
