// Accounts/ — registration by phone number, sign-in by password, PIN and SMS code, the owner's
// settings (profile, PIN, deactivation) and the admin view of accounts. Account methods: they are
// served where the account lives. The rules are pure values (OTPChallenge, Lockout,
// PasswordPolicy, PINPolicy); the data is the account directory's (Directory/). Errors:
// AccountFailure.

import Protocol

extension MethodTable {
    mutating func registerAccountMethods(_ registration: Registration?, otp: OTPLogin?, login: Login?, fingerprintSteps: FingerprintSteps, limiter: RateLimiter) {
        announce("accounts.register", "accounts.otp_login", "accounts.login")
        // Phone numbers appear in the audit log only redacted; codes and passwords never.
        register(AccountRegisterStart.self, home: .account, by: registration, access: .anyone, audit: { _, result in
            ["flow": .string(result.flow), "phone": .string(PhoneNumber.redact(result.phone))]
        }) { registration, params, context in
            try limiter.take(.registerStart, caller: context.caller)
            return try await registration.start(params, caller: context.caller)
        }

        register(AccountRegisterResend.self, home: .account, by: registration, access: .anyone, audit: { params, _ in
            ["flow": .string(params.flow)]
        }) { registration, params, context in
            try await registration.resend(params, caller: context.caller)
        }

        register(AccountRegisterVerify.self, home: .account, by: registration, access: .anyone, remembers: .code, audit: { params, result in
            ["flow": .string(params.flow), "account": .string(result.account.id), "session": .string(result.session.id),
             "device": .string(result.session.deviceID)]
        }) { registration, params, context in
            try await registration.verify(params, caller: context.caller)
        }

        register(AuthOTPStart.self, home: .account, by: otp, access: .anyone, audit: { _, result in
            ["flow": .string(result.flow), "phone": .string(PhoneNumber.redact(result.phone))]
        }) { otp, params, context in
            try limiter.take(.otpStart, caller: context.caller)
            return try await otp.start(params, caller: context.caller)
        }
        register(AuthOTPVerify.self, home: .account, by: otp, access: .anyone, remembers: .code, audit: { params, result in
            ["flow": .string(params.flow), "account": .string(result.account.id), "session": .string(result.session.id)]
        }) { otp, params, context in
            try await otp.verify(params, caller: context.caller)
        }

        register(AuthLogin.self, home: .account, by: login, access: .anyone, remembers: .password, audit: { _, result in
            ["account": result.account.map { .string($0.id) } ?? .null, "session": result.session.map { .string($0.id) } ?? .null,
             "next": result.next.map { .string($0) } ?? .null]
        }, forwarding: fingerprintSteps.forwarding) { login, params, context in
            try limiter.take(.login, caller: context.caller)
            return try await login.login(params, caller: context.caller)
        }
        register(AuthLoginPIN.self, home: .account, by: login, access: .anyone, remembers: .password, audit: { params, result in
            ["flow": .string(params.flow), "account": .string(result.account.id), "session": .string(result.session.id)]
        }) { login, params, context in
            try await login.loginPIN(params, caller: context.caller)
        }
    }

    /// The owner's settings (profile, PIN, deactivation) and the admin view of accounts.
    mutating func registerAccountSettingsMethods(_ settings: AccountSettings?, admin: AccountAdmin?) {
        announce("twofactor.pin", "accounts.deactivate", "admin.accounts", "account.password.check")
        // Guarded by the local lock: an account without a password takes a new one with the
        // session alone, which would let anyone at a locked keyboard set one and unlock with it.
        register(AccountProfileSet.self, home: .account, by: settings, access: .anyone, requiresUnlock: true, audit: { params, result in
            ["account": .string(result.id), "email": .bool(params.email != nil), "password": .bool(params.password != nil),
             "email_to": params.email != nil ? result.email.map { .string(AccountSettings.redacted(email: $0)) } ?? .null : .null]
        }) { settings, params, context in
            try await settings.setProfile(params, session: context.session(params.session))
        }
        register(AccountPasswordCheck.self, home: .account, by: settings, access: .anyone, requiresUnlock: true, audit: { _, _ in [:] }) { settings, params, context in
            try await settings.checkPassword(params, session: context.session(params.session))
        }
        // Guarded too: a session made in the last minutes replaces the PIN without the old one,
        // and the PIN is what a passkey signature (and deactivation) asks for.
        register(TwoFactorPINEnable.self, home: .account, by: settings, access: .anyone, requiresUnlock: true, audit: { _, _ in [:] }) { settings, params, context in
            try await settings.enablePIN(params, session: context.session(params.session))
        }
        register(TwoFactorPINDisable.self, home: .account, by: settings, access: .anyone, audit: { _, _ in [:] }) { settings, params, context in
            try await settings.disablePIN(params, session: context.session(params.session))
        }
        register(AccountDeactivate.self, home: .account, by: settings, access: .anyone, audit: { _, _ in [:] }) { settings, params, context in
            try await settings.deactivate(params, session: context.session(params.session))
        }
        register(AdminAccountsList.self, home: .account, by: admin, access: .admin, audit: { _, result in ["count": .integer(Int64(result.accounts.count))] }) { admin, params, _ in
            try await admin.list(limit: params.limit)
        }
        register(AdminAccountsShow.self, home: .account, by: admin, access: .admin, audit: { _, result in ["account": .string(result.id)] }) { admin, params, _ in
            try await admin.show(params.account)
        }
        register(AdminAccountsUnlock.self, home: .account, by: admin, access: .admin, audit: { _, result in ["account": .string(result.id)] }) { admin, params, _ in
            try await admin.unlock(params.account)
        }
        register(AdminAccountsSet.self, home: .account, by: admin, access: .admin, audit: { params, result in
            ["account": .string(result.id), "device_limit": params.deviceLimit.map { .integer(Int64($0)) } ?? .null,
             "device_policy": params.devicePolicy.map { .string($0) } ?? .null]
        }) { admin, params, _ in
            try await admin.set(params)
        }
        register(AdminAccountsE2EE.self, home: .account, by: admin, access: .admin, audit: { params, result in
            ["account": .string(result.id), "e2ee": .string(params.e2ee.rawValue)]
        }) { admin, params, _ in
            try await admin.setE2EE(params)
        }
        register(AdminAccountsDeactivate.self, home: .account, by: admin, access: .admin, audit: { _, result in ["account": .string(result.id)] }) { admin, params, _ in
            try await admin.deactivate(params.account)
        }
    }
}
