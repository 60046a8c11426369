// Sync/ — the account's event log (DESIGN §9): messages, notifications, read markers and
// dismissals, kept at the hub (or a standalone authd) and streamed to every machine of the
// account. The log's tables are the account store's (`SyncLog`); SyncService checks what apps
// send and serves the account methods; SyncBus fans committed events out to this machine's
// subscribers (and, at a hub, the linked machines). Errors: SyncFailure.

import FoundationEssentials
import JOSE
import OpenSSLCrypto
import Protocol

/// The sync account methods at the authd that keeps the account (a hub, or a standalone authd):
/// checks what an app sends, appends to the account's log, and hands each committed event to
/// this machine's subscribers and to the machines linked to the hub (`pushed`).
struct SyncService: Sendable {
    let log: SyncLog
    let directory: any MachineAccounts
    let bus: SyncBus
    /// Writes per local user and per machine (`[sync] writes_per_minute`,
    /// `machine_writes_per_minute`): a flood is slowed at the door, and a refusal says whose.
    let limiter: SyncWriteLimiter
    /// This machine's device id (the sender of what its own processes send).
    let thisMachine: DeviceID
    /// At a hub: the linked machines' keys and each account's setting, which decide whether a
    /// send must be end-to-end encrypted, and to whom. Nil elsewhere (a standalone authd keeps
    /// its log on the only machine that reads it).
    let keyBook: DeviceKeyBook?
    /// At a hub: sends committed events to the linked machines holding their accounts.
    let pushed: @Sendable ([(account: String, event: SyncEvent)]) async -> Void

    /// The largest body an event may carry, encoded.
    static let maxBodyBytes = SyncLimits.bodyBytes
    /// The kinds an app sends with `sync.send`; `read` and `dismiss` come from their own methods.
    static let sendableKinds: Set<String> = ["message", "notification"]
    /// authd's own: what happened to the account's machines and sessions, a person who added
    /// the account as a friend, and where friends who share with it are.
    static let authdKinds: Set<String> = ["device.linked", "device.revoked", "session.ended", "friend.added", "presence", "presence.settings"]
    static let allKinds: Set<String> = sendableKinds.union(["read", "dismiss"]).union(authdKinds)

    /// What `sync.send` refuses before anything is stored (here, or in a device's outbox); the
    /// event to store when it passes.
    static func check(_ params: SyncSend.Params) throws -> SyncLog.Draft {
        guard sendableKinds.contains(params.kind) else {
            throw InvalidParameter("Parameter 'kind' must be 'message' or 'notification' (read markers and dismissals have their own methods).", field: "kind")
        }
        if let conversation = params.conversation { try checkName(conversation, field: "conversation") }
        if let key = params.idempotencyKey { try checkName(key, field: "idempotency_key") }
        // Depth before encoding: a body that parsed at the line's own limit would be stored, and
        // then every answer carrying it (deeper still) could not be written or read.
        guard params.body.nestingDepth <= SyncLimits.bodyDepth else { throw SyncFailure.tooDeep(limit: SyncLimits.bodyDepth) }
        if let sealed = params.sealed {
            guard params.body == .null else { throw InvalidParameter("Parameter 'body' must be null when 'sealed' is given.", field: "body") }
            guard sealed.utf8.count <= SyncLimits.sealedBytes else { throw SyncFailure.tooLarge(limit: SyncLimits.sealedBytes) }
        }
        let draft = try SyncLog.Draft(kind: params.kind, conversation: params.conversation, body: params.body, idempotencyKey: params.idempotencyKey,
                                      sealed: params.sealed)
        guard draft.encoded.utf8.count <= maxBodyBytes else { throw SyncFailure.tooLarge(limit: maxBodyBytes) }
        return draft
    }

    func send(_ params: SyncSend.Params, caller: Caller) async throws -> SyncSend.Result {
        let draft = try Self.check(params)
        try limiter.take(caller)
        let account = try await directory.authenticate(PresentedSession(params.session, from: caller)).accountID
        try await checkEncryption(draft, account: account, caller: caller)
        let (event, duplicate) = try await log.append(account: account, draft, from: origin(of: caller))
        if !duplicate { await committed(event, account: account) }
        return SyncSend.Result(position: event.position, duplicate: duplicate)
    }

    func events(_ params: SyncEvents.Params, caller: Caller) async throws -> SyncEvents.Result {
        let limit = try Self.limit(params.limit, default: 500, most: 1000)
        guard params.after >= 0 else { throw InvalidParameter("Parameter 'after' must be 0 or more.", field: "after") }
        let account = try await directory.authenticate(PresentedSession(params.session, from: caller)).accountID
        var result = SyncEvents.Result(account: account, try await log.events(account: account, after: params.after, limit: limit))
        if case .forwarded(let machine, _) = caller {
            result.machineCursor = try await log.keptCursor(account: account, machine: DeviceIdentity.key(ofMachine: machine))
        }
        return result
    }

    func history(_ params: SyncHistory.Params, caller: Caller) async throws -> SyncHistory.Result {
        let limit = try Self.limit(params.limit, default: 50, most: 500)
        if let conversation = params.conversation { try Self.checkName(conversation, field: "conversation") }
        let account = try await directory.authenticate(PresentedSession(params.session, from: caller)).accountID
        return SyncHistory.Result(account: account, try await log.history(account: account, conversation: params.conversation, before: params.before, limit: limit))
    }

    func read(_ params: SyncRead.Params, caller: Caller) async throws -> SyncRead.Result {
        try Self.checkName(params.conversation, field: "conversation")
        guard params.upTo > 0 else { throw InvalidParameter("Parameter 'up_to' must be a position (1 or more).", field: "up_to") }
        try limiter.take(caller)
        let account = try await directory.authenticate(PresentedSession(params.session, from: caller)).accountID
        let (marker, event) = try await log.markRead(account: account, conversation: params.conversation, upTo: params.upTo, from: origin(of: caller))
        if let event { await committed(event, account: account) }
        return SyncRead.Result(conversation: params.conversation, upTo: marker, moved: event != nil, position: event?.position)
    }

    func unread(_ params: SyncUnread.Params, caller: Caller) async throws -> SyncUnread.Result {
        let account = try await directory.authenticate(PresentedSession(params.session, from: caller)).accountID
        return SyncUnread.Result(conversations: try await log.unread(account: account).map {
            SyncUnread.Conversation(conversation: $0.conversation, unread: $0.count, readUpTo: $0.readUpTo)
        })
    }

    func dismiss(_ params: SyncDismiss.Params, caller: Caller) async throws -> SyncDismiss.Result {
        try limiter.take(caller)
        let account = try await directory.authenticate(PresentedSession(params.session, from: caller)).accountID
        let event = try await log.dismiss(account: account, position: params.position, from: origin(of: caller))
        if let event { await committed(event, account: account) }
        return SyncDismiss.Result(dismissed: event != nil, position: event?.position)
    }

    /// At a hub, for an account whose sync is end-to-end encrypted: a `message` or
    /// `notification` must come sealed by the device that forwards it (its signature checked
    /// here against the key it published), to exactly the account's devices as they are now.
    /// Everywhere else a sealed body is refused: nothing would open it.
    private func checkEncryption(_ draft: SyncLog.Draft, account: String, caller: Caller) async throws {
        guard let keyBook else {
            if draft.sealed != nil { throw InvalidParameter("Parameter 'sealed' is taken only by a hub.", field: "sealed") }
            return
        }
        let (mode, devices) = try await keyBook.recipients(account: account)
        guard let sealed = draft.sealed else {
            if mode == .required && Self.sendableKinds.contains(draft.kind) { throw SyncFailure.e2eeRequired }
            return
        }
        guard case .forwarded(let machine, _) = caller else {
            throw InvalidParameter("Parameter 'sealed' is set by authd on a device linked to this hub, never by an app.", field: "sealed")
        }
        // Not for this account (any more), or the sender's own key is not published yet.
        guard mode == .required, let spki = devices[machine.description] else { throw SyncFailure.recipientsChanged }
        guard SignedEnvelope.signer(of: sealed) == machine.description else { throw E2EEFailure.badSignature }
        let jwe = try SignedEnvelope.open(sealed, signerKey: try P256PublicKey(spki: spki))
        guard let recipients = JWE.recipientIDs(jwe), recipients.count == devices.count, Set(recipients) == Set(devices.keys) else {
            throw SyncFailure.recipientsChanged
        }
    }

    /// Appends what a call did to accounts (a machine linked or removed, a session ended) to
    /// their logs, sent by this authd itself, and hands each event on like any other.
    func record(_ notices: [AccountNotice]) async {
        let origin = noticeOrigin
        let drafts = notices.compactMap { notice in
            (try? SyncLog.Draft(kind: notice.kind, conversation: nil, body: .object(notice.body), idempotencyKey: nil)).map { (notice.account, $0) }
        }
        guard let appended = try? await log.append(drafts, from: origin) else { return }
        for (account, event) in appended { bus.publish(event, account: account) }
        await pushed(appended)
    }

    private func committed(_ event: SyncEvent, account: String) async {
        bus.publish(event, account: account)
        await pushed([(account, event)])
    }

    /// Whom the events authd itself appends come from (`AccountNotice`).
    var noticeOrigin: SyncLog.Origin {
        SyncLog.Origin(deviceKey: "authd", sender: SyncSender(machine: "authd", deviceID: thisMachine.description, exe: nil))
    }

    /// Hands on events committed outside this service's appends: by another hub replica (read
    /// back from the log), or in a change's own transaction (`AuditScope.noticed`).
    func committedElsewhere(_ events: [(account: String, event: SyncEvent)]) async {
        for (account, event) in events { bus.publish(event, account: account) }
        await pushed(events)
    }

    /// The machine an event comes from: another machine of the hub for a forwarded call, else this one.
    private func origin(of caller: Caller) throws -> SyncLog.Origin {
        let device = try DeviceIdentity.resolve(nil, caller: caller)
        let deviceID: String? = switch caller {
        case .forwarded(let machine, _), .device(let machine): machine.description
        case .local: thisMachine.description
        }
        return SyncLog.Origin(deviceKey: device.key, sender: SyncSender(machine: device.name, deviceID: deviceID, exe: caller.executable))
    }

    /// Conversation names and idempotency keys: 1–128 printable characters.
    static func checkName(_ value: String, field: String) throws(InvalidParameter) {
        guard !value.isEmpty, value.unicodeScalars.count <= 128,
              !value.containsControlCharacter
        else { throw InvalidParameter("Parameter '\(field)' must be 1–128 printable characters.", field: field) }
    }

    static func limit(_ value: Int?, default fallback: Int, most: Int) throws(InvalidParameter) -> Int {
        guard let value else { return fallback }
        guard (1...most).contains(value) else { throw InvalidParameter("Parameter 'limit' must be 1–\(most).", field: "limit") }
        return value
    }
}

extension JSONValue {
    /// How deep arrays and objects nest in it: 0 for a scalar, 1 for `[]` or `{"a": 1}`.
    var nestingDepth: Int {
        switch self {
        case .array(let elements): 1 + (elements.lazy.map(\.nestingDepth).max() ?? 0)
        case .object(let members): 1 + (members.values.lazy.map(\.nestingDepth).max() ?? 0)
        case .null, .bool, .integer, .double, .string: 0
        }
    }
}

// MARK: The log's pages as the answers carry them

extension SyncEvents.Result {
    init(account: String, _ window: SyncLog.Window) {
        self.init(account: account, events: window.page.events, head: window.head, oldest: window.oldest, more: window.page.more)
    }
}

extension SyncHistory.Result {
    init(account: String, _ page: SyncLog.Page) {
        self.init(events: page.events, more: page.more, account: account)
    }
}

extension LinkSyncResume.Account {
    init(_ caughtUp: SyncLog.CatchUp) {
        self.init(account: caughtUp.account, cursor: caughtUp.cursor, events: caughtUp.page.events, users: caughtUp.users, more: caughtUp.page.more)
    }
}
