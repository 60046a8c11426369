import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// Registration by phone number (issue 3, flow 1): start → SMS code → verify → account +
/// session. Rules live in `OTPChallenge`; this type does the I/O around them: the store (one
/// transaction per step, so two concurrent verifies of one code cannot both win) and the SMS
/// gateway (always outside a transaction).
struct Registration: Sendable {
    let store: Store
    let config: ConfigHolder
    let codeKey: SecretBytes
    let stateDirectory: String
    let logger: Logger
    /// For the `http` SMS backend.
    let http: HTTPClient
    let now: @Sendable () -> Date

    static let codeLength = 6

    private var seconds: Int64 { Int64(now().timeIntervalSince1970) }

    var policy: OTPChallenge.Policy {
        let config = config.current
        return OTPChallenge.Policy(codeLifetime: Int64(config.codeLifetimeSeconds), resendDelay: Int64(config.resendDelaySeconds))
    }

    private var gateway: any SMSGateway {
        let config = config.current
        switch config.smsBackend {
        case .spool: return SpoolSMSGateway(directory: stateDirectory + "/sms-spool", logger: logger)
        case .command: return CommandSMSGateway(program: config.smsCommand, timeoutSeconds: config.smsTimeoutSeconds)
        case .http: return HTTPSMSGateway(http: http, url: config.smsURL, tokenFile: config.smsTokenFile, timeoutSeconds: config.smsTimeoutSeconds)
        }
    }

    // MARK: start / resend

    func start(_ params: AccountRegisterStart.Params) async throws -> OTPFlowInfo {
        let phone = try PhoneNumber.parse(params.phone, region: params.region)
        let now = seconds
        let policy = policy
        let code = try Self.newCode()
        let id = "flow_" + Base64URL.encode(try OpenSSL.randomBytes(16))
        let challenge = OTPChallenge.start(id: id, purpose: .registration, phone: phone.e164, codeMAC: try mac(flow: id, code: code), now: now, policy: policy)
        try await store.transaction { database in
            try Self.checkSendLimit(in: database, phone: phone.e164, now: now, policy: policy)
            try Self.insert(challenge, into: database)
            try database.execute("INSERT INTO sms_sends (phone, at) VALUES (?, ?)", [.text(phone.e164), .integer(now)])
        }
        try await deliver(code: code, to: phone, flow: challenge)
        return info(challenge, policy: policy)
    }

    func resend(_ params: AccountRegisterResend.Params) async throws -> OTPFlowInfo {
        let now = seconds
        let policy = policy
        let code = try Self.newCode()
        let newMAC = try mac(flow: params.flow, code: code)
        let challenge = try await store.transaction { database -> OTPChallenge in
            guard var challenge = try Self.load(params.flow, purpose: .registration, from: database) else { throw Self.unknownFlow }
            switch challenge.checkResend(now: now, policy: policy) {
            case .allowed: break
            case .closed: throw RPCError.failure(.otpUnknownFlow, "This registration is finished; start again.")
            case .tooManyResends:
                throw RPCError.failure(.otpTooManySends, "No more codes for this registration (at most \(policy.maxResends) resends); start again later.")
            case .tooEarly(let retryAfter):
                throw RPCError.failure(.otpTooEarly, "Wait \(retryAfter) s before asking for a new code.", details: ["retry_after": .integer(retryAfter)])
            }
            try Self.checkSendLimit(in: database, phone: challenge.phone, now: now, policy: policy)
            challenge.replaceCode(mac: newMAC, now: now, policy: policy)
            try Self.update(challenge, in: database)
            try database.execute("INSERT INTO sms_sends (phone, at) VALUES (?, ?)", [.text(challenge.phone), .integer(now)])
            return challenge
        }
        try await deliver(code: code, to: try PhoneNumber.parse(challenge.phone, region: nil), flow: challenge)
        return info(challenge, policy: policy)
    }

    /// Sends the code; on failure marks it undeliverable (never valid) and says so.
    func deliver(code: String, to phone: PhoneNumber, flow: OTPChallenge) async throws {
        let minutes = max(1, (flow.expiresAt - seconds + 59) / 60)
        let text = "Your authd code is \(code). It expires in \(minutes) min. Do not share it with anyone."
        do {
            try await gateway.send(text, to: phone)
        } catch {
            logger.warning("SMS to \(phone.redacted) not delivered: \(error)", [("AUTHD_FLOW", flow.id)])
            // The code never reached anyone; mark it void and let the user ask again at once.
            let now = seconds
            do {
                try await store.transaction { database in
                    try database.execute("UPDATE otp_flows SET code_deliverable = 0, resend_after = ? WHERE id = ? AND code_mac = ?",
                                         [.integer(now), .text(flow.id), .blob(flow.codeMAC)])
                }
            } catch {
                logger.error("could not mark an undelivered code void: \(error)", [("AUTHD_FLOW", flow.id)])
            }
            throw RPCError.failure(.smsUndeliverable, "The code could not be sent to \(phone.redacted); try again with resend.",
                                   details: ["flow": .string(flow.id)])
        }
    }

    // MARK: verify

    func verify(_ params: AccountRegisterVerify.Params, caller: CallerIdentity) async throws -> SignedIn {
        // Everything that can be refused without the code is checked first, so a typo in the
        // email or a weak password never burns an attempt.
        guard params.code.count == Self.codeLength, params.code.allSatisfy({ $0.isASCII && $0.isNumber }) else {
            throw RPCError.invalidParams("Parameter 'code' must be \(Self.codeLength) digits.", field: "code")
        }
        let email = try params.email.map(Self.normalizeEmail)
        let device = try SessionStore.DeviceIdentity.resolve(params.device)
        var passwordHash: String?
        // An unknown flow is refused before any expensive work (Argon2id below).
        guard let phoneHint = try await store.read({ try Self.load(params.flow, purpose: .registration, from: $0)?.phone }) else {
            throw Self.unknownFlow
        }
        if let password = params.password {
            try PasswordPolicy.check(password, hasSecondFactor: false, identifiers: [phoneHint, email ?? ""])
            passwordHash = try await Argon2id.owasp.hashOffPool(SecretBytes(Array(password.utf8)))
        }
        let candidate = try mac(flow: params.flow, code: params.code)
        let now = seconds
        let config = config.current

        enum Outcome: Sendable {
            case signedIn(SignedIn)
            case refused(RPCError)
        }
        // One transaction: the attempt is counted (and persisted) even when it fails, and a
        // code can complete exactly one flow.
        let outcome = try await store.transaction { database -> Outcome in
            guard var challenge = try Self.load(params.flow, purpose: .registration, from: database) else { throw Self.unknownFlow }
            let matches = OpenSSL.constantTimeEquals(challenge.codeMAC, candidate)
            let result = challenge.verify(codeMatches: matches, now: now)
            try Self.update(challenge, in: database)
            switch result {
            case .accepted: break
            case .wrong(let left):
                return .refused(.failure(.otpWrong, "Wrong code; \(left) attempt\(left == 1 ? "" : "s") left.", details: ["attempts_left": .integer(Int64(left))]))
            case .attemptsExhausted, .dead:
                return .refused(.failure(.otpAttemptsExhausted, "Too many wrong codes; start the registration again."))
            case .expired:
                return .refused(.failure(.otpExpired, "The code has expired; ask for a new one.", details: ["expired_at": .string(Timestamp.rfc3339(epochSeconds: challenge.expiresAt))]))
            case .alreadyUsed:
                return .refused(.failure(.otpUsed, "This code was already used."))
            }
            // The number is proven now; only now may we say it is taken.
            if try database.queryOne("SELECT 1 FROM accounts WHERE phone = ?", [.text(challenge.phone)], row: { $0.int(0) }) != nil {
                return .refused(.failure(.phoneTaken, "This number already has an account; sign in instead."))
            }
            if let email, try database.queryOne("SELECT 1 FROM accounts WHERE email = ?", [.text(email)], row: { $0.int(0) }) != nil {
                // Not the code's fault: keep the flow open so the user can retry with another
                // address (the attempt is not counted either).
                challenge.state = .open
                try Self.update(challenge, in: database)
                return .refused(.failure(.emailTaken, "This email address belongs to another account; use another one or none."))
            }
            let accountID = "acc_" + Base64URL.encode(try OpenSSL.randomBytes(12))
            try database.execute(
                "INSERT INTO accounts (id, phone, phone_verified_at, email, password_hash, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                [.text(accountID), .text(challenge.phone), .integer(now), email.map { .text($0) } ?? .null,
                 passwordHash.map { .text($0) } ?? .null, .integer(now)])
            // The password was only set here, not used to sign in: the method is the code.
            let session = try SessionStore.create(in: database, account: accountID, device: device, amr: ["otp"],
                                                  limit: config.deviceLimit, policy: config.devicePolicy, idle: Int64(config.sessionIdleSeconds), now: now, lifetime: Int64(config.sessionLifetimeSeconds))
            return .signedIn(SignedIn(account: AccountInfo(id: accountID, phone: challenge.phone, email: email, hasPassword: passwordHash != nil), session: session))
        }
        switch outcome {
        case .signedIn(let signedIn):
            logger.notice("account registered", [("AUTHD_ACCOUNT", signedIn.account.id), ("AUTHD_CALLER_UID", String(caller.uid))])
            return signedIn
        case .refused(let error):
            throw error
        }
    }

    // MARK: Helpers

    static let unknownFlow = RPCError.failure(.otpUnknownFlow, "No such registration; start again.")

    /// Six uniformly random digits (rejection sampling: no modulo bias).
    static func newCode() throws -> String {
        while true {
            let bytes = try OpenSSL.randomBytes(4)
            let value = bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }
            guard value < 4_294_000_000 else { continue }
            let digits = String(value % 1_000_000)
            return String(repeating: "0", count: codeLength - digits.count) + digits
        }
    }

    /// Codes are stored only as HMACs bound to their flow.
    func mac(flow: String, code: String) throws -> [UInt8] {
        try OpenSSL.hmacSHA256(key: codeKey, data: Array("\(flow):\(code)".utf8))
    }

    /// Characters that never appear unquoted in an address we accept.
    private static let emailForbidden = Set(#"()<>,;:\"[]"#.unicodeScalars)

    static func normalizeEmail(_ email: String) throws(RPCError) -> String {
        let parts = email.split(separator: "@", omittingEmptySubsequences: false)
        guard email.utf8.count <= 254, parts.count == 2, (1...64).contains(parts[0].utf8.count),
              parts[1].contains("."), !parts[1].hasPrefix("."), !parts[1].hasSuffix("."), !parts[1].contains(".."),
              email.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value != 0x7f && !Self.emailForbidden.contains($0) })
        else { throw .failure(.emailInvalid, "That is not a usable email address.") }
        // Addresses are identities here (sign-in, uniqueness): compared lower-cased whole.
        return email.lowercased()
    }

    static func sendsInLastHour(in database: Database, phone: String, now: Int64) throws -> Int {
        try database.queryOne("SELECT count(*) FROM sms_sends WHERE phone = ? AND at > ?", [.text(phone), .integer(now - 3600)]) { $0.int(0) } ?? 0
    }

    static func checkSendLimit(in database: Database, phone: String, now: Int64, policy: OTPChallenge.Policy) throws {
        let sends = try database.query("SELECT at FROM sms_sends WHERE phone = ? AND at > ? ORDER BY at", [.text(phone), .integer(now - 3600)]) { $0.int64(0) }
        if sends.count >= policy.maxSendsPerHour {
            let retryAfter = (sends.first ?? now) + 3600 - now
            throw RPCError.failure(.otpTooManySends, "Too many codes sent to this number; try again in \(retryAfter / 60 + 1) min.",
                                   details: ["retry_after": .integer(retryAfter)])
        }
    }

    func info(_ challenge: OTPChallenge, policy: OTPChallenge.Policy) -> OTPFlowInfo {
        OTPFlowInfo(flow: challenge.id, phone: challenge.phone, codeLength: Self.codeLength,
                    expiresAt: Timestamp.rfc3339(epochSeconds: challenge.expiresAt),
                    resendAfter: Timestamp.rfc3339(epochSeconds: challenge.resendAfter),
                    resendsLeft: max(0, policy.maxResends - challenge.resends))
    }

    static func insert(_ challenge: OTPChallenge, into database: Database) throws {
        try database.execute(
            """
            INSERT INTO otp_flows (id, purpose, phone, code_mac, code_deliverable, created_at, expires_at, resend_after, resends, attempts_left, state)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [.text(challenge.id), .text(challenge.purpose.rawValue), .text(challenge.phone), .blob(challenge.codeMAC),
             .integer(challenge.codeDeliverable ? 1 : 0), .integer(challenge.createdAt), .integer(challenge.expiresAt),
             .integer(challenge.resendAfter), .integer(Int64(challenge.resends)), .integer(Int64(challenge.attemptsLeft)), .text(challenge.state.rawValue)])
    }

    static func update(_ challenge: OTPChallenge, in database: Database) throws {
        try database.execute(
            "UPDATE otp_flows SET code_mac = ?, code_deliverable = ?, expires_at = ?, resend_after = ?, resends = ?, attempts_left = ?, state = ? WHERE id = ?",
            [.blob(challenge.codeMAC), .integer(challenge.codeDeliverable ? 1 : 0), .integer(challenge.expiresAt), .integer(challenge.resendAfter),
             .integer(Int64(challenge.resends)), .integer(Int64(challenge.attemptsLeft)), .text(challenge.state.rawValue), .text(challenge.id)])
    }

    static func load(_ id: String, purpose: OTPChallenge.Purpose, from database: Database) throws -> OTPChallenge? {
        guard id.utf8.count <= 64 else { return nil }
        return try database.queryOne(
            "SELECT id, purpose, phone, code_mac, code_deliverable, created_at, expires_at, resend_after, resends, attempts_left, state FROM otp_flows WHERE id = ? AND purpose = ?",
            [.text(id), .text(purpose.rawValue)]
        ) { row in
            OTPChallenge(id: row.text(0), purpose: OTPChallenge.Purpose(rawValue: row.text(1)) ?? purpose, phone: row.text(2), codeMAC: row.blob(3),
                         codeDeliverable: row.int(4) != 0, createdAt: row.int64(5), expiresAt: row.int64(6), resendAfter: row.int64(7),
                         resends: row.int(8), attemptsLeft: row.int(9), state: OTPChallenge.State(rawValue: row.text(10)) ?? .dead)
        }
    }
}
