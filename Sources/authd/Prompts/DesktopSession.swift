import FoundationEssentials
import Protocol
import Synchronization

/// What a request that may ask on the desktop is for: what its dialogs say and what consent is
/// keyed by.
enum DeskPurpose: Sendable, Equatable {
    case read
    case login(audience: String)
    case sign(audience: String, description: String, hash: String?)
    case accountToken(audience: String)
    case unlock
    /// One of the card's certificates (no PIN), for `audience` when one is named.
    case certificate(audience: String?, signing: Bool)

    /// What the person's consent is asked and remembered for: what the program gets (the
    /// question words it) and the audience it goes to; nil for what goes to no audience.
    var consent: (purpose: ConsentPurpose, audience: String)? {
        switch self {
        case .login(let audience): (.cardLogin, audience)
        case .sign(let audience, _, _): (.cardSign, audience)
        case .accountToken(let audience): (.accountToken, audience)
        case .certificate(let audience?, _): (.cardCertificate, audience)
        case .certificate(nil, _), .read, .unlock: nil
        }
    }

    /// The audience a token or certificate goes to.
    var audience: String? { consent?.audience }
}

/// Params of a method that may have authd ask the person on the desktop (`prompt: desktop`).
protocol AsksThePerson {
    var prompt: PromptRoute? { get }
    var purpose: DeskPurpose { get }
}

extension CardRead.Params: AsksThePerson { var purpose: DeskPurpose { .read } }
extension CardLogin.Params: AsksThePerson { var purpose: DeskPurpose { .login(audience: aud) } }
extension CardSign.Params: AsksThePerson { var purpose: DeskPurpose { .sign(audience: aud, description: description, hash: hash) } }
extension AuthToken.Params: AsksThePerson { var purpose: DeskPurpose { .accountToken(audience: aud) } }
extension Unlock.Params: AsksThePerson { var purpose: DeskPurpose { .unlock } }
extension CardCertificate.Params: AsksThePerson { var purpose: DeskPurpose { .certificate(audience: aud, signing: use == "signing") } }

/// The words of desktop dialogs (pure). Everything that came from outside — the program's
/// name, an audience, a document's description — goes through `Pinentry.field`, so a newline or
/// a control character in it cannot draw a line of its own.
enum DeskWording {
    static let title = "authd"

    static func label(_ kind: PromptKind) -> String {
        let labels: [PromptKind: String] = [.pin1: "PIN1:", .pin2: "PIN2:", .can: "CAN:", .pin: "PIN:", .password: "Password:", .code: "Code:"]
        return labels[kind] ?? "Answer:"
    }

    /// "Firefox (flatpak org.mozilla.firefox) asks to sign you in to https://example.com."
    static func request(by program: ProgramIdentity, for purpose: DeskPurpose) -> String {
        let who = Pinentry.field(program.displayName)
        switch purpose {
        case .read: return "\(who) asks to read your ID card."
        case .login(let audience): return "\(who) asks to sign you in to \(Pinentry.field(audience)) with your ID card."
        case .sign(let audience, let description, let hash):
            var lines = ["\(who) asks for your signature for \(Pinentry.field(audience)).", "Document: \(Pinentry.field(description))"]
            // The whole hash: the person may compare it with what the signing page shows.
            if let hash { lines.append("Hash: \(Pinentry.field(hash, limit: 100))") }
            return lines.joined(separator: "\n")
        case .accountToken(let audience): return "\(who) asks to sign you in to \(Pinentry.field(audience)) with your account."
        case .unlock: return "\(who) asks to unlock authd."
        case .certificate(let audience, let signing):
            let which = signing ? "signing" : "authentication"
            return "\(who) asks for your ID card's \(which) certificate\(audience.map { " for \(Pinentry.field($0))" } ?? "")."
        }
    }

    /// What a login hands over, for the PIN1 question: "Your name and personal code go to the
    /// site: MARI MAASIKAS, 47101010033."
    static func handedOver(_ holder: CardHolder) -> String {
        "Your name and personal code go to the site: \(Pinentry.field(holder.name, limit: 100)), \(Pinentry.field(holder.personalCode, limit: 40))."
    }

    /// The question before a certificate is handed over: whose it is, for whom; "Hand over" or "Cancel".
    static func handOver(_ holder: CardHolder, by program: ProgramIdentity, for purpose: DeskPurpose, timeout: Int) -> PinentryDialog {
        let lines = [request(by: program, for: purpose), "",
                     "Certificate of \(Pinentry.field(holder.name, limit: 100)), personal code \(Pinentry.field(holder.personalCode, limit: 40)).",
                     "Hand it over?"]
        return PinentryDialog(question: .confirm(ok: "Hand over", notOK: nil, cancel: "Cancel"), title: title,
                              description: lines.joined(separator: "\n"), timeout: timeout)
    }

    /// A secret's dialog: who asks and for what, then authd's own question.
    static func secret(_ kind: PromptKind, message: String, by program: ProgramIdentity, for purpose: DeskPurpose,
                       retriesLeft: Int?, error: String?, timeout: Int) -> PinentryDialog {
        var lines = [request(by: program, for: purpose), "", Pinentry.field(message, limit: 300)]
        if let retriesLeft { lines.append("\(retriesLeft) \(retriesLeft == 1 ? "try" : "tries") left.") }
        return PinentryDialog(question: .secret(prompt: label(kind)), title: title, description: lines.joined(separator: "\n"),
                              error: error.map { Pinentry.field($0) }, timeout: timeout)
    }

    /// "Allow PROGRAM to sign you in to AUDIENCE with your ID card?" with "Always allow", "Allow
    /// once" (when the answer may be remembered) and "Deny". Each purpose a consent is kept for
    /// (`ConsentPurpose`) has words of its own, so that the person knows what they allow for good.
    static func consent(by program: ProgramIdentity, for purpose: DeskPurpose, remembered: Bool, timeout: Int) -> PinentryDialog {
        let who = Pinentry.field(program.displayName)
        let audience = Pinentry.field(purpose.audience ?? "")
        let question = switch purpose {
        case .sign: "Allow \(who) to ask for your signature for \(audience)?"
        case .certificate: "Allow \(who) to have your ID card's certificate for \(audience)?"
        case .accountToken: "Allow \(who) to sign you in to \(audience) with your account?"
        case .login, .read, .unlock: "Allow \(who) to sign you in to \(audience) with your ID card?"
        }
        var lines = [question]
        if let executable = program.executable, executable != program.displayName { lines.append("Program: \(Pinentry.field(executable))") }
        if remembered { lines.append("\"Always allow\" is remembered; authctl consents revoke forgets it.") }
        // Underscores mark each button's key (pinentry's mnemonics), one letter each.
        return PinentryDialog(question: .confirm(ok: remembered ? "_Always allow" : "_Allow", notOK: remembered ? "Allow _once" : nil, cancel: "_Deny"),
                              title: title, description: lines.joined(separator: "\n"), timeout: timeout)
    }
}

/// One request's desktop: who asks (read by authd) and for what, and the person's desktop.
final class DesktopSession: Sendable {
    let uid: UInt32
    let program: ProgramIdentity
    let purpose: DeskPurpose
    let desk: any Desk
    /// `[server] prompt_timeout`.
    let timeout: Int
    /// The progress notes shown on the desktop, by id.
    private let shown = Mutex<[String: PromptKind]>([:])

    init(uid: UInt32, program: ProgramIdentity, purpose: DeskPurpose, desk: any Desk, timeout: Int) {
        self.uid = uid; self.program = program; self.purpose = purpose; self.desk = desk; self.timeout = timeout
    }

    /// Asks the person for a secret; throws `prompt.cancelled`, `prompt.timeout` or `prompt.no_desktop`.
    func ask(_ kind: PromptKind, message: String, retriesLeft: Int?, error: String?, within: Duration?) async throws -> String {
        let seconds = min(Int((within ?? .seconds(timeout)).components.seconds), timeout)
        let dialog = DeskWording.secret(kind, message: message, by: program, for: purpose, retriesLeft: retriesLeft, error: error, timeout: seconds)
        switch try await answer(dialog, seconds: seconds) {
        case .secret(let value): return value
        case .timedOut: throw PromptFailure.timedOut(kind: kind, seconds: seconds)
        case .cancelled, .ok, .notOK: throw PromptFailure.desktopCancelled(kind: kind)
        }
    }

    /// The person's answer, within `seconds` and a margin for the dialog to close: a desktop
    /// that never answers ends the question as timed out.
    private func answer(_ dialog: PinentryDialog, seconds: Int) async throws -> PinentryAnswer {
        let desk = self.desk, uid = self.uid
        return try await withThrowingTaskGroup(of: PinentryAnswer?.self) { group in
            group.addTask { try await desk.ask(uid: uid, dialog) }
            group.addTask {
                try await Task.sleep(for: .seconds(seconds + 5))
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next() else { return .timedOut }
            return first ?? .timedOut
        }
    }

    /// Runs `question` (a dialog on the desktop) while the asking connection hears, with no
    /// secret, that the desktop asks `kind`; its `prompt.cancel` withdraws the dialog
    /// (`user.cancelled`), and `prompt.answer` is refused (`prompt.on_desktop`).
    func asking<T: Sendable>(_ kind: PromptKind, told connection: PromptBroker, _ question: @escaping @Sendable () async throws -> T) async throws -> T {
        let declined = CancelFlag()
        let task = Task { try await question() }
        let id = connection.progress(onDesktop: true) {
            declined.set()
            task.cancel()
        }
        defer { connection.finish(id) }
        connection.notify(id: id, kind: kind, message: "Answer the \(PromptFailure.spoken(kind)) question in the dialog on your desktop.", secondsLeft: nil)
        do {
            return try await withTaskCancellationHandler { try await task.value } onCancel: { task.cancel() }
        } catch is CancellationError where declined.isSet {
            throw PromptFailure.cancelled(kind: kind)
        }
    }

    /// Consent for what `purpose` hands to its audience (DESIGN §12): asked unless `policy` says
    /// never, or (`first`) the person already said "always allow" to this program for the same
    /// purpose and audience; the asking connection hears that the desktop asks. Throws
    /// `consent.denied`.
    func consent(_ policy: Config.ConsentPolicy, book: ConsentBook, told connection: PromptBroker) async throws {
        guard let key = purpose.consent, policy != .never else { return }
        let remembered = policy == .first && key.audience.utf8.count <= ConsentBook.maxAudienceBytes
        if remembered, try await book.isGranted(uid: uid, program: program.key, purpose: key.purpose, audience: key.audience) { return }
        let dialog = DeskWording.consent(by: program, for: purpose, remembered: remembered, timeout: timeout)
        let answer: PinentryAnswer = try await asking(.consent, told: connection) { [self] in try await self.answer(dialog, seconds: timeout) }
        switch answer {
        case .ok:
            if remembered { try await book.grant(uid: uid, program: program.key, purpose: key.purpose, audience: key.audience) }
        case .notOK where remembered:
            // "Allow once", offered only where the answer may be remembered. Without that button
            // a NOT_CONFIRMED is a refusal, however a pinentry front-end words its Cancel.
            return
        case .timedOut:
            throw PromptFailure.timedOut(kind: .consent, seconds: timeout)
        case .notOK, .cancelled, .secret:
            throw PromptFailure.consentDenied(program: program.key, audience: key.audience)
        }
    }

    /// Asks the person whether `holder`'s certificate may be handed over; throws
    /// `prompt.cancelled` when they cancel, `prompt.timeout` when nobody answers.
    func confirmHandOver(_ holder: CardHolder) async throws {
        let dialog = DeskWording.handOver(holder, by: program, for: purpose, timeout: timeout)
        switch try await answer(dialog, seconds: timeout) {
        case .ok: return
        case .timedOut: throw PromptFailure.timedOut(kind: Self.certificateKind, seconds: timeout)
        case .notOK, .cancelled, .secret: throw PromptFailure.desktopCancelled(kind: Self.certificateKind)
        }
    }

    static let certificateKind = PromptKind(rawValue: "certificate")

    /// Progress on the desktop: shown once, closed at the end.
    func show(_ id: String, kind: PromptKind, message: String) {
        guard kind == .card || kind == .fingerprint else { return }
        let first = shown.withLock { $0.updateValue(kind, forKey: id) == nil }
        if first { desk.show(uid: uid, DeskNote(id: id, kind: kind, title: DeskWording.title, message: message, done: false)) }
    }

    func close(_ id: String) {
        guard let kind = shown.withLock({ $0.removeValue(forKey: id) }) else { return }
        desk.show(uid: uid, DeskNote(id: id, kind: kind, title: DeskWording.title, message: "", done: true))
    }
}

/// The prompts of one request, as its handler uses them: secrets go to the asking program's
/// connection (`prompt: client`) or to the person's desktop (`prompt: desktop`), in which case
/// the connection hears only that the desktop asks, with no secret; progress goes to the
/// connection, and under `desktop` to the desktop too.
struct RequestPrompts: Sendable {
    let connection: PromptBroker
    let desktop: DesktopSession?

    /// Whether authd asks the person itself (and so may ask again after a wrong PIN).
    var onDesktop: Bool { desktop != nil }

    /// A secret from the person. `error` says what went wrong the last time. Throws as
    /// `PromptBroker.ask` does, and `prompt.cancelled` or `prompt.no_desktop` on the desktop.
    func ask(_ kind: PromptKind, message: String, retriesLeft: Int? = nil, error: String? = nil, within: Duration? = nil) async throws -> String {
        guard let desktop else {
            return try await connection.ask(kind, message: error.map { "\($0) " + message } ?? message, retriesLeft: retriesLeft, within: within)
        }
        return try await desktop.asking(kind, told: connection) {
            try await desktop.ask(kind, message: message, retriesLeft: retriesLeft, error: error, within: within)
        }
    }

    func progress(onCancel: @escaping @Sendable () -> Void) -> String {
        connection.progress(onCancel: onCancel)
    }

    func notify(id: String, kind: PromptKind, message: String, secondsLeft: Int?, url: String? = nil, userCode: String? = nil) {
        connection.notify(id: id, kind: kind, message: message, secondsLeft: secondsLeft, url: url, userCode: userCode)
        desktop?.show(id, kind: kind, message: message)
    }

    func finish(_ id: String) {
        connection.finish(id)
        desktop?.close(id)
    }
}

/// Desktop prompts as the dispatcher starts them: the desks, the consents, the policy.
struct DesktopPrompts: Sendable {
    let desk: DeskRouter
    let consents: ConsentBook
    let config: ConfigHolder

    var agents: AgentDesk { desk.agents }
    /// System mode: no pinentry of authd's own (it has no desktop).
    private var needsAgent: Bool { desk.local == nil }

    /// The desktop of `peer`'s request for `purpose`, after the person's consent where it is
    /// needed. Throws `prompt.no_desktop` at once when there is no desktop to ask on.
    func session(for peer: CallerIdentity, purpose: DeskPurpose, told connection: PromptBroker) async throws -> DesktopSession {
        // An audience no token may carry is refused before the person is asked anything.
        if let audience = purpose.audience { try TokenStamp.checkText(audience, field: "aud") }
        guard desk.reachable(uid: peer.uid) else { throw PromptFailure.noDesktop(agent: needsAgent) }
        // Read now, never claimed by the asking program: by authd from /proc, or, where authd
        // may not read another user's processes (a system authd), by that user's agent. A program
        // neither can tell (it exited, or the pid is another user's now) is asked nothing and
        // gets nothing.
        var identity = ProgramIdentity.read(pid: peer.pid, expectedUID: peer.uid)
        if identity == nil { identity = await agents.identify(uid: peer.uid, pid: peer.pid) }
        guard let program = identity else { throw PromptFailure.unknownProgram }
        let config = self.config.current
        let session = DesktopSession(uid: peer.uid, program: program, purpose: purpose, desk: desk, timeout: config.promptTimeoutSeconds)
        try await session.consent(config.promptsConsent, book: consents, told: connection)
        return session
    }
}
