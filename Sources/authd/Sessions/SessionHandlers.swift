// Sessions/ — what a session token acts on: the account's sessions and devices, and the account
// tokens it earns. Account methods over the directory. Errors: SessionFailure.

import Protocol

extension MethodTable {
    mutating func registerSessionMethods(_ service: SessionService?) {
        announce("sessions", "devices")
        register(SessionList.self, home: .account, by: service, access: .anyone) { service, params, context in try await service.listSessions(context.session(params.session)) }
        register(SessionRevoke.self, home: .account, by: service, access: .anyone, audit: { params, _ in ["session": .string(params.id)] }) { service, params, context in
            try await service.revokeSession(params, session: context.session(params.session))
        }
        register(DeviceList.self, home: .account, by: service, access: .anyone) { service, params, context in try await service.listDevices(context.session(params.session)) }
        register(DeviceRevoke.self, home: .account, by: service, access: .anyone, audit: { params, _ in ["device": .string(params.id)] }) { service, params, context in
            try await service.revokeDevice(params, session: context.session(params.session))
        }
        register(AuthToken.self, home: .account, by: service, access: .anyone, requiresUnlock: true, audit: { params, result in
            ["aud": .string(params.aud), "kid": .string(result.kid), "jti": .string(result.jti), "expires_at": .string(result.expiresAt)]
        }) { service, params, context in
            try await service.accountToken(params, caller: context.caller)
        }

        register(SessionGet.self, home: .account, by: service, access: .anyone) { service, params, context in try await service.describe(context.session(params.session)) }
        register(AuthLogout.self, home: .account, by: service, access: .anyone, audit: { _, result in ["session": .string(result.session)] }) { service, params, context in
            AuthLogout.Result(loggedOut: true, session: try await service.logout(context.session(params.session)))
        }
    }
}
