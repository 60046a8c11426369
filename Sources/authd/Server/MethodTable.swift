import FoundationEssentials
import Protocol
import Synchronization

/// Who may call a method.
enum Access: Sendable {
    /// Any connected peer (in user mode only the owning user can connect at all).
    case anyone
    /// Root or the admin group (system mode); the owning user (user mode).
    case admin
    /// Root alone: methods that act for any Unix user on the word of the program asking, as
    /// pam_authd inside `sudo` or `login` does (a non-root program could name any user).
    case root
}

/// Where a method is served (DESIGN §8), and so what its handler knows about the request.
/// `machine` methods act on what this machine owns (its keys, card, fingerprints, lock, vault,
/// platform authenticator) and always run on the authd that received them, for a local process
/// (`RequestContext`). `account` methods act on what the account owns and run where the account
/// lives — this authd when it is standalone or the hub, the hub for a device — for any caller
/// (`AccountContext`): they take their secrets as params and never prompt.
struct Home<Context: Sendable>: Sendable {
    let kind: MethodHome
    /// The handler's context, or nil when this caller cannot call such a method here (another
    /// machine asking for this machine's card, say).
    let context: @Sendable (RequestEnvironment) -> Context?
}

/// `machine` or `account`, as an entry of the method table records it.
enum MethodHome: String, Sendable {
    case machine, account
}

extension Home where Context == RequestContext {
    static var machine: Home {
        Home(kind: .machine) { environment in
            guard case .local(let peer) = environment.caller else { return nil }
            return RequestContext(caller: peer, prompts: RequestPrompts(connection: environment.prompts, desktop: environment.desktop),
                                  streams: environment.streams)
        }
    }
}

extension Home where Context == DeviceID {
    /// Methods of the hub link itself (`link.ping`): only another machine calls them.
    static var link: Home {
        Home(kind: .machine) { environment in
            guard case .device(let id) = environment.caller else { return nil }
            return id
        }
    }
}

extension Home where Context == AccountContext {
    static var account: Home {
        Home(kind: .account) { AccountContext(caller: $0.caller) }
    }
}

/// A result that signs an account in on some device: the session's account and device.
protocol SignInResult {
    var signedInAccount: (account: String, device: String)? { get }
}

extension SignedIn: SignInResult {
    var signedInAccount: (account: String, device: String)? { (account.id, session.deviceID) }
}

extension FederationLogin.Result: SignInResult {
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
        let home: MethodHome
        let access: Access
        let audited: Bool
        /// Issues a token or releases a secret: refused with `session.locked` while the
        /// caller's local user is locked (see `LocalLock`).
        let requiresUnlock: Bool
        /// Waits for a person (a card's window, a PIN) and hands out what it got, changing
        /// nothing: the lock is checked again before it answers, and one that came meanwhile
        /// refuses the answer.
        let rechecksUnlock: Bool
        /// A successful call signs an account in for the caller's local user: the dispatcher
        /// has the lock remember it, with what the sign-in proved. Nil for a method that signs
        /// nothing in, or whose sign-in the lock does not remember (`federation.login`).
        let remembers: LocalLock.Proof?
        /// The account and device a result in its wire form signed in (nil for none): how a
        /// device reads a sign-in its hub answered, to run what follows a sign-in for it. Nil
        /// for a method that signs nothing in: its answers are passed on unread.
        let signedInFromWire: (@Sendable (RawJSON) -> (account: String, device: String)?)?
        /// On a device: what this machine adds to the caller of an account call it forwards
        /// (a machine fact the hub's handler needs); nil for nothing.
        let forwarding: (@Sendable (ForwardedCaller) async throws -> ForwardedCaller)?
        /// What the audit record of every outcome says about the request (granted, refused or
        /// failed alike), from its params; empty when they do not decode.
        let requestDetail: @Sendable (Request) -> [String: JSONValue]
        /// For a method whose params may say `prompt: desktop` (`AsksThePerson`): what a request
        /// that says so is for; nil for one that does not (or params that do not decode).
        let asksOnDesktop: (@Sendable (Request) -> DeskPurpose?)?
        let invoke: @Sendable (Request, RequestEnvironment) async throws -> Invocation
        /// The same handler, run without suspending, for a method whose handler never waits
        /// (see `registerImmediate`); nil for every other method.
        let immediate: (@Sendable (Request, RequestEnvironment) throws -> Invocation)?
    }

    /// A handler's result, encoded, and the non-secret facts the audit log records about it.
    struct Invocation: Sendable {
        let result: any Encodable & Sendable
        let auditDetail: [String: JSONValue]
        /// The account and device the call signed in, for what follows a sign-in (`Dispatcher`).
        let signedIn: (account: String, device: String)?
    }

    private(set) var entries: [String: Entry] = [:]
    /// What `hello` announces: the capabilities the registered methods make up, named by the
    /// code that registers them.
    private(set) var features: [String] = []

    /// Registers `M`. `audit`, when given, makes every call (granted, denied or failed) an audit
    /// record whose detail it computes from the params and, on success, the result.
    /// `requiresUnlock` marks methods that issue a token or release a secret; `rechecksUnlock`
    /// those of them that wait for a person and change nothing (see `Entry.rechecksUnlock`).
    /// `auditRequest`, when given, adds what the params say to every record of the call,
    /// refusals and failures included (the PAM service, tty and remote host of a decision).
    mutating func register<M: RPCMethod, Context>(
        _: M.Type, home: Home<Context>, access: Access, requiresUnlock: Bool = false, rechecksUnlock: Bool = false,
        audit: (@Sendable (M.Params, M.Result) -> [String: JSONValue])? = nil,
        auditRequest: (@Sendable (M.Params) -> [String: JSONValue])? = nil,
        _ handler: @escaping @Sendable (M.Params, Context) async throws -> M.Result
    ) {
        precondition(requiresUnlock || !rechecksUnlock, "\(M.name): rechecksUnlock without requiresUnlock")
        add(M.self, home: home, access: access, requiresUnlock: requiresUnlock, rechecksUnlock: rechecksUnlock, remembers: nil, signedIn: nil, audit: audit,
            auditRequest: auditRequest, forwarding: nil, immediate: nil, handler)
    }

    /// Registers `M`, served by `service`: a capability over the account data this machine is
    /// the home of (`Services.accountHome`), which a device does not have. There the entry is
    /// still made, with its flags, because a device forwards an account method whole to its hub
    /// before any handler runs (`Dispatcher`); were one ever run there, it answers
    /// `hub.not_on_device`.
    mutating func register<M: RPCMethod, Context, Service: Sendable>(
        _: M.Type, home: Home<Context>, by service: Service?, access: Access, requiresUnlock: Bool = false,
        audit: (@Sendable (M.Params, M.Result) -> [String: JSONValue])? = nil,
        _ handler: @escaping @Sendable (Service, M.Params, Context) async throws -> M.Result
    ) {
        // The name, not the metatype, goes into the closure: a metatype is not Sendable.
        let name = M.name
        register(M.self, home: home, access: access, requiresUnlock: requiresUnlock, audit: audit) { params, context in
            try await handler(try Self.served(service, name), params, context)
        }
    }

    /// `register(_:home:by:…)` for a method whose success signs an account in (see `remembers`).
    mutating func register<M: RPCMethod, Context, Service: Sendable>(
        _: M.Type, home: Home<Context>, by service: Service?, access: Access, remembers: LocalLock.Proof,
        audit: (@Sendable (M.Params, M.Result) -> [String: JSONValue])? = nil,
        forwarding: (@Sendable (ForwardedCaller) async throws -> ForwardedCaller)? = nil,
        _ handler: @escaping @Sendable (Service, M.Params, Context) async throws -> M.Result
    ) where M.Result: SignInResult {
        let name = M.name
        register(M.self, home: home, access: access, remembers: remembers, audit: audit, forwarding: forwarding) { params, context in
            try await handler(try Self.served(service, name), params, context)
        }
    }

    private static func served<Service>(_ service: Service?, _ method: String) throws -> Service {
        guard let service else { throw MachineAccessFailure.notOnDevice(operation: "serve \(method) itself") }
        return service
    }

    /// Registers `M`, a machine method whose handler never waits, changes nothing and is not
    /// audited (`hello`): the connection answers it at once on its event loop, without a task
    /// or a thread hop (`Dispatcher.respondNow`).
    mutating func registerImmediate<M: RPCMethod>(
        _: M.Type, home: Home<RequestContext>, access: Access, _ handler: @escaping @Sendable (M.Params, RequestContext) throws -> M.Result
    ) {
        add(M.self, home: home, access: access, requiresUnlock: false, rechecksUnlock: false, remembers: nil, signedIn: nil, audit: nil,
            auditRequest: nil, forwarding: nil, immediate: handler) { params, context in try handler(params, context) }
    }

    /// Registers `M`, whose success signs an account in that the caller's local user remembers
    /// (the lock is opened by what `remembers` proved; nil: a sign-in the lock does not remember).
    /// `forwarding`: see `Entry.forwarding`.
    mutating func register<M: RPCMethod, Context>(
        _: M.Type, home: Home<Context>, access: Access, requiresUnlock: Bool = false, remembers: LocalLock.Proof?,
        audit: (@Sendable (M.Params, M.Result) -> [String: JSONValue])? = nil,
        forwarding: (@Sendable (ForwardedCaller) async throws -> ForwardedCaller)? = nil,
        _ handler: @escaping @Sendable (M.Params, Context) async throws -> M.Result
    ) where M.Result: SignInResult {
        add(M.self, home: home, access: access, requiresUnlock: requiresUnlock, rechecksUnlock: false, remembers: remembers, signedIn: \.signedInAccount, audit: audit,
            auditRequest: nil, forwarding: forwarding, immediate: nil, handler)
    }

    private mutating func add<M: RPCMethod, Context>(
        _: M.Type, home: Home<Context>, access: Access, requiresUnlock: Bool, rechecksUnlock: Bool, remembers: LocalLock.Proof?,
        signedIn: (@Sendable (M.Result) -> (account: String, device: String)?)?,
        audit: (@Sendable (M.Params, M.Result) -> [String: JSONValue])?,
        auditRequest: (@Sendable (M.Params) -> [String: JSONValue])?,
        forwarding: (@Sendable (ForwardedCaller) async throws -> ForwardedCaller)?,
        immediate: (@Sendable (M.Params, Context) throws -> M.Result)?,
        _ handler: @escaping @Sendable (M.Params, Context) async throws -> M.Result
    ) {
        let name = M.name
        precondition(entries[name] == nil, "\(name) registered twice")
        let requestDetail: @Sendable (Request) -> [String: JSONValue] = { request in
            guard let auditRequest, let params = try? WireCodec.decodeParams(M.Params.self, from: request) else { return [:] }
            return auditRequest(params)
        }
        var asksOnDesktop: (@Sendable (Request) -> DeskPurpose?)?
        if M.Params.self is any AsksThePerson.Type {
            asksOnDesktop = { request in
                guard let decoded = try? WireCodec.decodeParams(M.Params.self, from: request), let params = decoded as? any AsksThePerson,
                      params.prompt == .desktop else { return nil }
                return params.purpose
            }
        }
        let signedInFromWire = signedIn.map { signedIn in
            { @Sendable (value: RawJSON) in (try? value.decode(M.Result.self)).flatMap(signedIn) }
        }
        let invocation: @Sendable (M.Params, M.Result) -> Invocation = { params, result in
            // What the result says wins over what the request said. When only one of them says
            // anything (most methods record one), that is the detail as it is.
            let (fromRequest, fromResult) = (auditRequest?(params) ?? [:], audit?(params, result) ?? [:])
            let detail = fromRequest.isEmpty ? fromResult
                : fromResult.isEmpty ? fromRequest : fromRequest.merging(fromResult) { _, resultSays in resultSays }
            return Invocation(result: result, auditDetail: detail, signedIn: signedIn?(result))
        }
        // What both ways of running the handler start with: the caller's context, the typed params.
        let noParams = ParamsOfEmptyRequest<M.Params>()
        let prepare: @Sendable (Request, RequestEnvironment) throws -> (M.Params, Context) = { request, environment in
            guard let context = home.context(environment) else { throw RPCError.forbidden(name) }
            return (try request.hasNoParams ? noParams.value() : WireCodec.decodeParams(M.Params.self, from: request), context)
        }
        let invoke: @Sendable (Request, RequestEnvironment) async throws -> Invocation = { request, environment in
            let (params, context) = try prepare(request, environment)
            return invocation(params, try await handler(params, context))
        }
        let invokeNow = immediate.map { immediate -> @Sendable (Request, RequestEnvironment) throws -> Invocation in
            { request, environment in
                let (params, context) = try prepare(request, environment)
                return invocation(params, try immediate(params, context))
            }
        }
        entries[name] = Entry(home: home.kind, access: access, audited: audit != nil, requiresUnlock: requiresUnlock, rechecksUnlock: rechecksUnlock, remembers: remembers,
                              signedInFromWire: signedInFromWire, forwarding: forwarding, requestDetail: requestDetail, asksOnDesktop: asksOnDesktop, invoke: invoke,
                              immediate: invokeNow)
    }

    /// Announces capabilities in `hello` (`features`), in registration order.
    mutating func announce(_ names: String...) {
        for name in names where !features.contains(name) { features.append(name) }
    }
}

/// What a method's params decode to when a request has none (absent, null or `{}`), found at
/// the first such request and kept: decoding `{}` is a pure function of the type, so a call
/// without params (`hello`) does not run the JSON decoder every time.
private final class ParamsOfEmptyRequest<P: Decodable & Sendable>: Sendable {
    private let decoded = Mutex<Result<P, RPCError>?>(nil)

    func value() throws(RPCError) -> P {
        if let known = decoded.withLock({ $0 }) { return try known.get() }
        let result = Result { () throws(RPCError) in try WireCodec.decodeParams(P.self, from: nil) }
        decoded.withLock { $0 = result }
        return try result.get()
    }
}
