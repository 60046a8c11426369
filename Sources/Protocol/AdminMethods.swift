// Admin methods: root or the `authd-admin` group in system mode, the owning user in user mode.

/// `admin.status` — what an admin needs to see the daemon is healthy.
public enum AdminStatus: RPCMethod {
    public static let name = "admin.status"
    public typealias Params = NoParams

    public struct Result: Codable, Sendable, Equatable {
        public var daemonVersion: String
        public var protocolVersion: Int
        public var mode: String
        public var pid: Int32
        public var startedAt: String
        public var uptimeSeconds: Int64
        public var paths: Paths
        public var connections: Int
        public var openFileDescriptors: Int
        public var residentMemoryBytes: Int64
        /// Memory mapped for password hashing: Argon2id's 19 MiB for each hash running, each kept
        /// 2 s for the next hash; absent from a daemon that does not report it.
        public var passwordHashingBytes: Int64?
        /// Answers written for clients that have not read them yet, over all connections.
        public var unreadOutputBytes: Int64
        /// Bytes of request lines clients have started and not finished, over all connections;
        /// absent from a daemon that does not report it.
        public var unfinishedInputBytes: Int64?
        public var keys: [KeyInfo]
        public var store: StoreHealth
        /// The audit log's size and continuity; absent from a daemon that does not report it.
        public var audit: AuditSize?
        /// The machine's role among machines and its link or listener (as `hub.status`).
        public var hub: HubStatus.Result?
        /// Where account data is when it is not in `store`: the PostgreSQL database of a hub
        /// (`[hub] database`); absent otherwise.
        public var accountStore: AccountStore?

        public init(daemonVersion: String, protocolVersion: Int, mode: String, pid: Int32, startedAt: String,
                    uptimeSeconds: Int64, paths: Paths, connections: Int, openFileDescriptors: Int,
                    residentMemoryBytes: Int64, passwordHashingBytes: Int64? = nil, unreadOutputBytes: Int64, unfinishedInputBytes: Int64? = nil, keys: [KeyInfo], store: StoreHealth,
                    audit: AuditSize? = nil, hub: HubStatus.Result? = nil) {
            self.daemonVersion = daemonVersion
            self.protocolVersion = protocolVersion
            self.mode = mode
            self.pid = pid
            self.startedAt = startedAt
            self.uptimeSeconds = uptimeSeconds
            self.paths = paths
            self.connections = connections
            self.openFileDescriptors = openFileDescriptors
            self.residentMemoryBytes = residentMemoryBytes
            self.passwordHashingBytes = passwordHashingBytes
            self.unreadOutputBytes = unreadOutputBytes
            self.unfinishedInputBytes = unfinishedInputBytes
            self.keys = keys
            self.store = store
            self.audit = audit
            self.hub = hub
        }

        enum CodingKeys: String, CodingKey {
            case daemonVersion = "daemon_version", protocolVersion = "protocol_version", mode, pid
            case startedAt = "started_at", uptimeSeconds = "uptime_s", paths, connections
            case openFileDescriptors = "open_fds", residentMemoryBytes = "rss_bytes", passwordHashingBytes = "password_hashing_bytes"
            case unreadOutputBytes = "unread_output_bytes"
            case unfinishedInputBytes = "unfinished_input_bytes", keys, store, audit, hub
            case accountStore = "account_store"
        }
    }

    /// A hub's account database on PostgreSQL, as this replica sees it now.
    public struct AccountStore: Codable, Sendable, Equatable {
        /// `postgresql`.
        public var engine: String
        /// The server's version (e.g. `15.18`); absent while it cannot be reached.
        public var serverVersion: String?
        /// One round trip (`SELECT 1`) in milliseconds; absent while the database cannot be reached.
        public var roundTripMs: Double?
        public var schemaVersion: Int?
        /// `ok`, or why the database cannot be used now.
        public var state: String
        /// The replicas on the database that said they were alive in the last minute.
        public var replicas: [Replica]
        /// The connections this replica keeps to the database, and its calls on them now
        /// (waiting or running): a count near or above the connections says the database is slow.
        public var connections: Int
        public var callsInFlight: Int

        public struct Replica: Codable, Sendable, Equatable {
            public var id: String
            /// Host name and listening address.
            public var name: String
            public var seenAt: String
            /// This replica (the one answering).
            public var this: Bool

            public init(id: String, name: String, seenAt: String, this: Bool) {
                self.id = id
                self.name = name
                self.seenAt = seenAt
                self.this = this
            }

            enum CodingKeys: String, CodingKey {
                case id, name, seenAt = "seen_at", this
            }
        }

        public init(engine: String, serverVersion: String?, roundTripMs: Double?, schemaVersion: Int?, state: String, replicas: [Replica],
                    connections: Int, callsInFlight: Int) {
            self.connections = connections
            self.callsInFlight = callsInFlight
            self.engine = engine
            self.serverVersion = serverVersion
            self.roundTripMs = roundTripMs
            self.schemaVersion = schemaVersion
            self.state = state
            self.replicas = replicas
        }

        enum CodingKeys: String, CodingKey {
            case engine, serverVersion = "server_version", roundTripMs = "round_trip_ms", schemaVersion = "schema_version", state, replicas, connections
            case callsInFlight = "calls_in_flight"
        }
    }

    public struct Paths: Codable, Sendable, Equatable {
        public var socket: String
        public var stateDirectory: String
        public var config: String
        public var database: String
        /// `credential` (systemd `authd.key`) or the path of the key file.
        public var masterKey: String

        public init(socket: String, stateDirectory: String, config: String, database: String, masterKey: String) {
            self.socket = socket
            self.stateDirectory = stateDirectory
            self.config = config
            self.database = database
            self.masterKey = masterKey
        }

        enum CodingKeys: String, CodingKey {
            case socket, stateDirectory = "state_dir", config, database, masterKey = "master_key"
        }
    }

    public struct KeyInfo: Codable, Sendable, Equatable {
        public var kid: String
        public var alg: String
        /// `current` (signs new tokens) or `retired` (published until `published_until`).
        public var status: String
        public var createdAt: String
        public var publishedUntil: String?

        public init(kid: String, alg: String, status: String, createdAt: String, publishedUntil: String?) {
            self.kid = kid
            self.alg = alg
            self.status = status
            self.createdAt = createdAt
            self.publishedUntil = publishedUntil
        }

        enum CodingKeys: String, CodingKey {
            case kid, alg, status, createdAt = "created_at", publishedUntil = "published_until"
        }
    }

    public struct StoreHealth: Codable, Sendable, Equatable {
        /// `ok`, or the first problem `PRAGMA integrity_check` reports.
        public var integrity: String
        public var schemaVersion: Int
        public var sizeBytes: Int64
        public var journalMode: String

        public init(integrity: String, schemaVersion: Int, sizeBytes: Int64, journalMode: String) {
            self.integrity = integrity
            self.schemaVersion = schemaVersion
            self.sizeBytes = sizeBytes
            self.journalMode = journalMode
        }

        enum CodingKeys: String, CodingKey {
            case integrity, schemaVersion = "schema_version", sizeBytes = "size_bytes", journalMode = "journal_mode"
        }
    }

    /// The audit log: how much it holds, against its bounds (`[audit]` in authd.conf(5)).
    public struct AuditSize: Codable, Sendable, Equatable {
        public var rows: Int
        /// The records' size as stored, estimated from their contents.
        public var bytes: Int64
        /// The time of the oldest record kept (RFC 3339, UTC); nil when the log is empty.
        public var oldest: String?
        /// Purges delete the oldest records and leave a record of what they deleted: every id up
        /// to this one is gone (0: none ever was).
        public var purgedThrough: Int64
        /// `ok` when every record after `purged_through` is present; otherwise what is missing.
        public var integrity: String
        public var retentionSeconds: Int
        public var maxBytes: Int64

        public init(rows: Int, bytes: Int64, oldest: String?, purgedThrough: Int64, integrity: String, retentionSeconds: Int, maxBytes: Int64) {
            self.rows = rows
            self.bytes = bytes
            self.oldest = oldest
            self.purgedThrough = purgedThrough
            self.integrity = integrity
            self.retentionSeconds = retentionSeconds
            self.maxBytes = maxBytes
        }

        enum CodingKeys: String, CodingKey {
            case rows, bytes, oldest, purgedThrough = "purged_through", integrity, retentionSeconds = "retention_s", maxBytes = "max_bytes"
        }
    }
}

/// `admin.reload` — re-reads the configuration file (as SIGHUP does). An invalid file is refused
/// with `config.invalid` naming file and line, and the running configuration stays in force.
public enum AdminReload: RPCMethod {
    public static let name = "admin.reload"
    public typealias Params = NoParams

    public struct Result: Codable, Sendable, Equatable {
        public var config: String
        /// Settings whose value changed, as `section.key`.
        public var changed: [String]

        public init(config: String, changed: [String]) {
            self.config = config
            self.changed = changed
        }
    }
}

/// `admin.backup` — a consistent copy of the store through SQLite's online backup API, written
/// to a new file (never overwriting one) with mode 0600. On a hub whose account data is in
/// PostgreSQL the copy holds the machine's own store only, and `account_data` says so.
public enum AdminBackup: RPCMethod {
    public static let name = "admin.backup"

    public struct Params: Codable, Sendable, Equatable {
        /// An absolute path that does not exist yet, in a directory that does.
        public var path: String
        public init(path: String) { self.path = path }
    }

    public struct Result: Codable, Sendable, Equatable {
        public var path: String
        public var bytes: Int64
        /// Where the account data is when it is not in the copy (PostgreSQL), and how it is backed up.
        public var accountData: String?

        public init(path: String, bytes: Int64, accountData: String? = nil) {
            self.path = path
            self.bytes = bytes
            self.accountData = accountData
        }

        enum CodingKeys: String, CodingKey {
            case path, bytes
            case accountData = "account_data"
        }
    }
}

/// `admin.keys.rotate` — makes a new current signing key. The previous key stops signing at
/// once; its public half stays in the JWKS until every token it signed has expired.
public enum AdminKeysRotate: RPCMethod {
    public static let name = "admin.keys.rotate"
    public typealias Params = NoParams

    public struct Result: Codable, Sendable, Equatable {
        public var kid: String
        public var previousKid: String?
        public var previousPublishedUntil: String?

        public init(kid: String, previousKid: String?, previousPublishedUntil: String?) {
            self.kid = kid
            self.previousKid = previousKid
            self.previousPublishedUntil = previousPublishedUntil
        }

        enum CodingKeys: String, CodingKey {
            case kid, previousKid = "previous_kid", previousPublishedUntil = "previous_published_until"
        }
    }
}

/// `admin.audit.tail` — the newest audit records, oldest first; with `follow`, the response is
/// followed by an `audit.record` notification for every new record until `subscription.cancel`
/// or disconnect.
public enum AdminAuditTail: RPCMethod {
    public static let name = "admin.audit.tail"

    public struct Params: Codable, Sendable, Equatable {
        /// 0…10000, default 50.
        public var limit: Int?
        public var follow: Bool?

        public init(limit: Int? = nil, follow: Bool? = nil) {
            self.limit = limit
            self.follow = follow
        }
    }

    public struct Result: Codable, Sendable, Equatable {
        public var records: [AuditRecord]
        /// Set when following: the id to pass to `subscription.cancel`.
        public var subscription: String?

        public init(records: [AuditRecord], subscription: String?) {
            self.records = records
            self.subscription = subscription
        }
    }
}

/// `audit.record` — one new audit record on a followed `admin.audit.tail`.
public enum AuditRecordNotification: RPCNotification {
    public static let name = "audit.record"

    public struct Params: Codable, Sendable, Equatable {
        public var subscription: String
        public var record: AuditRecord

        public init(subscription: String, record: AuditRecord) {
            self.subscription = subscription
            self.record = record
        }
    }
}

/// One audit log entry. Never holds a secret: tokens appear only by their `jti`.
public struct AuditRecord: Codable, Sendable, Equatable {
    public var id: Int64
    /// RFC 3339 with milliseconds, UTC.
    public var time: String
    public var caller: AuditCaller
    public var method: String
    /// `ok`, `denied` (authorization or policy refused it) or `error`.
    public var outcome: String
    public var reason: String?
    /// Method-specific, non-secret facts (e.g. `aud`, `jti`, `kid`).
    public var detail: [String: JSONValue]

    public init(id: Int64, time: String, caller: AuditCaller, method: String, outcome: String,
                reason: String?, detail: [String: JSONValue]) {
        self.id = id
        self.time = time
        self.caller = caller
        self.method = method
        self.outcome = outcome
        self.reason = reason
        self.detail = detail
    }
}

/// The caller as recorded in the audit log.
public struct AuditCaller: Codable, Sendable, Equatable {
    public var uid: UInt32
    public var pid: Int32
    public var exe: String?

    public init(uid: UInt32, pid: Int32, exe: String?) {
        self.uid = uid
        self.pid = pid
        self.exe = exe
    }
}

/// `admin.sms.last` — the newest message the `spool` SMS backend wrote (to `number`, when
/// given), for development: the code a registration or sign-in sent. Refused with
/// `sms.not_spooled` when another backend sends the messages, and `sms.none_spooled` when the
/// spool holds no such message.
public enum AdminSMSLast: RPCMethod {
    public static let name = "admin.sms.last"

    public struct Params: Codable, Sendable, Equatable {
        /// A phone number in international form (`+37251234567`); any recipient when absent.
        public var number: String?
        public init(number: String? = nil) { self.number = number }
    }

    public struct Result: Codable, Sendable, Equatable {
        /// The recipient, E.164.
        public var to: String
        /// The message as sent, verification code included.
        public var text: String
        /// When the message was written, RFC 3339, UTC.
        public var spooledAt: String
        /// The spool file that holds it.
        public var file: String

        public init(to: String, text: String, spooledAt: String, file: String) {
            self.to = to
            self.text = text
            self.spooledAt = spooledAt
            self.file = file
        }

        enum CodingKeys: String, CodingKey {
            case to, text, spooledAt = "spooled_at", file
        }
    }
}
