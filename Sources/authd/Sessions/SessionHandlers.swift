import FoundationEssentials
import Protocol

extension MethodTable {
    mutating func registerSessionMethods(store: Store, config: ConfigHolder, now: @escaping @Sendable () -> Date) {
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

        register(AuthLogout.self, access: .anyone, audit: { _, _ in [:] }) { params, _ in
            let seconds = Int64(now().timeIntervalSince1970)
            let idle = Int64(config.current.sessionIdleSeconds)
            try await store.transaction { database in
                let session = try SessionStore.authenticate(in: database, token: params.session, now: seconds, idle: idle)
                try SessionStore.revoke(in: database, sessionID: session.id, now: seconds)
            }
            return AuthLogout.Result(loggedOut: true)
        }
    }
}
