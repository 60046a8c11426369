// Federation/ — sign-in with an OpenID provider (code + PKCE over a loopback redirect, or the
// device grant), the token vault of this machine's users (TokenVault), remote.token and
// remote.fetch, persistent logout. Machine methods; the account link is the directory's.
// Every HTTP exchange goes through authd-http (System/HTTPClient.swift). Errors: FederationFailure.

import Protocol

extension MethodTable {
    mutating func registerFederationMethods(signIn: FederatedSignIn, remote: RemoteAccess, vault: TokenVault, config: ConfigHolder, events: EventBus) {
        announce("federation", "remote", "events")
        // A sign-in, but not remembered: the provider holds a federated account's credential, so
        // no password or finger of this machine could open the lock again; remembering it would
        // arm a lock that nothing opens. The provider's sign-in lives in the token vault instead.
        register(FederationLogin.self, home: .machine, access: .anyone, remembers: nil, audit: { params, result in
            ["provider": .string(result.provider), "flow": .string(params.flow ?? "code"), "account": .string(result.account.id),
             "created": .bool(result.created)]
        }) { params, context in
            try await signIn.login(params, context: context)
        }

        register(FederationStatus.self, home: .machine, access: .anyone) { _, context in
            let current = config.current
            let rows = try await vault.summaries(uid: context.caller.uid)
            let defaultName = current.defaultFederationProvider
            return FederationStatus.Result(providers: current.federationProviders.map { provider in
                var state = rows[provider.name] ?? FederationProviderState(name: provider.name, issuer: provider.issuer, isDefault: false, state: "signed_out")
                state.issuer = provider.issuer
                state.isDefault = provider.name == defaultName
                return state
            })
        }

        register(FederationLogout.self, home: .machine, access: .anyone, audit: { _, result in
            ["provider": .string(result.provider), "sessions_ended": .integer(Int64(result.sessionsEnded)), "revoked": .bool(result.revoked)]
        }) { params, context in
            try await remote.signOut(uid: context.caller.uid, provider: params.provider)
        }

        register(RemoteToken.self, home: .machine, access: .anyone, requiresUnlock: true, audit: { _, result in
            ["provider": .string(result.provider), "refreshed": .bool(result.refreshed)]
        }) { params, context in
            try await remote.token(uid: context.caller.uid, provider: params.provider)
        }

        register(RemoteFetch.self, home: .machine, access: .anyone, requiresUnlock: true, audit: { params, result in
            // The URL's origin only: its path and query may carry data the caller considers private.
            ["method": .string(params.method ?? "GET"), "origin": .string(WebOrigin(params.url, allowPath: true)?.serialized ?? ""),
             "status": .integer(Int64(result.status))]
        }) { params, context in
            try await remote.fetch(uid: context.caller.uid, params)
        }

        register(RemoteUnauthorized.self, home: .machine, access: .anyone, audit: { _, result in
            ["provider": .string(result.provider), "sessions_ended": .integer(Int64(result.sessionsEnded))]
        }) { params, context in
            try await remote.unauthorized(uid: context.caller.uid, provider: params.provider)
        }

        register(EventsSubscribe.self, home: .machine, access: .anyone) { _, context in
            let (id, stream) = await events.subscribe(uid: context.caller.uid)
            do {
                let subscription = try context.streams.open(onDrop: { Task { await events.unsubscribe(id) } }) { sink in
                    for await event in stream {
                        sink.notify(EventNotification.self, .init(subscription: sink.name, type: event.type, loggedOut: event.loggedOut, ended: event.ended, sync: event.sync,
                                                                         presence: event.presence))
                    }
                    await events.unsubscribe(id)
                }
                return EventsSubscribe.Result(subscription: subscription)
            } catch {
                await events.unsubscribe(id)
                throw error
            }
        }
    }
}
