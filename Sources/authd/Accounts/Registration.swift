import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// Registration by phone number: start → SMS code → verify → account + session. The rules live
/// in `OTPChallenge`, the flow's state in the account directory (one change per step, so two
/// concurrent verifies of one code cannot both win).
struct Registration: Sendable {
    let directory: any CodeFlows
    let codes: SMSCodes
    let logger: Logger

    /// Every step of a registration is the caller's that started it (`FlowOwner`).
    func start(_ params: AccountRegisterStart.Params, caller: Caller) async throws -> OTPFlowInfo {
        let phone = try PhoneNumber.parse(params.phone, region: params.region)
        let (challenge, code) = try await codes.open(.registration, for: phone, owner: FlowOwner(caller))
        try await codes.deliver(code: code, to: phone, flow: challenge)
        return codes.info(challenge)
    }

    func resend(_ params: AccountRegisterResend.Params, caller: Caller) async throws -> OTPFlowInfo {
        let code = try SMSCodes.newCode()
        let challenge = try await directory.replaceCode(flow: params.flow, purpose: .registration, mac: try codes.mac(flow: params.flow, code: code),
                                                        owner: FlowOwner(caller), policy: codes.policy)
        try await codes.deliver(code: code, to: try PhoneNumber.parse(challenge.phone, region: nil), flow: challenge)
        return codes.info(challenge)
    }

    func verify(_ params: AccountRegisterVerify.Params, caller: Caller) async throws -> SignedIn {
        // Everything that can be refused without the code is checked first, so a typo in the
        // email or a weak password never burns an attempt.
        try SMSCodes.checkFormat(params.code)
        let email = try params.email.map(Self.normalizeEmail)
        let device = try DeviceIdentity.resolve(params.device, caller: caller)
        // An unknown flow is refused before any expensive work (Argon2id below).
        guard let phoneHint = try await directory.registrationPhone(flow: params.flow, owner: FlowOwner(caller)) else { throw AccountFailure.unknownRegistration }
        var passwordHash: String?
        if let password = params.password {
            try PasswordPolicy.check(password, hasSecondFactor: false, identifiers: [phoneHint, email ?? ""])
            passwordHash = try await Argon2id.owasp.hashOffPool(SecretBytes(Array(password.utf8)))
        }
        let signedIn = try await directory.register(flow: params.flow, codeMAC: try codes.mac(flow: params.flow, code: params.code), email: email,
                                                    passwordHash: passwordHash, device: device, owner: FlowOwner(caller))
        logger.notice("account registered", [("AUTHD_ACCOUNT", signedIn.account.id)] + caller.logFields)
        return signedIn
    }

    /// Characters that never appear unquoted in an address we accept.
    private static let emailForbidden = Set(#"()<>,;:\"[]"#.unicodeScalars)

    static func normalizeEmail(_ email: String) throws(AccountFailure) -> String {
        let parts = email.split(separator: "@", omittingEmptySubsequences: false)
        guard email.utf8.count <= 254, parts.count == 2, (1...64).contains(parts[0].utf8.count),
              parts[1].contains("."), !parts[1].hasPrefix("."), !parts[1].hasSuffix("."), !parts[1].contains(".."),
              email.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value != 0x7f && !Self.emailForbidden.contains($0) })
        else { throw .emailInvalid }
        // Addresses are identities here (sign-in, uniqueness): compared lower-cased whole.
        return email.lowercased()
    }
}
