import FoundationEssentials
import Protocol

/// Who may call a method.
enum Access: Sendable {
    /// Any connected peer (in user mode only the owning user can connect at all).
    case anyone
    /// Root or the admin group (system mode); the owning user (user mode).
    case admin
}

/// Where a method is served (DESIGN §8). `machine` methods act on what this machine owns (its
/// keys, card, fingerprints, lock, vault, platform authenticator) and always run on the authd
/// that received them; `account` methods act on what the account owns and run where the account
/// lives: this authd when it is standalone or the hub, the hub for a device.
enum Home: String, Sendable {
    case machine, account
}

/// A result that signs an account in on some device: the session's account and device.
protocol SignInResult {
    var signedInAccount: (account: String, device: String)? { get }
}

extension SignedIn: SignInResult {
    var signedInAccount: (account: String, device: String)? { (account.id, session.deviceID) }
}

extension LoginStep: SignInResult {
    /// Only a sign-in that completed (no second step pending).
    var signedInAccount: (account: String, device: String)? {
        guard let account, let session else { return nil }
        return (account.id, session.deviceID)
    }
}

/// Every method the daemon serves, by wire name: where it is served, who may call it, typed
/// decoding of params, auditing, the lock, and the handler. Built once in `DispatchTable.swift`,
/// read-only afterwards.
struct MethodTable: Sendable {
    struct Entry: Sendable {
        let home: Home
        let access: Access
        let audited: Bool
        /// Issues a token or releases a secret: refused with `session.locked` while the
        /// caller's local user is locked (see `LocalLock`).
        let requiresUnlock: Bool
        /// A successful call signs an account in for the caller's local user: the dispatcher
        /// has the lock remember it, with what the sign-in proved.
        let remembers: LocalLock.Proof?
        let invoke: @Sendable (Request, RequestContext) async throws -> Invocation
    }

    /// A handler's result, encoded, and the non-secret facts the audit log records about it.
    struct Invocation: Sendable {
        let result: any Encodable & Sendable
        let auditDetail: [String: JSONValue]
        /// The account and device the call signed in, for `remembers`.
        let signedIn: (account: String, device: String)?
    }

    private(set) var entries: [String: Entry] = [:]
    /// What `hello` announces: the capabilities the registered methods make up, named by the
    /// code that registers them.
    private(set) var features: [String] = []

    /// Registers `M`. `audit`, when given, makes every call (granted, denied or failed) an audit
    /// record whose detail it computes from the params and, on success, the result.
    /// `requiresUnlock` marks methods that issue a token or release a secret; `remembers`,
    /// methods whose success is a sign-in the lock remembers.
    mutating func register<M: RPCMethod>(
        _: M.Type, home: Home, access: Access, requiresUnlock: Bool = false, remembers: LocalLock.Proof? = nil,
        audit: (@Sendable (M.Params, M.Result) -> [String: JSONValue])? = nil,
        _ handler: @escaping @Sendable (M.Params, RequestContext) async throws -> M.Result
    ) {
        precondition(entries[M.name] == nil, "\(M.name) registered twice")
        entries[M.name] = Entry(home: home, access: access, audited: audit != nil, requiresUnlock: requiresUnlock, remembers: remembers) { request, context in
            let params = try WireCodec.decodeParams(M.Params.self, from: request)
            let result = try await handler(params, context)
            return Invocation(result: result, auditDetail: audit?(params, result) ?? [:], signedIn: (result as? any SignInResult)?.signedInAccount)
        }
    }

    /// Announces capabilities in `hello` (`features`), in registration order.
    mutating func announce(_ names: String...) {
        for name in names where !features.contains(name) { features.append(name) }
    }
}
