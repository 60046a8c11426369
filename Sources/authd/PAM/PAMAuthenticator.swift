import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// `pam.authenticate` and `pam.account`: proves a Unix user for a PAM service by the methods
/// `[pam]` allows there and the user has, in the policy's order, through the caller's prompts.
/// A method that cannot be used now (no card within the window, no reader, a finger that does
/// not match or never comes) hands over to the next, saying why; a wrong secret, a blocked PIN,
/// a lockout or another person's card ends the request. The card's window, the fingerprint
/// gate and the account's lockouts apply as everywhere else.
struct PAMAuthenticator: Sendable {
    let links: PAMLinkStore
    let cards: CardService
    let biometrics: BiometricService
    let directory: any MachineAccounts
    let config: ConfigHolder

    /// Finger attempts before handing over to the next method (as the card's PIN1 release).
    static let fingerAttempts = 3

    /// The uid of the Unix user a request names: a login name PAM could pass that the user
    /// database knows.
    static func unixUser(_ name: String) throws(PAMFailure) -> UInt32 {
        guard FingerprintUser.validated(name) != nil, let uid = Syscalls.userID(named: name) else { throw .unknownUser }
        return uid
    }

    /// The CA certificates of `[pam] ca_file`, read at each use so a renewed file needs no reload.
    static func cardAnchors(_ config: Config) throws(PAMFailure) -> [X509Certificate] {
        let file = config.pamCAFile
        guard !file.isEmpty, let bytes = try? Syscalls.readFile(file, limit: 1 << 20),
              let anchors = try? X509Certificate.certificates(pem: String(decoding: bytes, as: UTF8.self))
        else { throw .caFileUnusable(file.isEmpty ? "unset" : file) }
        return anchors
    }

    static func checkService(_ service: String) throws(InvalidParameter) {
        guard PAMMethod.isServiceName(service) else { throw InvalidParameter("service must be a PAM service name (1–64 of letters, digits, - _ . @)", field: "service") }
    }

    /// The methods to try for the user, in order: those the policy allows for the service that
    /// the user has set up (a linked card; an enrolled finger, and unless the service takes a
    /// finger alone, a linked account with a PIN to follow it; a linked account).
    private func plan(user: String, service: String, links: PAMLinks, config: Config) async throws -> [PAMMethod] {
        var plan: [PAMMethod] = []
        for method in config.pamMethods(service: service) {
            switch method {
            case .card:
                if links.card != nil { plan.append(.card) }
            case .account:
                if links.account != nil { plan.append(.account) }
            case .fingerprint:
                let alone = config.pamFingerprintAlone.contains(service)
                if !alone, try await !accountHasPIN(links) { continue }
                if case .success(let reader) = await biometrics.reader.probe(user: user), !reader.fingers.isEmpty { plan.append(.fingerprint) }
            }
        }
        return plan
    }

    private func accountHasPIN(_ links: PAMLinks) async throws -> Bool {
        guard let account = links.account else { return false }
        return try await directory.pinFactor(account: account) == .enrolled
    }

    func authenticate(_ params: PAMAuthenticate.Params, context: RequestContext) async throws -> PAMAuthenticate.Result {
        try Self.checkService(params.service)
        let uid = try Self.unixUser(params.user)
        let config = self.config.current
        let links = try await links.links(params.user)
        let plan = try await plan(user: params.user, service: params.service, links: links, config: config)
        guard !plan.isEmpty else { throw PAMFailure.noMethod(service: params.service) }
        for (index, method) in plan.enumerated() {
            do {
                let proved = try await prove(method, user: params.user, uid: uid, service: params.service, links: links, config: config, context: context)
                return PAMAuthenticate.Result(user: params.user, method: proved)
            } catch {
                guard index < plan.count - 1, let why = Self.handOver(error) else { throw error }
                // Said as PAM_TEXT_INFO before the next method's first prompt.
                let prompts = context.prompts
                let id = prompts.progress {}
                prompts.notify(id: id, kind: method == .card ? .card : .fingerprint, message: why, secondsLeft: nil)
                prompts.finish(id)
            }
        }
        throw PAMFailure.noMethod(service: params.service)
    }

    /// Why a method could not be used now and the next one may be tried; nil when the error
    /// is a decision (a wrong secret, a lockout, another card) that ends the request.
    static func handOver(_ error: any Error) -> String? {
        if let card = error as? CardFailure {
            switch card {
            case .timeout, .noReader, .serviceUnavailable, .removed, .unsupported: return card.rpcError.message
            default: return nil
            }
        }
        return BiometricFailure.fallbackPreface(error).map { $0.isEmpty ? "Fingerprint skipped." : String($0.dropLast()) }
    }

    private func prove(_ method: PAMMethod, user: String, uid: UInt32, service: String, links: PAMLinks, config: Config,
                       context: RequestContext) async throws -> String {
        switch method {
        case .card:
            guard let card = links.card else { throw PAMFailure.noMethod(service: service) }
            _ = try await cards.verifyHolder(personalCode: card.personalCode, window: config.pamCardWindowSeconds,
                                             anchors: try Self.cardAnchors(config), context: context) {
                "PIN1 for the ID card of \($0):"
            }
            return "card"
        case .fingerprint:
            // A finger alone is not enough here: the linked account's PIN follows it, and an
            // account that cannot sign in is refused before the finger is asked for.
            let alone = config.pamFingerprintAlone.contains(service)
            let account = alone ? nil : try await activeAccount(links, service: service).id
            let settings = try await biometrics.settings(uid)
            try await biometrics.verify(user: user, gateUID: uid, attempts: min(Self.fingerAttempts, max(1, settings.gate.attemptsLeft)),
                                        purpose: "to sign in as \(user) (\(service))", timeout: config.pamFingerprintTimeoutSeconds, context: context)
            guard let account else { return "fingerprint" }
            try await confirmPIN(account: account, context: context)
            return "fingerprint+pin"
        case .account:
            let account = try await activeAccount(links, service: service).id
            let password = try await context.prompts.ask(.password, message: "Password of the authd account of \(user):")
            // Counted against the account's lockout and padded, exactly as sign-in checks it.
            try await directory.confirmPassword(SecretBytes(Array(password.utf8)), account: account)
            switch try await directory.pinFactor(account: account) {
            case .enrolled: try await confirmPIN(account: account, context: context)
            // As at sign-in: after too many wrong PINs, the password alone proves nothing.
            case .switchedOff: throw AccountFailure.pinSwitchedOff
            case .none: break
            }
            return "account"
        }
    }

    /// The linked account and its record, refused before its password or PIN is asked when it
    /// cannot sign in (deactivated, or this machine removed from it): it proves nothing then,
    /// here as anywhere (`pam.account` refuses it in the same words).
    private func activeAccount(_ links: PAMLinks, service: String) async throws -> (id: String, record: AccountRecord) {
        guard let account = links.account else { throw PAMFailure.noMethod(service: service) }
        let record: AccountRecord
        do {
            record = try await directory.account(id: account)
        } catch MachineAccessFailure.notSignedIn {
            // A device's hub answers only while this machine is signed in to the account: the
            // sign-in is refused as for a deactivated account, not left undecided.
            throw PAMFailure.machineRemoved
        }
        if record.deactivatedAt != nil { throw PAMFailure.accountDeactivated }
        return (account, record)
    }

    private func confirmPIN(account: String, context: RequestContext) async throws {
        let pin = try await context.prompts.ask(.pin, message: "Account PIN:")
        try await directory.confirmPIN(SecretBytes(Array(pin.utf8)), account: account)
    }

    /// `pam.account`: a deactivated or locked linked account refuses the sign-in; a user with
    /// no linked account passes (other stack lines decide about them).
    func account(_ params: PAMAccount.Params) async throws -> PAMAccount.Result {
        try Self.checkService(params.service)
        _ = try Self.unixUser(params.user)
        let links = try await links.links(params.user)
        guard links.account != nil else { return .init(user: params.user, account: nil) }
        let (account, record) = try await activeAccount(links, service: params.service)
        if let until = record.lockedUntil { throw PAMFailure.accountLocked(until: until) }
        return .init(user: params.user, account: account)
    }
}
