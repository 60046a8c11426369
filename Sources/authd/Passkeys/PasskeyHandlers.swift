// Passkeys/ — authd as this machine's platform authenticator (passkey.*, machine methods: keys
// sealed in `passkey_keys`) and as the WebAuthn relying party of its accounts (auth.passkey.*,
// account methods). CBOR.swift is the only caller of libcbor, PublicSuffixList.swift of libpsl.
// Errors: PasskeyFailure.

import Protocol

extension MethodTable {
    mutating func registerPasskeyMethods(authenticator: PlatformAuthenticator, relyingParty: RelyingParty?, limiter: RateLimiter) {
        announce("passkeys", "auth.passkey")
        register(PasskeyCreate.self, home: .machine, access: .anyone, audit: { params, result in
            ["origin": .string(params.origin), "rp_id": .string(params.options.rp.id ?? PasskeyScope.Origin(params.origin)?.host ?? ""),
             "credential": .string(result.id)]
        }) { params, context in
            try await authenticator.create(params, context: context)
        }
        register(PasskeyGet.self, home: .machine, access: .anyone, audit: { params, result in
            ["origin": .string(params.origin), "rp_id": .string(params.options.rpId ?? PasskeyScope.Origin(params.origin)?.host ?? ""),
             "credential": .string(result.id)]
        }) { params, context in
            try await authenticator.get(params, context: context)
        }
        register(PasskeyList.self, home: .machine, access: .anyone, requiresUnlock: true) { params, context in
            try await authenticator.list(params, uid: context.caller.uid)
        }
        register(PasskeyDelete.self, home: .machine, access: .anyone, requiresUnlock: true, audit: { params, _ in ["credential": .string(params.id)] }) { params, context in
            try await authenticator.delete(params, uid: context.caller.uid)
        }

        register(AuthPasskeyRegisterBegin.self, home: .account, by: relyingParty, access: .anyone) { relyingParty, params, context in
            try await relyingParty.registerBegin(params, caller: context.caller)
        }
        register(AuthPasskeyRegisterFinish.self, home: .account, by: relyingParty, access: .anyone, audit: { _, result in ["credential": .string(result.id)] }) { relyingParty, params, context in
            try await relyingParty.registerFinish(params, caller: context.caller)
        }
        register(AuthPasskeyLoginBegin.self, home: .account, by: relyingParty, access: .anyone) { relyingParty, params, context in
            try limiter.take(.login, caller: context.caller)
            return try await relyingParty.loginBegin(params, caller: context.caller)
        }
        register(AuthPasskeyLoginFinish.self, home: .account, by: relyingParty, access: .anyone, remembers: .passkey, audit: { params, result in
            ["credential": .string(params.credential.id), "account": .string(result.account.id), "session": .string(result.session.id)]
        }) { relyingParty, params, context in
            try await relyingParty.loginFinish(params, context: context)
        }
        register(AuthPasskeyList.self, home: .account, by: relyingParty, access: .anyone) { relyingParty, params, context in
            try await relyingParty.list(params, session: context.session(params.session))
        }
        register(AuthPasskeyRemove.self, home: .account, by: relyingParty, access: .anyone, audit: { params, _ in ["credential": .string(params.id)] }) { relyingParty, params, context in
            try await relyingParty.remove(params, session: context.session(params.session))
        }
    }
}
