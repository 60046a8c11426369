import FoundationEssentials
import OpenSSLCrypto
import Protocol
import Synchronization

// Prompts/ — the intent model (DESIGN §12): authd, not the asking program, asks the person for
// secrets and consent, through pinentry on their desktop. Desk.swift reaches a desktop,
// DesktopSession.swift words one request's dialogs, Consents.swift remembers answers,
// Pinentry.swift speaks Assuan, ProgramIdentity.swift reads who asks, AgentPrompter.swift is the
// agent's side. Errors: PromptFailure (Server/Prompts.swift).

/// A progress notification on the person's desktop (present the card, touch the reader).
struct DeskNote: Sendable, Equatable {
    let id: String
    let kind: PromptKind
    let title: String
    let message: String
    /// Closes the notification.
    let done: Bool
}

/// A local user's desktop, where authd asks the person itself: the user's desktop agent
/// (`authd --desktop`, registered with `desktop.register`), or in user mode pinentry run by authd.
protocol Desk: Sendable {
    /// Whether `uid` has a desktop to ask on now.
    func reachable(uid: UInt32) -> Bool
    /// Shows `dialog` to `uid` and waits for the answer. Throws `PromptFailure.noDesktop` when
    /// there is no desktop (any more); task cancellation closes the dialog.
    func ask(uid: UInt32, _ dialog: PinentryDialog) async throws -> PinentryAnswer
    /// Shows or updates progress; best effort.
    func show(uid: UInt32, _ note: DeskNote)
}

/// The desktops of this authd's users: a registered agent first, then (user mode, when
/// `local` is set) pinentry run by authd itself.
struct DeskRouter: Desk {
    let agents: AgentDesk
    let local: PinentryDesk?

    func reachable(uid: UInt32) -> Bool {
        agents.reachable(uid: uid) || (local?.reachable(uid: uid) ?? false)
    }

    func ask(uid: UInt32, _ dialog: PinentryDialog) async throws -> PinentryAnswer {
        guard let local, !agents.reachable(uid: uid) else { return try await agents.ask(uid: uid, dialog) }
        return try await local.ask(uid: uid, dialog)
    }

    func show(uid: UInt32, _ note: DeskNote) {
        if agents.reachable(uid: uid) { agents.show(uid: uid, note) } else { local?.show(uid: uid, note) }
    }
}

/// User mode: pinentry run by authd, which runs as the person, with authd's own desktop
/// environment (DISPLAY, WAYLAND_DISPLAY, the session bus) and terminal. One dialog at a time.
struct PinentryDesk: Desk {
    let config: ConfigHolder
    /// What pinentry gets of authd's environment: the desktop session's variables only.
    let environment: [String: String]
    /// authd's own PATH, where `pinentry` is looked for when `[prompts] pinentry` names none
    /// by its path (pinentry itself does not get it).
    let search: [String: String]
    let tty: (name: String, type: String)?
    /// Where progress notes go (the session bus's notification service).
    let notes: (@Sendable (DeskNote) -> Void)?
    private let turn = FIFOLock()

    /// `environment`: authd's own; pinentry gets its desktop session's variables only, and
    /// draws on `GPG_TTY` or authd's terminal.
    init(config: ConfigHolder, environment: [String: String], notes: (@Sendable (DeskNote) -> Void)?) {
        self.config = config
        self.environment = Pinentry.sessionEnvironment(environment)
        search = Pinentry.searchEnvironment(environment)
        self.tty = Syscalls.terminal(environment: environment)
        self.notes = notes
    }

    /// The pinentry program a dialog runs now; nil when there is none.
    var program: String? {
        let configured = config.current.promptsPinentry
        return Pinentry.resolve(configured: configured.isEmpty ? nil : configured, environment: search)
    }

    private func pinentry() -> Pinentry? {
        program.map { Pinentry(path: $0, environment: environment, tty: tty) }
    }

    func reachable(uid: UInt32) -> Bool { pinentry() != nil }

    func ask(uid: UInt32, _ dialog: PinentryDialog) async throws -> PinentryAnswer {
        guard let pinentry = pinentry() else { throw PromptFailure.noDesktop(agent: false) }
        try await turn.lock()
        defer { turn.unlock() }
        do {
            return try await pinentry.ask(dialog)
        } catch let failure as PinentryFailure {
            throw PromptFailure.desktopFailed(failure)
        }
    }

    func show(uid: UInt32, _ note: DeskNote) { notes?(note) }
}

/// The desktop agents registered with this authd (`desktop.register`), one per local user, and
/// the questions each has open. An agent is reachable from its registration on; what is sent to
/// it before its stream starts (right after the registration's response) waits for the stream.
/// An agent answers only the questions it was sent, on the connection it registered on
/// (`desktop.reply`); when that connection closes, its open questions end with `prompt.no_desktop`.
final class AgentDesk: Desk {
    private struct Agent {
        let number: UInt64
        let connection: ObjectIdentifier
        /// `desktop.register`'s `agent_token`, which `desktop.forward` must present.
        let token: [UInt8]
        /// Nil until the agent's stream starts; meanwhile `held` keeps what is sent to it.
        var sink: StreamSink?
        var held: [@Sendable (StreamSink) -> Void] = []
    }
    /// A question sent to agent number `agent` of `uid`, waiting for its answer.
    private struct Waiting<Answer> {
        let uid: UInt32
        let agent: UInt64
        let resume: @Sendable (Answer) -> Void
    }
    private typealias Open = Waiting<Result<PinentryAnswer, any Error>>
    private typealias Identifying = Waiting<ProgramIdentity?>
    private struct State {
        var agents: [UInt32: Agent] = [:]
        var open: [String: Open] = [:]
        var identifying: [String: Identifying] = [:]
        var next: UInt64 = 0

        func uid(ofAgent number: UInt64) -> UInt32? { agents.first { $0.value.number == number }?.key }

        /// Takes the question `id` of `waiting` for its answer, if it went to the agent that is
        /// registered on `connection`: no other connection may answer it.
        mutating func answer<Answer>(_ id: String, in waiting: WritableKeyPath<State, [String: Waiting<Answer>]>,
                                     from connection: ObjectIdentifier) -> Waiting<Answer>? {
            guard let question = self[keyPath: waiting][id],
                  let agent = agents[question.uid], agent.number == question.agent, agent.connection == connection else { return nil }
            return self[keyPath: waiting].removeValue(forKey: id)
        }

        /// Takes every question of agent `number` of `waiting`.
        mutating func take<Answer>(_ waiting: WritableKeyPath<State, [String: Waiting<Answer>]>, of number: UInt64) -> [Waiting<Answer>] {
            self[keyPath: waiting].filter { $0.value.agent == number }.map(\.key).compactMap { self[keyPath: waiting].removeValue(forKey: $0) }
        }
    }
    private let state = Mutex(State())

    /// The agent of `uid` from now on, replacing an earlier one (whose open questions end):
    /// its number, and the token it presents in `desktop.forward`.
    func register(uid: UInt32, connection: ObjectIdentifier) throws -> (number: UInt64, token: String) {
        let token = try OpenSSL.randomBytes(32)
        let (number, ended) = state.withLock { state in
            state.next += 1
            let replaced = state.agents[uid]?.number
            state.agents[uid] = Agent(number: state.next, connection: connection, token: token)
            return (state.next, replaced.map { Self.takeOpen(of: $0, from: &state) } ?? ([], []))
        }
        Self.end(ended)
        return (number, Hex.encode(token))
    }

    /// Whether `token` is that of `uid`'s registered agent (compared in constant time).
    func isAgent(uid: UInt32, token: String) -> Bool {
        guard let registered = state.withLock({ $0.agents[uid]?.token }), let presented = Hex.decode(token) else { return false }
        return OpenSSL.constantTimeEquals(registered, presented)
    }

    /// The agent `number`'s stream started: what was held for it goes out now, in order, and
    /// only then does anything go to it directly (a withdrawal never overtakes its question).
    func activate(_ number: UInt64, sink: StreamSink) {
        while true {
            let held = state.withLock { state -> [@Sendable (StreamSink) -> Void] in
                guard let uid = state.uid(ofAgent: number), let held = state.agents[uid]?.held else { return [] }
                if held.isEmpty { state.agents[uid]?.sink = sink }
                state.agents[uid]?.held = []
                return held
            }
            if held.isEmpty { return }
            for send in held { send(sink) }
        }
    }

    /// The agent `number` left (its connection closed, or its stream never started).
    func unregister(_ number: UInt64) {
        let ended = state.withLock { state in
            if let uid = state.uid(ofAgent: number) { state.agents[uid] = nil }
            return Self.takeOpen(of: number, from: &state)
        }
        Self.end(ended)
    }

    private static func takeOpen(of agent: UInt64, from state: inout State) -> ([Open], [Identifying]) {
        (state.take(\.open, of: agent), state.take(\.identifying, of: agent))
    }

    private static func end(_ ended: ([Open], [Identifying])) {
        for open in ended.0 { open.resume(.failure(PromptFailure.noDesktop(agent: true))) }
        for identifying in ended.1 { identifying.resume(nil) }
    }

    /// Who process `pid` of `uid` is, as `uid`'s agent reads it (a system authd may not read
    /// another user's processes); nil when it cannot tell within `limit`, or there is no agent.
    func identify(uid: UInt32, pid: Int32, within limit: Duration = .seconds(5)) async -> ProgramIdentity? {
        guard let id = try? Hex.encode(OpenSSL.randomBytes(16)) else { return nil }
        let timer = Task { [weak self] in
            try? await Task.sleep(for: limit)
            self?.state.withLock { $0.identifying.removeValue(forKey: id) }?.resume(nil)
        }
        defer { timer.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<ProgramIdentity?, Never>) in
                let registered = state.withLock { state -> Bool in
                    guard let agent = state.agents[uid], !Task.isCancelled else { return false }
                    state.identifying[id] = Identifying(uid: uid, agent: agent.number) { continuation.resume(returning: $0) }
                    return true
                }
                guard registered else { return continuation.resume(returning: nil) }
                deliver(to: uid) { sink in sink.notify(DesktopIdentify.self, .init(subscription: sink.name, askId: id, pid: pid)) }
            }
        } onCancel: {
            state.withLock { $0.identifying.removeValue(forKey: id) }?.resume(nil)
        }
    }

    /// `desktop.identified`: only the connection the question went to may answer it.
    func identified(_ id: String, from connection: ObjectIdentifier, _ program: ProgramIdentity?) throws(PromptFailure) {
        guard let waiting = state.withLock({ $0.answer(id, in: \.identifying, from: connection) }) else { throw .unknown }
        waiting.resume(program)
    }

    /// Sends to `uid`'s agent, or holds it until its stream starts; false when it has none.
    @discardableResult
    private func deliver(to uid: UInt32, _ send: @escaping @Sendable (StreamSink) -> Void) -> Bool {
        let sink = state.withLock { state -> StreamSink?? in
            guard let agent = state.agents[uid] else { return .none }
            if agent.sink == nil { state.agents[uid]?.held.append(send) }
            return .some(agent.sink)
        }
        guard case .some(let ready) = sink else { return false }
        if let ready { send(ready) }
        return true
    }

    /// `desktop.reply`: only the connection the question went to may answer it. A failure
    /// (the agent could not show it) ends the question with that failure.
    func reply(_ id: String, from connection: ObjectIdentifier, _ answer: Result<PinentryAnswer, PromptFailure>) throws(PromptFailure) {
        guard let open = state.withLock({ $0.answer(id, in: \.open, from: connection) }) else { throw .unknown }
        open.resume(answer.mapError { $0 })
    }

    func reachable(uid: UInt32) -> Bool { state.withLock { $0.agents[uid] != nil } }

    func ask(uid: UInt32, _ dialog: PinentryDialog) async throws -> PinentryAnswer {
        let id = Hex.encode(try OpenSSL.randomBytes(16))
        let wire = DesktopDialog(dialog)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<PinentryAnswer, any Error>) in
                let registered = state.withLock { state -> Bool in
                    guard let agent = state.agents[uid], !Task.isCancelled else { return false }
                    state.open[id] = Open(uid: uid, agent: agent.number) { continuation.resume(with: $0) }
                    return true
                }
                guard registered else {
                    continuation.resume(throwing: Task.isCancelled ? CancellationError() : PromptFailure.noDesktop(agent: true))
                    return
                }
                deliver(to: uid) { sink in sink.notify(DesktopAsk.self, .init(subscription: sink.name, askId: id, dialog: wire)) }
            }
        } onCancel: {
            guard let open = state.withLock({ $0.open.removeValue(forKey: id) }) else { return }
            open.resume(.failure(CancellationError()))
            deliver(to: uid) { sink in sink.notify(DesktopWithdraw.self, .init(subscription: sink.name, askId: id)) }
        }
    }

    func show(uid: UInt32, _ note: DeskNote) {
        deliver(to: uid) { sink in
            sink.notify(DesktopShow.self, .init(subscription: sink.name, showId: note.id, kind: note.kind, title: note.title, message: note.message, done: note.done))
        }
    }
}

extension DesktopDialog {
    init(_ dialog: PinentryDialog) {
        switch dialog.question {
        case .secret(let prompt):
            self.init(question: "secret", title: dialog.title, description: dialog.description, prompt: prompt, error: dialog.error, timeoutS: dialog.timeout)
        case .confirm(let ok, let notOK, let cancel):
            self.init(question: "confirm", title: dialog.title, description: dialog.description, error: dialog.error, ok: ok, notOk: notOK, cancel: cancel,
                      timeoutS: dialog.timeout)
        }
    }

    /// The dialog to show; nil for a question this agent does not know.
    var pinentry: PinentryDialog? {
        let asked: PinentryDialog.Question
        switch question {
        case "secret": asked = .secret(prompt: prompt ?? "")
        case "confirm": asked = .confirm(ok: ok ?? "OK", notOK: notOk, cancel: cancel ?? "Cancel")
        default: return nil
        }
        return PinentryDialog(question: asked, title: title, description: description, error: error, timeout: timeoutS)
    }
}

extension PinentryAnswer {
    /// `desktop.reply`'s params as an answer; nil when they do not fit together.
    init?(_ answer: DesktopAnswer, value: String?) {
        switch (answer, value) {
        case (.secret, let value?): self = .secret(value)
        case (.ok, nil): self = .ok
        case (.notOk, nil): self = .notOK
        case (.cancelled, nil): self = .cancelled
        case (.timedOut, nil): self = .timedOut
        default: return nil
        }
    }
}
