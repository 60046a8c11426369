// Biometrics/ — fingerprints through fprintd (sd-bus): each local user's gate and PIN1 release,
// fast-forward sign-in of the remembered account, the fingerprint as an account's second step
// on this machine (FingerprintSteps). Machine methods; account data only through the directory.
// Errors: BiometricFailure.

import Protocol

extension MethodTable {
    mutating func registerBiometricMethods(_ biometrics: BiometricService, signIn: FingerprintSignIn, cards: CardService) {
        announce("biometric", "auth.fast", "twofactor.fingerprint", "card.biometric")
        register(BiometricStatus.self, home: .machine, access: .anyone) { _, context in
            try await biometrics.status(context.caller.uid, caller: context.caller)
        }
        // Turning a fingerprint use on needs the lock open; turning it off never does.
        register(BiometricEnable.self, home: .machine, access: .anyone, requiresUnlock: true, audit: { _, _ in [:] }) { _, context in
            let uid = context.caller.uid
            try await biometrics.verify(user: try BiometricService.user(of: context.caller), gateUID: uid, attempts: 3,
                                        purpose: "to turn on fingerprint unlock", context: context)
            try await biometrics.update(uid) { $0.gate.enabled = true }
            return try await biometrics.status(uid, caller: context.caller)
        }
        register(BiometricDisable.self, home: .machine, access: .anyone, audit: { _, _ in [:] }) { _, context in
            try await biometrics.update(context.caller.uid) {
                $0.gate.enabled = false
                $0.pin1 = .off
            }
            return try await biometrics.status(context.caller.uid, caller: context.caller)
        }
        register(CardBiometricEnable.self, home: .machine, access: .anyone, requiresUnlock: true, audit: { _, _ in [:] }) { _, context in
            let uid = context.caller.uid
            guard try await cards.secrets.load(.pin1, uid: uid) != nil else { throw BiometricFailure.pin1NotSaved }
            if try await biometrics.settings(uid).gate.cutOff { throw BiometricFailure.cutOff }
            try await biometrics.requireAvailable(context.caller)
            try await biometrics.update(uid) { $0.pin1 = .fingerprint }
            return try await biometrics.status(uid, caller: context.caller)
        }
        register(CardBiometricDisable.self, home: .machine, access: .anyone, audit: { _, _ in [:] }) { _, context in
            try await biometrics.update(context.caller.uid) { $0.pin1 = .off }
            return try await biometrics.status(context.caller.uid, caller: context.caller)
        }
        register(AuthFast.self, home: .machine, access: .anyone, remembers: .fingerprint, audit: { _, result in
            ["account": .string(result.account.id), "session": .string(result.session.id)]
        }) { _, context in
            try await signIn.fast(context: context)
        }
        register(AuthLoginFingerprint.self, home: .machine, access: .anyone, remembers: .password, audit: { params, result in
            ["flow": .string(params.flow), "account": .string(result.account.id), "session": .string(result.session.id)]
        }) { params, context in
            try await signIn.secondStep(params, context: context)
        }
        register(TwoFactorFingerprintEnable.self, home: .machine, access: .anyone, audit: { _, result in ["user": .string(result.user ?? "")] }) { params, context in
            try await signIn.enableSecondStep(params, context: context)
        }
        register(TwoFactorFingerprintDisable.self, home: .machine, access: .anyone, audit: { _, _ in [:] }) { params, context in
            try await signIn.disableSecondStep(params, session: context.session(params.session))
        }
    }
}
