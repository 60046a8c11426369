import OpenSSLCrypto
import Protocol

/// Where a subscriber reads the account's log: this authd's own (standalone, hub), or the hub's
/// over the link (a device).
protocol SyncSource: Sendable {
    func events(_ params: SyncEvents.Params, for caller: CallerIdentity) async throws -> SyncEvents.Result
    /// Whether `error` means the log is away for now (the hub unreachable): the subscriber waits
    /// for the link rather than end.
    func isTransient(_ error: any Error) -> Bool
}

/// A standalone authd's or a hub's own log.
struct LocalSyncSource: SyncSource {
    let service: SyncService

    func events(_ params: SyncEvents.Params, for caller: CallerIdentity) async throws -> SyncEvents.Result {
        try await service.events(params, caller: .local(caller))
    }

    func isTransient(_ error: any Error) -> Bool { false }
}

/// One `sync.subscribe` stream: every event of the account after the position it started from,
/// in order and exactly once, whatever order and however often the bus hints at them. A hint
/// that does not follow the last delivered position, or a `resync`, sends it to the log for
/// what lies between; events the log no longer keeps are announced as one `sync.gap`.
struct SyncFollower: Sendable {
    let source: any SyncSource
    let caller: CallerIdentity
    let session: String
    let kinds: Set<String>?
    let conversation: String?

    /// Events read from the log per call while catching up.
    static let page = 500

    /// authd's own kinds that end a session (or every session of a machine).
    static let endings: Set<String> = ["session.ended", "device.revoked"]

    func run(after start: Int64, signals: AsyncStream<SyncBus.Signal>, sink: StreamSink) async {
        var last = start
        let mine = OpenSSL.sha256(Array(session.utf8))
        guard await catchUp(&last, sink) else { return }
        for await signal in signals {
            switch signal {
            case .event(let event) where event.position <= last:
                continue
            case .event(let event) where event.position == last + 1:
                deliver(event, sink)
                last = event.position
                // A session or a machine of the account ended: if it was this stream's, the log
                // now refuses it, and the stream ends saying so.
                if Self.endings.contains(event.kind) {
                    guard await catchUp(&last, sink) else { return }
                }
            case .event, .resync:
                guard await catchUp(&last, sink) else { return }
            case .sent(let sent):
                guard sent.sessionHash == mine else { continue }
                let (position, error): (Int64?, RPCError?) = switch sent.outcome {
                case .success(let position): (position, nil)
                case .failure(let error): (nil, error)
                }
                sink.notify(SyncSentNotification.self, .init(subscription: sink.name, outboxID: sent.outboxID, position: position, error: error))
            }
        }
    }

    /// Reads the log after `last` until it is read to the end. False when the stream is over:
    /// cancelled, or its session ended, which the subscriber is told (`sync.ended`, the reason
    /// the log gave). A transient failure waits for the next hint.
    private func catchUp(_ last: inout Int64, _ sink: StreamSink) async -> Bool {
        while !Task.isCancelled {
            let page: SyncEvents.Result
            do {
                page = try await source.events(SyncEvents.Params(session: session, after: last, limit: Self.page), for: caller)
            } catch {
                if source.isTransient(error) { return true }
                if !Task.isCancelled, !(error is CancellationError) {
                    let reason = (error as? RPCError) ?? (error as? any WireErrorConvertible)?.rpcError ?? .internalError
                    sink.notify(SyncEndedNotification.self, .init(subscription: sink.name, error: reason))
                }
                return false
            }
            if page.oldest > last + 1 && page.head > last {
                let to = min(page.oldest - 1, page.head)
                sink.notify(SyncGapNotification.self, .init(subscription: sink.name, from: last + 1, to: to))
                last = to
            }
            for event in page.events where event.position > last {
                deliver(event, sink)
                last = event.position
            }
            // A page stops at its count or its size (`more`); a hub that predates `more` fills it.
            if !(page.more ?? (page.events.count >= Self.page)) { return true }
        }
        return false
    }

    private func deliver(_ event: SyncEvent, _ sink: StreamSink) {
        if let kinds, !kinds.contains(event.kind) { return }
        if let conversation, event.conversation != conversation { return }
        sink.notify(SyncEventNotification.self, .init(subscription: sink.name, event: event))
    }
}
