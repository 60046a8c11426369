import FoundationEssentials
import Protocol
import OpenSSLCrypto
import Synchronization

/// authd.conf(5): INI-style `[section]` / `key = value`. A `#` or `;` starts a comment at the
/// start of a line, or after a space or tab (`issuer = https://id.example.com   # note`); with no
/// space before it, it is part of the value (`https://host/path#fragment`), as in most INI readers.
/// Every key is known and validated; unknown sections or keys are errors, so a typo is reported
/// instead of silently ignored.
///
/// Each key is declared once, in one spot: its property (type, default, meaning), and right below
/// the properties of its section one row of that section's table (the key's name in the file and
/// the rule its value must meet). Parsing, the known keys named in error messages and
/// `changes(from:)` all read the tables, so a new key is a property and a row; a new section is a
/// table, listed in `sections`. What involves several keys is checked at the end of `parse`.
struct Config: Equatable, Sendable {
    var maxConnections = 4096
    /// Connections one uid may hold (root is exempt), so one local user cannot take them all or
    /// pin max_connections × 1 MiB of half-sent lines.
    var maxConnectionsPerUser = 256
    var shutdownTimeoutSeconds = 5
    /// A connection with nothing in flight, no stream and no request for this long is closed
    /// (after one to two of these), so forgotten and hostile clients give their slots back.
    var idleTimeoutSeconds = 300
    /// The longest a request waits for the answer to a prompt (a person typing a password).
    var promptTimeoutSeconds = 120
    private static let server = Section("server", [
        .integer("max_connections", \.maxConnections, in: 16...1_000_000),
        .integer("max_connections_per_user", \.maxConnectionsPerUser, in: 1...1_000_000),
        .duration("shutdown_timeout", \.shutdownTimeoutSeconds, in: 0...300),
        .duration("idle_timeout", \.idleTimeoutSeconds, in: 1...86_400),
        .duration("prompt_timeout", \.promptTimeoutSeconds, in: 1...3_600),
    ])

    var logLevel = LogLevel.info
    var logTarget = LogTarget.auto
    private static let log = Section("log", [
        Setting("level", \.logLevel) { value throws(ValueError) in
            guard let level = LogLevel(name: value) else {
                throw ValueError(message: "must be one of \(LogLevel.allCases.map(\.name).joined(separator: ", ")), not \(shown(value))")
            }
            return level
        },
        .choice("target", \.logTarget),
    ])

    /// The pinentry program desktop prompts run (DESIGN §12); empty: `pinentry` on the PATH,
    /// Debian's alternative, which the person chooses with update-alternatives.
    var promptsPinentry = ""
    /// When a program needs the person's consent for a token of an audience, under `prompt: desktop`.
    var promptsConsent = ConsentPolicy.first
    private static let prompts = Section("prompts", [
        .text("pinentry", \.promptsPinentry, "must be an absolute path to a program") { $0.hasPrefix("/") && $0.utf8.count < 4096 },
        .choice("consent", \.promptsConsent),
    ])

    var tokenIssuer = "authd"
    var tokenLifetimeSeconds = 300
    private static let tokens = Section("tokens", [
        .text("issuer", \.tokenIssuer, "must be 1–256 printable ASCII characters without spaces", where: isPrintableASCIIWord),
        .duration("lifetime", \.tokenLifetimeSeconds, in: 10...maximumTokenLifetimeSeconds),
    ])

    var adminGroup = "authd-admin"
    private static let admin = Section("admin", [
        .text("group", \.adminGroup, "must be a group name") { group in
            (1...64).contains(group.count) && group.allSatisfy { $0.isLetter || $0.isNumber || "-_.".contains($0) }
        },
    ])

    var smsBackend = SMSBackend.spool
    var smsCommand = ""
    var smsTimeoutSeconds = 10
    var smsURL = ""
    var smsTokenFile = ""
    private static let sms = Section("sms", [
        .choice("backend", \.smsBackend),
        .text("command", \.smsCommand, "must be an absolute path to a program") { $0.hasPrefix("/") && $0.utf8.count < 4096 },
        .duration("timeout", \.smsTimeoutSeconds, in: 1...120),
        .text("url", \.smsURL, "must be an https:// URL (http:// only to a loopback address: the request carries a bearer token)") {
            WebOrigin($0, allowPath: true) != nil
        },
        .text("token_file", \.smsTokenFile, "must be an absolute path to a file holding the bearer token") { $0.hasPrefix("/") },
    ])

    var codeLifetimeSeconds = 600
    var resendDelaySeconds = 60
    var sessionIdleSeconds = 3600
    var sessionLifetimeSeconds = 86400
    var deviceLimit = 2
    var devicePolicy = DevicePolicy.deny
    var startsPerMinute = 10
    var loginsPerMinute = 30
    private static let accounts = Section("accounts", [
        .duration("code_lifetime", \.codeLifetimeSeconds, in: 1...3600),
        .duration("resend_delay", \.resendDelaySeconds, in: 0...3600),
        .duration("session_idle", \.sessionIdleSeconds, in: 1...(30 * 86400)),
        .duration("session_lifetime", \.sessionLifetimeSeconds, in: 1...(365 * 86400)),
        .integer("device_limit", \.deviceLimit, in: 1...1000),
        .choice("device_policy", \.devicePolicy),
        .integer("starts_per_minute", \.startsPerMinute, in: 1...100_000),
        .integer("logins_per_minute", \.loginsPerMinute, in: 1...100_000),
    ])

    /// How long a card operation waits for the card to be presented.
    var cardWindowSeconds = 90
    /// Lifetime of card-signed login and signature tokens.
    var cardTokenLifetimeSeconds = 120
    private static let card = Section("card", [
        .duration("window", \.cardWindowSeconds, in: 1...600),
        .duration("token_lifetime", \.cardTokenLifetimeSeconds, in: 10...3600),
    ])

    /// Inactivity after which authd locks a local user by itself; 0 = never.
    var lockIdleSeconds = 900
    private static let lock = Section("lock", [
        .duration("idle", \.lockIdleSeconds, in: 0...(7 * 86400)),
    ])

    /// How long one fingerprint scan waits for a finger.
    var biometricTimeoutSeconds = 30
    private static let biometric = Section("biometric", [
        .duration("timeout", \.biometricTimeoutSeconds, in: 1...300),
    ])

    /// OpenID providers (`[federation.NAME]`, keys in ``FederationProvider``), in file order.
    var federationProviders: [FederationProvider] = []
    /// The provider used when a request names none (`[federation] default`).
    var federationDefault = ""
    /// How long a federated sign-in waits for the browser redirect or the device approval.
    var federationLoginTimeoutSeconds = 300
    /// Bound on each HTTP exchange with a provider or a remote API.
    var federationHTTPTimeoutSeconds = 10
    private static let federation = Section("federation", [
        // Any name here; that a provider has it is checked once the whole file is read.
        Setting("default", \.federationDefault) { $0 },
        .duration("login_timeout", \.federationLoginTimeoutSeconds, in: 10...3600),
        .duration("http_timeout", \.federationHTTPTimeoutSeconds, in: 1...120),
    ])

    /// authd as WebAuthn relying party (`[passkeys]`): its RP ID, its name for people, the
    /// origins it accepts (exactly), and how long a ceremony may take.
    var passkeyRPID = "localhost"
    var passkeyRPName = "authd"
    var passkeyOrigins = ["http://localhost"]
    var passkeyTimeoutSeconds = 300
    private static let passkeys = Section("passkeys", [
        .text("rp_id", \.passkeyRPID, "must be a domain name such as example.com (no scheme, no port)") { PasskeyScope.isDomain($0) },
        .text("rp_name", \.passkeyRPName, "must be 1–64 printable characters") { name in
            (1...64).contains(name.count) && !name.containsControlCharacter
        },
        .words("origins", \.passkeyOrigins, "must be space-separated origins such as https://example.com (http:// only for localhost)") { origins in
            !origins.isEmpty && origins.allSatisfy { PasskeyScope.Origin($0) != nil }
        },
        .duration("timeout", \.passkeyTimeoutSeconds, in: 30...3600),
    ])

    /// `[pam]`: which methods pam_authd may use for each PAM service, in the order tried
    /// (`sudo = card, fingerprint`); services not named use `default`.
    var pamServices: [String: [PAMMethod]] = [:]
    var pamDefaultMethods: [PAMMethod] = [.card, .fingerprint, .account]
    /// Services where a matching finger alone proves the user; elsewhere the finger is followed
    /// by the linked account's PIN, so a finger is never the only factor unless the admin says so.
    var pamFingerprintAlone: [String] = []
    /// How long pam_authd's card check waits for the card, and one fingerprint scan for a finger.
    var pamCardWindowSeconds = 90
    var pamFingerprintTimeoutSeconds = 30
    /// How many Unix users one card or one account may be linked to.
    var pamLinkLimit = 1
    /// PEM certificates of the CAs whose ID cards pam_authd accepts (the card issuer's root and
    /// intermediates); empty: no card is accepted.
    var pamCAFile = ""
    private static let pam = Section("pam", [
        Setting("default", \.pamDefaultMethods) { value throws(ValueError) in try PAMMethod.list(value) },
        Setting("fingerprint_alone", \.pamFingerprintAlone) { value throws(ValueError) in
            let services = PAMMethod.items(value)
            guard services.allSatisfy(PAMMethod.isServiceName) else {
                throw ValueError(message: "must be PAM service names separated by commas, not \(shown(value))")
            }
            return services
        },
        .duration("card_window", \.pamCardWindowSeconds, in: 1...600),
        .duration("fingerprint_timeout", \.pamFingerprintTimeoutSeconds, in: 1...300),
        .integer("link_limit", \.pamLinkLimit, in: 1...1000),
        .text("ca_file", \.pamCAFile, "must be an absolute path to a PEM file of CA certificates") { $0.hasPrefix("/") && $0.utf8.count < 4096 },
    ])

    /// The methods `[pam]` allows for a PAM service, in the order pam_authd tries them.
    func pamMethods(service: String) -> [PAMMethod] { pamServices[service] ?? pamDefaultMethods }

    /// Ninety days: long enough to look back over a quarter's sign-ins and token issuance.
    static let defaultAuditRetentionSeconds = 90 * 86400
    /// 64 MiB: some 300,000 records, and small beside the disk of any machine authd runs on.
    static let defaultAuditMaxBytes: Int64 = 64 << 20
    /// How long audit records are kept, and how much room the audit log may take.
    var auditRetentionSeconds = defaultAuditRetentionSeconds
    var auditMaxBytes = Int(defaultAuditMaxBytes)
    private static let audit = Section("audit", [
        .duration("retention", \.auditRetentionSeconds, in: 86400...(3650 * 86400)),
        .size("max_size", \.auditMaxBytes, in: (1 << 20)...(1 << 40)),
    ])

    /// `[hub]` (DESIGN §8): `listen`, `cert_file` and `key_file` make this authd a hub; `url`
    /// with `ca_file` or `pin` make it a device of that hub; neither leaves it standalone. Read
    /// once at start: a change takes effect when authd restarts.
    var hubListen: HostPort?
    var hubCertFile = ""
    var hubKeyFile = ""
    /// The hub's addresses, in the order the link tries them (replicas of one hub, with one
    /// certificate and one `ca_file` or `pin`); empty: not a device.
    var hubURLs: [HostPort] = []
    var hubCAFile = ""
    /// SHA-256 of the hub key's SubjectPublicKeyInfo, trusted instead of a CA.
    var hubPin: [UInt8] = []
    /// A TLS client that has not finished its handshake by then is disconnected.
    var hubHandshakeTimeoutSeconds = 10
    /// Device connections a hub holds at most; connections in their handshake from one address.
    var hubMaxDevices = 10_000
    var hubMaxHandshakesPerAddress = 64
    /// Machines that hold no session (newcomers): connections at once from one address, in all,
    /// and how long one may stay connected without signing in.
    var hubNewcomersPerAddress = 4
    var hubMaxNewcomers = 256
    var hubNewcomerTimeoutSeconds = 60
    /// The account database on PostgreSQL (a `postgresql://` URI or a libpq keyword string);
    /// empty: account data stays in this authd's own SQLite store. Holds no password.
    var hubDatabase = ""
    /// How many connections this replica keeps to that database.
    var hubDatabaseConnections = Store.defaultConnections
    private static let hub = Section("hub", [
        Setting("listen", \.hubListen) { value throws(ValueError) in
            guard let address = HostPort(value, allowPortZero: true) else {
                throw ValueError(message: "must be HOST:PORT with an IP address or a name (port 0: the kernel picks one), such as 0.0.0.0:7443 or [::]:7443, not \(shown(value))")
            }
            return address
        },
        .text("cert_file", \.hubCertFile, "must be an absolute path to the hub's PEM certificate chain") { $0.hasPrefix("/") },
        .text("key_file", \.hubKeyFile, "must be an absolute path to the hub's PEM private key") { $0.hasPrefix("/") },
        Setting("url", \.hubURLs) { value throws(ValueError) in try HostPort.hubAddresses(value) },
        .text("ca_file", \.hubCAFile, "must be an absolute path to the PEM certificates of the CA that issued the hub's") { $0.hasPrefix("/") },
        Setting("pin", \.hubPin) { value throws(ValueError) in
            guard value.hasPrefix("sha256//"), let digest = Data(base64Encoded: String(value.dropFirst(8))).map(Array.init), digest.count == 32 else {
                throw ValueError(message: "must be sha256// and the base64 SHA-256 of the hub key's SubjectPublicKeyInfo (as curl --pinnedpubkey takes it), not \(shown(value))")
            }
            return digest
        },
        .duration("handshake_timeout", \.hubHandshakeTimeoutSeconds, in: 1...120),
        .integer("max_devices", \.hubMaxDevices, in: 1...1_000_000),
        .integer("max_handshakes_per_address", \.hubMaxHandshakesPerAddress, in: 1...100_000),
        .integer("newcomers_per_address", \.hubNewcomersPerAddress, in: 1...10_000),
        .integer("max_newcomers", \.hubMaxNewcomers, in: 1...100_000),
        .duration("newcomer_timeout", \.hubNewcomerTimeoutSeconds, in: 1...3600),
        Setting("database", \.hubDatabase) { value throws(ValueError) in
            try PostgreSQLTarget.check(value)
            return value
        },
        .integer("database_connections", \.hubDatabaseConnections, in: 1...64),
    ])

    // MARK: [sync]

    /// How long the account's events are kept where the account lives (a hub, or a standalone
    /// authd); a reader behind that is told (`sync.gap`).
    var syncRetentionSeconds = 30 * 86400
    /// Events sent while a commit is under way go into the next commit together.
    var syncGroupCommit = true
    /// Show each `notification` event on the desktop of the user authd runs as.
    var syncDesktopNotifications = false
    /// Events (sends, read markers, dismissals) one local user (of this machine, or of a
    /// machine linked to the hub) may add per minute.
    var syncWritesPerMinute = 600
    /// The same for all users of one machine together: a shared machine's many users, each
    /// within their own limit, still cannot add without bound.
    var syncMachineWritesPerMinute = 6000
    private static let sync = Section("sync", [
        .duration("retention", \.syncRetentionSeconds, in: 3600...(3650 * 86400)),
        .yesNo("desktop_notifications", \.syncDesktopNotifications),
        .yesNo("group_commit", \.syncGroupCommit),
        .integer("writes_per_minute", \.syncWritesPerMinute, in: 1...1_000_000),
        .integer("machine_writes_per_minute", \.syncMachineWritesPerMinute, in: 1...10_000_000),
    ])

    // MARK: [presence]

    /// On a machine: read where it is (GeoClue2) and its Wi-Fi access point (NetworkManager) and
    /// tell the hub when the person enters or leaves a hotspot.
    var presenceEnabled = false
    /// On a machine: a hotspot entered by its access point is left once none of its BSSIDs has
    /// been seen for this long.
    var presenceBSSIDAbsenceSeconds = 120
    /// Where the account lives: a person's presence is dropped when their machines have not
    /// reported for this long (nobody is shown somewhere they left hours ago).
    var presenceExpirySeconds = 3600
    /// Where the account lives: private hotspots one account may define.
    var presenceMaxHotspots = 20
    /// Where the account lives: `friends.add` lookups one account may make per hour (so the
    /// directory cannot be harvested).
    var presenceLookupsPerHour = 30
    private static let presence = Section("presence", [
        .yesNo("enabled", \.presenceEnabled),
        .duration("bssid_absence", \.presenceBSSIDAbsenceSeconds, in: 10...86400),
        .duration("expiry", \.presenceExpirySeconds, in: 60...(7 * 86400)),
        .integer("max_hotspots", \.presenceMaxHotspots, in: 1...1000),
        .integer("lookups_per_hour", \.presenceLookupsPerHour, in: 1...100_000),
    ])

    /// What `[hub]` makes this authd.
    enum Role: String, Sendable { case standalone, hub, device }
    var role: Role { hubListen != nil ? .hub : !hubURLs.isEmpty ? .device : .standalone }

    /// This configuration with `old`'s `[hub]`: the role and its link are set up at start only.
    func keepingHub(of old: Config) -> Config {
        var kept = self
        kept.hubListen = old.hubListen
        kept.hubCertFile = old.hubCertFile
        kept.hubKeyFile = old.hubKeyFile
        kept.hubURLs = old.hubURLs
        kept.hubCAFile = old.hubCAFile
        kept.hubPin = old.hubPin
        kept.hubHandshakeTimeoutSeconds = old.hubHandshakeTimeoutSeconds
        kept.hubMaxDevices = old.hubMaxDevices
        kept.hubMaxHandshakesPerAddress = old.hubMaxHandshakesPerAddress
        kept.hubNewcomersPerAddress = old.hubNewcomersPerAddress
        kept.hubMaxNewcomers = old.hubMaxNewcomers
        kept.hubNewcomerTimeoutSeconds = old.hubNewcomerTimeoutSeconds
        kept.hubDatabase = old.hubDatabase
        kept.hubDatabaseConnections = old.hubDatabaseConnections
        return kept
    }

    /// Every section but `[federation.NAME]`, in the order `changes(from:)` reports their keys.
    private static let sections = [server, log, prompts, tokens, admin, sms, accounts, card, lock, biometric, federation, passkeys, audit, hub, sync, presence, pam]

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
        /// The keys of a `[federation.NAME]` section.
        fileprivate static let settings: [Setting<FederationProvider>] = [
            .text("issuer", \.issuer, "must be an https:// URL (http:// only to a loopback address), exactly as the provider's discovery document names it") {
                WebOrigin($0, allowPath: true) != nil
            },
            .text("client_id", \.clientID, "must be 1–256 printable ASCII characters", where: Config.isPrintableASCIIWord),
            .text("client_secret_file", \.clientSecretFile, "must be an absolute path to a file holding the client secret") {
                $0.hasPrefix("/") && $0.utf8.count < 4096
            },
            .words("scopes", \.scopes, "must be space-separated OAuth scopes including openid") { scopes in
                scopes.contains("openid") && scopes.allSatisfy { $0.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value < 0x7f && $0 != "\"" && $0 != "\\" } }
            },
            Setting("api", \.apiOrigins) { value throws(ValueError) in
                var origins: [String] = []
                for item in value.split(separator: " ") {
                    guard let origin = WebOrigin(String(item), allowPath: false) else {
                        throw ValueError(message: "must be space-separated origins such as https://api.example.com (http:// only to a loopback address), not \(shown(String(item)))")
                    }
                    origins.append(origin.serialized)
                }
                return origins
            },
        ]
    }

    /// The provider a request that names none uses: `[federation] default`, else the only one.
    var defaultFederationProvider: String? {
        federationDefault.isEmpty ? (federationProviders.count == 1 ? federationProviders[0].name : nil) : federationDefault
    }

    enum LogTarget: String, Sendable, CaseIterable { case auto, journal, stderr }
    /// `always`: ask every time; `first`: ask once and remember an "always allow"; `never`: do not ask.
    enum ConsentPolicy: String, Sendable, CaseIterable { case always, first, never }
    enum SMSBackend: String, Sendable, CaseIterable { case spool, command, http }
    /// What a sign-in on one device too many does: refuse it, or end the least recently used
    /// device's sessions to make room.
    enum DevicePolicy: String, Sendable, CaseIterable { case deny, replaceOldest = "replace_oldest" }

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
        /// The line each `section.key` is set on.
        var keyLines: [String: Int] = [:]
        // Split on bytes: in Swift "\r\n" is one Character, so CRLF files would not split on "\n".
        let lines = text.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
        // Every problem of the file is collected, so that one `--check-config` lists them all.
        var problems: [ConfigError] = []
        var skipping = false
        for (index, rawLine) in lines.enumerated() {
            let number = index + 1
            let line = trim(withoutComment(rawLine))
            if line.isEmpty { continue }
            do throws(ConfigError) {
                if line.hasPrefix("[") {
                    section = nil
                    skipping = true
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
                    } else if !sections.contains(where: { $0.name == name }) {
                        throw ConfigError(file: file, line: number, reason: "unknown section [\(Redaction.printable(name, limit: 40))]; known: \(sections.map(\.name).sorted().joined(separator: ", "))")
                    }
                    section = name
                    skipping = false
                    continue
                }
                // The lines of a refused section are not judged: its header's error says it all.
                if skipping { continue }
                guard let equals = line.firstIndex(of: "=") else {
                    throw ConfigError(file: file, line: number, reason: "expected 'key = value'")
                }
                guard let section else { throw ConfigError(file: file, line: number, reason: "a setting must follow a [section] header") }
                let key = trim(line[..<equals])
                let value = trim(line[line.index(after: equals)...])
                if section == "pam" && !pam.settings.contains(where: { $0.key == key }) {
                    // Any other key of [pam] names a PAM service: its methods, in order.
                    guard PAMMethod.isServiceName(key) else {
                        throw ConfigError(file: file, line: number, reason: "'\(Redaction.printable(key, limit: 40))' in [pam] is neither a setting (\(pam.settings.map(\.key).sorted().joined(separator: ", "))) nor a PAM service name")
                    }
                    guard keyLines.updateValue(number, forKey: "pam.\(key)") == nil else {
                        throw ConfigError(file: file, line: number, reason: "'\(key)' is set twice in [pam]")
                    }
                    do {
                        config.pamServices[key] = try PAMMethod.list(value)
                    } catch {
                        throw ConfigError(file: file, line: number, reason: "pam.\(key): \(error.message)")
                    }
                } else if section.hasPrefix("federation.") {
                    try set(key, to: value, in: section, settings: FederationProvider.settings, of: &config.federationProviders[config.federationProviders.count - 1],
                            file: file, line: number, keyLines: &keyLines)
                } else {
                    try set(key, to: value, in: section, settings: sections.first { $0.name == section }!.settings, of: &config,
                            file: file, line: number, keyLines: &keyLines)
                }
            } catch {
                problems.append(error)
            }
        }
        do throws(ConfigError) {
            try checkWhole(config, file: file, keyLines: keyLines)
        } catch {
            problems.append(error)
        }
        if var first = problems.first {
            first.more = Array(problems.dropFirst())
            throw first
        }
        return config
    }

    /// The settings that depend on each other, once every line is read.
    private static func checkWhole(_ config: Config, file: String, keyLines: [String: Int]) throws(ConfigError) {
        if config.smsBackend == .command && config.smsCommand.isEmpty {
            throw ConfigError(file: file, line: keyLines["sms.backend"] ?? 0, reason: "sms.backend = command needs sms.command (the program to run)")
        }
        if config.smsBackend == .http && config.smsURL.isEmpty {
            throw ConfigError(file: file, line: keyLines["sms.backend"] ?? 0, reason: "sms.backend = http needs sms.url (the gateway to POST to)")
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
        try checkHub(config, file: file, keyLines: keyLines)
        if config.sessionIdleSeconds > config.sessionLifetimeSeconds {
            throw ConfigError(file: file, line: 0, reason: "accounts.session_idle (\(config.sessionIdleSeconds)s) is longer than accounts.session_lifetime (\(config.sessionLifetimeSeconds)s)")
        }
    }

    /// `[hub]` as a whole: one role, what it needs, and files that can be read (and a key that
    /// matches its certificate), so that `--check-config` finds what would stop the hub or the
    /// link later.
    private static func checkHub(_ config: Config, file: String, keyLines: [String: Int]) throws(ConfigError) {
        func line(_ key: String) -> Int { keyLines["hub." + key] ?? 0 }
        // The keys of one role set in the file, in a fixed order so the error names the same one each time.
        func given(_ keys: [String]) -> String? { keys.first { keyLines["hub." + $0] != nil } }
        let hubKeys = ["database", "cert_file", "key_file", "max_devices", "max_handshakes_per_address", "newcomers_per_address", "max_newcomers", "newcomer_timeout"]
        let deviceKeys = ["ca_file", "pin"]
        switch config.role {
        case .standalone:
            // The limits of a hub may stay in a file whose listen line is commented out.
            if let key = given(["cert_file", "key_file"] + deviceKeys) {
                throw ConfigError(file: file, line: line(key), reason: "hub.\(key) is set, but neither hub.listen (to be a hub) nor hub.url (to be a device of one)")
            }
        case .hub:
            if !config.hubURLs.isEmpty {
                throw ConfigError(file: file, line: line("url"), reason: "hub.listen and hub.url are both set: an authd is a hub or a device, not both")
            }
            if let key = given(deviceKeys) {
                throw ConfigError(file: file, line: line(key), reason: "hub.\(key) is for a device (with hub.url); a hub has hub.cert_file and hub.key_file")
            }
            guard !config.hubCertFile.isEmpty, !config.hubKeyFile.isEmpty else {
                throw ConfigError(file: file, line: line("listen"), reason: "hub.listen needs hub.cert_file and hub.key_file (the hub's TLS certificate and key)")
            }
            do {
                _ = try TLSContext.server(certificateFile: config.hubCertFile, keyFile: config.hubKeyFile)
            } catch {
                throw ConfigError(file: file, line: line("key_file"), reason: "hub.cert_file and hub.key_file: \(error)")
            }
        case .device:
            if let key = given(hubKeys) {
                throw ConfigError(file: file, line: line(key), reason: "hub.\(key) is for a hub (with hub.listen); a device has hub.ca_file or hub.pin")
            }
            switch (config.hubCAFile.isEmpty, config.hubPin.isEmpty) {
            case (true, true):
                throw ConfigError(file: file, line: line("url"), reason: "hub.url needs hub.ca_file or hub.pin: how to know the hub is the real one")
            case (false, false):
                throw ConfigError(file: file, line: line("pin"), reason: "hub.ca_file and hub.pin are both set; trust the hub one way")
            case (false, true):
                do {
                    guard let pem = try Syscalls.readFile(config.hubCAFile, limit: 1 << 20),
                          String(decoding: pem, as: UTF8.self).contains("-----BEGIN CERTIFICATE-----")
                    else { throw FileError(description: "no PEM certificate in it") }
                } catch {
                    throw ConfigError(file: file, line: line("ca_file"), reason: "hub.ca_file \(config.hubCAFile): \(error)")
                }
            case (true, false):
                break
            }
        }
    }

    /// Sets `key` of `section` from its text on `line`: into the config itself, or into the
    /// provider a `[federation.NAME]` section describes.
    private static func set<Root>(_ key: String, to value: String, in section: String, settings: [Setting<Root>], of root: inout Root,
                                  file: String, line: Int, keyLines: inout [String: Int]) throws(ConfigError) {
        guard let setting = settings.first(where: { $0.key == key }) else {
            let known = settings.map(\.key).sorted().joined(separator: ", ")
            throw ConfigError(file: file, line: line, reason: "unknown key '\(Redaction.printable(key, limit: 40))' in [\(section)]; known: \(known)")
        }
        guard keyLines.updateValue(line, forKey: "\(section).\(key)") == nil else {
            throw ConfigError(file: file, line: line, reason: "'\(key)' is set twice in [\(section)]")
        }
        do {
            try setting.apply(&root, value)
        } catch {
            throw ConfigError(file: file, line: line, reason: "\(section).\(key): \(error.message)")
        }
    }

    /// The line up to its comment: a `#` or `;` at the start or after a space or tab begins one.
    private static func withoutComment(_ line: String) -> Substring {
        var previous: Character = " "
        for index in line.indices {
            let character = line[index]
            if (character == "#" || character == ";") && (previous == " " || previous == "\t") { return line[..<index] }
            previous = character
        }
        return line[...]
    }

    /// A value as an error message shows it: printable, at most 80 characters, and without a
    /// URL's query (which might hold a key), so that a person sees what authd read.
    static func shown(_ value: String) -> String {
        let withoutQuery = value.firstIndex(of: "?").map { value[..<$0] + "?…" } ?? value
        return "'" + Redaction.printable(String(withoutQuery), limit: 80) + "'"
    }

    /// Without surrounding spaces, tabs and carriage returns.
    private static func trim(_ text: some StringProtocol) -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" }
        return String(text.drop(while: isSpace).reversed().drop(while: isSpace).reversed())
    }

    /// The `section.key` names whose values differ between two configs; a provider that was
    /// added, removed or changed is `federation.NAME`.
    func changes(from old: Config) -> [String] {
        var changed = Config.sections.flatMap { section in
            section.settings.filter { $0.differs(self, old) }.map { "\(section.name).\($0.key)" }
        }
        for service in Set(pamServices.keys).union(old.pamServices.keys).sorted() where pamServices[service] != old.pamServices[service] {
            changed.append("pam.\(service)")
        }
        let names = Set(federationProviders.map(\.name) + old.federationProviders.map(\.name))
        for name in names.sorted() where federationProviders.first(where: { $0.name == name }) != old.federationProviders.first(where: { $0.name == name }) {
            changed.append("federation.\(name)")
        }
        return changed
    }

    struct ValueError: Error { let message: String }

    /// One key: its name in its section, and how its text becomes the value of one property of
    /// `Root` (the config, or a federation provider).
    fileprivate struct Setting<Root>: Sendable {
        let key: String
        /// Parses and checks the text, then stores the value.
        let apply: @Sendable (inout Root, String) throws(ValueError) -> Void
        /// Whether two roots hold different values for the key.
        let differs: @Sendable (Root, Root) -> Bool

        init<Value: Equatable & Sendable>(_ key: String, _ property: WritableKeyPath<Root, Value> & Sendable,
                               parse: @escaping @Sendable (String) throws(ValueError) -> Value) {
            self.key = key
            apply = { root, value throws(ValueError) in root[keyPath: property] = try parse(value) }
            differs = { $0[keyPath: property] != $1[keyPath: property] }
        }
    }

    /// One `[section]` and its keys.
    private struct Section: Sendable {
        let name: String
        let settings: [Setting<Config>]
        init(_ name: String, _ settings: [Setting<Config>]) {
            self.name = name
            self.settings = settings
        }
    }

    /// 1–256 printable ASCII characters, no spaces: an issuer or a client id.
    private static func isPrintableASCIIWord(_ value: String) -> Bool {
        (1...256).contains(value.count) && value.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value < 0x7f }
    }

    static func integer(_ value: String, in range: ClosedRange<Int>) throws(ValueError) -> Int {
        guard let number = Int(value), range.contains(number) else {
            throw ValueError(message: "must be a whole number from \(range.lowerBound) to \(range.upperBound), not \(shown(value))")
        }
        return number
    }

    /// Seconds, with an optional `s`, `m`, `h` or `d` suffix (`90`, `90s`, `5m`, `1h`, `1d`).
    static func duration(_ value: String, in range: ClosedRange<Int>) throws(ValueError) -> Int {
        guard let seconds = scaled(value, units: ["s": 1, "m": 60, "h": 3600, "d": 86400], in: range) else {
            throw ValueError(message: "must be a duration from \(range.lowerBound)s to \(range.upperBound)s (e.g. 90s, 5m, 1h, 1d), not \(shown(value))")
        }
        return seconds
    }

    /// Bytes, with an optional `K`, `M` or `G` suffix (powers of 1024: `64M` is 64 MiB).
    static func size(_ value: String, in range: ClosedRange<Int>) throws(ValueError) -> Int {
        guard let bytes = scaled(value, units: ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30], in: range) else {
            throw ValueError(message: "must be a size from \(range.lowerBound) to \(range.upperBound) bytes (e.g. 64M, 1G), not \(shown(value))")
        }
        return bytes
    }

    /// A whole number with an optional one-letter unit, as a multiple of the unit; nil when it
    /// is not one, or falls outside `range`.
    private static func scaled(_ value: String, units: [Character: Int], in range: ClosedRange<Int>) -> Int? {
        var digits = Substring(value)
        var multiplier = 1
        if let last = value.last, let unit = units[last] {
            digits = value.dropLast()
            multiplier = unit
        }
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), let number = Int(digits), number >= 0,
              number <= Int.max / multiplier, range.contains(number * multiplier)
        else { return nil }
        return number * multiplier
    }
}

/// The kinds of rows in the settings tables.
extension Config.Setting {
    static func integer(_ key: String, _ property: WritableKeyPath<Root, Int> & Sendable, in range: ClosedRange<Int>) -> Self {
        Self(key, property) { value throws(Config.ValueError) in try Config.integer(value, in: range) }
    }

    static func size(_ key: String, _ property: WritableKeyPath<Root, Int> & Sendable, in range: ClosedRange<Int>) -> Self {
        Self(key, property) { value throws(Config.ValueError) in try Config.size(value, in: range) }
    }

    static func duration(_ key: String, _ property: WritableKeyPath<Root, Int> & Sendable, in range: ClosedRange<Int>) -> Self {
        Self(key, property) { value throws(Config.ValueError) in try Config.duration(value, in: range) }
    }

    /// `yes` or `no`.
    static func yesNo(_ key: String, _ property: WritableKeyPath<Root, Bool> & Sendable) -> Self {
        Self(key, property) { value throws(Config.ValueError) in
            switch value {
            case "yes": true
            case "no": false
            default: throw Config.ValueError(message: "must be yes or no, not \(Config.shown(value))")
            }
        }
    }

    /// One of an enumeration's raw values; the error lists them all.
    static func choice<Value: RawRepresentable<String> & CaseIterable & Equatable & Sendable>(_ key: String, _ property: WritableKeyPath<Root, Value> & Sendable) -> Self {
        let names = Value.allCases.map(\.rawValue)
        let must = "must be \(names.dropLast().joined(separator: ", ")) or \(names.last ?? "")"
        return Self(key, property) { value throws(Config.ValueError) in
            guard let choice = Value(rawValue: value) else { throw Config.ValueError(message: "\(must), not \(Config.shown(value))") }
            return choice
        }
    }

    /// Text kept as written, when `isValid`; otherwise the error says it `must` be.
    static func text(_ key: String, _ property: WritableKeyPath<Root, String> & Sendable, _ must: String,
                     where isValid: @escaping @Sendable (String) -> Bool) -> Self {
        Self(key, property) { value throws(Config.ValueError) in
            guard isValid(value) else { throw Config.ValueError(message: "\(must), not \(Config.shown(value))") }
            return value
        }
    }

    /// Space-separated words, when `isValid` accepts the list; otherwise the error says it `must` be.
    static func words(_ key: String, _ property: WritableKeyPath<Root, [String]> & Sendable, _ must: String,
                      where isValid: @escaping @Sendable ([String]) -> Bool) -> Self {
        Self(key, property) { value throws(Config.ValueError) in
            let words = value.split(separator: " ").map(String.init)
            guard isValid(words) else { throw Config.ValueError(message: "\(must), not \(Config.shown(value))") }
            return words
        }
    }
}

/// The configuration in force; replaced whole on a successful reload.
final class ConfigHolder: Sendable {
    private let value: Mutex<Config>
    /// Where the configuration is read from, for messages that send an admin to a setting.
    let file: String

    init(_ config: Config, file: String = "authd.conf") {
        value = Mutex(config)
        self.file = file
    }
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
    /// The file's other problems, after this first one.
    var more: [ConfigError] = []

    /// The first problem, and how many more there are (one line, for logs and `admin.reload`).
    var description: String {
        one + (more.isEmpty ? "" : " (and \(more.count) more problem\(more.count == 1 ? "" : "s"): authd --check-config lists them)")
    }

    /// Every problem, one per line (`--check-config`).
    var report: String { ([one] + more.map(\.one)).joined(separator: "\n") }

    private var one: String { line > 0 ? "\(file):\(line): \(reason)" : "\(file): \(reason)" }
}
