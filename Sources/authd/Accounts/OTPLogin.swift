import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// Sign-in with an SMS code, on the same challenge rules as registration. Whether a number has
/// an account never shows: a number without one gets a flow with a code nobody knows, and the
/// same answers.
struct OTPLogin: Sendable {
    let directory: any CodeFlows
    let codes: SMSCodes

    /// The flow is the caller's that started it (`FlowOwner`): only it may verify the code.
    func start(_ params: AuthOTPStart.Params, caller: Caller) async throws -> OTPFlowInfo {
        let phone = try PhoneNumber.parse(params.phone, region: params.region)
        let exists = try await directory.hasActiveAccount(phone: phone.e164)
        let (challenge, code) = try await codes.open(.login, for: phone, knowable: exists, owner: FlowOwner(caller))
        if exists {
            do {
                try await codes.deliver(code: code, to: phone, flow: challenge)
            } catch {
                // Saying sms.undeliverable only for numbers with an account would tell who has
                // one; the failure is in the log, and the user can start again.
            }
        }
        return codes.info(challenge)
    }

    func verify(_ params: AuthOTPVerify.Params, caller: Caller) async throws -> SignedIn {
        try SMSCodes.checkFormat(params.code)
        let device = try DeviceIdentity.resolve(params.device, caller: caller)
        let replacementCode = try SMSCodes.newCode()
        switch try await directory.signInWithCode(flow: params.flow, codeMAC: try codes.mac(flow: params.flow, code: params.code),
                                                  replacementMAC: try codes.mac(flow: params.flow, code: replacementCode), device: device, owner: FlowOwner(caller),
                                                  policy: codes.policy) {
        case .signedIn(let signedIn):
            return signedIn
        case .replaced(let challenge, let deliver, let failure):
            // A failed delivery answers exactly like a sent code (see start): the caller must not
            // learn from it that the number has an account. The failure is logged.
            if deliver { _ = try? await codes.deliver(code: replacementCode, to: try PhoneNumber.parse(challenge.phone, region: nil), flow: challenge) }
            throw failure
        }
    }
}
