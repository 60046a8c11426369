import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// The one-time codes of registration and sign-in by SMS: six random digits, kept only as an
/// HMAC bound to their flow (`[accounts] code_lifetime`, `resend_delay`), and their delivery
/// through the configured gateway (`[sms] backend`), always outside any store change.
struct SMSCodes: Sendable {
    let directory: any CodeFlows
    let config: ConfigHolder
    /// HMAC key for codes (HKDF label `otp-code`).
    let key: SecretBytes
    let stateDirectory: String
    let logger: Logger
    /// For the `http` SMS backend.
    let http: HTTPClient
    let now: @Sendable () -> Date

    static let length = 6

    var seconds: Int64 { Int64(now().timeIntervalSince1970) }

    var policy: OTPChallenge.Policy {
        let config = config.current
        return OTPChallenge.Policy(codeLifetime: Int64(config.codeLifetimeSeconds), resendDelay: Int64(config.resendDelaySeconds))
    }

    /// Whether the gateway hands a message over at once, on this machine (the spool: a file
    /// written): sent before an answer that must not wait for a real gateway.
    var sendsAtOnce: Bool { config.current.smsBackend == .spool }

    private var gateway: any SMSGateway {
        let config = config.current
        switch config.smsBackend {
        case .spool: return SpoolSMSGateway(directory: stateDirectory + "/sms-spool", logger: logger)
        case .command: return CommandSMSGateway(program: config.smsCommand, timeoutSeconds: config.smsTimeoutSeconds)
        case .http: return HTTPSMSGateway(http: http, url: config.smsURL, tokenFile: config.smsTokenFile, timeoutSeconds: config.smsTimeoutSeconds)
        }
    }

    /// Opens a code flow for `phone` in the directory (the number's hourly limit applies) and
    /// returns it with its code, to be delivered. With `knowable` false (sign-in for a number
    /// without an account) the flow holds a code nobody knows, and nothing is to be sent.
    /// `owner`: the caller that may take the flow's next steps.
    func open(_ purpose: OTPChallenge.Purpose, for phone: PhoneNumber, knowable: Bool = true, owner: FlowOwner) async throws -> (OTPChallenge, code: String) {
        let code = try Self.newCode()
        let id = try Self.newFlowID()
        let mac = knowable ? try mac(flow: id, code: code) : try OpenSSL.randomBytes(32)
        let challenge = OTPChallenge.start(id: id, purpose: purpose, phone: phone.e164, codeMAC: mac, now: seconds, policy: policy)
        try await directory.openCodeChallenge(challenge, owner: owner, policy: policy)
        return (challenge, code)
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
            do {
                try await directory.voidCode(flow: flow.id, mac: flow.codeMAC)
            } catch {
                logger.error("could not mark an undelivered code void: \(error)", [("AUTHD_FLOW", flow.id)])
            }
            throw AccountFailure.codeUndeliverable(redactedPhone: phone.redacted, flow: flow.id)
        }
    }

    /// Six uniformly random digits (rejection sampling: no modulo bias).
    static func newCode() throws -> String {
        while true {
            let bytes = try OpenSSL.randomBytes(4)
            let value = bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }
            guard value < 4_294_000_000 else { continue }
            let digits = String(value % 1_000_000)
            return String(repeating: "0", count: length - digits.count) + digits
        }
    }

    static func newFlowID() throws -> String {
        "flow_" + Base64URL.encode(try OpenSSL.randomBytes(16))
    }

    /// Codes are stored only as HMACs bound to their flow.
    func mac(flow: String, code: String) throws -> [UInt8] {
        try OpenSSL.hmacSHA256(key: key, data: Array("\(flow):\(code)".utf8))
    }

    static func checkFormat(_ code: String) throws(InvalidParameter) {
        guard code.count == length, code.allSatisfy({ $0.isASCII && $0.isNumber }) else {
            throw InvalidParameter("Parameter 'code' must be \(length) digits.", field: "code")
        }
    }

    func info(_ challenge: OTPChallenge) -> OTPFlowInfo {
        OTPFlowInfo(flow: challenge.id, phone: challenge.phone, codeLength: Self.length,
                    expiresAt: Timestamp.rfc3339(epochSeconds: challenge.expiresAt),
                    resendAfter: Timestamp.rfc3339(epochSeconds: challenge.resendAfter),
                    resendsLeft: max(0, policy.maxResends - challenge.resends))
    }
}
