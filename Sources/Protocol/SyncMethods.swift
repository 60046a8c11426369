// Sync between a person's machines (DESIGN §9): the account's event log at the hub, read and
// written with a session token; `sync.subscribe` is the machine's local stream of it.

/// The sizes every sync answer keeps to, the same at the hub and on every device: an answer a
/// device cannot take (a line over ``LineFramer/defaultMaxLineLength``, JSON nested deeper than
/// ``StrictJSON/maximumDepth``) would drop its whole link, for every user of that machine.
public enum SyncLimits {
    /// The largest body an event may carry, encoded.
    public static let bodyBytes = 64 << 10
    /// The largest end-to-end encrypted body (``SyncEvent/sealed``) a hub stores: a body of
    /// ``bodyBytes`` encrypted and signed (base64 twice) for as many devices as an account may have.
    public static let sealedBytes = 512 << 10
    /// How deep a body's arrays and objects may nest. Far below the line's own limit, so that
    /// every envelope an event travels in (an answer, a page of answers, a forwarded call) still
    /// parses wherever it goes.
    public static let bodyDepth = 64
    /// The most the events of one answer (`sync.events`, `sync.history`, `link.sync.resume`)
    /// take, encoded: the line limit less room for the envelope around them. A page stops
    /// before the event that would pass it (it always holds at least one), says `more`, and the
    /// caller goes on from its last position.
    public static let pageBytes = LineFramer.defaultMaxLineLength - (64 << 10)
}

extension Reason {
    /// `sync.send` of a body nested deeper than ``SyncLimits/bodyDepth``.
    public static let syncTooDeep = Reason("sync.too_deep")
    /// On a device: `sync.send` that could not travel to the hub as it is (the forwarded line
    /// would be over the line limit), refused before it is queued.
    public static let syncUnforwardable = Reason("sync.unforwardable")
    /// An event's stored body that does not read back as JSON (``SyncEvent/withheld``).
    public static let syncUnreadable = Reason("sync.unreadable")
}

/// One event of an account's log, as every machine sees it.
public struct SyncEvent: Codable, Sendable, Equatable {
    /// Its place in the account's log: 1, 2, 3 … with no gaps, the same on every machine.
    public var position: Int64
    /// `message`, `notification`, `read` or `dismiss`; authd's own `device.linked`,
    /// `device.revoked` and `session.ended`.
    public var kind: String
    public var conversation: String?
    /// What the sender sent, as it sent it (`read`: `{"up_to": N}`; `dismiss`: `{"position": N}`).
    public var body: JSONValue
    public var sender: SyncSender
    /// RFC 3339.
    public var at: String
    public var idempotencyKey: String?
    /// Set when the body cannot be served (body null): `sync.too_deep` for one stored before
    /// bodies' depth was limited, `sync.too_large`, `sync.unreadable`; on a device, an
    /// end-to-end encrypted body that does not open here (`e2ee.not_a_recipient`,
    /// `e2ee.tampered`, `e2ee.bad_signature`, `e2ee.unknown_sender`, `e2ee.malformed`). The
    /// event keeps its place, so a reader passes it and goes on.
    public var withheld: Reason?
    /// As a hub holds and relays an end-to-end encrypted body (body null): the sending
    /// device's signature (compact JWS, ES256) over a JWE to every device of the account. A
    /// device opens it before its apps see the event, and apps never see this member there.
    public var sealed: String?
    /// On a device: true when the body was end-to-end encrypted, and this machine checked the
    /// sending device's signature and decrypted it.
    public var encrypted: Bool?

    public init(position: Int64, kind: String, conversation: String?, body: JSONValue, sender: SyncSender, at: String, idempotencyKey: String?,
                withheld: Reason? = nil, sealed: String? = nil, encrypted: Bool? = nil) {
        self.position = position
        self.kind = kind
        self.conversation = conversation
        self.body = body
        self.sender = sender
        self.at = at
        self.idempotencyKey = idempotencyKey
        self.withheld = withheld
        self.sealed = sealed
        self.encrypted = encrypted
    }

    enum CodingKeys: String, CodingKey {
        case position, kind, conversation, body, sender, at, idempotencyKey = "idempotency_key", withheld, sealed, encrypted
    }
}

/// Which machine, and which program on it, sent an event.
public struct SyncSender: Codable, Sendable, Equatable {
    /// The machine's name (its host name, or the name its sign-in gave).
    public var machine: String
    /// The machine's device id when it is linked to a hub.
    public var deviceID: String?
    public var exe: String?

    public init(machine: String, deviceID: String?, exe: String?) {
        self.machine = machine
        self.deviceID = deviceID
        self.exe = exe
    }

    enum CodingKeys: String, CodingKey { case machine, deviceID = "device_id", exe }
}

// The event a hub pushes to every machine of the account writes its own members (as a token's
// result does); `encode(to:)` stays the reference, which debug builds check it against.

extension SyncSender: CompactJSON.Writable {
    public func write(to object: inout CompactJSON.Object) {
        object.member(CodingKeys.deviceID, deviceID)
        object.member(CodingKeys.exe, exe)
        object.member(CodingKeys.machine, machine)
    }
}

extension SyncEvent: CompactJSON.Writable {
    public func write(to object: inout CompactJSON.Object) {
        object.member(CodingKeys.at, at)
        object.member(CodingKeys.body, body)
        object.member(CodingKeys.conversation, conversation)
        object.member(CodingKeys.encrypted, encrypted)
        object.member(CodingKeys.idempotencyKey, idempotencyKey)
        object.member(CodingKeys.kind, kind)
        object.member(CodingKeys.position, position)
        object.member(CodingKeys.sealed, sealed)
        object.member(CodingKeys.sender, sender)
        object.member(CodingKeys.withheld, withheld)
    }
}

/// `sync.send` — appends a `message` or `notification` to the account's log. The same
/// `idempotency_key` from the same machine always answers the first send's position and stores
/// nothing twice (`duplicate` true). On a device whose hub is away the event is kept in the
/// machine's outbox instead (`queued`, `outbox_id`) and sent, in order, when the link is back;
/// the app's `sync.subscribe` streams then get `sync.sent` with its position.
public enum SyncSend: RPCMethod {
    public static let name = "sync.send"

    public struct Params: Codable, Sendable, Equatable {
        public var session: String
        public var kind: String
        public var conversation: String?
        public var body: JSONValue
        public var idempotencyKey: String?
        /// Set by authd on a device, never by an app: the body end-to-end encrypted to the
        /// account's devices and signed by this device (``SyncEvent/sealed``); `body` is null.
        public var sealed: String?

        public init(session: String, kind: String, conversation: String?, body: JSONValue, idempotencyKey: String?, sealed: String? = nil) {
            self.session = session
            self.kind = kind
            self.conversation = conversation
            self.body = body
            self.idempotencyKey = idempotencyKey
            self.sealed = sealed
        }

        enum CodingKeys: String, CodingKey { case session, kind, conversation, body, idempotencyKey = "idempotency_key", sealed }
    }

    public struct Result: Codable, Sendable, Equatable {
        /// Nil while queued.
        public var position: Int64?
        public var duplicate: Bool
        public var queued: Bool?
        public var outboxID: Int64?

        public init(position: Int64, duplicate: Bool) {
            self.position = position
            self.duplicate = duplicate
        }

        public init(queuedAs outboxID: Int64) {
            duplicate = false
            queued = true
            self.outboxID = outboxID
        }

        enum CodingKeys: String, CodingKey { case position, duplicate, queued, outboxID = "outbox_id" }
    }
}

/// `sync.events` — the account's events after `after` (exclusive), oldest first, at most
/// `limit` (default 500, at most 1,000) and at most ``SyncLimits/pageBytes``; with the newest
/// position and the oldest still kept, so a reader that fell behind the retention can tell.
/// `more`: the page stopped at its limit, and the caller goes on after its last position.
public enum SyncEvents: RPCMethod {
    public static let name = "sync.events"

    public struct Params: Codable, Sendable, Equatable {
        public var session: String
        public var after: Int64
        public var limit: Int?

        public init(session: String, after: Int64, limit: Int?) {
            self.session = session
            self.after = after
            self.limit = limit
        }
    }

    public struct Result: Codable, Sendable, Equatable {
        public var account: String
        public var events: [SyncEvent]
        /// The newest position (0: no event yet).
        public var head: Int64
        /// The oldest position still kept (head + 1 when none is).
        public var oldest: Int64
        /// Asked through a device: how far that machine has taken the log (its cursor at the hub).
        public var machineCursor: Int64?
        /// More events follow the last one (the page stopped at its count or size). Nil from a
        /// hub that predates it: a full page (`limit` events) then means more.
        public var more: Bool?

        public init(account: String, events: [SyncEvent], head: Int64, oldest: Int64, machineCursor: Int64? = nil, more: Bool? = nil) {
            self.account = account
            self.events = events
            self.head = head
            self.oldest = oldest
            self.machineCursor = machineCursor
            self.more = more
        }

        enum CodingKeys: String, CodingKey { case account, events, head, oldest, machineCursor = "machine_cursor", more }
    }
}

/// `sync.history` — the newest events before `before` (exclusive; the newest without it), in
/// one conversation or all, newest first, at most `limit` (default 50, at most 500) and at most
/// ``SyncLimits/pageBytes``. `more`: older events follow; the next page is before the last
/// position of this one.
public enum SyncHistory: RPCMethod {
    public static let name = "sync.history"

    public struct Params: Codable, Sendable, Equatable {
        public var session: String
        public var conversation: String?
        public var before: Int64?
        public var limit: Int?

        public init(session: String, conversation: String?, before: Int64?, limit: Int?) {
            self.session = session
            self.conversation = conversation
            self.before = before
            self.limit = limit
        }
    }

    public struct Result: Codable, Sendable, Equatable {
        public var events: [SyncEvent]
        /// Older events follow (the page stopped at its count or size).
        public var more: Bool?
        /// The session's account (whose devices' keys open its end-to-end encrypted events).
        public var account: String?

        public init(events: [SyncEvent], more: Bool? = nil, account: String? = nil) {
            self.events = events
            self.more = more
            self.account = account
        }
    }
}

/// `sync.read` — moves the account's read marker of a conversation forward to `up_to`; a lower
/// or equal `up_to` changes nothing (`moved` false). A move reaches the other machines as a
/// `read` event.
public enum SyncRead: RPCMethod {
    public static let name = "sync.read"

    public struct Params: Codable, Sendable, Equatable {
        public var session: String
        public var conversation: String
        public var upTo: Int64

        public init(session: String, conversation: String, upTo: Int64) {
            self.session = session
            self.conversation = conversation
            self.upTo = upTo
        }

        enum CodingKeys: String, CodingKey { case session, conversation, upTo = "up_to" }
    }

    public struct Result: Codable, Sendable, Equatable {
        public var conversation: String
        /// The marker now (unchanged when `moved` is false).
        public var upTo: Int64
        public var moved: Bool
        /// The `read` event's position, when it moved.
        public var position: Int64?

        public init(conversation: String, upTo: Int64, moved: Bool, position: Int64?) {
            self.conversation = conversation
            self.upTo = upTo
            self.moved = moved
            self.position = position
        }

        enum CodingKeys: String, CodingKey { case conversation, upTo = "up_to", moved, position }
    }
}

/// `sync.unread` — per conversation with messages: how many `message` events lie after its
/// read marker (counted from the log, never kept as a counter).
public enum SyncUnread: RPCMethod {
    public static let name = "sync.unread"

    public struct Params: Codable, Sendable, Equatable {
        public var session: String
        public init(session: String) { self.session = session }
    }

    public struct Conversation: Codable, Sendable, Equatable {
        public var conversation: String
        public var unread: Int
        public var readUpTo: Int64

        public init(conversation: String, unread: Int, readUpTo: Int64) {
            self.conversation = conversation
            self.unread = unread
            self.readUpTo = readUpTo
        }

        enum CodingKeys: String, CodingKey { case conversation, unread, readUpTo = "read_up_to" }
    }

    public struct Result: Codable, Sendable, Equatable {
        public var conversations: [Conversation]
        public init(conversations: [Conversation]) { self.conversations = conversations }
    }
}

/// `sync.dismiss` — a notification read or dismissed on one machine: a `dismiss` event tells
/// the others. Dismissing one twice changes nothing (`dismissed` false).
public enum SyncDismiss: RPCMethod {
    public static let name = "sync.dismiss"

    public struct Params: Codable, Sendable, Equatable {
        public var session: String
        public var position: Int64

        public init(session: String, position: Int64) {
            self.session = session
            self.position = position
        }
    }

    public struct Result: Codable, Sendable, Equatable {
        public var dismissed: Bool
        /// The `dismiss` event's position, when one was made.
        public var position: Int64?

        public init(dismissed: Bool, position: Int64?) {
            self.dismissed = dismissed
            self.position = position
        }
    }
}

/// `sync.subscribe` — this machine's stream of the account's events after `since` (exclusive;
/// from now without it): a `sync.event` notification for each, in order, exactly once, filtered
/// by `kinds` and `conversation` when given. Events no longer kept are announced by one
/// `sync.gap`.
public enum SyncSubscribe: RPCMethod {
    public static let name = "sync.subscribe"

    public struct Params: Codable, Sendable, Equatable {
        public var session: String
        public var since: Int64?
        public var kinds: [String]?
        public var conversation: String?

        public init(session: String, since: Int64?, kinds: [String]?, conversation: String?) {
            self.session = session
            self.since = since
            self.kinds = kinds
            self.conversation = conversation
        }
    }

    public struct Result: Codable, Sendable, Equatable {
        public var subscription: String
        public var account: String
        /// The newest position when the stream opened.
        public var head: Int64

        public init(subscription: String, account: String, head: Int64) {
            self.subscription = subscription
            self.account = account
            self.head = head
        }
    }
}

/// The `sync.event` notification of a `sync.subscribe` stream.
public enum SyncEventNotification: RPCNotification {
    public static let name = "sync.event"

    public struct Params: Codable, Sendable, Equatable {
        public var subscription: String
        public var event: SyncEvent

        public init(subscription: String, event: SyncEvent) {
            self.subscription = subscription
            self.event = event
        }
    }
}

/// The `sync.sent` notification, on a device: an event this stream's session queued while the
/// hub was away was sent (`position`), or refused by the hub (`error`) and dropped.
public enum SyncSentNotification: RPCNotification {
    public static let name = "sync.sent"

    public struct Params: Codable, Sendable, Equatable {
        public var subscription: String
        public var outboxID: Int64
        public var position: Int64?
        public var error: RPCError?

        public init(subscription: String, outboxID: Int64, position: Int64?, error: RPCError?) {
            self.subscription = subscription
            self.outboxID = outboxID
            self.position = position
            self.error = error
        }

        enum CodingKeys: String, CodingKey { case subscription, outboxID = "outbox_id", position, error }
    }
}

/// The `sync.gap` notification: events from `from` up to `to` (inclusive) are no longer kept
/// (`[sync] retention`); the stream goes on after them.
public enum SyncGapNotification: RPCNotification {
    public static let name = "sync.gap"

    public struct Params: Codable, Sendable, Equatable {
        public var subscription: String
        public var from: Int64
        public var to: Int64

        public init(subscription: String, from: Int64, to: Int64) {
            self.subscription = subscription
            self.from = from
            self.to = to
        }
    }
}

/// The `sync.ended` notification: the stream is over and no more notifications follow on it,
/// because its session is (`error`: `session.invalid`, `device.revoked`, … — sign in again).
public enum SyncEndedNotification: RPCNotification {
    public static let name = "sync.ended"

    public struct Params: Codable, Sendable, Equatable {
        public var subscription: String
        public var error: RPCError

        public init(subscription: String, error: RPCError) {
            self.subscription = subscription
            self.error = error
        }
    }
}

/// `link.sync_event`, a notification from the hub on a device's link: an event of an account
/// that machine holds a session of, as soon as it is committed.
public enum LinkSyncEvent: RPCNotification {
    public static let name = "link.sync_event"

    public struct Params: Codable, Sendable, Equatable {
        public var account: String
        public var event: SyncEvent
        /// The local users of the receiving machine who hold a live session of the account
        /// (by uid): whose desktops show its notifications.
        public var users: [UInt32]?

        public init(account: String, event: SyncEvent, users: [UInt32]?) {
            self.account = account
            self.event = event
            self.users = users
        }
    }
}

extension LinkSyncEvent.Params: CompactJSON.Writable {
    public func write(to object: inout CompactJSON.Object) {
        object.member(CodingKeys.account, account)
        object.member(CodingKeys.event, event)
        object.member(CodingKeys.users, users)
    }

    enum CodingKeys: String, CodingKey { case account, event, users }
}

/// `link.sync.ack`, on a device's link: the machine has taken the account's log up to
/// `position`; its cursor at the hub moves forward to it (never back).
public enum LinkSyncAck: RPCMethod {
    public static let name = "link.sync.ack"

    public struct Params: Codable, Sendable, Equatable {
        public var account: String
        public var position: Int64

        public init(account: String, position: Int64) {
            self.account = account
            self.position = position
        }
    }

    public typealias Result = Acknowledged
}

/// `link.sync.resume`, on a device's link: for each account the machine holds a live session
/// of, the events after the machine's cursor (at most `limit` each, default 500; all accounts'
/// together at most ``SyncLimits/pageBytes``): what it missed while its link was down. An
/// account with `more` has further events: the machine acknowledges what it took
/// (`link.sync.ack`) and asks again. A machine without a cursor for an account starts from now.
public enum LinkSyncResume: RPCMethod {
    public static let name = "link.sync.resume"

    public struct Params: Codable, Sendable, Equatable {
        public var limit: Int?
        public init(limit: Int?) { self.limit = limit }
    }

    public struct Account: Codable, Sendable, Equatable {
        public var account: String
        public var cursor: Int64
        public var events: [SyncEvent]
        /// As in `link.sync_event`: the machine's local users who hold a live session of it.
        public var users: [UInt32]?
        /// More events of this account follow these (nil from a hub that predates it: a full
        /// page then means more).
        public var more: Bool?

        public init(account: String, cursor: Int64, events: [SyncEvent], users: [UInt32]?, more: Bool? = nil) {
            self.account = account
            self.cursor = cursor
            self.events = events
            self.users = users
            self.more = more
        }
    }

    public struct Result: Codable, Sendable, Equatable {
        public var accounts: [Account]
        public init(accounts: [Account]) { self.accounts = accounts }
    }
}

/// A `notification` or `dismiss` event of an account a local user holds a live session of on
/// this machine: what a system authd hands that user's desktop (`authd --desktop`) on their
/// `events.subscribe` streams, as `sync.notification` and `sync.dismiss`.
public struct SyncDesktopEvent: Codable, Sendable, Equatable {
    public var account: String
    public var event: SyncEvent

    public init(account: String, event: SyncEvent) {
        self.account = account
        self.event = event
    }
}
