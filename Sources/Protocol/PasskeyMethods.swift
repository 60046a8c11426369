// Passkeys: authd as a platform authenticator for local programs (`passkey.*`) and as
// a WebAuthn relying party for its own accounts (`auth.passkey.*`).
//
// The WebAuthn structures keep their W3C member names (camelCase, `PublicKeyCredential.toJSON()`
// and the `…OptionsJSON` dictionaries of WebAuthn Level 3 §5.1), so a browser's or a WebAuthn
// library's JSON passes through unchanged. Binary members are base64url without padding.

/// `PublicKeyRelyingPartyEntity`: `id` is the RP ID (a domain), `name` for people.
public struct PasskeyRPEntity: Codable, Sendable, Equatable {
    public var id: String?
    public var name: String
    public init(id: String?, name: String) {
        self.id = id
        self.name = name
    }
}

/// `PublicKeyCredentialUserEntityJSON`: `id` is the user handle (1–64 bytes, base64url).
public struct PasskeyUser: Codable, Sendable, Equatable {
    public var id: String
    public var name: String
    public var displayName: String
    public init(id: String, name: String, displayName: String) {
        self.id = id
        self.name = name
        self.displayName = displayName
    }
}

/// `PublicKeyCredentialParameters`.
public struct PasskeyAlgorithm: Codable, Sendable, Equatable {
    public var type: String
    public var alg: Int
    public init(type: String = "public-key", alg: Int) {
        self.type = type
        self.alg = alg
    }
}

/// `PublicKeyCredentialDescriptorJSON`.
public struct PasskeyDescriptor: Codable, Sendable, Equatable {
    public var type: String
    public var id: String
    public var transports: [String]?
    public init(type: String = "public-key", id: String, transports: [String]? = nil) {
        self.type = type
        self.id = id
        self.transports = transports
    }
}

/// `AuthenticatorSelectionCriteria`.
public struct PasskeySelection: Codable, Sendable, Equatable {
    public var authenticatorAttachment: String?
    public var residentKey: String?
    public var requireResidentKey: Bool?
    public var userVerification: String?
    public init(authenticatorAttachment: String? = nil, residentKey: String? = nil, requireResidentKey: Bool? = nil, userVerification: String? = nil) {
        self.authenticatorAttachment = authenticatorAttachment
        self.residentKey = residentKey
        self.requireResidentKey = requireResidentKey
        self.userVerification = userVerification
    }
}

/// `PublicKeyCredentialCreationOptionsJSON` (WebAuthn L3 §5.1.9).
public struct PasskeyCreationOptions: Codable, Sendable, Equatable {
    public var rp: PasskeyRPEntity
    public var user: PasskeyUser
    public var challenge: String
    public var pubKeyCredParams: [PasskeyAlgorithm]
    /// Milliseconds.
    public var timeout: Int?
    public var excludeCredentials: [PasskeyDescriptor]?
    public var authenticatorSelection: PasskeySelection?
    public var hints: [String]?
    public var attestation: String?
    public var extensions: [String: JSONValue]?

    public init(rp: PasskeyRPEntity, user: PasskeyUser, challenge: String, pubKeyCredParams: [PasskeyAlgorithm], timeout: Int? = nil,
                excludeCredentials: [PasskeyDescriptor]? = nil, authenticatorSelection: PasskeySelection? = nil, hints: [String]? = nil,
                attestation: String? = nil, extensions: [String: JSONValue]? = nil) {
        self.rp = rp
        self.user = user
        self.challenge = challenge
        self.pubKeyCredParams = pubKeyCredParams
        self.timeout = timeout
        self.excludeCredentials = excludeCredentials
        self.authenticatorSelection = authenticatorSelection
        self.hints = hints
        self.attestation = attestation
        self.extensions = extensions
    }
}

/// `PublicKeyCredentialRequestOptionsJSON` (WebAuthn L3 §5.1.10).
public struct PasskeyRequestOptions: Codable, Sendable, Equatable {
    public var challenge: String
    /// Milliseconds.
    public var timeout: Int?
    public var rpId: String?
    public var allowCredentials: [PasskeyDescriptor]?
    public var userVerification: String?
    public var hints: [String]?
    public var extensions: [String: JSONValue]?

    public init(challenge: String, timeout: Int? = nil, rpId: String? = nil, allowCredentials: [PasskeyDescriptor]? = nil,
                userVerification: String? = nil, hints: [String]? = nil, extensions: [String: JSONValue]? = nil) {
        self.challenge = challenge
        self.timeout = timeout
        self.rpId = rpId
        self.allowCredentials = allowCredentials
        self.userVerification = userVerification
        self.hints = hints
        self.extensions = extensions
    }
}

/// `AuthenticatorAttestationResponseJSON`.
public struct PasskeyAttestationResponse: Codable, Sendable, Equatable {
    public var clientDataJSON: String
    public var attestationObject: String
    public var authenticatorData: String?
    public var transports: [String]?
    /// DER SubjectPublicKeyInfo, a convenience copy of the key in `attestationObject`.
    public var publicKey: String?
    public var publicKeyAlgorithm: Int?
    public init(clientDataJSON: String, attestationObject: String, authenticatorData: String? = nil, transports: [String]? = nil,
                publicKey: String? = nil, publicKeyAlgorithm: Int? = nil) {
        self.clientDataJSON = clientDataJSON
        self.attestationObject = attestationObject
        self.authenticatorData = authenticatorData
        self.transports = transports
        self.publicKey = publicKey
        self.publicKeyAlgorithm = publicKeyAlgorithm
    }
}

/// `RegistrationResponseJSON` and `AuthenticationResponseJSON`: a `PublicKeyCredential` in its
/// toJSON() form, around the authenticator's response.
public struct PasskeyCredential<Response: Codable & Sendable & Equatable>: Codable, Sendable, Equatable {
    public var id: String
    public var rawId: String
    public var type: String
    public var authenticatorAttachment: String?
    public var clientExtensionResults: [String: JSONValue]
    public var response: Response
    public init(id: String, rawId: String, type: String = "public-key", authenticatorAttachment: String? = nil,
                clientExtensionResults: [String: JSONValue] = [:], response: Response) {
        self.id = id
        self.rawId = rawId
        self.type = type
        self.authenticatorAttachment = authenticatorAttachment
        self.clientExtensionResults = clientExtensionResults
        self.response = response
    }
}

/// What `passkey.create` returns and `auth.passkey.register.finish` takes.
public typealias PasskeyRegistration = PasskeyCredential<PasskeyAttestationResponse>

/// `AuthenticatorAssertionResponseJSON`; `signature` is ASN.1 DER (ES256).
public struct PasskeyAssertionResponse: Codable, Sendable, Equatable {
    public var clientDataJSON: String
    public var authenticatorData: String
    public var signature: String
    public var userHandle: String?
    public init(clientDataJSON: String, authenticatorData: String, signature: String, userHandle: String? = nil) {
        self.clientDataJSON = clientDataJSON
        self.authenticatorData = authenticatorData
        self.signature = signature
        self.userHandle = userHandle
    }
}

/// What `passkey.get` returns and `auth.passkey.login.finish` takes.
public typealias PasskeyAssertion = PasskeyCredential<PasskeyAssertionResponse>

private enum OriginKey: String, CodingKey { case origin, userVerification }

/// `passkey.create` — authd, as this machine's platform authenticator, makes a discoverable
/// ES256 passkey for the calling local user. Params are `origin` (the web origin the caller
/// speaks for) and the members of `PublicKeyCredentialCreationOptionsJSON` at the top level;
/// `userVerification` may also stand at the top level. `rp.id` must be the origin's host or a
/// parent of it that is not a public suffix (`passkey.bad_origin`). authd always verifies the
/// user (finger, or the PIN of the account signed in here) before it makes the key
/// (`passkey.uv_failed`). The answer is a `RegistrationResponseJSON` with attestation `none`.
public enum PasskeyCreate: RPCMethod {
    public static let name = "passkey.create"
    public struct Params: Codable, Sendable, Equatable {
        public var origin: String
        public var userVerification: String?
        public var options: PasskeyCreationOptions
        public init(origin: String, userVerification: String? = nil, options: PasskeyCreationOptions) {
            self.origin = origin
            self.userVerification = userVerification
            self.options = options
        }
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: OriginKey.self)
            origin = try container.decode(String.self, forKey: .origin)
            userVerification = try container.decodeIfPresent(String.self, forKey: .userVerification)
            options = try PasskeyCreationOptions(from: decoder)
        }
        public func encode(to encoder: any Encoder) throws {
            try options.encode(to: encoder)
            var container = encoder.container(keyedBy: OriginKey.self)
            try container.encode(origin, forKey: .origin)
            try container.encodeIfPresent(userVerification, forKey: .userVerification)
        }
    }
    public typealias Result = PasskeyRegistration
}

/// `passkey.get` — an assertion with one of the calling user's passkeys for `rpId` (default:
/// the origin's host), restricted to `allowCredentials` when given; the most recently used one
/// when several qualify. `passkey.none` when there is none. Params are `origin` and the members
/// of `PublicKeyCredentialRequestOptionsJSON`. The answer is an `AuthenticationResponseJSON`.
public enum PasskeyGet: RPCMethod {
    public static let name = "passkey.get"
    public struct Params: Codable, Sendable, Equatable {
        public var origin: String
        public var options: PasskeyRequestOptions
        public init(origin: String, options: PasskeyRequestOptions) {
            self.origin = origin
            self.options = options
        }
        public init(from decoder: any Decoder) throws {
            origin = try decoder.container(keyedBy: OriginKey.self).decode(String.self, forKey: .origin)
            options = try PasskeyRequestOptions(from: decoder)
        }
        public func encode(to encoder: any Encoder) throws {
            try options.encode(to: encoder)
            var container = encoder.container(keyedBy: OriginKey.self)
            try container.encode(origin, forKey: .origin)
        }
    }
    public typealias Result = PasskeyAssertion
}

/// One passkey authd holds for the calling user.
public struct PasskeyInfo: Codable, Sendable, Equatable {
    /// The credential id (base64url).
    public var id: String
    public var rpId: String
    public var rpName: String
    public var userName: String
    public var displayName: String
    /// The user handle (base64url).
    public var userHandle: String
    public var signCount: Int
    /// RFC 3339.
    public var createdAt: String
    public var lastUsedAt: String?

    public init(id: String, rpId: String, rpName: String, userName: String, displayName: String, userHandle: String, signCount: Int,
                createdAt: String, lastUsedAt: String?) {
        self.id = id
        self.rpId = rpId
        self.rpName = rpName
        self.userName = userName
        self.displayName = displayName
        self.userHandle = userHandle
        self.signCount = signCount
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
    }

    enum CodingKeys: String, CodingKey {
        case id
        case rpId = "rp_id", rpName = "rp_name", userName = "user_name", displayName = "display_name", userHandle = "user_handle",
             signCount = "sign_count", createdAt = "created_at", lastUsedAt = "last_used_at"
    }
}

/// `passkey.list` — the calling user's passkeys, newest first; only those for `rp_id` when given.
public enum PasskeyList: RPCMethod {
    public static let name = "passkey.list"
    public struct Params: Codable, Sendable, Equatable {
        public var rpId: String?
        public init(rpId: String? = nil) { self.rpId = rpId }
        enum CodingKeys: String, CodingKey { case rpId = "rp_id" }
    }
    public struct Result: Codable, Sendable, Equatable {
        public var passkeys: [PasskeyInfo]
        public init(passkeys: [PasskeyInfo]) { self.passkeys = passkeys }
    }
}

/// `passkey.delete` — deletes one of the calling user's passkeys and its private key for good
/// (`passkey.none` when the user has no passkey with that id).
public enum PasskeyDelete: RPCMethod {
    public static let name = "passkey.delete"
    public struct Params: Codable, Sendable, Equatable {
        public var id: String
        public init(id: String) { self.id = id }
    }
    public struct Result: Codable, Sendable, Equatable {
        public var id: String
        public var deleted: Bool
        public init(id: String, deleted: Bool) {
            self.id = id
            self.deleted = deleted
        }
    }
}

/// `auth.passkey.register.begin` — starts adding a passkey to the signed-in account: creation
/// options for any WebAuthn client (authd's own `passkey.create`, a browser), valid for
/// `[passkeys] timeout`. `origin` is the first of `[passkeys] origins`, the one a local client
/// claims.
public enum AuthPasskeyRegisterBegin: RPCMethod {
    public static let name = "auth.passkey.register.begin"
    public struct Params: Codable, Sendable, Equatable {
        public var session: String
        public init(session: String) { self.session = session }
    }
    public struct Result: Codable, Sendable, Equatable {
        public var flow: String
        public var origin: String
        public var options: PasskeyCreationOptions
        public init(flow: String, origin: String, options: PasskeyCreationOptions) {
            self.flow = flow
            self.origin = origin
            self.options = options
        }
    }
}

/// `auth.passkey.register.finish` — verifies the new credential (WebAuthn L3 §7.1) and adds it
/// to the account. The flow is used up by this call whatever its outcome.
public enum AuthPasskeyRegisterFinish: RPCMethod {
    public static let name = "auth.passkey.register.finish"
    public struct Params: Codable, Sendable, Equatable {
        public var session: String
        public var flow: String
        public var credential: PasskeyRegistration
        public init(session: String, flow: String, credential: PasskeyRegistration) {
            self.session = session
            self.flow = flow
            self.credential = credential
        }
    }
    public struct Result: Codable, Sendable, Equatable {
        /// The credential id (base64url).
        public var id: String
        public var createdAt: String
        public init(id: String, createdAt: String) {
            self.id = id
            self.createdAt = createdAt
        }
        enum CodingKeys: String, CodingKey { case id, createdAt = "created_at" }
    }
}

/// `auth.passkey.login.begin` — starts a passkey sign-in. Without `login` any passkey of an
/// authd account will do (the user handle names the account); with `login` (phone or email)
/// only that account's passkeys are allowed.
public enum AuthPasskeyLoginBegin: RPCMethod {
    public static let name = "auth.passkey.login.begin"
    public struct Params: Codable, Sendable, Equatable {
        public var login: String?
        public var region: String?
        public init(login: String? = nil, region: String? = nil) {
            self.login = login
            self.region = region
        }
    }
    public struct Result: Codable, Sendable, Equatable {
        public var flow: String
        public var origin: String
        public var options: PasskeyRequestOptions
        public init(flow: String, origin: String, options: PasskeyRequestOptions) {
            self.flow = flow
            self.origin = origin
            self.options = options
        }
    }
}

/// `auth.passkey.login.finish` — verifies the assertion (WebAuthn L3 §7.2) and creates a
/// session (`amr` `["pop", "mfa"]`). The flow is used up by this call whatever its outcome.
public enum AuthPasskeyLoginFinish: RPCMethod {
    public static let name = "auth.passkey.login.finish"
    public struct Params: Codable, Sendable, Equatable {
        public var flow: String
        public var credential: PasskeyAssertion
        public var device: DeviceDescription?
        public init(flow: String, credential: PasskeyAssertion, device: DeviceDescription? = nil) {
            self.flow = flow
            self.credential = credential
            self.device = device
        }
    }
    public typealias Result = SignedIn
}

/// `auth.passkey.list` — the passkeys registered to the signed-in account.
public enum AuthPasskeyList: RPCMethod {
    public static let name = "auth.passkey.list"
    public struct Params: Codable, Sendable, Equatable {
        public var session: String
        public init(session: String) { self.session = session }
    }
    public struct Result: Codable, Sendable, Equatable {
        public var passkeys: [AccountPasskey]
        public init(passkeys: [AccountPasskey]) { self.passkeys = passkeys }
    }
}

/// `auth.passkey.remove` — removes a passkey from the signed-in account; it can no longer sign in.
public enum AuthPasskeyRemove: RPCMethod {
    public static let name = "auth.passkey.remove"
    public struct Params: Codable, Sendable, Equatable {
        public var session: String
        public var id: String
        public init(session: String, id: String) {
            self.session = session
            self.id = id
        }
    }
    public typealias Result = PasskeyDelete.Result
}

/// A passkey registered to an authd account.
public struct AccountPasskey: Codable, Sendable, Equatable {
    public var id: String
    public var signCount: Int
    public var backupEligible: Bool
    public var backupState: Bool
    public var createdAt: String
    public var lastUsedAt: String?
    public init(id: String, signCount: Int, backupEligible: Bool, backupState: Bool, createdAt: String, lastUsedAt: String?) {
        self.id = id
        self.signCount = signCount
        self.backupEligible = backupEligible
        self.backupState = backupState
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
    }
    enum CodingKeys: String, CodingKey {
        case id
        case signCount = "sign_count", backupEligible = "backup_eligible", backupState = "backup_state", createdAt = "created_at",
             lastUsedAt = "last_used_at"
    }
}
