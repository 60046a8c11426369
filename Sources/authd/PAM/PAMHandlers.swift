import Protocol

extension MethodTable {
    /// pam_authd's methods (root only; every decision audited with the user, service, tty and
    /// remote host) and the links between Unix users and cards or accounts (a user's own; any
    /// user's for an admin).
    mutating func registerPAMMethods(_ pam: PAMAuthenticator, lock: LocalLock, isAdmin: @escaping @Sendable (Caller) -> Bool) {
        announce("pam")
        let links = pam.links
        let origin: @Sendable (PAMAuthenticate.Params) -> [String: JSONValue] = { params in
            var detail: [String: JSONValue] = [
                "user": .string(Redaction.printable(params.user, limit: 64)), "service": .string(Redaction.printable(params.service, limit: 64)),
            ]
            if let tty = params.tty { detail["tty"] = .string(Redaction.printable(tty, limit: 64)) }
            if let rhost = params.rhost { detail["rhost"] = .string(Redaction.printable(rhost, limit: 256)) }
            return detail
        }
        register(PAMAuthenticate.self, home: .machine, access: .root, audit: { _, result in ["method": .string(result.method)] },
                 auditRequest: origin) { params, context in
            try await pam.authenticate(params, context: context)
        }
        register(PAMAccount.self, home: .machine, access: .root, audit: { _, _ in [:] }, auditRequest: origin) { params, _ in
            try await pam.account(params)
        }

        /// The Unix user a link method is about: the caller's own, or, for an admin, anyone.
        let target: @Sendable (String?, RequestContext) throws -> String = { named, context in
            guard let own = context.caller.username else { throw PAMFailure.unknownUser }
            guard let named, named != own else { return own }
            guard isAdmin(.local(context.caller)) else { throw PAMFailure.otherUser }
            _ = try PAMAuthenticator.unixUser(named)
            return named
        }
        let named: @Sendable (String?) -> [String: JSONValue] = { user in user.map { ["user": .string(Redaction.printable($0, limit: 64))] } ?? [:] }
        // A link is a way in to the user's Unix login, the screen's lock included: made while
        // the user's lock holds, it would let whoever is at the locked keyboard link their own
        // card and open the lock with it. So both link methods are lock-guarded, and a card
        // link checks the lock again after the card and its PIN1, before it commits.
        register(PAMLinkCard.self, home: .machine, access: .anyone, requiresUnlock: true, audit: { _, _ in [:] },
                 auditRequest: { named($0.user) }) { params, context in
            let user = try target(params.user, context)
            let anchors = try PAMAuthenticator.cardAnchors(pam.config.current)
            let window = try pam.cards.window(params.timeoutS)
            // A user proves the card is theirs with its PIN1: holding someone else's card for a
            // moment must not be enough to take it (a card serves link_limit users). An admin
            // links what the admin decides, with the holder perhaps not there.
            let holder = isAdmin(.local(context.caller))
                ? try await pam.cards.holder(window: window, anchors: anchors, context: context)
                : try await pam.cards.verifyHolder(personalCode: nil, window: window, anchors: anchors, context: context) {
                    "PIN1 for the ID card of \($0), to link it to \(user):"
                }
            try await lock.admit(context.caller.uid)
            return try await links.link(user, kind: .card, subject: holder.personalCode, holder: holder.name, by: context.caller.uid,
                                        limit: pam.config.current.pamLinkLimit)
        }
        register(PAMLinkAccount.self, home: .machine, access: .anyone, requiresUnlock: true, audit: { _, _ in [:] },
                 auditRequest: { named($0.user) }) { params, context in
            let user = try target(params.user, context)
            let account: String
            if let given = params.account {
                guard isAdmin(.local(context.caller)) else { throw PAMFailure.otherUser }
                account = given
            } else {
                // The account the user is signed in to on this machine (what `authctl login` remembered).
                guard let uid = Syscalls.userID(named: user), let remembered = try await lock.account(uid) else { throw PAMFailure.noAccount }
                account = remembered
            }
            let record = try await pam.directory.account(id: account)
            if record.deactivatedAt != nil { throw PAMFailure.accountDeactivated }
            return try await links.link(user, kind: .account, subject: record.id, holder: nil, by: context.caller.uid,
                                        limit: pam.config.current.pamLinkLimit)
        }
        register(PAMUnlink.self, home: .machine, access: .anyone, audit: { _, _ in [:] }, auditRequest: { named($0.user) }) { params, context in
            let user = try target(params.user, context)
            var kind: PAMLinkStore.Kind?
            if let given = params.kind {
                guard let parsed = PAMLinkStore.Kind(rawValue: given) else { throw InvalidParameter("kind must be card or account", field: "kind") }
                kind = parsed
            }
            return try await links.unlink(user, kind: kind)
        }
        register(PAMStatus.self, home: .machine, access: .anyone) { params, context in
            try await links.links(try target(params.user, context))
        }
    }
}
