import FoundationEssentials
import Protocol

extension MethodTable {
    mutating func registerSessionMethods(_ service: SessionService, login: Login, limiter: RateLimiter, lock: LocalLock) {
        register(AuthLogin.self, access: .anyone, audit: { _, result in
            ["account": result.account.map { .string($0.id) } ?? .null, "session": result.session.map { .string($0.id) } ?? .null,
             "next": result.next.map { .string($0) } ?? .null]
        }) { params, context in
            try limiter.take(.login, uid: context.caller.uid)
            let step = try await login.login(params)
            if let account = step.account, let session = step.session {
                try await lock.remember(context.caller.uid, account: account.id, device: session.deviceID, proof: .password)
            }
            return step
        }
        register(AuthLoginPIN.self, access: .anyone, audit: { params, result in
            ["flow": .string(params.flow), "account": .string(result.account.id), "session": .string(result.session.id)]
        }) { params, context in
            let signedIn = try await login.loginPIN(params)
            try await lock.remember(context.caller.uid, account: signedIn.account.id, device: signedIn.session.deviceID, proof: .password)
            return signedIn
        }
        register(TwoFactorPINEnable.self, access: .anyone, audit: { _, _ in [:] }) { params, _ in
            try await service.enablePIN(params)
        }
        register(TwoFactorPINDisable.self, access: .anyone, audit: { _, _ in [:] }) { params, _ in
            try await service.disablePIN(params, login: login)
        }
        register(AccountProfileSet.self, access: .anyone, audit: { params, result in
            ["account": .string(result.id), "email": .bool(params.email != nil), "password": .bool(params.password != nil)]
        }) { params, _ in
            try await service.setProfile(params, login: login)
        }
        register(SessionList.self, access: .anyone) { params, _ in try await service.listSessions(params.session) }
        register(SessionRevoke.self, access: .anyone, audit: { params, _ in ["session": .string(params.id)] }) { params, _ in
            try await service.revokeSession(params)
        }
        register(DeviceList.self, access: .anyone) { params, _ in try await service.listDevices(params.session) }
        register(DeviceRevoke.self, access: .anyone, audit: { params, _ in ["device": .string(params.id)] }) { params, _ in
            try await service.revokeDevice(params)
        }
        register(AuthToken.self, access: .anyone, requiresUnlock: true, audit: { params, result in
            ["aud": .string(params.aud), "kid": .string(result.kid), "jti": .string(result.jti), "expires_at": .string(result.expiresAt)]
        }) { params, context in
            try await service.accountToken(params, caller: context.caller)
        }

        register(SessionGet.self, access: .anyone) { params, _ in try await service.describe(params.session) }
        register(AuthLogout.self, access: .anyone, audit: { _, result in ["session": .string(result.session)] }) { params, _ in
            AuthLogout.Result(loggedOut: true, session: try await service.logout(params.session))
        }
    }
}
