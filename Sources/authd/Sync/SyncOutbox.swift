import FoundationEssentials
import JOSE
import OpenSSLCrypto
import Protocol

/// On a device: `sync.send` reaches the hub at once when it can, behind anything its user still
/// has queued; while the hub is away it is kept in the machine's outbox — durably, before the app
/// hears `queued` — and sent in order when the link is back. Each entry carries an idempotency
/// key (the app's, or one made here), so an entry resent after a crash is the same event at the
/// hub: nothing acknowledged to an app is lost, and nothing is stored twice.
///
/// The outbox is a queue per local user, sent in turns: one user's entries (refused, slowed
/// down by the hub, or many) never hold back another's. What could never reach the hub is
/// refused before it is queued, and an entry the hub refuses, or that can no longer be sent, is
/// taken out and told to its sender (`sync.sent` with `error`): nothing waits for ever.
actor SyncOutbox {
    private let store: Store
    private let sealer: Sealer
    private let link: HubLink
    /// Seals what goes to the hub (DESIGN §13).
    private let cipher: SyncCipher
    private let bus: SyncBus
    private let logger: Logger
    private let now: @Sendable () -> Date
    private var flushing = false
    /// Users the hub slowed down, and until when: their entries wait, nobody else's do.
    private var resting: [UInt32: ContinuousClock.Instant] = [:]
    /// How many entries each local user has in the outbox. Only this actor writes the table, so
    /// the counts are read from it once, before this actor's first write, and kept here after:
    /// a send learns whether it must wait behind its user's entries without reading the table.
    private var queued: [UInt32: Int]?
    private var queuedLoading: Task<[UInt32: Int], any Error>?

    init(store: Store, sealer: Sealer, link: HubLink, cipher: SyncCipher, bus: SyncBus, logger: Logger, now: @escaping @Sendable () -> Date) {
        self.store = store
        self.sealer = sealer
        self.link = link
        self.cipher = cipher
        self.bus = bus
        self.logger = logger
        self.now = now
    }

    func send(_ params: SyncSend.Params, caller: CallerIdentity) async throws -> SyncSend.Result {
        let draft = try SyncService.check(params)
        // One key for the first attempt and any resend: a send whose answer was lost with the
        // link (the hub had stored it) is then the same event when the outbox sends it again.
        let key = try params.idempotencyKey ?? Self.idempotencyKey(at: now())
        var params = params
        params.idempotencyKey = key
        // Refused now what no link could carry, rather than answered `queued` and kept for ever.
        try Self.checkForwardable(params, bodyText: draft.encoded, caller: ForwardedCaller(caller))
        if try await !hasQueued(uid: caller.uid) {
            do {
                return try await forward(params, caller: caller)
            } catch let failure as HubLinkFailure {
                guard case .unavailable = failure else { throw failure }
            }
        }
        // Behind what this user has queued (or the hub away): keep it, in order.
        let id = try await queue(params, key: key, body: draft.encoded, caller: caller)
        logger.info("sync: the hub is away; an event was kept in the outbox", [("AUTHD_SYNC_OUTBOX_ID", String(id))])
        Task { await flush() }
        return SyncSend.Result(queuedAs: id)
    }

    /// The idempotency key of a send that came without one: `authd-`, the time in milliseconds
    /// (12 hex digits) and 128 random bits. The time first, so that a machine's keys come in
    /// order: the hub's index of keys takes each batch of them on its last page, not each on a
    /// page of its own.
    static func idempotencyKey(at time: Date) throws -> String {
        let milliseconds = UInt64(max(0, time.timeIntervalSince1970 * 1000))
        let hex = String(milliseconds, radix: 16)
        return "authd-" + String(repeating: "0", count: max(0, 12 - hex.count)) + hex + Base64URL.encode(try RandomIdentifiers.shared.next())
    }

    /// Whether `params` goes to the hub as one line it reads: nested no deeper than a body may
    /// be (`sync.too_deep`; the envelope adds a handful of levels, far below what any parser
    /// takes), and within the line limit with the envelope and the caller (`sync.unforwardable`).
    /// Measured, not written out: every send passes here, and a body may be 64 KiB. `bodyText`:
    /// the body as the same encoder already wrote it (to store it), so it is not written again.
    static func checkForwardable(_ params: SyncSend.Params, bodyText: String? = nil, caller: ForwardedCaller) throws(SyncFailure) {
        guard params.body.nestingDepth <= SyncLimits.bodyDepth else { throw .tooDeep(limit: SyncLimits.bodyDepth) }
        let limit = LineFramer.defaultMaxLineLength
        var bare = params
        bare.body = .null
        guard let rest = try? WireCodec.encodeJSON(bare).count, let who = try? WireCodec.encodeJSON(caller).count,
              let body = bodyText?.utf8.count ?? (try? WireCodec.encodeJSON(params.body).count),
              rest - "null".utf8.count + body + who + envelopeBytes <= limit
        else { throw .unforwardable(limit: limit) }
    }

    /// `link.forward`'s envelope around the params and the caller: the id, the method names and
    /// the member names, with room to spare.
    static let envelopeBytes = 256

    /// How one attempt to send an entry went.
    private enum Attempt {
        /// Out of the queue: stored at the hub (its position), or refused for good.
        case done(Result<Int64, RPCError>)
        /// The hub slows down this user (`user`) or the whole machine: try again after `seconds`.
        case slowed(SyncWriteLimit.Scope, seconds: Int64)
        /// The hub is away: everything waits for the link.
        case away
    }

    /// Sends what is queued, each user's oldest first, the users in turns, until the outbox is
    /// empty or the hub is away again.
    func flush() async {
        guard !flushing else { return }
        flushing = true
        defer { flushing = false }
        while true {
            let heads: [Head]
            do {
                _ = try await queuedCounts()
                heads = try await oldestOfEachUser()
            } catch {
                logger.error("sync: the outbox cannot be read: \(error)")
                return
            }
            guard !heads.isEmpty else { return }
            let now = ContinuousClock.now
            resting = resting.filter { $0.value > now }
            let ready = heads.filter { resting[$0.uid] == nil }
            guard !ready.isEmpty else {
                // Come back when the first rest is over; meanwhile a send of another user (or
                // the link coming back) starts a flush of its own rather than waiting on this one.
                let wake = heads.compactMap { resting[$0.uid] }.min() ?? now
                Task {
                    try? await Task.sleep(until: wake, clock: .continuous)
                    await self.flush()
                }
                return
            }
            turns: for head in ready {
                switch await attempt(head) {
                case .away:
                    return
                case .slowed(.user, let seconds):
                    resting[head.uid] = .now + .seconds(seconds)
                case .slowed(.machine, let seconds):
                    // Every user of this machine waits alike.
                    for other in heads { resting[other.uid] = .now + .seconds(seconds) }
                    break turns
                case .done(let outcome):
                    do {
                        try await store.transaction { try $0.execute("DELETE FROM sync_outbox WHERE id = ?", [.integer(head.id)]) }
                    } catch {
                        logger.error("sync: an event the hub has could not leave the outbox: \(error)")
                        return
                    }
                    let left = (queued?[head.uid] ?? 1) - 1
                    queued?[head.uid] = left > 0 ? left : nil
                    bus.sent(SyncBus.Sent(sessionHash: head.sessionHash, outboxID: head.id, outcome: outcome))
                }
            }
        }
    }

    /// Sends one entry and says what became of it.
    private func attempt(_ head: Head) async -> Attempt {
        let entry: Entry
        do {
            entry = try open(head)
            try Self.checkForwardable(entry.params, bodyText: head.body, caller: ForwardedCaller(entry.caller))
        } catch let failure as SyncFailure {
            // Queued before such entries were refused at the door (too deep to travel, say).
            logger.warning("sync: a queued event cannot be sent (\(failure.rpcError.reason)); it was dropped", [("AUTHD_SYNC_OUTBOX_ID", String(head.id))])
            return .done(.failure(failure.rpcError))
        } catch {
            logger.error("sync: a queued event cannot be read back (\(error)); it was dropped", [("AUTHD_SYNC_OUTBOX_ID", String(head.id))])
            return .done(.failure(.internalError))
        }
        do {
            return .done(.success(try await forward(entry.params, caller: entry.caller).position ?? 0))
        } catch is HubLinkFailure {
            return .away
        } catch HubSendRefusal.slowed(let scope, let seconds, _) {
            return .slowed(scope, seconds: seconds)
        } catch let failure as E2EEFailure {
            // The hub gave a key its device did not sign: this machine encrypts to none of them.
            logger.warning("sync: a queued event was not sent (\(failure.reason)); it was dropped", [("AUTHD_SYNC_OUTBOX_ID", String(entry.id))])
            return .done(.failure(failure.rpcError))
        } catch HubSendRefusal.refused(let error) {
            // The hub refused it for good (the session ended, say): dropped, and the app told.
            logger.warning("sync: the hub refused a queued event (\(error.reason)); it was dropped", [("AUTHD_SYNC_OUTBOX_ID", String(entry.id))])
            return .done(.failure(error))
        } catch {
            // Not the hub's answer (its result did not decode): it stored the event or not; the
            // idempotency key makes a resend safe, but one that fails like this would fail again.
            logger.error("sync: sending a queued event failed (\(error)); it was dropped", [("AUTHD_SYNC_OUTBOX_ID", String(entry.id))])
            return .done(.failure(.internalError))
        }
    }

    // MARK: The hub

    /// What the hub's refusal of a send means for the queue, decided here at the link's edge
    /// once: the outbox acts on these, never on a wire error's reason. A caller whose send went
    /// straight through gets the hub's answer as it was.
    enum HubSendRefusal: Error, WireErrorConvertible {
        /// Not this entry's fault: its user's or the machine's write limit, or a hub shutting
        /// down or full for now. The entry stays and is tried again after `seconds`.
        case slowed(SyncWriteLimit.Scope, seconds: Int64, answer: RPCError)
        /// Refused for good (the session ended, say): the entry goes and its sender is told.
        case refused(RPCError)

        var rpcError: RPCError {
            switch self {
            case .slowed(_, _, let answer), .refused(let answer): answer
            }
        }
    }

    /// Sealed (``SyncCipher``) and sent; sealed again once, with the account's keys read anew,
    /// when the hub says the account's devices changed meanwhile.
    private func forward(_ params: SyncSend.Params, caller: CallerIdentity) async throws -> SyncSend.Result {
        do {
            do {
                return try await link.forward(SyncSend.self, try await cipher.seal(params), caller: ForwardedCaller(caller))
            } catch let error as RPCError where error.reason == .syncRecipientsChanged || error.reason == .syncE2EERequired {
                return try await link.forward(SyncSend.self, try await cipher.seal(params, reread: true), caller: ForwardedCaller(caller))
            }
        } catch let error as RPCError where error.reason == .rateLimited {
            // A hub that predates the scope slows the machine.
            let scope: SyncWriteLimit.Scope = error.details["scope"]?.stringValue == SyncWriteLimit.Scope.user.rawValue ? .user : .machine
            throw HubSendRefusal.slowed(scope, seconds: min(60, max(1, error.details["retry_after"]?.integerValue ?? 1)), answer: error)
        } catch let error as RPCError where error.code == .unavailable {
            throw HubSendRefusal.slowed(.machine, seconds: min(60, max(1, error.details["retry_after"]?.integerValue ?? 5)), answer: error)
        } catch let error as RPCError {
            throw HubSendRefusal.refused(error)
        }
    }

    // MARK: The table

    /// An entry as the table has it: enough to report on it even when it does not open.
    private struct Head {
        let id: Int64
        let uid: UInt32
        let sessionHash: [UInt8]
        let sealed: [UInt8]
        let username: String?
        let exe: String?
        let kind: String
        let conversation: String?
        let body: String
        let key: String
    }

    private struct Entry {
        let id: Int64
        let params: SyncSend.Params
        let caller: CallerIdentity
    }

    private func hasQueued(uid: UInt32) async throws -> Bool {
        try await queuedCounts()[uid] != nil
    }

    /// ``queued``, read from the table by the first caller (the others wait for that read); a
    /// read that fails is tried again by the next caller.
    private func queuedCounts() async throws -> [UInt32: Int] {
        if let queued { return queued }
        let loading = queuedLoading ?? Task { [store] in
            try await store.read { database in
                try database.query("SELECT uid, count(*) FROM sync_outbox GROUP BY uid") { (UInt32(truncatingIfNeeded: $0.int64(0)), Int($0.int64(1))) }
            }.reduce(into: [:]) { $0[$1.0] = $1.1 }
        }
        queuedLoading = loading
        do {
            let counts = try await loading.value
            if queued == nil { queued = counts }
            return queued ?? counts
        } catch {
            queuedLoading = nil
            throw error
        }
    }

    private func queue(_ params: SyncSend.Params, key: String, body: String, caller: CallerIdentity) async throws -> Int64 {
        let sealed = try sealer.seal(SecretBytes(Array(params.session.utf8)), purpose: .syncOutboxSession, identity: "sync_outbox:\(key)")
        let now = Int64(now().timeIntervalSince1970)
        // The counts are read before this write, or the read could count this entry twice.
        _ = try await queuedCounts()
        let id = try await store.transaction { database in
            try database.queryOne(
                """
                INSERT INTO sync_outbox (session_sealed, session_hash, uid, username, exe, kind, conversation, body, idempotency_key, queued_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id
                """,
                [.blob(sealed), .blob(OpenSSL.sha256(Array(params.session.utf8))), .integer(Int64(caller.uid)), caller.username.map(SQLValue.text) ?? .null,
                 caller.exe.map(SQLValue.text) ?? .null, .text(params.kind), params.conversation.map(SQLValue.text) ?? .null,
                 .text(body), .text(key), .integer(now)]) { $0.int64(0) } ?? 0
        }
        queued?[caller.uid, default: 0] += 1
        return id
    }

    /// Each user's oldest entry, the users in the order of those entries.
    private func oldestOfEachUser() async throws -> [Head] {
        try await store.read { database in
            try database.query(
                """
                SELECT id, session_sealed, session_hash, uid, username, exe, kind, conversation, body, idempotency_key FROM sync_outbox
                WHERE id IN (SELECT min(id) FROM sync_outbox GROUP BY uid) ORDER BY id
                """) {
                Head(id: $0.int64(0), uid: UInt32(truncatingIfNeeded: $0.int64(3)), sessionHash: $0.blob(2), sealed: $0.blob(1), username: $0.optionalText(4),
                     exe: $0.optionalText(5), kind: $0.text(6), conversation: $0.optionalText(7), body: $0.text(8), key: $0.text(9))
            }
        }
    }

    private func open(_ head: Head) throws -> Entry {
        guard let session = try sealer.open(head.sealed, purpose: .syncOutboxSession, identity: "sync_outbox:\(head.key)") else {
            throw SealedValueError()
        }
        let body = try WireCodec.decode(JSONValue.self, from: Data(head.body.utf8))
        let params = SyncSend.Params(session: String(decoding: session.withUnsafeBytes { Array($0) }, as: UTF8.self), kind: head.kind,
                                     conversation: head.conversation, body: body, idempotencyKey: head.key)
        return Entry(id: head.id, params: params,
                     caller: CallerIdentity(uid: head.uid, gid: head.uid, pid: 0, exe: head.exe, username: head.username, groups: []))
    }

    /// A sealed session that does not open: the store was changed behind authd's back.
    struct SealedValueError: Error, CustomStringConvertible {
        var description: String { "an outbox entry's sealed session does not open; the store is damaged" }
    }
}
