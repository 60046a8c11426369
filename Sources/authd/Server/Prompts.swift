import FoundationEssentials
import Protocol
import Synchronization

/// The prompts raised by requests on one connection (DESIGN §3, like gpg-agent's loopback
/// pinentry): authd sends a `prompt` notification; the client answers with `prompt.answer` or
/// `prompt.cancel` on the same connection. A request that is cancelled (the client left, the
/// daemon stops) stops waiting at once.
final class PromptBroker: Sendable {
    enum Outcome: Sendable {
        case answered(String)
        case cancelled
    }

    private struct State {
        var next: UInt64 = 0
        var waiting: [String: @Sendable (Outcome) -> Void] = [:]
        /// Prompts that take no answer (progress such as "present your card").
        var progressOnly: Set<String> = []
    }
    private let state = Mutex(State())
    /// Where the `prompt` notifications go: the connection's output, set once by `connect`.
    private let output = Mutex<(@Sendable (Data) -> Void)?>(nil)

    /// Sends this broker's prompts through `output` (the connection's, as it is made).
    func connect(_ output: @escaping @Sendable (Data) -> Void) {
        self.output.withLock { $0 = output }
    }

    private func register(progressOnly: Bool, _ handler: @escaping @Sendable (Outcome) -> Void) -> String {
        state.withLock {
            $0.next += 1
            let id = "p\($0.next)"
            $0.waiting[id] = handler
            if progressOnly { $0.progressOnly.insert(id) }
            return id
        }
    }

    private func take(_ id: String) -> (@Sendable (Outcome) -> Void)? {
        state.withLock {
            $0.progressOnly.remove(id)
            return $0.waiting.removeValue(forKey: id)
        }
    }

    private func send(_ params: PromptNotification.Params) {
        guard let line = try? WireCodec.notificationLine(method: PromptNotification.name, params: params) else { return }
        output.withLock { $0 }?(line)
    }

    /// Sends a prompt and waits for its answer. Throws `user.cancelled` when the user declines,
    /// `CancellationError` when the request itself is cancelled.
    func ask(_ kind: PromptKind, message: String, retriesLeft: Int? = nil) async throws -> String {
        let box = Mutex<String?>(nil)
        let outcome: Outcome = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
                let id = register(progressOnly: false) { continuation.resume(returning: $0) }
                box.withLock { $0 = id }
                if Task.isCancelled, let handler = take(id) { handler(.cancelled); return }
                send(PromptNotification.Params(promptId: id, kind: kind, message: message, expectsAnswer: true, retriesLeft: retriesLeft))
            }
        } onCancel: {
            if let id = box.withLock({ $0 }), let handler = take(id) { handler(.cancelled) }
        }
        try Task.checkCancellation()
        switch outcome {
        case .answered(let value): return value
        case .cancelled: throw PromptFailure.cancelled(kind: kind)
        }
    }

    /// A progress prompt that takes no answer but can be cancelled: returns its id and calls
    /// `onCancel` if the client sends `prompt.cancel` for it. Tell it with `notify`; end it with
    /// `finish`.
    func progress(onCancel: @escaping @Sendable () -> Void) -> String {
        register(progressOnly: true) { outcome in
            if case .cancelled = outcome { onCancel() }
        }
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
        let isProgress = state.withLock { $0.progressOnly.contains(id) }
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

    var rpcError: RPCError {
        switch self {
        case .cancelled(let kind): .failure(.userCancelled, "The user cancelled the \(kind) prompt.")
        case .unknown: .failure(.promptUnknown, "No prompt with that id is waiting on this connection.")
        case .takesNoAnswer: .failure(.promptUnknown, "That prompt takes no answer; it can only be cancelled.")
        }
    }
}
