import Dispatch
import FoundationEssentials
import Protocol

/// A person's desktop: each `notification` event it is handed appears there
/// (`org.freedesktop.Notifications` on the session bus of the user this process runs as), with
/// the sending machine's name, and a `dismiss` from any machine closes it. Without a session bus
/// (a server) it says so once in the log; the streams work as ever.
///
/// A user-mode authd with `[sync] desktop_notifications = yes` hands it every event of the
/// accounts it follows (``start(sync:config:)``). A system authd cannot reach its users' session
/// buses (nor may it: they admit only their own user); it hands each user's events to their
/// `authd --desktop` instead (``DesktopDelivery``, ``DesktopAgent``), which shows them here.
final class DesktopNotifications: @unchecked Sendable {
    // @unchecked: `bus`, `shown` and `warned` are touched only on `queue` (sd-bus does no locking).
    private let queue = DispatchQueue(label: "authd.desktop-notifications")
    private let logger: Logger
    private var bus: Bus?
    /// The desktop's id of each notification shown, by its account and position (the newest
    /// few): what a dismissal closes, and what is not shown twice when the log is read again.
    private var shown: [Shown: UInt32] = [:]

    private struct Shown: Hashable {
        let account: String
        let position: Int64
    }
    private var warned = false
    /// The desktop's id of each progress note shown (`DeskNote.id`), until it is done.
    private var progressShown: [String: UInt32] = [:]

    static let service = "org.freedesktop.Notifications"
    static let path = "/org/freedesktop/Notifications"
    /// Notifications remembered for a later dismissal.
    static let remembered = 512

    init(logger: Logger) { self.logger = logger }

    /// Follows every event `sync` hands out while the setting is on.
    func start(sync: SyncBus, config: ConfigHolder) {
        let events = sync.observe { config.current.syncDesktopNotifications && Self.kinds.contains($0.event.kind) }
        Task { [self] in
            for await observed in events {
                take(observed.event, of: observed.account)
            }
        }
    }

    /// Shows a `notification` and a new device of the account (`device.linked`), closes what a
    /// `dismiss` names; other kinds are not for the desktop.
    func take(_ event: SyncEvent, of account: String) {
        guard Self.kinds.contains(event.kind) else { return }
        queue.async { [self] in show(event, of: account) }
    }

    /// Ask mode: the person entered a hotspot; the desktop asks whom to tell (the answer is
    /// `authctl presence answer`, or an app's `presence.answer`).
    func ask(_ question: PresenceAskEvent) {
        queue.async { [self] in
            let name = Redaction.printable(question.hotspot.name, limit: 64)
            let groups = question.groups.isEmpty ? "" : " (you share with \(question.groups.map { Redaction.printable($0, limit: 64) }.joined(separator: ", ")))"
            post(summary: "You are at \(name)", body: "Tell a group? authctl presence answer \(question.hotspot.id) GROUP\(groups); or nobody: authctl presence answer \(question.hotspot.id)")
        }
    }

    /// Progress of a request authd asks about on the desktop (present the card): shown, updated
    /// in place, and closed when done.
    func progress(_ note: DeskNote) {
        queue.async { [self] in
            do {
                if note.done {
                    guard let id = progressShown.removeValue(forKey: note.id), id != 0 else { return }
                    _ = try connected().call(Self.service, Self.path, Self.service, "CloseNotification", arguments: [.uint32(id)], timeout: .seconds(2))
                } else if progressShown[note.id] != nil || progressShown.count < 64 {
                    progressShown[note.id] = try notify(summary: note.title, body: note.message, replacing: progressShown[note.id] ?? 0, category: "device")
                }
            } catch {
                failed(error)
            }
        }
    }

    /// The kinds the desktop hears of.
    static let kinds: Set<String> = ["notification", "dismiss", "device.linked"]

    private func show(_ event: SyncEvent, of account: String) {
        do {
            if event.kind == "notification" || event.kind == "device.linked" {
                let key = Shown(account: account, position: event.position)
                guard shown[key] == nil else { return }
                let (summary, body) = event.kind == "notification" ? Self.text(of: event) : Self.newDevice(event)
                let reply = try notify(summary: summary, body: body, category: event.kind == "notification" ? "im.received" : "device.added")
                shown[key] = reply
                if shown.count > Self.remembered, let oldest = shown.keys.min(by: { $0.position < $1.position }) { shown[oldest] = nil }
            } else if case .integer(let position)? = event.body["position"], let id = shown[Shown(account: account, position: position)], id != 0 {
                // Kept (as 0) so that a notification read again is not shown again.
                shown[Shown(account: account, position: position)] = 0
                _ = try connected().call(Self.service, Self.path, Self.service, "CloseNotification", arguments: [.uint32(id)], timeout: .seconds(2))
            }
        } catch {
            failed(error)
        }
    }

    /// Shows one notification (on `queue`).
    private func post(summary: String, body: String) {
        do {
            _ = try notify(summary: summary, body: body)
        } catch {
            failed(error)
        }
    }

    /// The bus may come back (a desktop session starting later): try again next time, say it once.
    private func failed(_ error: any Error) {
        bus = nil
        if !warned {
            warned = true
            logger.warning("sync: desktop notifications are on, but the session bus cannot show them: \(error)")
        }
    }

    private func notify(summary: String, body: String, replacing: UInt32 = 0, category: String = "im.received") throws -> UInt32 {
        let reply = try connected().call(Self.service, Self.path, Self.service, "Notify", arguments: [
            .string("authd"), .uint32(replacing), .string(""), .string(summary), .string(body), .stringArray([]),
            .stringVariants([("category", category)]), .int32(-1),
        ], timeout: .seconds(2))
        return try reply.uint32()
    }

    private func connected() throws -> Bus {
        if let bus { return bus }
        let opened = try Bus.openSession()
        bus = opened
        return opened
    }

    /// A device added to the account: every machine of it says so, since whoever added it
    /// reads from then on what the account's machines send each other.
    static func newDevice(_ event: SyncEvent) -> (summary: String, body: String) {
        let name = event.body["name"]?.stringValue.map { Redaction.printable($0, limit: 64) } ?? "unnamed"
        let id = event.body["device_id"]?.stringValue.map { Redaction.printable($0, limit: 80) }
        let row = event.body["device"]?.stringValue.map { Redaction.printable($0, limit: 64) } ?? "?"
        return ("A new device was added to your account",
                "A new device \(name)\(id.map { " (id \($0))" } ?? "") was added to your account. Not yours? authctl devices revoke \(row)")
    }

    /// The notification's title and text as the sender gave them (`title`, `text`), and which
    /// machine sent it.
    static func text(of event: SyncEvent) -> (summary: String, body: String) {
        let title = event.body["title"]?.stringValue.map { Redaction.printable($0, limit: 200) }
        let text = event.body["text"]?.stringValue.map { Redaction.printable($0, limit: 1000) }
        let from = "from \(Redaction.printable(event.sender.machine, limit: 128))"
        return (title ?? text ?? "Notification", [title == nil ? nil : text, from].compactMap { $0 }.joined(separator: "\n"))
    }
}
