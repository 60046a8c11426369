import FoundationEssentials
import Protocol

/// Who may call a method.
enum Access: Sendable {
    /// Any connected peer (in user mode only the owning user can connect at all).
    case anyone
    /// Root or the admin group (system mode); the owning user (user mode).
    case admin
}

/// Every method the daemon serves, by wire name: typed decoding of params, authorization,
/// auditing, and the handler. Built once in `DispatchTable.swift`, read-only afterwards.
struct MethodTable: Sendable {
    struct Entry: Sendable {
        let access: Access
        let audited: Bool
        /// Issues a token or releases a secret: refused with `session.locked` while the
        /// caller's local user is locked (see `LocalLock`).
        let requiresUnlock: Bool
        let invoke: @Sendable (Request, RequestContext) async throws -> Invocation
    }

    /// A handler's result, encoded, and the non-secret facts the audit log records about it.
    struct Invocation: Sendable {
        let result: any Encodable & Sendable
        let auditDetail: [String: JSONValue]
    }

    private(set) var entries: [String: Entry] = [:]

    /// Registers `M`. `audit`, when given, makes every call (granted, denied or failed) an audit
    /// record whose detail it computes from the params and, on success, the result.
    /// `requiresUnlock` marks methods that issue a token or release a secret.
    mutating func register<M: RPCMethod>(
        _: M.Type, access: Access, requiresUnlock: Bool = false,
        audit: (@Sendable (M.Params, M.Result) -> [String: JSONValue])? = nil,
        _ handler: @escaping @Sendable (M.Params, RequestContext) async throws -> M.Result
    ) {
        precondition(entries[M.name] == nil, "\(M.name) registered twice")
        entries[M.name] = Entry(access: access, audited: audit != nil, requiresUnlock: requiresUnlock) { request, context in
            let params = try WireCodec.decodeParams(M.Params.self, from: request)
            let result = try await handler(params, context)
            return Invocation(result: result, auditDetail: audit?(params, result) ?? [:])
        }
    }
}
