import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// Sign-in with an SMS code, on the same challenge rules as registration. Whether a number has
/// an account never shows: a number without one gets a flow with a code nobody knows, and the
/// same answers, at the same time.
struct OTPLogin: Sendable {
    let directory: any CodeFlows
    let codes: SMSCodes

    /// When `start`, and `verify` refusing a wrong code, answer: this long after the request came,
    /// whether or not a code went out. Only a number with an account gets one, and a gateway
    /// takes its time (a program to run, an HTTP request): an answer that waited for it would
    /// say who has an account. So a real gateway sends beside the answer; the spool (a file
    /// written here, well within this) has sent the code by the answer.
    static let answerAfter: Duration = CredentialPadding.delay

    /// The flow is the caller's that started it (`FlowOwner`): only it may verify the code.
    func start(_ params: AuthOTPStart.Params, caller: Caller) async throws -> OTPFlowInfo {
        let started = ContinuousClock.now
        let phone = try PhoneNumber.parse(params.phone, region: params.region)
        let exists = try await directory.hasActiveAccount(phone: phone.e164)
        let (challenge, code) = try await codes.open(.login, for: phone, knowable: exists, owner: FlowOwner(caller))
        // Saying sms.undeliverable only for numbers with an account would tell who has one; a
        // failure is in the log, and the user can start again.
        await answerOnTime(started: started, sending: exists ? (code, phone, challenge) : nil)
        return codes.info(challenge)
    }

    /// Sends `code` (when there is one to send; a failure is logged, never told), and returns
    /// `answerAfter` after `started`.
    private func answerOnTime(started: ContinuousClock.Instant, sending: (code: String, phone: PhoneNumber, flow: OTPChallenge)?) async {
        if let (code, phone, flow) = sending {
            let codes = self.codes
            if codes.sendsAtOnce {
                _ = try? await codes.deliver(code: code, to: phone, flow: flow)
            } else {
                // Not the request's task: its audit scope ends with the answer.
                Task.detached { _ = try? await codes.deliver(code: code, to: phone, flow: flow) }
            }
        }
        try? await Task.sleep(until: started + Self.answerAfter, clock: .continuous)
    }

    func verify(_ params: AuthOTPVerify.Params, caller: Caller) async throws -> SignedIn {
        let started = ContinuousClock.now
        try SMSCodes.checkFormat(params.code)
        let device = try DeviceIdentity.resolve(params.device, caller: caller)
        let replacementCode = try SMSCodes.newCode()
        switch try await directory.signInWithCode(flow: params.flow, codeMAC: try codes.mac(flow: params.flow, code: params.code),
                                                  replacementMAC: try codes.mac(flow: params.flow, code: replacementCode), device: device, owner: FlowOwner(caller),
                                                  policy: codes.policy) {
        case .signedIn(let signedIn):
            return signedIn
        case .replaced(let challenge, let deliver, let failure):
            // A failed delivery answers exactly like a sent code, and as soon (see start): the
            // caller must not learn from it that the number has an account. The failure is logged.
            let phone = try PhoneNumber.parse(challenge.phone, region: nil)
            await answerOnTime(started: started, sending: deliver ? (replacementCode, phone, challenge) : nil)
            throw failure
        }
    }
}
