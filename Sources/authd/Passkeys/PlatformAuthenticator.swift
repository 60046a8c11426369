import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// authd as this machine's platform authenticator (`passkey.*`): discoverable ES256 passkeys
/// per local user, private keys sealed in the store, attestation "none", a signature counter
/// per passkey, and user verification before every key is made or used.
struct PlatformAuthenticator: Sendable {
    let store: Store
    let sealer: Sealer
    let verification: PasskeyUserVerification
    let now: @Sendable () -> Date

    /// authd's passkeys are device-bound: no backup, so BE = BS = 0 forever (§6.1.3).
    static let aaguid = [UInt8](repeating: 0, count: 16)
    static let credentialIDLength = 32

    private var seconds: Int64 { Int64(now().timeIntervalSince1970) }

    private static func sealIdentity(_ credentialID: [UInt8]) -> String { "passkey:" + Base64URL.encode(credentialID) }

    static func binary(_ text: String, field: String, bytes range: ClosedRange<Int>) throws(InvalidParameter) -> [UInt8] {
        guard text.utf8.count <= 4 * range.upperBound, let bytes = Base64URL.decode(text), range.contains(bytes.count) else {
            throw InvalidParameter("Parameter '\(field)' must be base64url of \(range.lowerBound)–\(range.upperBound) bytes.", field: field)
        }
        return bytes
    }

    static func label(_ text: String, field: String) throws(InvalidParameter) -> String {
        guard (1...256).contains(text.count), !text.containsControlCharacter else {
            throw InvalidParameter("Parameter '\(field)' must be 1–256 printable characters.", field: field)
        }
        return text
    }

    /// The ids of a descriptor list, ignoring descriptors of another type (§5.1.3 step 3).
    static func descriptorIDs(_ descriptors: [PasskeyDescriptor]?, field: String) throws(InvalidParameter) -> [[UInt8]] {
        guard let descriptors else { return [] }
        guard descriptors.count <= 64 else { throw InvalidParameter("Parameter '\(field)' may list at most 64 credentials.", field: field) }
        var ids: [[UInt8]] = []
        for descriptor in descriptors where descriptor.type == "public-key" {
            ids.append(try binary(descriptor.id, field: field, bytes: 1...AuthenticatorData.maxCredentialIDLength))
        }
        return ids
    }

    private static func who(_ context: RequestContext) -> String {
        context.caller.exe.map { " (asked by \(Redaction.printable($0, limit: 128)))" } ?? ""
    }

    // MARK: passkey.create

    func create(_ params: PasskeyCreate.Params, context: RequestContext) async throws -> PasskeyRegistration {
        let options = params.options
        let (origin, rpID) = try PasskeyScope.rpID(options.rp.id, for: params.origin)
        let rpName = try Self.label(options.rp.name, field: "rp.name")
        let userHandle = try Self.binary(options.user.id, field: "user.id", bytes: 1...64)
        let userName = try Self.label(options.user.name, field: "user.name")
        let displayName = options.user.displayName.isEmpty ? userName : try Self.label(options.user.displayName, field: "user.displayName")
        let challenge = try Self.binary(options.challenge, field: "challenge", bytes: 16...1024)
        // An empty list means "ES256 or RS256" (§5.4 pubKeyCredParams).
        guard options.pubKeyCredParams.isEmpty
                || options.pubKeyCredParams.contains(where: { $0.type == "public-key" && Int64($0.alg) == ES256PublicKey.algorithm }) else {
            throw PasskeyFailure.unsupportedAlgorithm
        }
        let excluded = try Self.descriptorIDs(options.excludeCredentials, field: "excludeCredentials")
        let uid = Int64(context.caller.uid)
        if !excluded.isEmpty {
            let held = try await store.read { database in
                try excluded.contains { id in
                    try database.queryOne("SELECT 1 FROM passkey_keys WHERE credential_id = ? AND uid = ? AND rp_id = ?",
                                          [.blob(id), .integer(uid), .text(rpID)]) { _ in true } ?? false
                }
            }
            if held { throw PasskeyFailure.excludedHeld(rpID: rpID) }
        }

        _ = try await verification.verify(purpose: "to create a passkey for \(rpID) as \(userName)\(Self.who(context))",
                                          timeoutMilliseconds: options.timeout, context: context)

        let key = try P256PrivateKey.generate()
        let spki = try key.publicKey().spki
        // i2d_PUBKEY of a P-256 key: a 27-byte header, then the uncompressed point 04 ‖ x ‖ y.
        guard spki.count == 91, spki[26] == 0x04 else { throw CryptoError(operation: "passkey key", detail: "unexpected public key encoding") }
        let publicKey = try ES256PublicKey(x: Array(spki[27..<59]), y: Array(spki[59..<91]))
        let credentialID = try OpenSSL.randomBytes(Self.credentialIDLength)
        let authenticatorData = try AuthenticatorData.make(
            rpID: rpID, flags: AuthenticatorData.Flag.userPresent | AuthenticatorData.Flag.userVerified, signCount: 0,
            attested: .init(aaguid: Self.aaguid, credentialID: credentialID, publicKey: publicKey))
        let attestationObject = try CBOR.encode(.map([(.text("fmt"), .text("none")), (.text("attStmt"), .map([])),
                                                      (.text("authData"), .bytes(authenticatorData))]))
        let clientData = CollectedClientData.serialize(type: "webauthn.create", challenge: challenge, origin: origin.serialized)
        let sealed = try sealer.seal(try key.derRepresentation(), purpose: .passkeyKey, identity: Self.sealIdentity(credentialID))
        let now = seconds
        try await store.transaction { database in
            // One passkey per RP and user handle: the new one replaces the old (CTAP 2.1 §6.1.2 step 20).
            try database.execute("DELETE FROM passkey_keys WHERE uid = ? AND rp_id = ? AND user_handle = ?", [.integer(uid), .text(rpID), .blob(userHandle)])
            try database.execute(
                """
                INSERT INTO passkey_keys (credential_id, uid, rp_id, rp_name, user_handle, user_name, display_name, private_sealed, sign_count, created_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?)
                """,
                [.blob(credentialID), .integer(uid), .text(rpID), .text(rpName), .blob(userHandle), .text(userName), .text(displayName), .blob(sealed), .integer(now)])
            try AuditScope.record(in: database, ["origin": .string(origin.serialized), "rp_id": .string(rpID), "credential": .string(Base64URL.encode(credentialID))])
        }
        var extensions: [String: JSONValue] = [:]
        if options.extensions?["credProps"] == .bool(true) { extensions["credProps"] = .object(["rk": .bool(true)]) }
        return PasskeyRegistration(
            id: Base64URL.encode(credentialID), rawId: Base64URL.encode(credentialID), authenticatorAttachment: "platform",
            clientExtensionResults: extensions,
            response: .init(clientDataJSON: Base64URL.encode(clientData), attestationObject: Base64URL.encode(attestationObject),
                            authenticatorData: Base64URL.encode(authenticatorData), transports: ["internal"],
                            publicKey: Base64URL.encode(publicKey.subjectPublicKeyInfo), publicKeyAlgorithm: Int(ES256PublicKey.algorithm)))
    }

    // MARK: passkey.get

    private struct Held: Sendable {
        let credentialID: [UInt8]
        let userHandle: [UInt8]
        let userName: String
    }

    func get(_ params: PasskeyGet.Params, context: RequestContext) async throws -> PasskeyAssertion {
        let options = params.options
        let (origin, rpID) = try PasskeyScope.rpID(options.rpId, for: params.origin)
        let challenge = try Self.binary(options.challenge, field: "challenge", bytes: 16...1024)
        let allowed = try Self.descriptorIDs(options.allowCredentials, field: "allowCredentials")
        let uid = Int64(context.caller.uid)
        let candidates = try await store.read { database in
            try database.query(
                "SELECT credential_id, user_handle, user_name FROM passkey_keys WHERE uid = ? AND rp_id = ? ORDER BY coalesce(last_used_at, created_at) DESC, created_at DESC",
                [.integer(uid), .text(rpID)]) { Held(credentialID: $0.blob(0), userHandle: $0.blob(1), userName: $0.text(2)) }
        }
        // An allow list that names none of ours is "no passkey here" even if we hold others.
        guard let held = candidates.first(where: { allowed.isEmpty || allowed.contains($0.credentialID) }) else {
            throw PasskeyFailure.noneForRP(rpID: rpID, allowListGiven: !allowed.isEmpty)
        }

        _ = try await verification.verify(purpose: "to sign in to \(rpID) as \(held.userName)\(Self.who(context))",
                                          timeoutMilliseconds: options.timeout, context: context)

        let clientData = CollectedClientData.serialize(type: "webauthn.get", challenge: challenge, origin: origin.serialized)
        let now = seconds
        let sealer = sealer
        // The counter moves and the signature is made in one transaction: a signature is never
        // handed out under a counter value the store does not hold.
        let (authenticatorData, signature) = try await store.transaction { database -> ([UInt8], [UInt8]) in
            guard let row = try database.queryOne("SELECT private_sealed, sign_count FROM passkey_keys WHERE credential_id = ? AND uid = ?",
                                                   [.blob(held.credentialID), .integer(uid)], row: { ($0.blob(0), $0.int64(1)) })
            else { throw PasskeyFailure.deletedMeanwhile }
            let (sealed, count) = row
            guard let der = try sealer.open(sealed, purpose: .passkeyKey, identity: Self.sealIdentity(held.credentialID)) else {
                throw CryptoError(operation: "open passkey key", detail: "the sealed key does not open")
            }
            let next = UInt32(clamping: count + 1)
            try database.execute("UPDATE passkey_keys SET sign_count = ?, last_used_at = ? WHERE credential_id = ?",
                                 [.integer(Int64(next)), .integer(now), .blob(held.credentialID)])
            let data = try AuthenticatorData.make(rpID: rpID, flags: AuthenticatorData.Flag.userPresent | AuthenticatorData.Flag.userVerified,
                                                  signCount: next, attested: nil)
            let raw = try P256PrivateKey(der: der).signES256(data + OpenSSL.sha256(clientData))
            return (data, try ECDSASignature.derFromRaw(raw))
        }
        return PasskeyAssertion(
            id: Base64URL.encode(held.credentialID), rawId: Base64URL.encode(held.credentialID), authenticatorAttachment: "platform",
            response: .init(clientDataJSON: Base64URL.encode(clientData), authenticatorData: Base64URL.encode(authenticatorData),
                            signature: Base64URL.encode(signature), userHandle: Base64URL.encode(held.userHandle)))
    }

    // MARK: passkey.list, passkey.delete

    func list(_ params: PasskeyList.Params, uid: UInt32) async throws -> PasskeyList.Result {
        var sql = "SELECT credential_id, rp_id, rp_name, user_name, display_name, user_handle, sign_count, created_at, last_used_at FROM passkey_keys WHERE uid = ?"
        var values: [SQLValue] = [.integer(Int64(uid))]
        if let rpID = params.rpId {
            sql += " AND rp_id = ?"
            values.append(.text(rpID))
        }
        let passkeys = try await store.read { database in
            try database.query(sql + " ORDER BY created_at DESC, rowid DESC", values) {
                PasskeyInfo(id: Base64URL.encode($0.blob(0)), rpId: $0.text(1), rpName: $0.text(2), userName: $0.text(3), displayName: $0.text(4),
                            userHandle: Base64URL.encode($0.blob(5)), signCount: $0.int(6), createdAt: Timestamp.rfc3339(epochSeconds: $0.int64(7)),
                            lastUsedAt: $0.optionalInt64(8).map { Timestamp.rfc3339(epochSeconds: $0) })
            }
        }
        return .init(passkeys: passkeys)
    }

    func delete(_ params: PasskeyDelete.Params, uid: UInt32) async throws -> PasskeyDelete.Result {
        let id = try Self.binary(params.id, field: "id", bytes: 1...AuthenticatorData.maxCredentialIDLength)
        let deleted = try await store.transaction { database in
            try database.execute("DELETE FROM passkey_keys WHERE credential_id = ? AND uid = ?", [.blob(id), .integer(Int64(uid))])
            guard database.changes == 1 else { return false }
            try AuditScope.record(in: database, ["credential": .string(params.id)])
            return true
        }
        guard deleted else { throw PasskeyFailure.noSuchPasskey }
        return .init(id: params.id, deleted: true)
    }
}
