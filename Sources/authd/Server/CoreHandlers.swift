import Protocol

extension MethodTable {
    /// Methods about the connection itself.
    mutating func registerCoreMethods(_ services: Services, features: [String]) {
        register(Hello.self, access: .anyone) { _, context in
            Hello.Result(protocolVersion: protocolVersion, daemonVersion: DaemonVersion.string,
                         mode: services.options.mode.rawValue, caller: context.caller, features: features)
        }

        register(SubscriptionCancel.self, access: .anyone) { params, context in
            guard context.connection.cancelSubscription(params.subscription) else {
                throw RPCError.failure(.unknownSubscription, "This connection has no stream '\(Redaction.printable(params.subscription, limit: 64))'.")
            }
            return SubscriptionCancel.Result(cancelled: true)
        }

        register(PromptAnswer.self, access: .anyone) { params, context in
            try context.connection.prompts.answer(params.promptId, value: params.value)
            return Acknowledged()
        }

        register(PromptCancel.self, access: .anyone) { params, context in
            try context.connection.prompts.cancel(params.promptId)
            return Acknowledged()
        }
    }
}
