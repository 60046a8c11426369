import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// Sign-in with an SMS code (issue 3, flow 5), built on the same challenge rules and store
/// as registration.
struct OTPLogin: Sendable {
    let phones: Registration

    private var seconds: Int64 { Int64(phones.now().timeIntervalSince1970) }

    func start(_ params: AuthOTPStart.Params) async throws -> OTPFlowInfo {
        let phone = try PhoneNumber.parse(params.phone, region: params.region)
        let now = seconds
        let policy = phones.policy
        let code = try Registration.newCode()
        let id = "flow_" + Base64URL.encode(try OpenSSL.randomBytes(16))
        let exists = try await phones.store.read { database in
            try database.queryOne("SELECT 1 FROM accounts WHERE phone = ? AND deactivated_at IS NULL", [.text(phone.e164)]) { $0.int(0) } != nil
        }
        // Without an account the flow gets a code nobody knows and no SMS is sent; the answer
        // is the same, so the method cannot tell who has an account.
        let mac = exists ? try phones.mac(flow: id, code: code) : try OpenSSL.randomBytes(32)
        let challenge = OTPChallenge.start(id: id, purpose: .login, phone: phone.e164, codeMAC: mac, now: now, policy: policy)
        try await phones.store.transaction { database in
            try Registration.checkSendLimit(in: database, phone: phone.e164, now: now, policy: policy)
            try Registration.insert(challenge, into: database)
            try database.execute("INSERT INTO sms_sends (phone, at) VALUES (?, ?)", [.text(phone.e164), .integer(now)])
        }
        if exists {
            do {
                try await phones.deliver(code: code, to: phone, flow: challenge)
            } catch {
                // Saying sms.undeliverable only for numbers with an account would tell who has
                // one; the failure is in the log, and the user can start again.
            }
        }
        return phones.info(challenge, policy: policy)
    }

    func verify(_ params: AuthOTPVerify.Params) async throws -> SignedIn {
        guard params.code.count == Registration.codeLength, params.code.allSatisfy({ $0.isASCII && $0.isNumber }) else {
            throw RPCError.invalidParams("Parameter 'code' must be \(Registration.codeLength) digits.", field: "code")
        }
        let device = try SessionStore.DeviceIdentity.resolve(params.device)
        let candidate = try phones.mac(flow: params.flow, code: params.code)
        let now = seconds
        let policy = phones.policy
        let config = phones.config.current
        let replacementCode = try Registration.newCode()
        let replacementMAC = try phones.mac(flow: params.flow, code: replacementCode)

        enum Outcome: Sendable {
            case signedIn(SignedIn)
            case refused(RPCError)
            case resend(OTPChallenge, RPCError)
        }
        let outcome = try await phones.store.transaction { database -> Outcome in
            guard var challenge = try Registration.load(params.flow, purpose: .login, from: database) else { throw Registration.unknownFlow }
            let matches = OpenSSL.constantTimeEquals(challenge.codeMAC, candidate)
            let result = challenge.verify(codeMatches: matches, now: now)
            switch result {
            case .accepted:
                try Registration.update(challenge, in: database)
                guard let account = try SessionStore.accountInfo(in: database, where: "phone", is: challenge.phone, includeDeactivated: false) else { return .refused(.failure(.otpWrong, "Wrong code.", details: ["attempts_left": 0])) }
                try database.execute("UPDATE accounts SET failed_logins = 0, locked_until = NULL WHERE id = ?", [.text(account.id)])
                let session = try SessionStore.create(in: database, account: account.id, device: device, amr: ["otp"], limit: config.deviceLimit, policy: config.devicePolicy, idle: Int64(config.sessionIdleSeconds),
                                                      now: now, lifetime: Int64(config.sessionLifetimeSeconds))
                return .signedIn(SignedIn(account: account, session: session))
            case .wrong:
                // A wrong code brings a fresh one at once, at most twice; then the flow ends. When
                // no new code may be sent (the number's hourly limit), the flow ends too: the
                // attempt must always be counted, never undone by an error.
                let sendsThisHour = try Registration.sendsInLastHour(in: database, phone: challenge.phone, now: now)
                guard challenge.resends < policy.maxResends, sendsThisHour < policy.maxSendsPerHour else {
                    challenge.state = .dead
                    try Registration.update(challenge, in: database)
                    return .refused(.failure(.otpAttemptsExhausted, "Wrong code again; sign in again from the start."))
                }
                let exists = try database.queryOne("SELECT 1 FROM accounts WHERE phone = ? AND deactivated_at IS NULL", [.text(challenge.phone)]) { $0.int(0) } != nil
                challenge.replaceCode(mac: exists ? replacementMAC : try OpenSSL.randomBytes(32), now: now, policy: policy)
                try Registration.update(challenge, in: database)
                try database.execute("INSERT INTO sms_sends (phone, at) VALUES (?, ?)", [.text(challenge.phone), .integer(now)])
                let error = RPCError.failure(.otpWrong, "Wrong code; a new one was sent.",
                                             details: ["new_code_sent": true, "resends_left": .integer(Int64(policy.maxResends - challenge.resends))])
                return exists ? .resend(challenge, error) : .refused(error)
            case .attemptsExhausted, .dead:
                try Registration.update(challenge, in: database)
                return .refused(.failure(.otpAttemptsExhausted, "Too many wrong codes; sign in again from the start."))
            case .expired:
                return .refused(.failure(.otpExpired, "The code has expired; sign in again."))
            case .alreadyUsed:
                return .refused(.failure(.otpUsed, "This code was already used."))
            }
        }
        switch outcome {
        case .signedIn(let signedIn):
            return signedIn
        case .refused(let error):
            throw error
        case .resend(let challenge, let error):
            // A failed delivery answers exactly like a sent code (see start): the caller must not
            // learn from it that the number has an account. The failure is logged.
            _ = try? await phones.deliver(code: replacementCode, to: try PhoneNumber.parse(challenge.phone, region: nil), flow: challenge)
            throw error
        }
    }
}
