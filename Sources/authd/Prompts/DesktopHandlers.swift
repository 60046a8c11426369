import Protocol

extension MethodTable {
    /// The desktop: agents that register to ask their user's questions, their answers, and the
    /// person's remembered consents. Machine methods; each acts for the caller's own user only.
    mutating func registerDesktopMethods(_ desktop: DesktopPrompts) {
        announce("prompt.desktop", "consents")
        let agents = desktop.agents
        register(DesktopRegister.self, home: .machine, access: .anyone, audit: { _, _ in [:] }) { _, context in
            // Reachable at once: a request that comes right after the response finds it, and
            // what it is sent waits for the stream.
            let (number, token) = try agents.register(uid: context.caller.uid, connection: ObjectIdentifier(context.streams.connection as AnyObject))
            let subscription: String
            do {
                subscription = try context.streams.open(onDrop: { agents.unregister(number) }) { sink in
                    agents.activate(number, sink: sink)
                    // The agent serves until its connection closes, which cancels this stream.
                    while !Task.isCancelled { try? await Task.sleep(for: .seconds(3600)) }
                    agents.unregister(number)
                }
            } catch {
                agents.unregister(number)
                throw error
            }
            let pinentry = desktop.config.current.promptsPinentry
            return DesktopRegister.Result(subscription: subscription, pinentry: pinentry.isEmpty ? nil : pinentry, agentToken: token)
        }
        register(DesktopReply.self, home: .machine, access: .anyone) { params, context in
            let connection = ObjectIdentifier(context.streams.connection as AnyObject)
            let outcome: Result<PinentryAnswer, PromptFailure>
            if params.answer == .unavailable {
                outcome = .failure(.noDesktop(agent: true))
            } else if let answer = PinentryAnswer(params.answer, value: params.value) {
                outcome = .success(answer)
            } else {
                throw RPCError.invalidParams(params.answer == .secret ? "answer 'secret' needs a value." : "Only answer 'secret' takes a value.", field: "value")
            }
            try agents.reply(params.askId, from: connection, outcome)
            return Acknowledged()
        }
        register(DesktopIdentified.self, home: .machine, access: .anyone) { params, context in
            let program = try params.program.map { program throws(RPCError) -> ProgramIdentity in
                guard let kind = ProgramIdentity.Kind(rawValue: program.kind), !program.name.isEmpty, program.name.utf8.count <= 4096,
                      (program.executable?.utf8.count ?? 0) <= 4096 else {
                    throw RPCError.invalidParams("Parameter 'program' must name a kind (executable, flatpak, snap) and a name.", field: "program")
                }
                return ProgramIdentity(kind: kind, name: program.name, executable: program.executable)
            }
            try agents.identified(params.askId, from: ObjectIdentifier(context.streams.connection as AnyObject), program)
            return Acknowledged()
        }
        register(ConsentsList.self, home: .machine, access: .anyone) { _, context in
            ConsentsList.Result(consents: try await desktop.consents.list(uid: context.caller.uid))
        }
        register(ConsentsRevoke.self, home: .machine, access: .anyone, audit: { params, result in
            var detail: [String: JSONValue] = ["program": .string(Redaction.printable(params.program, limit: 200)), "revoked": .integer(Int64(result.revoked))]
            if let purpose = params.purpose { detail["purpose"] = .string(purpose.rawValue) }
            return detail
        }) { params, context in
            let revoked = try await desktop.consents.revoke(uid: context.caller.uid, program: params.program, purpose: params.purpose, audience: params.audience)
            guard revoked > 0 else {
                throw RPCError.failure(.consentUnknown, "No consent of \(Redaction.printable(params.program, limit: 200))"
                                       + (params.purpose.map { " for \($0.rawValue)" } ?? "")
                                       + (params.audience.map { " for \(Redaction.printable($0, limit: 200))" } ?? "") + " is remembered.")
            }
            return ConsentsRevoke.Result(revoked: revoked)
        }
    }
}
