// Tokens/ — the daemon's own JWTs: auth.local (this machine asserts the caller's Unix identity),
// token.verify and the JWKS; TokenStamp is what every token starts with. Machine methods.
// Errors: TokenFailure.

import Protocol

extension MethodTable {
    /// `hubKeys`: on a device, the hub's keys, published beside the machine's own.
    mutating func registerTokenMethods(_ tokens: TokenService, hubKeys: HubKeys? = nil) {
        announce("auth.local", "token.verify", "keys.jwks")
        register(AuthLocal.self, home: .machine, access: .anyone, requiresUnlock: true, audit: { params, result in
            // The token itself is never recorded; its kid and expiry are enough to find it.
            ["aud": .string(params.aud), "kid": .string(result.kid), "expires_at": .string(result.expiresAt), "jti": .string(result.jti)]
        }) { params, context in
            try tokens.issueLocal(for: context.caller, params: params)
        }

        register(TokenVerify.self, home: .machine, access: .anyone) { params, _ in
            do {
                return try tokens.verify(params)
            } catch {
                // On a device, a key it does not know may be its hub's: an account token.
                guard case .unknownKey(let kid)? = error as? TokenFailure, let hub = await hubKeys?.published(with: kid) else { throw error }
                return try tokens.verify(params, hub: hub)
            }
        }

        register(KeysJWKS.self, home: .machine, access: .anyone) { _, _ in
            var set = tokens.keys.jwks(now: tokens.now())
            if let hub = await hubKeys?.published() { set.keys += hub.jwks }
            return set
        }
    }
}
