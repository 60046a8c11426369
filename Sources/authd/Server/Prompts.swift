import FoundationEssentials
import Protocol
import Synchronization

/// The prompts raised by requests on one connection (DESIGN §3, like gpg-agent's loopback
/// pinentry): authd sends a `prompt` notification; the client answers with `prompt.answer` or
/// `prompt.cancel` on the same connection. A request that is cancelled (the client left, the
/// daemon stops) stops waiting at once; one nobody answers fails after `[server] prompt_timeout`
/// or the shorter deadline its capability gives (the card's window, WebAuthn's `timeout`).
///
/// A request waiting for an answer does not hold one of the connection's in-flight slots (the
/// answer must be able to arrive on it); at most `maxWaiting` prompts wait at once instead.
final class PromptBroker: Sendable {
    enum Outcome: Sendable {
        case answered(String)
        case cancelled
        case timedOut
        /// Not asked: `maxWaiting` questions already wait.
        case refused
    }

    /// Questions that may wait for an answer on one connection at once.
    static let maxWaiting = 16

    private struct State {
        var next: UInt64 = 0
        var waiting: [String: @Sendable (Outcome) -> Void] = [:]
        /// Prompts that take no answer (progress such as "present your card").
        var progressOnly: Set<String> = []
        /// Of those, the questions the person answers on the desktop (DESIGN §12).
        var onDesktop: Set<String> = []
    }
    private let state = Mutex(State())
    /// Where the `prompt` notifications go, and who hears how many questions wait: the
    /// connection, set once by `connect`.
    private let output = Mutex<(line: Callback<Data>, waiting: Callback<Int>)?>(nil)
    private let timeout: Duration

    /// `timeout`: `[server] prompt_timeout`, the longest any question waits.
    init(timeout: Duration) { self.timeout = timeout }

    /// Sends this broker's prompts through `output` and tells `waiting` how many questions wait
    /// for an answer whenever that number changes (the connection's, as it is made).
    func connect(_ output: @escaping @Sendable (Data) -> Void, waiting: @escaping @Sendable (Int) -> Void) {
        self.output.withLock { $0 = (Callback(output), Callback(waiting)) }
    }

    private var questionsWaiting: Int { state.withLock { $0.waiting.count - $0.progressOnly.count } }

    private func reportWaiting() {
        let count = questionsWaiting
        output.withLock { $0 }?.waiting.call(count)
    }

    /// Nil when `maxWaiting` questions already wait (progress prompts are not limited: each
    /// belongs to a request that is doing something).
    private func register(progressOnly: Bool, onDesktop: Bool = false, _ handler: @escaping @Sendable (Outcome) -> Void) -> String? {
        state.withLock {
            guard progressOnly || $0.waiting.count - $0.progressOnly.count < Self.maxWaiting else { return nil }
            $0.next += 1
            let id = "p\($0.next)"
            $0.waiting[id] = handler
            if progressOnly { $0.progressOnly.insert(id) }
            if onDesktop { $0.onDesktop.insert(id) }
            return id
        }
    }

    private func take(_ id: String) -> (@Sendable (Outcome) -> Void)? {
        state.withLock {
            $0.progressOnly.remove(id)
            $0.onDesktop.remove(id)
            return $0.waiting.removeValue(forKey: id)
        }
    }

    private func send(_ params: PromptNotification.Params) {
        guard let line = try? WireCodec.notificationLine(method: PromptNotification.name, params: params) else { return }
        output.withLock { $0 }?.line.call(line)
    }

    /// Sends a prompt and waits for its answer, at most `[server] prompt_timeout` or `within`
    /// when that is shorter. Throws `user.cancelled` when the user declines, `prompt.timeout`
    /// when nobody answers in time, `server.busy` beyond `maxWaiting` questions, and
    /// `CancellationError` when the request itself is cancelled.
    func ask(_ kind: PromptKind, message: String, retriesLeft: Int? = nil, within: Duration? = nil) async throws -> String {
        let limit = min(within ?? timeout, timeout)
        let box = Mutex<(id: String?, expired: Bool)>((nil, false))
        let timer = Task { [weak self] in
            try? await Task.sleep(for: limit)
            guard !Task.isCancelled else { return }
            let id = box.withLock { $0.expired = true; return $0.id }
            if let id, let handler = self?.take(id) { handler(.timedOut) }
        }
        defer { timer.cancel() }
        let outcome: Outcome = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
                guard let id = register(progressOnly: false, { continuation.resume(returning: $0) }) else {
                    continuation.resume(returning: .refused)
                    return
                }
                let expired = box.withLock { $0.id = id; return $0.expired }
                if Task.isCancelled, let handler = take(id) { handler(.cancelled); return }
                if expired, let handler = take(id) { handler(.timedOut); return }
                reportWaiting()
                send(PromptNotification.Params(promptId: id, kind: kind, message: message, expectsAnswer: true, retriesLeft: retriesLeft))
            }
        } onCancel: {
            if let id = box.withLock({ $0.id }), let handler = take(id) { handler(.cancelled) }
        }
        reportWaiting()
        try Task.checkCancellation()
        switch outcome {
        case .answered(let value): return value
        case .cancelled: throw PromptFailure.cancelled(kind: kind)
        case .timedOut: throw PromptFailure.timedOut(kind: kind, seconds: Int(limit.components.seconds))
        case .refused: throw PromptFailure.tooMany
        }
    }

    /// A progress prompt that takes no answer but can be cancelled: returns its id and calls
    /// `onCancel` if the client sends `prompt.cancel` for it. Tell it with `notify`; end it with
    /// `finish`. `onDesktop`: it stands for a question the desktop asks, which `prompt.answer`
    /// on this connection may not answer (`prompt.on_desktop`).
    func progress(onDesktop: Bool = false, onCancel: @escaping @Sendable () -> Void) -> String {
        register(progressOnly: true, onDesktop: onDesktop) { outcome in
            if case .cancelled = outcome { onCancel() }
        }!
    }

    func notify(id: String, kind: PromptKind, message: String, secondsLeft: Int?, url: String? = nil, userCode: String? = nil) {
        send(PromptNotification.Params(promptId: id, kind: kind, message: message, expectsAnswer: false, secondsLeft: secondsLeft,
                                       url: url, userCode: userCode))
    }

    func finish(_ id: String) {
        _ = take(id)
    }

    /// `prompt.answer`.
    func answer(_ id: String, value: String) throws(PromptFailure) {
        let (isProgress, isOnDesktop) = state.withLock { ($0.progressOnly.contains(id), $0.onDesktop.contains(id)) }
        if isOnDesktop { throw .onDesktop }
        if isProgress { throw .takesNoAnswer }
        guard let handler = take(id) else { throw .unknown }
        handler(.answered(value))
    }

    /// `prompt.cancel`.
    func cancel(_ id: String) throws(PromptFailure) {
        guard let handler = take(id) else { throw .unknown }
        handler(.cancelled)
    }
}

/// Why a prompt ended without an answer, or a prompt id was refused.
enum PromptFailure: WireErrorConvertible, Equatable {
    /// The user declined the prompt (`prompt.cancel`).
    case cancelled(kind: PromptKind)
    /// No prompt with that id is waiting on this connection.
    case unknown
    /// A progress prompt ("present your card") takes no answer; it can only be cancelled.
    case takesNoAnswer
    /// Nobody answered within the prompt's deadline.
    case timedOut(kind: PromptKind, seconds: Int)
    /// `PromptBroker.maxWaiting` questions already wait on this connection.
    case tooMany
    /// `prompt: desktop` with no desktop to ask on: no agent registered for the user (`agent`),
    /// or, in user mode, no pinentry to run.
    case noDesktop(agent: Bool)
    /// The pinentry program could not be run or broke off (no display, a crash).
    case desktopFailed(PinentryFailure)
    /// The person cancelled the desktop dialog.
    case desktopCancelled(kind: PromptKind)
    /// `prompt.answer` for a question the desktop asks.
    case onDesktop
    /// The person did not let the program have the token.
    case consentDenied(program: String, audience: String)
    /// authd could not read which program asks (it exited), so it asks the person nothing.
    case unknownProgram

    var rpcError: RPCError {
        switch self {
        case .cancelled(let kind): .failure(.userCancelled, "The \(Self.spoken(kind)) prompt was cancelled.")
        case .unknown: .failure(.promptUnknown, "No prompt with that id is waiting on this connection.")
        case .takesNoAnswer: .failure(.promptUnknown, "That prompt takes no answer; it can only be cancelled.")
        case .timedOut(let kind, let seconds):
            .failure(.promptTimeout, "Nobody answered the \(kind) prompt within \(seconds) s.", details: ["timeout_s": .integer(Int64(seconds))])
        case .noDesktop(true):
            .failure(.promptNoDesktop, "No desktop agent is running for your user to ask on: start it in your graphical session "
                     + "(systemctl --user enable --now authd-desktop.service, or run authd --desktop), or ask with prompt: client.")
        case .noDesktop(false):
            .failure(.promptNoDesktop, "No pinentry program was found to ask on the desktop: install one (apt install pinentry-gnome3) "
                     + "or set [prompts] pinentry, or ask with prompt: client.")
        case .desktopFailed(let failure):
            .failure(.promptNoDesktop, "The desktop dialog could not be shown (\(failure)): pinentry needs a display or a terminal; "
                     + "on a machine without a desktop, run authd --desktop --pinentry /usr/bin/pinentry-tty in a terminal, or ask with prompt: client.")
        case .desktopCancelled(let kind):
            .failure(.promptCancelled, "The \(Self.spoken(kind)) dialog on the desktop was cancelled.")
        case .onDesktop:
            .failure(.promptOnDesktop, "That question is answered in the dialog on the desktop, not on this connection.")
        case .consentDenied(let program, let audience):
            .failure(.consentDenied, "The person did not allow \(Redaction.printable(program, limit: 120)) a token for \(Redaction.printable(audience, limit: 120)).")
        case .unknownProgram:
            .failure(.consentDenied, "authd could not tell which program asks (it has exited?), so it did not ask the person.")
        case .tooMany:
            .failure(.serverBusy, "\(PromptBroker.maxWaiting) prompts already wait for an answer on this connection; answer or cancel one first.",
                     details: ["limit": .integer(Int64(PromptBroker.maxWaiting))])
        }
    }

    /// A prompt kind as a person names it ("PIN2", "account PIN"), not its wire name.
    static func spoken(_ kind: PromptKind) -> String {
        let names: [PromptKind: String] = [
            .pin1: "PIN1", .pin2: "PIN2", .can: "CAN", .pin: "account PIN", .password: "password", .code: "code",
            .card: "ID card", .fingerprint: "fingerprint", .browser: "browser sign-in", .deviceCode: "device sign-in", .consent: "consent",
        ]
        return names[kind] ?? kind.rawValue
    }
}
