import FoundationEssentials
import Protocol
import Synchronization

/// Turns one decoded request into one response line: method lookup, authorization, the
/// handler, the audit record, error mapping. Unknown failures become `internal` on the wire and
/// a full description in the log.
final class Dispatcher: Sendable {
    let table: MethodTable
    let services: Services
    let tracker = RequestTracker()

    var logger: Logger { services.logger }

    /// Whom the account events an audited call appends come from (this authd), made once:
    /// every audited call's scope carries it, each token's included.
    private let noticeOrigin: SyncLog.Origin

    init(table: MethodTable, services: Services) {
        self.table = table
        self.services = services
        noticeOrigin = services.syncService.noticeOrigin
    }

    struct Response: Sendable {
        /// Nil for a JSON-RPC notification (no reply is sent).
        let line: [UInt8]?
        let succeeded: Bool
    }

    func respond(to request: Request, environment: RequestEnvironment) async -> Response {
        let started = ContinuousClock.now
        // At the hub: an account call a device forwards runs as that device's process, through
        // this same function (and so the same gate) once unwrapped.
        if request.method == LinkForward.name, case .device(let device) = environment.caller {
            return await serveForwarded(request, from: device, environment: environment)
        }
        // The desktop agent passes on a request of a program on the session bus: it runs as that
        // program's, through this same function, once unwrapped.
        if request.method == DesktopForward.name, case .local(let agent) = environment.caller {
            return await serveForAgent(request, agent: agent, environment: environment)
        }
        guard let entry = table.entries[request.method] else {
            return reply(request, .failure(.unknownMethod(request.method)))
        }
        let caller = environment.caller

        // The gate (ssh-agent's checks before its switch): every check a call must pass, before it
        // is served here *or* forwarded to the hub. Nothing that answers or forwards may come
        // before it, so the hub (which sees a forwarded caller) never has to repeat a check only
        // this machine can make, such as its local user's lock.
        if let refusal = await gate(request, entry, caller) {
            return await refuse(request, entry, caller, refusal, started: started)
        }

        // `prompt: desktop` (DESIGN §12): authd asks the person itself, and first, for a token,
        // whether this program may have it; here, before the call is served or forwarded, since
        // the desktop is this machine's. No desktop: an immediate `prompt.no_desktop`.
        var environment = environment
        if let asks = entry.asksOnDesktop, case .local(let peer) = caller, let purpose = asks(request) {
            do {
                environment.desktop = try await services.desktop.session(for: peer, purpose: purpose, told: environment.prompts)
            } catch {
                return await refuse(request, entry, caller, wireError(error, method: request.method), started: started)
            }
            // The consent dialog may have waited minutes: a lock that came meanwhile holds for
            // this call as for any other.
            if let refusal = await gate(request, entry, caller) {
                return await refuse(request, entry, caller, refusal, started: started)
            }
        }

        // A device's own machine asks its hub for what the account owns (DESIGN §8).
        if entry.home == .account, let link = services.hub.link, case .local(let peer) = caller {
            return await forward(request, entry, over: link, for: peer, started: started)
        }
        return await serve(request, entry, environment, started: started)
    }

    /// Who may call the method, and the local user's lock for a method that issues a token or
    /// releases a secret (it answers `session.locked` while the lock holds, and counts the call
    /// as activity otherwise). Nil when the call may go on.
    private func gate(_ request: Request, _ entry: MethodTable.Entry, _ caller: Caller) async -> RPCError? {
        guard isAllowed(caller, entry) else { return .forbidden(request.method) }
        // The lock is the local user's: on a device, as on a standalone authd, it guards the
        // account calls this machine forwards as much as the ones it serves.
        guard entry.requiresUnlock, case .local(let peer) = caller else { return nil }
        do {
            try await services.localLock.admit(peer.uid)
            return nil
        } catch {
            return wireError(error, method: request.method)
        }
    }

    /// Answers a call refused before it was served or forwarded, with its audit record.
    private func refuse(_ request: Request, _ entry: MethodTable.Entry, _ caller: Caller, _ refusal: RPCError,
                        started: ContinuousClock.Instant) async -> Response {
        await recordRefusal(refusal, of: request, entry, caller)
        log(request.method, caller, .failure(refusal), started)
        return reply(request, .failure(refusal))
    }

    /// The audit record of a refused or failed call: floods of the same refusal are counted, not
    /// written one by one; a wrong secret and an admin's own action are always written in full.
    private func recordRefusal(_ error: RPCError, of request: Request, _ entry: MethodTable.Entry, _ caller: Caller) async {
        guard entry.audited, error.reason != .invalidParams else { return }
        let summarizable = !AuditLog.countedFailures.contains(error.reason) && !(entry.access == .admin && services.isAdmin(caller))
        _ = try? await services.audit.refused(.init(
            caller: caller, method: request.method, outcome: error.code == .forbidden ? .denied : .error,
            reason: error.reason, detail: entry.requestDetail(request)), summarizable: summarizable)
    }

    /// Runs a call that passed the gate on this machine: the handler, the sign-in it may make,
    /// its audit record, and what it ended or announced.
    private func serve(_ request: Request, _ entry: MethodTable.Entry, _ environment: RequestEnvironment,
                       started: ContinuousClock.Instant) async -> Response {
        let caller = environment.caller
        let outcome: Result<any Encodable & Sendable, RPCError>
        // A state change writes the call's record in its own transaction (see AuditScope).
        let scope = entry.audited ? AuditScope(caller: caller, method: request.method, auditHome: services.audit.home, now: services.now,
                                               publish: services.audit.publish, noticeOrigin: noticeOrigin) : nil
        do {
            // Blocking work (Argon2id) is shared fairly between callers, not in arrival order; a
            // change writes its audit record in its own transaction through the scope.
            let invocation = try await WorkRequester.$key.withValue(caller.limitKey) {
                try await AuditScope.$current.withValue(scope) { try await entry.invoke(request, environment) }
            }
            // Admitted before it waited (for a card, a PIN): it hands out nothing if the local
            // user's lock came meanwhile.
            if entry.rechecksUnlock, let refusal = await gate(request, entry, caller) { throw refusal }
            if let (account, device) = invocation.signedIn, case .local(let peer) = caller {
                try await signedIn(peer, account: account, device: device, entry)
            }
            // Fail closed: a result that cannot be recorded is not handed out. A change's own
            // transaction wrote its record already (and followers had it as it committed).
            if let scope, scope.committed.isEmpty {
                try await services.audit.record(.init(caller: caller, method: request.method, outcome: .ok, reason: nil, detail: invocation.auditDetail))
            }
            outcome = .success(invocation.result)
        } catch {
            let wire = wireError(error, method: request.method)
            // A change committed before the call failed (the lock could not remember a sign-in,
            // say) keeps its record, which followers had as it committed.
            await recordRefusal(wire, of: request, entry, caller)
            outcome = .failure(wire)
        }
        if let scope { await services.announce(scope.announcements) }
        // A machine that was a newcomer and now holds a session signed in: it becomes a member
        // at once, where it is (see HubListener).
        if case .success = outcome, let machine = caller.machine, services.connections.isNewcomer(.device(machine)),
           await services.connections.holdsSession(machine) {
            services.connections.promote(.device(machine), limit: services.config.current.hubMaxDevices)
        }
        log(request.method, caller, outcome.map { _ in () }, started)
        return reply(request, outcome)
    }

    /// Answers at once, on the connection's event loop, a request whose method never waits
    /// (`MethodTable.registerImmediate`: `hello`): no task and no thread hop between reading the
    /// line and writing the answer. Nil for every other request, which goes to `respond`.
    func respondNow(to request: Request, environment: RequestEnvironment) -> Response? {
        guard let entry = table.entries[request.method], let immediate = entry.immediate else { return nil }
        let started = ContinuousClock.now
        let outcome: Result<any Encodable & Sendable, RPCError>
        if !isAllowed(environment.caller, entry) {
            outcome = .failure(.forbidden(request.method))
        } else {
            do {
                outcome = .success(try immediate(request, environment).result)
            } catch {
                outcome = .failure(wireError(error, method: request.method))
            }
        }
        log(request.method, environment.caller, outcome.map { _ in () }, started)
        return reply(request, outcome)
    }

    private func isAllowed(_ caller: Caller, _ entry: MethodTable.Entry) -> Bool {
        switch entry.access {
        case .anyone: true
        case .admin: services.isAdmin(caller)
        case .root: services.isRoot(caller)
        }
    }

    /// Sends an account call to the hub with who asked here, and answers with what the hub said.
    /// A sign-in the hub made is remembered by the caller's local user here, as on a standalone
    /// authd (the lock is this machine's).
    private func forward(_ request: Request, _ entry: MethodTable.Entry, over link: HubLink, for peer: CallerIdentity,
                         started: ContinuousClock.Instant) async -> Response {
        var caller = ForwardedCaller(peer)
        let outcome: Result<any Encodable & Sendable, RPCError>
        do {
            if let forwarding = entry.forwarding { caller = try await forwarding(caller) }
            let answer = try await link.forward(request.method, request.rawParams, caller: caller)
            if case .success(let value) = answer, let (account, device) = entry.signedInFromWire?(value) {
                try await signedIn(peer, account: account, device: device, entry)
            }
            outcome = answer.map { $0 as any Encodable & Sendable }
        } catch {
            outcome = .failure(wireError(error, method: request.method))
        }
        log(request.method, .local(peer), outcome.map { _ in () }, started)
        return reply(request, outcome)
    }

    /// The one place that runs after a sign-in, made here or answered by the hub: the caller's
    /// local user remembers the account (its lock opens, when the proof may open it), and on a
    /// device the hub learns this machine's key if it has not yet (`SyncCipher.signedIn`).
    private func signedIn(_ peer: CallerIdentity, account: String, device: String, _ entry: MethodTable.Entry) async throws {
        if let proof = entry.remembers {
            try await services.localLock.remember(peer.uid, account: account, device: device, proof: proof)
        }
        await services.cipher?.signedIn()
    }

    /// At the hub: unwraps a device's forwarded call and serves it like any other, with the
    /// device and its process as the caller. Only account methods cross the link.
    private func serveForwarded(_ request: Request, from device: DeviceID, environment: RequestEnvironment) async -> Response {
        let (inner, forwardedCaller): (Request, ForwardedCaller)
        do {
            (inner, forwardedCaller) = try WireCodec.decodeForwarded(request)
        } catch {
            return reply(request, .failure(error))
        }
        guard table.entries[inner.method]?.home == .account else {
            return reply(request, .failure(.failure(.forbidden, "Only account methods are served over the hub link; \(Redaction.printable(inner.method, limit: 64)) is not one.")))
        }
        return await respond(to: inner, environment: RequestEnvironment(caller: .forwarded(device, forwardedCaller), prompts: environment.prompts,
                                                                        streams: environment.streams))
    }

    /// The methods a desktop agent may pass on for a program on the session bus.
    static let agentMethods: Set<String> = [CardLogin.name, CardSign.name, AuthToken.name]

    /// Unwraps `desktop.forward` and serves the request as the program's, on the desktop. Only
    /// the caller's user's registered agent (its `agent_token`) may call it; who the program is
    /// authd reads itself, or has that agent read, with its uid checked.
    private func serveForAgent(_ request: Request, agent: CallerIdentity, environment: RequestEnvironment) async -> Response {
        let forwarded: DesktopForward.Params
        do {
            forwarded = try WireCodec.decodeParams(DesktopForward.Params.self, from: request)
        } catch {
            return reply(request, .failure(error))
        }
        guard services.desktop.agents.isAgent(uid: agent.uid, token: forwarded.agentToken) else {
            return reply(request, .failure(.failure(.forbidden, "Only the desktop agent registered for this user (authd --desktop) may pass on requests from the session bus.")))
        }
        guard Self.agentMethods.contains(forwarded.method) else {
            return reply(request, .failure(.failure(.forbidden, "The desktop agent passes on only \(Self.agentMethods.sorted().joined(separator: ", ")); "
                                                    + "\(Redaction.printable(forwarded.method, limit: 64)) is not one.")))
        }
        guard forwarded.pid > 0 else {
            return reply(request, .failure(.invalidParams("Parameter 'pid' must be a process id.", field: "pid")))
        }
        guard case .object(var fields) = forwarded.params ?? .object([:]) else {
            return reply(request, .failure(.invalidParams("Parameter 'params' must be an object.", field: "params")))
        }
        fields["prompt"] = .string(PromptRoute.desktop.rawValue)
        let program = CallerIdentity(uid: agent.uid, gid: agent.gid, pid: forwarded.pid, exe: Syscalls.executablePath(pid: forwarded.pid),
                                     username: agent.username, groups: agent.groups)
        return await respond(to: Request(id: request.id, method: forwarded.method, params: .object(fields)),
                             environment: RequestEnvironment(caller: .local(program), prompts: environment.prompts, streams: environment.streams))
    }

    private func reply(_ request: Request, _ outcome: Result<any Encodable & Sendable, RPCError>) -> Response {
        guard let id = request.id else {
            return Response(line: nil, succeeded: (try? outcome.get()) != nil)
        }
        switch outcome {
        case .success(let result):
            do {
                return Response(line: try WireCodec.responseLine(id: id, result: result), succeeded: true)
            } catch {
                logger.error("cannot encode the result of \(request.method): \(error)")
                return Response(line: WireCodec.errorLine(id: id, error: .internalError), succeeded: false)
            }
        case .failure(let error):
            return Response(line: WireCodec.errorLine(id: id, error: error), succeeded: false)
        }
    }

    private func wireError(_ error: any Error, method: String) -> RPCError {
        let wire: RPCError
        switch error {
        case let error as RPCError: return error
        case let error as any WireErrorConvertible: wire = error.rpcError
        case is CancellationError: return .cancelled
        default: wire = .internalError
        }
        // An error answered as internal (one of no known kind, or a database error other than
        // "away" or "too slow") is the log's to explain, as the answer promises.
        if wire.reason == .internal { logger.error("\(method) failed: \(error)", [("AUTHD_METHOD", method)]) }
        return wire
    }

    /// One debug line per request; built only when debug logging is on (the hot path pays nothing).
    private func log(_ method: String, _ caller: Caller, _ outcome: Result<Void, RPCError>, _ started: ContinuousClock.Instant) {
        guard logger.level <= .debug else { return }
        let elapsed = ContinuousClock.now - started
        let microseconds = elapsed.components.seconds * 1_000_000 + elapsed.components.attoseconds / 1_000_000_000_000
        var fields = [("AUTHD_METHOD", method)] + caller.logFields + [("AUTHD_DURATION_US", String(microseconds))]
        switch outcome {
        case .success:
            logger.debug("\(method) ok", fields)
        case .failure(let error):
            fields.append(("AUTHD_REASON", error.reason.rawValue))
            logger.debug("\(method) failed: \(error.reason)", fields)
        }
    }
}

/// Counts requests in flight across all connections, so shutdown can wait for them.
final class RequestTracker: Sendable {
    private let count = Mutex(0)
    func begin() { count.withLock { $0 += 1 } }
    func end() { count.withLock { $0 -= 1 } }
    var inFlight: Int { count.withLock { $0 } }
}
