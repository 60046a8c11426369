import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// Password sign-in and its second step. Every way of failing looks the same from outside —
/// `auth.failed`, after the same Argon2id work and no sooner than `CredentialPadding.delay` —
/// except a lock, which is safe to tell. The checks and the steps (`SignInFlow`) are the account
/// directory's; this type reads the request and says which accounts take a finger here.
struct Login: Sendable {
    let directory: any AccountDirectory
    /// This machine's fingerprint second steps (a machine fact: the finger is on this machine).
    let fingerprintSteps: FingerprintSteps

    func login(_ params: AuthLogin.Params, caller: Caller) async throws -> LoginStep {
        try await CredentialPadding.padded {
            guard params.password.count <= PasswordPolicy.maximum else {
                throw InvalidParameter("Parameter 'password' has at most \(PasswordPolicy.maximum) characters.", field: "password")
            }
            let device = try DeviceIdentity.resolve(params.device, caller: caller)
            let login = try Self.normalizeLogin(params.login, region: params.region)
            switch try await directory.signIn(password: SecretBytes(Array(params.password.utf8)), login: login, device: device,
                                              fingerprintAccounts: try await fingerprintSteps.accounts()) {
            case .signedIn(let signedIn): return LoginStep(account: signedIn.account, session: signedIn.session)
            case .secondStep(let flow, let step): return LoginStep(flow: flow, next: step.rawValue)
            }
        }
    }

    /// `auth.login.pin`: the PIN step of a sign-in the password opened.
    func loginPIN(_ params: AuthLoginPIN.Params) async throws -> SignedIn {
        try await CredentialPadding.padded {
            try await directory.completeSignIn(params.flow, pin: SecretBytes(Array((params.pin ?? "").utf8)))
        }
    }

    /// `login` as the directory names accounts: an email address (has `@`) or a phone number.
    /// Anything else is refused like a wrong password.
    static func normalizeLogin(_ login: String, region: String?) throws(AccountFailure) -> AccountKey {
        if login.contains("@") {
            guard let email = try? Registration.normalizeEmail(login) else { throw .authFailed }
            return .email(email)
        }
        guard let phone = try? PhoneNumber.parse(login, region: region) else { throw .authFailed }
        return .phone(phone.e164)
    }
}
