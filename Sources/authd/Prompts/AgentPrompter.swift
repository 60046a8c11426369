import AuthdClient
import Dispatch
import FoundationEssentials
import Glibc
import Protocol
import Synchronization

/// The prompt side of `authd --desktop` (DESIGN §12): registers with authd as this user's
/// desktop (`desktop.register`), shows each question authd sends through pinentry — one dialog at
/// a time, in the order asked — and answers on the same connection (`desktop.reply`, sent as a
/// notification so that answers never wait for the stream being read); closes a dialog authd
/// withdraws; shows progress as desktop notifications. While authd is away it connects again,
/// every 1 s at first and at most every 30 s.
final class AgentPrompter: Sendable {
    let socketPath: String
    /// `--pinentry`, when given: it wins over authd's `[prompts] pinentry`.
    let pinentry: String?
    /// What pinentry gets of the agent's environment (the desktop session's variables).
    let environment: [String: String]
    /// The agent's own PATH, where a pinentry named without a path is looked for.
    let search: [String: String]
    /// Where a terminal pinentry draws: `GPG_TTY`, or the agent's own terminal.
    let tty: (name: String, type: String)?
    let notifications: DesktopNotifications
    let logger: Logger
    /// The registration's `agent_token` while registered, which ``AgentForwarder`` presents.
    let token = AgentToken()
    private let turn = FIFOLock()

    init(socketPath: String, pinentry: String?, environment: [String: String], notifications: DesktopNotifications, logger: Logger) {
        self.socketPath = socketPath
        self.pinentry = pinentry
        self.environment = Pinentry.sessionEnvironment(environment)
        search = Pinentry.searchEnvironment(environment)
        self.tty = Syscalls.terminal(environment: environment)
        self.notifications = notifications
        self.logger = logger
    }

    /// Serves on a thread of its own, for good.
    func start() {
        DispatchQueue(label: "authd.desktop-prompts").async { [self] in
            DesktopAgent.keepConnected("ask authd's questions", socketPath: socketPath, logger: logger) { connected in try serve(registered: connected) }
        }
    }

    /// One connection: register, then show what authd asks until it closes.
    private func serve(registered: () -> Void) throws {
        let connection = try LineConnection(socketPath: socketPath)
        let client = RPCClient(connection: connection)
        let registration = try client.call(DesktopRegister.self, NoParams())
        // `--pinentry`, else authd's `[prompts] pinentry`, else `pinentry`: each a path, or a
        // name looked for on the agent's PATH.
        let path = Pinentry.resolve(configured: pinentry ?? registration.pinentry, environment: search)
        let replies = Replies(connection: connection)
        let open = OpenDialogs()
        token.set(registration.agentToken)
        defer {
            token.set(nil)
            open.cancelAll()
        }
        logger.info("desktop: asking authd's questions for this user with \(path ?? "no pinentry (none found)") (\(socketPath))")
        registered()
        while let (method, params) = try client.nextNotification() {
            guard let params else { continue }
            switch method {
            case DesktopAsk.name:
                guard let ask = try? WireCodec.decode(DesktopAsk.Params.self, from: params) else { continue }
                open.start(ask.askId) { [self] in
                    if let answer = await show(ask.dialog, with: path) { replies.send(ask.askId, answer) }
                }
            case DesktopWithdraw.name:
                guard let withdrawn = try? WireCodec.decode(DesktopWithdraw.Params.self, from: params) else { continue }
                open.remove(withdrawn.askId)?.cancel()
            case DesktopIdentify.name:
                // authd may not read this user's processes (a system authd): the agent, as the
                // user, reads who asks, by the same rules.
                guard let asked = try? WireCodec.decode(DesktopIdentify.Params.self, from: params) else { continue }
                let program = ProgramIdentity.read(pid: asked.pid, expectedUID: Syscalls.effectiveUserID())
                replies.identified(asked.askId, program.map { DesktopProgram(kind: $0.kind.rawValue, name: $0.name, executable: $0.executable) })
            case DesktopShow.name:
                guard let note = try? WireCodec.decode(DesktopShow.Params.self, from: params) else { continue }
                notifications.progress(DeskNote(id: note.showId, kind: note.kind, title: note.title, message: note.message, done: note.done))
            default:
                continue
            }
        }
    }

    /// The person's answer to one dialog, shown when its turn comes; nil when authd withdrew it.
    private func show(_ dialog: DesktopDialog, with path: String?) async -> (DesktopAnswer, String?)? {
        guard let path, let asked = dialog.pinentry else { return (.unavailable, nil) }
        do {
            try await turn.lock()
        } catch {
            return nil
        }
        defer { turn.unlock() }
        do {
            switch try await Pinentry(path: path, environment: environment, tty: tty).ask(asked) {
            case .secret(let value): return (.secret, value)
            case .ok: return (.ok, nil)
            case .notOK: return (.notOk, nil)
            case .cancelled: return (.cancelled, nil)
            case .timedOut: return (.timedOut, nil)
            }
        } catch is CancellationError {
            return nil
        } catch {
            logger.warning("desktop: pinentry \(path) could not ask: \(error)")
            return (.unavailable, nil)
        }
    }
}

/// The dialogs of one connection that are shown or wait their turn, by ask id.
private final class OpenDialogs: Sendable {
    private let tasks = Mutex<[String: Task<Void, Never>]>([:])

    /// Runs `dialog` as `id` until it ends or is withdrawn. Started under the lock, so that
    /// the task's own removal at its end always comes after it was added.
    func start(_ id: String, _ dialog: @escaping @Sendable () async -> Void) {
        tasks.withLock { tasks in
            tasks[id] = Task { [self] in
                await dialog()
                _ = remove(id)
            }
        }
    }

    func remove(_ id: String) -> Task<Void, Never>? { tasks.withLock { $0.removeValue(forKey: id) } }
    func cancelAll() { tasks.withLock { for task in $0.values { task.cancel() }; $0 = [:] } }
}

/// `desktop.reply` notifications on the agent's connection, one writer at a time; each line is
/// wiped once sent (it may carry a secret).
private final class Replies: @unchecked Sendable {
    // @unchecked: `connection` is written only under `lock`; the reading side is the agent's loop.
    private let connection: LineConnection
    private let lock = Mutex(())

    init(connection: LineConnection) { self.connection = connection }

    func identified(_ askID: String, _ program: DesktopProgram?) {
        guard let line = try? WireCodec.requestLine(id: nil, method: DesktopIdentified.name, params: DesktopIdentified.Params(askId: askID, program: program)) else { return }
        lock.withLock { _ in try? connection.send(line) }
    }

    func send(_ askID: String, _ answer: (DesktopAnswer, String?)) {
        guard var line = try? WireCodec.requestLine(id: nil, method: DesktopReply.name,
                                                    params: DesktopReply.Params(askId: askID, answer: answer.0, value: answer.1)) else { return }
        lock.withLock { _ in try? connection.send(line) }
        line.withUnsafeMutableBytes { LineConnection.wipe($0) }
    }
}

/// The agent's current `agent_token`, shared by its prompt connection (which registers) and the
/// session-bus calls it passes on.
final class AgentToken: Sendable {
    private let value = Mutex<String?>(nil)
    func set(_ token: String?) { value.withLock { $0 = token } }
    var current: String? { value.withLock { $0 } }
}
