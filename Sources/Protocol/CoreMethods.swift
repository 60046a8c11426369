// Methods every client uses: the handshake, local identity tokens, verification, the JWKS,
// and stream control.

/// authd's release, shared by the daemon and the programs built with it (the Web eID host
/// reports it in its own version's build metadata).
public enum AuthdRelease {
    public static let version = "0.1.0"
}

/// `hello` — the handshake. Safe to call at any time, by anyone.
public enum Hello: RPCMethod {
    public static let name = "hello"
    public typealias Params = NoParams

    public struct Result: Codable, Sendable, Equatable {
        /// The wire protocol version (``protocolVersion``).
        public var protocolVersion: Int
        /// The daemon's release, e.g. `0.1.0`.
        public var daemonVersion: String
        /// `user` or `system`.
        public var mode: String
        /// Who the daemon believes is calling, read from the socket once per connection.
        public var caller: CallerIdentity
        /// Capabilities this daemon offers, e.g. `auth.local`, `admin`, `audit.follow`.
        public var features: Features

        public init(protocolVersion: Int, daemonVersion: String, mode: String, caller: CallerIdentity, features: Features) {
            self.protocolVersion = protocolVersion
            self.daemonVersion = daemonVersion
            self.mode = mode
            self.caller = caller
            self.features = features
        }

        // In the order of the keys' bytes, the order `write(to:)` writes them in.
        enum CodingKeys: String, CodingKey {
            case caller, daemonVersion = "daemon_version", features, mode, protocolVersion = "protocol_version"
        }
    }
}

extension Hello {
    /// The capabilities a daemon offers, in the order it announces them. A daemon's list does
    /// not change while it runs, and every client's first call asks for it, so the list's JSON
    /// text is written once, when the list is made, and each `hello` copies it.
    public struct Features: Codable, Sendable, Equatable, RandomAccessCollection, ExpressibleByArrayLiteral {
        public let names: [String]
        /// `names` as compact JSON.
        let text: [UInt8]

        public init(_ names: [String]) {
            self.names = names
            let writer = CompactJSON.Writer()
            writer.array(names, writer.string)
            text = writer.text
        }

        public init(arrayLiteral names: String...) { self.init(names) }

        public init(from decoder: any Decoder) throws { self.init(try [String](from: decoder)) }

        public func encode(to encoder: any Encoder) throws { try names.encode(to: encoder) }

        public var startIndex: Int { names.startIndex }
        public var endIndex: Int { names.endIndex }
        public subscript(position: Int) -> String { names[position] }
    }
}

extension Hello.Result: CompactJSON.Writable {
    public func write(to object: inout CompactJSON.Object) {
        object.member(CodingKeys.caller, caller)
        object.member(CodingKeys.daemonVersion, daemonVersion)
        object.member(CodingKeys.features, text: features.text)
        object.member(CodingKeys.mode, mode)
        object.member(CodingKeys.protocolVersion, protocolVersion)
    }
}

/// The identity of a connected process as the daemon sees it: `SO_PEERCRED`, `SO_PEERGROUPS`
/// and `/proc/PID/exe`, read once when the connection is accepted.
public struct CallerIdentity: Codable, Sendable, Equatable {
    public var uid: UInt32
    public var gid: UInt32
    public var pid: Int32
    /// The executable path, or `nil` when it could not be read (the process exited, or belongs to
    /// another user and the daemon may not look).
    public var exe: String?
    /// The login name for `uid`, when the user database knows it.
    public var username: String?
    /// Supplementary groups of the process.
    public var groups: [UInt32]

    enum CodingKeys: String, CodingKey { case exe, gid, groups, pid, uid, username }

    public init(uid: UInt32, gid: UInt32, pid: Int32, exe: String?, username: String?, groups: [UInt32]) {
        self.uid = uid
        self.gid = gid
        self.pid = pid
        self.exe = exe
        self.username = username
        self.groups = groups
    }
}

extension CallerIdentity: CompactJSON.Writable {
    public func write(to object: inout CompactJSON.Object) {
        object.member(CodingKeys.exe, exe)
        object.member(CodingKeys.gid, gid)
        object.member(CodingKeys.groups, groups)
        object.member(CodingKeys.pid, pid)
        object.member(CodingKeys.uid, uid)
        object.member(CodingKeys.username, username)
    }
}

/// `auth.local` — a JWT in which the daemon asserts the caller's local Unix identity
/// (`sub` = `unix:<uid>`, `preferred_username`, `azp` = the caller's executable).
public enum AuthLocal: RPCMethod {
    public static let name = "auth.local"

    public struct Params: Codable, Sendable, Equatable {
        /// The audience: who the token is for (an app id or origin). 1–256 printable characters.
        public var aud: String
        /// Optional caller nonce echoed in the `nonce` claim. At most 256 printable characters.
        public var nonce: String?

        public init(aud: String, nonce: String? = nil) {
            self.aud = aud
            self.nonce = nonce
        }
    }

    public typealias Result = IssuedToken
}

extension AuthLocal.Params: ParamsReadable {
    public init(reading params: inout ParamsReader) throws(RPCError) {
        self.init(aud: try params.string("aud"), nonce: try params.optionalString("nonce"))
    }
}

/// A token the daemon issued.
public struct IssuedToken: Codable, Sendable, Equatable {
    /// The compact JWS.
    public var token: String
    /// The key id in the token's header.
    public var kid: String
    /// The token's `jti` claim: how the audit log and revocation lists name it.
    public var jti: String
    /// When the token expires (RFC 3339, UTC).
    public var expiresAt: String

    public init(token: String, kid: String, jti: String, expiresAt: String) {
        self.token = token
        self.kid = kid
        self.jti = jti
        self.expiresAt = expiresAt
    }

    enum CodingKeys: String, CodingKey { case expiresAt = "expires_at", jti, kid, token }
}

extension IssuedToken: CompactJSON.Writable {
    public func write(to object: inout CompactJSON.Object) {
        object.member(CodingKeys.expiresAt, expiresAt)
        object.member(CodingKeys.jti, jti)
        object.member(CodingKeys.kid, kid)
        object.member(CodingKeys.token, token)
    }
}

/// `token.verify` — checks a daemon-issued token: structure, `kid`, ES256 signature, `iss`,
/// `nbf`, `exp` and, when given, `aud`. Failures are errors with a `token.*` reason.
public enum TokenVerify: RPCMethod {
    public static let name = "token.verify"

    public struct Params: Codable, Sendable, Equatable {
        public var token: String
        /// When given, the token's `aud` must equal it (or contain it, when `aud` is an array).
        public var aud: String?

        public init(token: String, aud: String? = nil) {
            self.token = token
            self.aud = aud
        }
    }

    public struct Result: Codable, Sendable, Equatable {
        public var header: [String: JSONValue]
        public var claims: [String: JSONValue]

        public init(header: [String: JSONValue], claims: [String: JSONValue]) {
            self.header = header
            self.claims = claims
        }
    }
}

/// `keys.jwks` — the public keys that verify daemon tokens, as an RFC 7517 JWK Set.
public enum KeysJWKS: RPCMethod {
    public static let name = "keys.jwks"
    public typealias Params = NoParams
    public typealias Result = JWKSet
}

/// An RFC 7517 JSON Web Key Set.
public struct JWKSet: Codable, Sendable, Equatable {
    public var keys: [JWK]
    public init(keys: [JWK]) { self.keys = keys }
}

/// A public EC key as a JWK (RFC 7517/7518): `kty` `EC`, `crv` `P-256`, base64url `x`, `y`.
public struct JWK: Codable, Sendable, Equatable {
    public var kty: String
    public var crv: String
    public var x: String
    public var y: String
    public var kid: String
    public var use: String
    public var alg: String

    public init(kty: String = "EC", crv: String = "P-256", x: String, y: String, kid: String, use: String = "sig", alg: String = "ES256") {
        self.kty = kty
        self.crv = crv
        self.x = x
        self.y = y
        self.kid = kid
        self.use = use
        self.alg = alg
    }
}

/// `subscription.cancel` — ends a stream this connection started (e.g. `admin.audit.tail` with
/// `follow`). Closing the connection ends all of its streams too.
public enum SubscriptionCancel: RPCMethod {
    public static let name = "subscription.cancel"

    public struct Params: Codable, Sendable, Equatable {
        public var subscription: String
        public init(subscription: String) { self.subscription = subscription }
    }

    public struct Result: Codable, Sendable, Equatable {
        public var cancelled: Bool
        public init(cancelled: Bool) { self.cancelled = cancelled }
    }
}
