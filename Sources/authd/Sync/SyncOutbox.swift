import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// On a device: `sync.send` reaches the hub at once when it can, behind anything still queued;
/// while the hub is away it is kept in the machine's outbox — durably, before the app hears
/// `queued` — and sent in order when the link is back. Each entry carries an idempotency key
/// (the app's, or one made here), so an entry resent after a crash is the same event at the
/// hub: nothing acknowledged to an app is lost, and nothing is stored twice.
actor SyncOutbox {
    private let store: Store
    private let sealer: Sealer
    private let link: HubLink
    private let bus: SyncBus
    private let machineName: String
    private let logger: Logger
    private let now: @Sendable () -> Date
    private var flushing = false

    init(store: Store, sealer: Sealer, link: HubLink, bus: SyncBus, machineName: String, logger: Logger, now: @escaping @Sendable () -> Date) {
        self.store = store
        self.sealer = sealer
        self.link = link
        self.bus = bus
        self.machineName = machineName
        self.logger = logger
        self.now = now
    }

    func send(_ params: SyncSend.Params, caller: CallerIdentity) async throws -> SyncSend.Result {
        let draft = try SyncService.check(params)
        // One key for the first attempt and any resend: a send whose answer was lost with the
        // link (the hub had stored it) is then the same event when the outbox sends it again.
        let key = try params.idempotencyKey ?? "authd-" + Base64URL.encode(OpenSSL.randomBytes(16))
        var params = params
        params.idempotencyKey = key
        if try await isEmpty() {
            do {
                return try await forward(params, caller: caller)
            } catch let failure as HubLinkFailure {
                guard case .unavailable = failure else { throw failure }
            }
        }
        // Behind what is queued (or the hub away): keep it, in order.
        let id = try await queue(params, key: key, body: draft.encoded, caller: caller)
        logger.info("sync: the hub is away; an event was kept in the outbox", [("AUTHD_SYNC_OUTBOX_ID", String(id))])
        Task { await flush() }
        return SyncSend.Result(queuedAs: id)
    }

    /// Sends what is queued, oldest first, until the outbox is empty or the hub is away again.
    func flush() async {
        guard !flushing else { return }
        flushing = true
        defer { flushing = false }
        while true {
            let entry: Entry
            do {
                guard let oldest = try await oldest() else { return }
                entry = oldest
            } catch {
                logger.error("sync: the outbox cannot be read: \(error)")
                return
            }
            let outcome: Result<Int64, RPCError>
            do {
                let result = try await forward(entry.params, caller: entry.caller)
                outcome = .success(result.position ?? 0)
            } catch is HubLinkFailure {
                return
            } catch let error as RPCError where error.reason == .rateLimited {
                // The hub slows this machine down: wait as it says, then go on in order.
                let seconds = min(60, max(1, error.details["retry_after"]?.integerValue ?? 1))
                try? await Task.sleep(for: .seconds(seconds))
                continue
            } catch let error as RPCError {
                // The hub refused it for good (the session ended, say): dropped, and the app told.
                logger.warning("sync: the hub refused a queued event (\(error.reason)); it was dropped", [("AUTHD_SYNC_OUTBOX_ID", String(entry.id))])
                outcome = .failure(error)
            } catch {
                logger.error("sync: sending the outbox failed: \(error)")
                return
            }
            do {
                try await store.transaction { try $0.execute("DELETE FROM sync_outbox WHERE id = ?", [.integer(entry.id)]) }
            } catch {
                logger.error("sync: an event the hub has could not leave the outbox: \(error)")
                return
            }
            bus.sent(SyncBus.Sent(sessionHash: entry.sessionHash, outboxID: entry.id, outcome: outcome))
        }
    }

    // MARK: The hub

    private func forward(_ params: SyncSend.Params, caller: CallerIdentity) async throws -> SyncSend.Result {
        try await link.forward(SyncSend.self, params, caller: ForwardedCaller(caller, machine: machineName))
    }

    // MARK: The table

    private struct Entry {
        let id: Int64
        let params: SyncSend.Params
        let caller: CallerIdentity
        let sessionHash: [UInt8]
    }

    private func isEmpty() async throws -> Bool {
        try await store.read { try $0.queryOne("SELECT 1 FROM sync_outbox LIMIT 1", row: { _ in true }) == nil }
    }

    private func queue(_ params: SyncSend.Params, key: String, body: String, caller: CallerIdentity) async throws -> Int64 {
        let sealed = try sealer.seal(SecretBytes(Array(params.session.utf8)), purpose: .syncOutboxSession, identity: "sync_outbox:\(key)")
        let now = Int64(now().timeIntervalSince1970)
        return try await store.transaction { database in
            try database.execute(
                """
                INSERT INTO sync_outbox (session_sealed, session_hash, uid, username, exe, kind, conversation, body, idempotency_key, queued_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [.blob(sealed), .blob(OpenSSL.sha256(Array(params.session.utf8))), .integer(Int64(caller.uid)), caller.username.map(SQLValue.text) ?? .null,
                 caller.exe.map(SQLValue.text) ?? .null, .text(params.kind), params.conversation.map(SQLValue.text) ?? .null,
                 .text(body), .text(key), .integer(now)])
            return database.lastInsertRowID
        }
    }

    private func oldest() async throws -> Entry? {
        let row = try await store.read { database in
            try database.queryOne(
                "SELECT id, session_sealed, session_hash, uid, username, exe, kind, conversation, body, idempotency_key FROM sync_outbox ORDER BY id LIMIT 1") {
                (id: $0.int64(0), sealed: $0.blob(1), hash: $0.blob(2), uid: UInt32($0.int64(3)), username: $0.optionalText(4), exe: $0.optionalText(5),
                 kind: $0.text(6), conversation: $0.optionalText(7), body: $0.text(8), key: $0.text(9))
            }
        }
        guard let row else { return nil }
        guard let session = try sealer.open(row.sealed, purpose: .syncOutboxSession, identity: "sync_outbox:\(row.key)") else {
            throw SealedValueError()
        }
        let body = try WireCodec.decode(JSONValue.self, from: Data(row.body.utf8))
        let params = SyncSend.Params(session: String(decoding: session.withUnsafeBytes { Array($0) }, as: UTF8.self), kind: row.kind,
                                     conversation: row.conversation, body: body, idempotencyKey: row.key)
        return Entry(id: row.id, params: params, caller: CallerIdentity(uid: row.uid, gid: row.uid, pid: 0, exe: row.exe, username: row.username, groups: []),
                     sessionHash: row.hash)
    }

    /// A sealed session that does not open: the store was changed behind authd's back.
    struct SealedValueError: Error, CustomStringConvertible {
        var description: String { "an outbox entry's sealed session does not open; the store is damaged" }
    }
}
