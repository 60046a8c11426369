// Card/ — the ID card over PC/SC (PCSC.swift is the only caller of pcsc-lite): reading, card-signed
// login and signature tokens, the saved CAN and PIN1 (sealed). Machine methods. Errors: CardFailure.

import Protocol

extension MethodTable {
    /// The ID card. Login and signature requests are audited with the caller, `aud` and outcome.
    mutating func registerCardMethods(_ cards: CardService) {
        announce("card", "card.pace", "card.web-eid")
        register(CardReaders.self, home: .machine, access: .anyone) { _, _ in
            try await cards.listReaders()
        }
        register(CardRead.self, home: .machine, access: .anyone, requiresUnlock: true, rechecksUnlock: true, audit: { _, _ in [:] }) { params, context in
            try await cards.read(params, context: context)
        }
        register(CardLogin.self, home: .machine, access: .anyone, requiresUnlock: true, rechecksUnlock: true, audit: { params, result in
            ["aud": .string(Redaction.printable(params.aud, limit: 200)), "format": .string(result.format)]
        }) { params, context in
            try await cards.login(params, context: context)
        }
        register(CardSign.self, home: .machine, access: .anyone, requiresUnlock: true, rechecksUnlock: true, audit: { params, result in
            ["aud": .string(Redaction.printable(params.aud, limit: 200)), "hash_alg": .string(result.hashAlg), "hash": .string(result.hash)]
        }) { params, context in
            try await cards.sign(params, context: context)
        }
        register(CardCertificate.self, home: .machine, access: .anyone, requiresUnlock: true, rechecksUnlock: true, audit: { params, result in
            ["aud": .string(Redaction.printable(params.aud ?? "", limit: 200)), "use": .string(result.use)]
        }) { params, context in
            try await cards.certificate(params, context: context)
        }
        register(CardCANSet.self, home: .machine, access: .anyone, audit: { _, _ in [:] }) { params, context in
            try await cards.setCAN(params.can, uid: context.caller.uid)
            return Acknowledged()
        }
        register(CardCANGet.self, home: .machine, access: .anyone, requiresUnlock: true) { _, context in
            CardCANGet.Result(can: try await cards.savedCAN(uid: context.caller.uid))
        }
        register(CardCANClear.self, home: .machine, access: .anyone, audit: { _, _ in [:] }) { _, context in
            try await cards.secrets.clear(.can, uid: context.caller.uid)
            return Acknowledged()
        }
        register(CardPIN1Save.self, home: .machine, access: .anyone, audit: { _, _ in [:] }) { params, context in
            try await cards.savePIN1(params.pin, uid: context.caller.uid)
            return Acknowledged()
        }
        register(CardPIN1Clear.self, home: .machine, access: .anyone, audit: { _, _ in [:] }) { _, context in
            try await cards.secrets.clear(.pin1, uid: context.caller.uid)
            return Acknowledged()
        }
    }
}
