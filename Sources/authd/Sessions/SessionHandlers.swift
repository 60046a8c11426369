import FoundationEssentials
import Protocol

extension MethodTable {
    mutating func registerSessionMethods(_ service: SessionService, login: Login, limiter: RateLimiter) {
        let store = service.store, config = service.config, now = service.now
        register(AuthLogin.self, access: .anyone, audit: { _, result in
            ["account": result.account.map { .string($0.id) } ?? .null, "session": result.session.map { .string($0.id) } ?? .null,
             "next": result.next.map { .string($0) } ?? .null]
        }) { params, context in
            try limiter.take(.login, uid: context.caller.uid)
            return try await login.login(params)
        }
        register(AuthLoginPIN.self, access: .anyone, audit: { params, result in
            ["flow": .string(params.flow), "account": .string(result.account.id), "session": .string(result.session.id)]
        }) { params, _ in
            try await login.loginPIN(params)
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
        register(AuthToken.self, access: .anyone, audit: { params, result in
            ["aud": .string(params.aud), "kid": .string(result.kid), "jti": .string(result.jti), "expires_at": .string(result.expiresAt)]
        }) { params, context in
            try await service.accountToken(params, caller: context.caller)
        }

        register(SessionGet.self, access: .anyone) { params, _ in
            let seconds = Int64(now().timeIntervalSince1970)
            let idle = Int64(config.current.sessionIdleSeconds)
            return try await store.transaction { database in
                let session = try SessionStore.authenticate(in: database, token: params.session, now: seconds, idle: idle)
                guard let account = try database.queryOne("SELECT id, phone, email, password_hash IS NOT NULL FROM accounts WHERE id = ?", [.text(session.accountID)], row: {
                    AccountInfo(id: $0.text(0), phone: $0.text(1), email: $0.optionalText(2), hasPassword: $0.int(3) != 0)
                }), let device = try database.queryOne("SELECT id, name FROM devices WHERE id = ?", [.text(session.deviceID)], row: {
                    DeviceSummary(id: $0.text(0), name: $0.text(1))
                }) else { throw RPCError.failure(.sessionInvalid, "This session has ended; sign in again.") }
                return SessionGet.Result(
                    id: session.id, account: account, device: device, amr: session.amr,
                    createdAt: Timestamp.rfc3339(epochSeconds: session.createdAt), expiresAt: Timestamp.rfc3339(epochSeconds: session.expiresAt),
                    idleExpiresAt: Timestamp.rfc3339(epochSeconds: session.idleExpiresAt))
            }
        }

        register(AuthLogout.self, access: .anyone, audit: { _, result in ["session": .string(result.session)] }) { params, _ in
            let seconds = Int64(now().timeIntervalSince1970)
            let idle = Int64(config.current.sessionIdleSeconds)
            let ended = try await store.transaction { database -> String in
                let session = try SessionStore.authenticate(in: database, token: params.session, now: seconds, idle: idle)
                try SessionStore.revoke(in: database, sessionID: session.id, now: seconds)
                return session.id
            }
            return AuthLogout.Result(loggedOut: true, session: ended)
        }
    }
}
