import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// Password sign-in and its second step. Every way of failing looks the same from outside —
/// `auth.failed`, after the same Argon2id work and no sooner than `CredentialPadding.delay` —
/// except a lock, which is safe to tell. The checks and the steps (`SignInFlow`) are the account
/// directory's; this type reads the request and says which accounts take a finger here.
struct Login: Sendable {
    let directory: any PasswordSignIns & LinkedMachines
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
                                              fingerprintAccounts: try await fingerprintAccounts(caller)) {
            case .signedIn(let signedIn): return LoginStep(account: signedIn.account, session: signedIn.session)
            case .secondStep(let flow, let step): return LoginStep(flow: flow, next: step.rawValue)
            }
        }
    }

    /// The accounts whose second step is a finger where the sign-in is made: this machine's, or,
    /// for a sign-in a linked machine forwards, those it names that it is signed in to already
    /// (it scans the finger; a machine new to the account takes the PIN).
    private func fingerprintAccounts(_ caller: Caller) async throws -> Set<String> {
        guard case .forwarded(let machine, let process) = caller else { return try await fingerprintSteps.accounts() }
        var accounts: Set<String> = []
        for account in (process.fingerprintAccounts ?? []).prefix(Self.fingerprintAccountsLimit)
        where try await directory.machineDevice(account: account, machine: machine)?.live == true {
            accounts.insert(account)
        }
        return accounts
    }

    /// At most this many accounts a machine names are looked at (a machine has a few users).
    static let fingerprintAccountsLimit = 16

    /// `auth.login.pin`: the PIN step of a sign-in the password opened.
    /// Only the machine and local user that opened the flow may finish it.
    func loginPIN(_ params: AuthLoginPIN.Params, caller: Caller) async throws -> SignedIn {
        try await CredentialPadding.padded {
            try await directory.completeSignIn(params.flow, pin: SecretBytes(Array((params.pin ?? "").utf8)), owner: FlowOwner(caller))
        }
    }

    /// `login` as the directory names accounts: an email address (has `@`) or a phone number.
    /// Anything else is refused like a wrong password (`AccountFailure.authFailed`); only
    /// libphonenumber's absence is another error.
    static func normalizeLogin(_ login: String, region: String?) throws -> AccountKey {
        if login.contains("@") {
            guard let email = try? Registration.normalizeEmail(login) else { throw AccountFailure.authFailed }
            return .email(email)
        }
        guard let phone = try PhoneNumber.parseIfNumber(login, region: region) else { throw AccountFailure.authFailed }
        return .phone(phone.e164)
    }
}
