import Protocol

extension MethodTable {
    mutating func registerAccountMethods(_ registration: Registration, limiter: RateLimiter, lock: LocalLock) {
        // Phone numbers appear in the audit log only redacted; codes and passwords never.
        register(AccountRegisterStart.self, access: .anyone, audit: { _, result in
            ["flow": .string(result.flow), "phone": .string(PhoneNumber.redact(result.phone))]
        }) { params, context in
            try limiter.take(.registerStart, uid: context.caller.uid)
            return try await registration.start(params)
        }

        register(AccountRegisterResend.self, access: .anyone, audit: { params, _ in
            ["flow": .string(params.flow)]
        }) { params, _ in
            try await registration.resend(params)
        }

        register(AccountRegisterVerify.self, access: .anyone, audit: { params, result in
            ["flow": .string(params.flow), "account": .string(result.account.id), "session": .string(result.session.id),
             "device": .string(result.session.deviceID)]
        }) { params, context in
            let signedIn = try await registration.verify(params, caller: context.caller)
            try await lock.remember(context.caller.uid, account: signedIn.account.id, device: signedIn.session.deviceID, proof: .code)
            return signedIn
        }
    }

    mutating func registerOTPLoginMethods(_ otp: OTPLogin, limiter: RateLimiter, lock: LocalLock) {
        register(AuthOTPStart.self, access: .anyone, audit: { _, result in
            ["flow": .string(result.flow), "phone": .string(PhoneNumber.redact(result.phone))]
        }) { params, context in
            try limiter.take(.otpStart, uid: context.caller.uid)
            return try await otp.start(params)
        }
        register(AuthOTPVerify.self, access: .anyone, audit: { params, result in
            ["flow": .string(params.flow), "account": .string(result.account.id), "session": .string(result.session.id)]
        }) { params, context in
            let signedIn = try await otp.verify(params)
            try await lock.remember(context.caller.uid, account: signedIn.account.id, device: signedIn.session.deviceID, proof: .code)
            return signedIn
        }
    }

    mutating func registerAccountAdminMethods(_ admin: AccountAdmin, sessions: SessionService, login: Login) {
        register(AccountDeactivate.self, access: .anyone, audit: { _, _ in [:] }) { params, _ in
            try await admin.deactivate(params, sessions: sessions, login: login)
        }
        register(AdminAccountsList.self, access: .admin, audit: { _, result in ["count": .integer(Int64(result.accounts.count))] }) { params, _ in
            try await admin.list(limit: params.limit)
        }
        register(AdminAccountsShow.self, access: .admin, audit: { _, result in ["account": .string(result.id)] }) { params, _ in
            try await admin.show(params.account)
        }
        register(AdminAccountsUnlock.self, access: .admin, audit: { _, result in ["account": .string(result.id)] }) { params, _ in
            try await admin.unlock(params.account)
        }
        register(AdminAccountsSet.self, access: .admin, audit: { params, result in
            ["account": .string(result.id), "device_limit": params.deviceLimit.map { .integer(Int64($0)) } ?? .null,
             "device_policy": params.devicePolicy.map { .string($0) } ?? .null]
        }) { params, _ in
            try await admin.set(params)
        }
        register(AdminAccountsDeactivate.self, access: .admin, audit: { _, result in ["account": .string(result.id)] }) { params, _ in
            try await admin.deactivate(params.account)
        }
    }

}
