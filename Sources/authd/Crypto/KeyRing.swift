// Crypto/ — the daemon's key hierarchy on top of OpenSSLCrypto (the libcrypto wrapper, a module of
// its own): the master key and sealing (Sealer), the token-signing keys (KeyRing), compact JWS,
// and Argon2id (Argon2.swift is the only caller of libargon2).

import FoundationEssentials
import OpenSSLCrypto
import Protocol
import Synchronization

/// The daemon's ES256 token-signing keys: one current key that signs, and retired keys whose
/// public halves stay in the JWKS until every token they signed has expired.
///
/// Reads (signing, JWKS, verification) take a lock, not an actor hop, so token issuance scales
/// across cores; changes go through the store first and are then re-read from it.
final class KeyRing: Sendable {
    struct SigningKey: Sendable {
        let kid: String
        let key: P256PrivateKey
    }

    struct PublishedKey: Sendable {
        let kid: String
        let alg: String
        let publicKey: P256PublicKey
        let jwk: JWK
        let createdAt: Int64
        let retiredAt: Int64?
        let publishedUntil: Int64?
    }

    private struct State: Sendable {
        var current: SigningKey
        var published: [PublishedKey]
        /// The keys the other replicas of this hub publish (`HubReplicas`): verified and listed
        /// in the JWKS as this replica's own are, so a relying party trusts one JWKS.
        var peers: [PublishedKey] = []
    }

    private let store: Store
    private let sealer: Sealer
    private let state: Mutex<State>
    /// Told after each rotation (a hub replica publishes its new key to the others).
    private let rotated = Mutex<Callback<Void>?>(nil)

    /// How long a retired key stays published: the longest token lifetime plus clock skew.
    static let retiredKeyOverlapSeconds = Int64(Config.maximumTokenLifetimeSeconds + 300)

    private init(store: Store, sealer: Sealer, state: State) {
        self.store = store
        self.sealer = sealer
        self.state = Mutex(state)
    }

    /// Checks the master key against the store, loads the keys, and creates the first signing
    /// key on first start.
    static func open(store: Store, sealer: Sealer, now: Date) async throws -> KeyRing {
        try await verifyMasterKey(store: store, sealer: sealer)
        if try await store.currentSigningKeyID() == nil {
            let generated = try Generated(sealer: sealer, now: now)
            try await store.transaction { database in
                // Another start may have raced us; the unique index keeps exactly one current key.
                if try database.queryOne("SELECT kid FROM signing_keys WHERE retired_at IS NULL", row: { $0.text(0) }) == nil {
                    try generated.insert(into: database)
                }
            }
        }
        return KeyRing(store: store, sealer: sealer, state: try await load(store: store, sealer: sealer))
    }

    private static func verifyMasterKey(store: Store, sealer: Sealer) async throws {
        let check = SecretBytes(Array("authd master key check".utf8))
        let stored = try await store.read { try $0.queryOne("SELECT value FROM meta WHERE key = 'master_key_check'") { $0.blob(0) } }
        if let stored {
            guard try sealer.open(stored, purpose: .keyCheck, identity: "meta:master_key_check") != nil else {
                throw MasterKeyError(description: "the master key does not open this store (was authd.key or master.key replaced?); refusing to start")
            }
        } else {
            let sealed = try sealer.seal(check, purpose: .keyCheck, identity: "meta:master_key_check")
            try await store.transaction { try $0.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('master_key_check', ?)", [.blob(sealed)]) }
        }
    }

    private static func load(store: Store, sealer: Sealer) async throws -> State {
        struct Row: Sendable {
            let kid: String, alg: String, spki: [UInt8], sealed: [UInt8]?, created: Int64, retired: Int64?, until: Int64?
        }
        let rows = try await store.read {
            try $0.query("SELECT kid, alg, public_spki, private_sealed, created_at, retired_at, published_until FROM signing_keys ORDER BY created_at") {
                Row(kid: $0.text(0), alg: $0.text(1), spki: $0.blob(2), sealed: $0.optionalBlob(3), created: $0.int64(4),
                    retired: $0.optionalInt64(5), until: $0.optionalInt64(6))
            }
        }
        var current: SigningKey?
        var published: [PublishedKey] = []
        for row in rows {
            let publicKey = try P256PublicKey(spki: row.spki)
            let (x, y) = try publicKey.coordinates()
            published.append(PublishedKey(
                kid: row.kid, alg: row.alg, publicKey: publicKey,
                jwk: JWK(x: Base64URL.encode(x), y: Base64URL.encode(y), kid: row.kid),
                createdAt: row.created, retiredAt: row.retired, publishedUntil: row.until))
            if row.retired == nil {
                guard let sealed = row.sealed,
                      let der = try sealer.open(sealed, purpose: .signingKey, identity: "signing_key:\(row.kid)")
                else { throw MasterKeyError(description: "the signing key \(row.kid) cannot be unsealed; the store is damaged") }
                current = SigningKey(kid: row.kid, key: try P256PrivateKey(der: der))
            }
        }
        guard let current else { throw MasterKeyError(description: "the store has no current signing key") }
        return State(current: current, published: published)
    }

    /// A freshly generated key pair, sealed and ready to insert.
    private struct Generated: Sendable {
        let kid: String
        let spki: [UInt8]
        let sealed: [UInt8]
        let createdAt: Int64

        init(sealer: Sealer, now: Date) throws {
            let key = try P256PrivateKey.generate()
            let publicKey = try key.publicKey()
            let (x, y) = try publicKey.coordinates()
            kid = KeyRing.thumbprint(x: x, y: y)
            spki = publicKey.spki
            sealed = try sealer.seal(try key.derRepresentation(), purpose: .signingKey, identity: "signing_key:\(kid)")
            createdAt = Int64(now.timeIntervalSince1970)
        }

        func insert(into database: Database) throws {
            try database.execute(
                "INSERT INTO signing_keys (kid, alg, public_spki, private_sealed, created_at) VALUES (?, 'ES256', ?, ?, ?)",
                [.text(kid), .blob(spki), .blob(sealed), .integer(createdAt)])
        }
    }

    /// The RFC 7638 JWK thumbprint of a P-256 key, used as its `kid`.
    static func thumbprint(x: [UInt8], y: [UInt8]) -> String {
        let canonical = #"{"crv":"P-256","kty":"EC","x":"\#(Base64URL.encode(x))","y":"\#(Base64URL.encode(y))"}"#
        return Base64URL.encode(OpenSSL.sha256(Array(canonical.utf8)))
    }

    var current: SigningKey { state.withLock { $0.current } }

    /// The public key for `kid` if it is still published at `now` (here, or by another replica).
    func publishedKey(kid: String, now: Date) -> PublishedKey? {
        state.withLock { state in (state.published + state.peers).first { $0.kid == kid && Self.isPublished($0, at: now) } }
    }

    func jwks(now: Date) -> JWKSet {
        JWKSet(keys: state.withLock { state in (state.published + state.peers).filter { Self.isPublished($0, at: now) }.map(\.jwk) })
    }

    /// Calls `body` after each rotation.
    func onRotation(_ body: @escaping @Sendable () -> Void) {
        rotated.withLock { $0 = Callback { body() } }
    }

    /// The other replicas' published keys, as they stand now.
    func setPeers(_ peers: [PublishedKey]) {
        state.withLock { state in state.peers = peers.filter { peer in !state.published.contains { $0.kid == peer.kid } } }
    }

    /// A published key from its public half, as another replica publishes it.
    static func published(kid: String, spki: [UInt8], createdAt: Int64, publishedUntil: Int64?) throws -> PublishedKey {
        let publicKey = try P256PublicKey(spki: spki)
        let (x, y) = try publicKey.coordinates()
        guard thumbprint(x: x, y: y) == kid else { throw MasterKeyError(description: "a replica's key \(kid) is not the key its id names") }
        return PublishedKey(kid: kid, alg: "ES256", publicKey: publicKey, jwk: JWK(x: Base64URL.encode(x), y: Base64URL.encode(y), kid: kid),
                            createdAt: createdAt, retiredAt: nil, publishedUntil: publishedUntil)
    }

    func keys(now: Date) -> [PublishedKey] {
        state.withLock { $0.published.filter { Self.isPublished($0, at: now) } }
    }

    private static func isPublished(_ key: PublishedKey, at now: Date) -> Bool {
        guard let until = key.publishedUntil else { return true }
        return Int64(now.timeIntervalSince1970) < until
    }

    struct Rotation: Sendable {
        let kid: String
        let previousKid: String?
        let previousPublishedUntil: Int64?
    }

    /// Makes a new current key. The old one stops signing now, its private half is destroyed,
    /// and its public half stays published for ``retiredKeyOverlapSeconds``. Keys whose
    /// publication ended are deleted.
    func rotate(now: Date) async throws -> Rotation {
        let generated = try Generated(sealer: sealer, now: now)
        let seconds = Int64(now.timeIntervalSince1970)
        let until = seconds + Self.retiredKeyOverlapSeconds
        let previous = try await store.transaction { database -> String? in
            let previous = try database.queryOne("SELECT kid FROM signing_keys WHERE retired_at IS NULL") { $0.text(0) }
            try database.execute(
                "UPDATE signing_keys SET retired_at = ?, published_until = ?, private_sealed = NULL WHERE retired_at IS NULL",
                [.integer(seconds), .integer(until)])
            try database.execute("DELETE FROM signing_keys WHERE published_until IS NOT NULL AND published_until <= ?", [.integer(seconds)])
            try generated.insert(into: database)
            try AuditScope.record(in: database, ["kid": .string(generated.kid), "previous_kid": previous.map { .string($0) } ?? .null])
            return previous
        }
        var reloaded = try await Self.load(store: store, sealer: sealer)
        state.withLock { state in
            reloaded.peers = state.peers
            state = reloaded
        }
        rotated.withLock { $0 }?.call(())
        return Rotation(kid: generated.kid, previousKid: previous, previousPublishedUntil: previous == nil ? nil : until)
    }
}

extension Store {
    func currentSigningKeyID() async throws -> String? {
        try await read { database in try database.queryOne("SELECT kid FROM signing_keys WHERE retired_at IS NULL") { $0.text(0) } }
    }
}
