import Protocol

extension MethodTable {
    /// Methods about the connection itself. Registered last: `hello` announces every feature
    /// the table holds by then.
    mutating func registerCoreMethods(_ services: Services) {
        announce("subscriptions", "prompts")
        let features = Hello.Features(features)
        registerImmediate(Hello.self, home: .machine, access: .anyone) { _, context in
            Hello.Result(protocolVersion: protocolVersion, daemonVersion: DaemonVersion.string,
                         mode: services.options.mode.rawValue, caller: context.caller, features: features)
        }

        register(SubscriptionCancel.self, home: .machine, access: .anyone) { params, context in
            guard context.streams.cancel(params.subscription) else { throw StreamFailure.unknown(params.subscription) }
            return SubscriptionCancel.Result(cancelled: true)
        }

        register(PromptAnswer.self, home: .machine, access: .anyone) { params, context in
            try context.prompts.connection.answer(params.promptId, value: params.value)
            return Acknowledged()
        }

        register(PromptCancel.self, home: .machine, access: .anyone) { params, context in
            try context.prompts.connection.cancel(params.promptId)
            return Acknowledged()
        }
    }
}
