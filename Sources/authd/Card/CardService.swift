import FoundationEssentials
import OpenSSLCrypto
import Protocol
import SmartCard
import Synchronization

/// The ID-card flows: read, login and sign. Each runs as one card operation (one at a time):
/// it asks the caller for what is missing (PIN, then the card, then the CAN if the card is
/// contactless and none is saved), then does all card work inside one PC/SC transaction.
/// PIN and CAN formats are checked before the card is touched, so a typo burns no retry.
struct CardService: Sendable {
    let readers: CardQueue
    let secrets: CardSecrets
    let biometrics: BiometricService
    let config: ConfigHolder
    let logger: Logger
    let now: @Sendable () -> Date
    /// CANs typed for an operation that ended with `card.removed`, so the retry needs no new
    /// entry. Memory only, per uid, for five minutes.
    let recentCANs = RecentCANs()

    // MARK: Input rules (pure)

    static func validCAN(_ text: String) throws(CardFailure) -> [UInt8] {
        let bytes = Array(text.utf8)
        guard bytes.count == 6, bytes.allSatisfy({ (0x30...0x39).contains($0) }) else { throw .canInvalid }
        return bytes
    }

    static func validPIN(_ text: String, _ pin: EstEID.PIN) throws(CardFailure) -> [UInt8] {
        let bytes = Array(text.utf8)
        guard pin.lengths.contains(bytes.count), bytes.allSatisfy({ (0x30...0x39).contains($0) }) else { throw .pinInvalidLength(pin) }
        return bytes
    }

    func window(_ requested: Int?) throws(InvalidParameter) -> Int {
        guard let requested else { return config.current.cardWindowSeconds }
        guard (1...600).contains(requested) else { throw InvalidParameter("timeout_s must be 1–600 seconds", field: "timeout_s") }
        return requested
    }

    // MARK: Secrets

    func setCAN(_ can: String, uid: UInt32) async throws {
        var bytes = try Self.validCAN(can)
        defer { OpenSSL.wipe(&bytes) }
        try await secrets.save(.can, uid: uid, SecretBytes(bytes))
    }

    func savedCAN(uid: UInt32) async throws -> String? {
        try await secrets.load(.can, uid: uid).map { secret in secret.withUnsafeBytes { String(decoding: $0, as: UTF8.self) } }
    }

    func savePIN1(_ pin: String, uid: UInt32) async throws {
        var bytes = try Self.validPIN(pin, .pin1)
        defer { OpenSSL.wipe(&bytes) }
        try await secrets.save(.pin1, uid: uid, SecretBytes(bytes))
        // A new PIN1 lifts the suspension a refused one caused.
        if try await biometrics.settings(uid).pin1 == .suspended {
            try await biometrics.update(uid) { $0.pin1 = $0.pin1.afterPIN1Saved() }
        }
    }

    /// Finger attempts to release the saved PIN1 before asking for it by hand.
    static let pin1FingerAttempts = 3

    /// PIN1 for a login of `format`: the saved one where the format may use it (released by a
    /// matching finger when the user turned that on), or asked for. A finger that fails or a
    /// reader that is unavailable is said in the PIN1 prompt, which follows.
    /// `seen`: what a read of the card before the question showed (its holder, the tries left),
    /// for the dialog.
    private func obtainPIN1(_ context: RequestContext, window: Int, format: CardTokens.Format, purpose: String, wrong: String? = nil,
                            seen: SeenCard? = nil) async throws -> (secret: SecretBytes, saved: Bool, byFinger: Bool) {
        let uid = context.caller.uid
        // A website's login asks as if no PIN1 were saved, on the desktop (where the card read
        // first, `seen`, shows whose name goes to the site) and on the client's connection alike.
        guard wrong == nil, format.usesSavedPIN1, let saved = try await secrets.load(.pin1, uid: uid) else {
            return (try await askPIN(.pin1, context, window: window, purpose: purpose, preface: seen.map { DeskWording.handedOver($0.holder) + " " } ?? "",
                                     wrong: wrong, retriesLeft: wrong == nil ? seen?.retriesLeft : nil), false, false)
        }
        let settings = try await biometrics.settings(uid)
        guard settings.pin1 == .fingerprint else { return (saved, true, false) }
        let why: String
        do {
            try await biometrics.verify(user: try BiometricService.user(of: context.caller), gateUID: uid,
                                        attempts: min(Self.pin1FingerAttempts, max(1, settings.gate.attemptsLeft)),
                                        purpose: "to release PIN1 \(purpose)", context: context)
            return (saved, true, true)
        } catch {
            guard let preface = BiometricFailure.fallbackPreface(error) else { throw error }
            why = preface
        }
        return (try await askPIN(.pin1, context, window: window, purpose: purpose, preface: why), false, false)
    }

    // MARK: Flows

    func listReaders() async throws -> Protocol.CardReaders.Result {
        let states = try await readers.list()
        return Protocol.CardReaders.Result(readers: states.map {
            .init(name: $0.name, cardPresent: $0.cardPresent, atr: $0.cardPresent ? Hex.encode($0.atr) : nil)
        })
    }

    /// Asks for a PIN on the caller's connection, waiting at most the card's window for the
    /// answer, and checks its format.
    /// `wrong`: what the card said of the PIN typed the last time (a desktop dialog asks again).
    private func askPIN(_ pin: EstEID.PIN, _ context: RequestContext, window: Int, purpose: String, preface: String = "",
                        wrong: String? = nil, retriesLeft: Int? = nil) async throws -> SecretBytes {
        let name = pin == .pin1 ? "PIN1" : "PIN2"
        let answer = try await context.prompts.ask(pin == .pin1 ? .pin1 : .pin2, message: preface + "Enter \(name) \(purpose)",
                                                   retriesLeft: retriesLeft, error: wrong, within: .seconds(window))
        var bytes = try Self.validPIN(answer, pin)
        defer { OpenSSL.wipe(&bytes) }
        return SecretBytes(bytes)
    }

    /// "Present your card": progress prompts with the seconds left until the card is in a reader.
    private func presentCard(_ context: RequestContext, until deadline: ContinuousClock.Instant, window: Int,
                             skipping stale: PCSC.ReaderState?) async throws -> PCSC.ReaderState {
        let flag = CancelFlag()
        let prompts = context.prompts
        let readers = self.readers
        let id = prompts.progress { flag.set(); readers.cancelWaiting() }
        defer { prompts.finish(id) }
        return try await readers.waitForCard(until: deadline, window: window, skipping: stale, cancelled: flag) { left in
            prompts.notify(id: id, kind: .card, message: "Place your ID card on the reader — \(left) s left", secondsLeft: left)
        }
    }

    /// The CAN for a contactless card: saved, remembered from a removed attempt, or asked
    /// (waiting at most the card's window for the answer).
    private func obtainCAN(_ context: RequestContext, window: Int) async throws -> (can: SecretBytes, saved: Bool) {
        let uid = context.caller.uid
        if let saved = try await secrets.load(.can, uid: uid) { return (saved, true) }
        if let recent = recentCANs.take(uid: uid, now: now()) { return (recent, false) }
        let answer = try await context.prompts.ask(.can, message: "Enter the card's CAN (6 digits on its front)", within: .seconds(window))
        var bytes = try Self.validCAN(answer)
        defer { OpenSSL.wipe(&bytes) }
        return (SecretBytes(bytes), false)
    }

    private static func bytes(_ secret: SecretBytes) -> [UInt8] { secret.withUnsafeBytes { Array($0) } }

    /// One try at the card in a reader: its result, or the finding that no card was really
    /// there (the connection was lost before the card answered anything).
    private enum Attempt<T: Sendable>: Sendable {
        case done(T)
        case noCard
    }

    /// The common part of every flow: the card, the CAN if needed, one transaction; failures
    /// that concern saved secrets delete them.
    ///
    /// A card pulled just before the operation can still show in its reader for a moment
    /// (pcscd polls for presence): connecting to it, or its first command, fails. That is not
    /// a card removed during the operation but no card yet, so authd waits for one again until
    /// the window ends, as if the reader had looked empty. Once the card has answered a command,
    /// losing it is `card.removed`.
    private func withCard<T: Sendable>(_ context: RequestContext, window: Int, pin1: (secret: SecretBytes, saved: Bool)?,
                                       _ work: @escaping @Sendable (IDCard) throws(CardFailure) -> T) async throws -> T {
        let deadline = ContinuousClock.now + .seconds(window)
        let uid = context.caller.uid
        var stale: PCSC.ReaderState?
        var can: (can: SecretBytes, saved: Bool)?
        while true {
            let reader = try await presentCard(context, until: deadline, window: window, skipping: stale)
            guard let interface = IDCard.interface(forATR: reader.atr) else { throw CardFailure.unsupported }
            if interface == .contactless, can == nil { can = try await obtainCAN(context, window: window) }
            let canSecret = interface == .contactless ? can?.can : nil
            let outcome: Result<Attempt<T>, CardFailure> = await readers.runCatching { pcsc throws(CardFailure) in
                var connected: PCSC.Card?
                do throws(CardFailure) {
                    let card = try pcsc.connect(reader.name)
                    connected = card
                    defer { card.disconnect() }
                    try card.begin()
                    defer { card.end() }
                    let idCard = IDCard(card: card, interface: interface)
                    if let canSecret {
                        // Made here, and only here: the copy that is wiped is the only one.
                        var canBytes = Self.bytes(canSecret)
                        defer { OpenSSL.wipe(&canBytes) }
                        try idCard.establishPACE(can: canBytes)
                    }
                    return .done(try work(idCard))
                } catch .removed where connected?.answered != true {
                    return .noCard
                }
            }
            switch outcome {
            case .success(.done(let value)):
                return value
            case .success(.noCard):
                stale = reader
                continue
            case .failure(let failure):
                try await settle(failure, uid: uid, can: can, pin1: pin1)
            }
        }
    }

    /// Deletes saved secrets the card refused and remembers a typed CAN for the retry after a
    /// removal; then throws `failure` (as it is, or saying what was deleted).
    private func settle(_ failure: CardFailure, uid: UInt32, can: (can: SecretBytes, saved: Bool)?,
                        pin1: (secret: SecretBytes, saved: Bool)?) async throws -> Never {
        switch failure {
        case .canMismatch where can?.saved == true:
            try await secrets.clear(.can, uid: uid)
            logger.notice("the saved CAN did not match the card and was deleted", [("AUTHD_CALLER_UID", String(uid))])
            throw CardFailure.canMismatch(savedDeleted: true)
        case .pinWrong(let left, _) where pin1?.saved == true:
            // A saved PIN1 the card refuses is deleted, so no further retries burn by themselves.
            try await secrets.clear(.pin1, uid: uid)
            throw CardFailure.pinWrong(retriesLeft: left, savedDeleted: true)
        case .removed:
            if let can, !can.saved { recentCANs.remember(can.can, uid: uid, now: now()) }
            throw failure
        default:
            throw failure
        }
    }

    /// When the token is issued, until when it holds, its id, and who asked for it.
    private func stamp(_ context: RequestContext) throws -> TokenStamp {
        try TokenStamp.issue(now: now(), lifetime: config.current.cardTokenLifetimeSeconds, azp: context.caller.exe)
    }

    func read(_ params: CardRead.Params, context: RequestContext) async throws -> CardRead.Result {
        let window = try window(params.timeoutS)
        return try await readers.exclusively {
            let fields = try await withCard(context, window: window, pin1: nil) { card throws(CardFailure) in try card.personalData() }
            return PersonalData.result(fields)
        }
    }

    /// The card as a read before a PIN question found it: its certificate (the later signing
    /// transaction must find the same one), its holder and the PIN's tries left.
    struct SeenCard: Sendable {
        let certificate: [UInt8]
        let holder: CardHolder
        let retriesLeft: Int
    }

    /// Reads the certificate and the PIN's tries left, no PIN: what the dialog shows before it asks.
    private func look(_ context: RequestContext, window: Int, pin: EstEID.PIN) async throws -> SeenCard {
        let (certificate, left) = try await withCard(context, window: window, pin1: nil) { card throws(CardFailure) in
            let certificate = try card.certificate(authentication: pin == .pin1)
            try card.selectApplication(for: pin)
            return (certificate, try card.retriesLeft(pin))
        }
        if left == 0 { throw CardFailure.pinBlocked }
        return SeenCard(certificate: certificate, holder: CardHolder(try CardTokens.subject(certificate).1), retriesLeft: left)
    }

    func login(_ params: CardLogin.Params, context: RequestContext) async throws -> CardLogin.Result {
        let format = try CardTokens.Format(params)
        let window = try window(params.timeoutS)
        let stamp = try stamp(context)
        return try await readers.exclusively {
            let uid = context.caller.uid
            var wrong: String?
            // A Web eID login on the desktop shows, as web-eid-app does, whose name and personal
            // code go to the site before PIN1 is asked: the card is read first.
            let seen: SeenCard?
            if case .webEID = format, context.prompts.onDesktop { seen = try await look(context, window: window, pin: .pin1) } else { seen = nil }
            while true {
                let pin1 = try await obtainPIN1(context, window: window, format: format, purpose: "to log in to \(Redaction.printable(params.aud, limit: 80))",
                                                wrong: wrong, seen: seen)
                let signed: CardTokens.Signed
                do {
                    signed = try await withCard(context, window: window, pin1: (pin1.secret, pin1.saved)) { card throws(CardFailure) in
                        // Copied out of the secret here, and only here: the copy that is wiped
                        // is the only one (a copy made outside would be shared with this one,
                        // and wiping would copy it first and clear the new copy alone).
                        var pin = Self.bytes(pin1.secret)
                        defer { OpenSSL.wipe(&pin) }
                        let certificate = try card.certificate(authentication: true)
                        // PIN1 goes only to the card whose holder the dialog showed.
                        if let seen, certificate != seen.certificate { throw .certificateMismatch }
                        let input = try CardTokens.loginInput(format: format, certificate: certificate, params: params, stamp: stamp)
                        try card.selectApplication(for: .pin1)
                        if try card.retriesLeft(.pin1) == 0 { throw .pinBlocked }
                        try card.verify(.pin1, digits: pin)
                        let signature = try card.authenticate(digest: input.digest)
                        return CardTokens.Signed(certificate: certificate, input: input, signature: signature)
                    }
                } catch CardFailure.pinWrong(let left, let deleted) where pin1.byFinger {
                    // The finger released a PIN1 the card refuses: no more automatic tries until a new one is saved.
                    try await biometrics.update(uid) { $0.pin1 = $0.pin1.afterCardRefusedPIN1() }
                    logger.notice("the card refused the fingerprint-released PIN1; fingerprint PIN1 is suspended until a new PIN1 is saved",
                                  [("AUTHD_CALLER_UID", String(uid))])
                    throw CardFailure.pinWrong(retriesLeft: left, savedDeleted: deleted)
                } catch CardFailure.pinWrong(let left, _) where Self.asksAgain(context, typed: !pin1.saved, left: left) {
                    wrong = Self.wrongPIN(.pin1, left: left)
                    continue
                }
                return try CardTokens.loginResult(format: format, signed)
            }
        }
    }

    func sign(_ params: CardSign.Params, context: RequestContext) async throws -> CardSign.Result {
        let document = try CardTokens.DocumentHash(params)
        var expected: [UInt8]?
        if let given = params.certificate {
            guard let der = Data(base64Encoded: given), !der.isEmpty else {
                throw InvalidParameter("certificate must be the signing certificate, base64 DER", field: "certificate")
            }
            expected = Array(der)
        }
        let expectedCertificate = expected
        let window = try window(params.timeoutS)
        let stamp = try stamp(context)
        let purpose = "to sign \"\(Redaction.printable(params.description, limit: 120))\" for \(Redaction.printable(params.aud, limit: 80))"
        return try await readers.exclusively {
            var wrong: String?
            while true {
                let pin2 = try await askPIN(.pin2, context, window: window, purpose: purpose, wrong: wrong)
                let signed: (CardTokens.Signed, [UInt8])
                do {
                    signed = try await withCard(context, window: window, pin1: nil) { card throws(CardFailure) in
                        var pin = Self.bytes(pin2)  // the only copy (see `login`)
                        defer { OpenSSL.wipe(&pin) }
                        let certificate = try card.certificate(authentication: false)
                        // Another card than the one the caller named: PIN2 is not sent to it.
                        if let expectedCertificate, certificate != expectedCertificate { throw .certificateMismatch }
                        let input = try CardTokens.signatureInput(certificate: certificate, document: document, params: params, stamp: stamp)
                        try card.selectApplication(for: .pin2)
                        if try card.retriesLeft(.pin2) == 0 { throw .pinBlocked }
                        try card.setSigningEnvironment()
                        // PIN2 authorises one signature: verify before each of the two.
                        try card.verify(.pin2, digits: pin)
                        let documentSignature = try card.sign(digest: document.digest)
                        try card.verify(.pin2, digits: pin)
                        let tokenSignature = try card.sign(digest: input.digest)
                        return (CardTokens.Signed(certificate: certificate, input: input, signature: tokenSignature), documentSignature)
                    }
                } catch CardFailure.pinWrong(let left, _) where Self.asksAgain(context, typed: true, left: left) {
                    wrong = Self.wrongPIN(.pin2, left: left)
                    continue
                }
                return try CardTokens.signResult(signed.0, documentSignature: signed.1, document: document)
            }
        }
    }

    /// Whether a PIN the card refused is asked again in the same request: only when authd asks
    /// the person itself (`prompt: desktop`, as web-eid-app does), for a PIN they typed, while
    /// the card allows tries. On a client's connection the request fails with `pin.wrong`, and
    /// the asking program decides.
    private static func asksAgain(_ context: RequestContext, typed: Bool, left: Int) -> Bool {
        context.prompts.onDesktop && typed && left > 0
    }

    private static func wrongPIN(_ pin: EstEID.PIN, left: Int) -> String {
        "Wrong \(pin == .pin1 ? "PIN1" : "PIN2"): \(left) \(left == 1 ? "try" : "tries") left."
    }
}

extension CardService {
    /// One of the card's certificates, with no PIN. On the desktop the person sees whose it is
    /// and for whom, and hands it over or not (`prompt.cancelled`).
    func certificate(_ params: CardCertificate.Params, context: RequestContext) async throws -> CardCertificate.Result {
        guard params.use == "signing" || params.use == "authentication" else {
            throw InvalidParameter("use must be signing or authentication", field: "use")
        }
        if let aud = params.aud { try TokenStamp.checkText(aud, field: "aud") }
        let window = try window(params.timeoutS)
        let signing = params.use == "signing"
        return try await readers.exclusively {
            let certificate = try await withCard(context, window: window, pin1: nil) { card throws(CardFailure) in
                try card.certificate(authentication: !signing)
            }
            let holder = CardHolder(try CardTokens.subject(certificate).1)
            if let desktop = context.prompts.desktop {
                try await desktop.asking(DesktopSession.certificateKind, told: context.prompts.connection) { try await desktop.confirmHandOver(holder) }
            }
            return CardCertificate.Result(certificate: Data(certificate).base64EncodedString(), use: params.use)
        }
    }
}

/// The holder of a card, as its authentication certificate names them: what a Unix user is
/// linked to (the personal code, as pam_pkcs11's subject mapping does) and the name prompts show.
struct CardHolder: Sendable, Equatable {
    let personalCode: String
    /// `MARI MAASIKAS`: given names and surname as the certificate writes them.
    let name: String

    init(personalCode: String, name: String) {
        self.personalCode = personalCode
        self.name = name
    }

    init(_ subject: CardTokens.Subject) {
        personalCode = subject.personalCode
        name = [subject.givenName, subject.familyName].compactMap { $0 }.joined(separator: " ")
    }
}

extension CardService {
    /// The holder of the card in the reader (no PIN), for linking a Unix user to it; the
    /// certificate must chain to `anchors`, as it must at every sign-in.
    func holder(window: Int, anchors: [X509Certificate], context: RequestContext) async throws -> CardHolder {
        try await readers.exclusively {
            let certificate = try await withCard(context, window: window, pin1: nil) { card throws(CardFailure) in
                try card.certificate(authentication: true)
            }
            let (parsed, subject) = try CardTokens.subject(certificate)
            guard parsed.isIssued(byAnyOf: anchors) else { throw PAMFailure.cardUntrusted }
            return CardHolder(subject)
        }
    }

    /// What the second transaction of `verifyHolder` found.
    private enum HolderProof: Sendable {
        case signed([UInt8])
        /// Another card is in the reader now: PIN1 was not sent to it.
        case otherCard
    }

    /// Proves that the holder `personalCode` (any holder, when nil) is present: the card's
    /// authentication certificate must chain to `anchors` (anyone can make a card whose
    /// certificate names anyone) and name them (both checked before PIN1 is asked, so another
    /// person's card burns no retry); then PIN1, always typed (a saved PIN1 belongs to the
    /// caller, not to the user being proved), signs a fresh challenge, and the certificate must
    /// verify the signature. `prompt` words the PIN1 question for the holder's name. Returns the holder.
    func verifyHolder(personalCode: String?, window: Int, anchors: [X509Certificate], context: RequestContext,
                      prompt: @Sendable (String) -> String) async throws -> CardHolder {
        try await readers.exclusively {
            let certificate = try await withCard(context, window: window, pin1: nil) { card throws(CardFailure) in
                try card.certificate(authentication: true)
            }
            let (parsed, subject) = try CardTokens.subject(certificate)
            let holder = CardHolder(subject)
            guard parsed.isIssued(byAnyOf: anchors) else { throw PAMFailure.cardUntrusted }
            guard personalCode == nil || holder.personalCode == personalCode else { throw PAMFailure.cardMismatch }
            let answer = try await context.prompts.ask(.pin1, message: prompt(holder.name), within: .seconds(window))
            var typed = try Self.validPIN(answer, .pin1)
            let pin = SecretBytes(typed)
            OpenSSL.wipe(&typed)
            let digest = Digest.sha384.hash(try OpenSSL.randomBytes(48))
            let proof = try await withCard(context, window: window, pin1: nil) { card throws(CardFailure) in
                var pin = Self.bytes(pin)  // the only copy (see `login`)
                defer { OpenSSL.wipe(&pin) }
                // The card may have been swapped while PIN1 was typed: PIN1 goes only to the card checked.
                guard try card.certificate(authentication: true) == certificate else { return HolderProof.otherCard }
                try card.selectApplication(for: .pin1)
                if try card.retriesLeft(.pin1) == 0 { throw .pinBlocked }
                try card.verify(.pin1, digits: pin)
                return .signed(try card.authenticate(digest: digest))
            }
            switch proof {
            case .otherCard:
                throw PAMFailure.cardMismatch
            case .signed(let signature):
                // The card said yes; the certificate must agree, or a card that signs anything would pass.
                guard parsed.verifies(rawSignature: signature, digest: digest) else { throw CardFailure.cardError("the signature does not verify with the card certificate") }
                return holder
            }
        }
    }
}

/// CANs typed for an attempt that ended with `card.removed` (memory only, five minutes).
final class RecentCANs: Sendable {
    private let entries = Mutex<[UInt32: (SecretBytes, Date)]>([:])

    func remember(_ can: SecretBytes, uid: UInt32, now: Date) {
        entries.withLock { $0[uid] = (can, now.addingTimeInterval(300)) }
    }

    func take(uid: UInt32, now: Date) -> SecretBytes? {
        entries.withLock { entries in
            guard let (can, expiry) = entries.removeValue(forKey: uid), expiry > now else { return nil }
            return can
        }
    }
}
