import Foundation
import Protocol

extension Command {
    static let syncSend = Command(
        path: ["sync", "send"], synopsis: "[--conversation C] [--kind message|notification] [--idempotency-key K] TEXT | --body-fd N",
        abstract: """
            Send an event to every machine of the account: TEXT as {"text": TEXT}, or a JSON body read from file
            descriptor N (at most 64 KiB). Prints its position.
            """,
        options: [
            OptionSpec(name: "conversation", value: "C", help: "the conversation it belongs to"),
            OptionSpec(name: "kind", value: "K", help: "message (default) or notification"),
            OptionSpec(name: "idempotency-key", value: "K", help: "sending again with the same key stores nothing twice"),
            OptionSpec(name: "body-fd", value: "N", help: "read the JSON body from file descriptor N"),
            sessionFileOption,
        ],
        positionals: 0...1
    ) { invocation throws(CLIError) in
        let body: JSONValue
        if let text = invocation.value("body-fd") {
            guard invocation.positionals.isEmpty else { throw .usage("give TEXT or --body-fd, not both") }
            guard let fd = Int32(text), fd >= 0 else { throw .usage("--body-fd needs a file descriptor number") }
            let data = FileHandle(fileDescriptor: fd, closeOnDealloc: false).readData(ofLength: 64 << 10 + 1)
            guard let decoded = try? WireCodec.decode(JSONValue.self, from: data) else {
                throw .usage("the body read from --body-fd is not JSON")
            }
            body = decoded
        } else {
            guard let text = invocation.positionals.first else { throw .usage("sync send needs TEXT or --body-fd N") }
            body = ["text": .string(text)]
        }
        let token = try SessionFile.load(invocation)
        let sent = try invocation.connect().call(SyncSend.self, .init(
            session: token, kind: invocation.value("kind") ?? "message", conversation: invocation.value("conversation"), body: body,
            idempotencyKey: invocation.value("idempotency-key")))
        if invocation.global.json { Output.json(sent); return .ok }
        if let position = sent.position {
            Output.line(sent.duplicate ? "\(position) (sent before with this key)" : String(position))
        } else {
            Output.line("queued as \(sent.outboxID ?? 0): the hub cannot be reached; it is sent when the link is back")
        }
        return .ok
    }

    static let syncWatch = Command(
        path: ["sync", "watch"], synopsis: "[--since P] [--conversation C] [--kind K]...",
        abstract: """
            Follow the account's events on this machine, one line each (--json: one JSON object each), until
            interrupted. --since P first replays what came after position P.
            """,
        options: [
            OptionSpec(name: "since", value: "P", help: "start after position P (default: from now)"),
            OptionSpec(name: "conversation", value: "C", help: "only this conversation"),
            OptionSpec(name: "kind", value: "K", help: "only these kinds (message, notification, read, dismiss, device.linked, device.revoked, session.ended, friend.added, presence); repeatable"),
            sessionFileOption,
        ]
    ) { invocation throws(CLIError) in
        var since: Int64?
        if let text = invocation.value("since") {
            guard let value = Int64(text), value >= 0 else { throw .usage("--since needs a position (0 or more)") }
            since = value
        }
        let kinds = invocation.values("kind")
        let token = try SessionFile.load(invocation)
        let connection = try invocation.connect()
        _ = try connection.call(SyncSubscribe.self, .init(session: token, since: since, kinds: kinds.isEmpty ? nil : kinds,
                                                          conversation: invocation.value("conversation")))
        if isatty(STDERR_FILENO) == 1 { Output.error("Waiting for events (Ctrl-C to stop)…") }
        while true {
            let (method, params) = try connection.nextNotification()
            guard let params else { continue }
            if method == SyncEndedNotification.name, let ended = try? WireCodec.decode(SyncEndedNotification.Params.self, from: params) {
                var error = CLIError(ended.error)
                error.message = "the stream ended: " + ended.error.message
                throw error
            }
            if method == SyncSentNotification.name, let sent = try? WireCodec.decode(SyncSentNotification.Params.self, from: params) {
                if invocation.global.json { Output.json(sent) } else {
                    Output.line(sent.position.map { "(queued \(sent.outboxID) was sent as \($0))" } ?? "(queued \(sent.outboxID) was refused: \(sent.error?.message ?? "?"))")
                }
                continue
            }
            if method == SyncGapNotification.name, let gap = try? WireCodec.decode(SyncGapNotification.Params.self, from: params) {
                if invocation.global.json { Output.json(gap) } else { Output.line("(events \(gap.from)–\(gap.to) are no longer kept)") }
                continue
            }
            guard method == SyncEventNotification.name, let event = try? WireCodec.decode(SyncEventNotification.Params.self, from: params).event else { continue }
            if invocation.global.json { Output.json(event) } else { Output.line(SyncText.line(event)) }
        }
    }

    static let syncRead = Command(
        path: ["sync", "read"], synopsis: "CONVERSATION POSITION",
        abstract: "Mark the conversation read up to POSITION on every machine (a marker only moves forward).",
        options: [sessionFileOption], positionals: 2...2
    ) { invocation throws(CLIError) in
        guard let upTo = Int64(invocation.positionals[1]) else { throw .usage("POSITION must be a number") }
        let token = try SessionFile.load(invocation)
        let read = try invocation.connect().call(SyncRead.self, .init(session: token, conversation: invocation.positionals[0], upTo: upTo))
        if invocation.global.json { Output.json(read); return .ok }
        Output.line(read.moved ? "\(read.conversation): read up to \(read.upTo)" : "\(read.conversation): already read up to \(read.upTo); nothing changed")
        return .ok
    }

    static let syncHistory = Command(
        path: ["sync", "history"], synopsis: "[--conversation C] [--before P] [--limit N]",
        abstract: "Show the account's newest events (before position P), newest first.",
        options: [
            OptionSpec(name: "conversation", value: "C", help: "only this conversation"),
            OptionSpec(name: "before", value: "P", help: "only events before position P"),
            OptionSpec(name: "limit", value: "N", help: "at most N events (default 50, at most 500)"),
            sessionFileOption,
        ]
    ) { invocation throws(CLIError) in
        let before = try invocation.value("before").map { text throws(CLIError) in
            guard let value = Int64(text) else { throw .usage("--before needs a position") }
            return value
        }
        let limit = try invocation.value("limit").map { text throws(CLIError) in
            guard let value = Int(text) else { throw .usage("--limit needs a number") }
            return value
        }
        let token = try SessionFile.load(invocation)
        let history = try invocation.connect().call(SyncHistory.self, .init(session: token, conversation: invocation.value("conversation"),
                                                                            before: before, limit: limit))
        if invocation.global.json { Output.json(history); return .ok }
        for event in history.events { Output.line(SyncText.line(event)) }
        // A page stops at its size as well as its count: say where the next one starts.
        if history.more == true, let last = history.events.last {
            Output.error("more events: authctl sync history --before \(last.position)")
        }
        return .ok
    }

    static let syncUnread = Command(
        path: ["sync", "unread"], synopsis: "",
        abstract: "Show how many messages each conversation has after its read marker.",
        options: [sessionFileOption]
    ) { invocation throws(CLIError) in
        let token = try SessionFile.load(invocation)
        let unread = try invocation.connect().call(SyncUnread.self, .init(session: token))
        if invocation.global.json { Output.json(unread); return .ok }
        Output.list(unread.conversations, none: "unread messages") { "\($0.conversation): \($0.unread) unread (read up to \($0.readUpTo))" }
        return .ok
    }

    static let syncDismiss = Command(
        path: ["sync", "dismiss"], synopsis: "POSITION",
        abstract: "Dismiss the notification at POSITION on every machine of the account.",
        options: [sessionFileOption], positionals: 1...1
    ) { invocation throws(CLIError) in
        guard let position = Int64(invocation.positionals[0]) else { throw .usage("POSITION must be a number") }
        let token = try SessionFile.load(invocation)
        let dismissed = try invocation.connect().call(SyncDismiss.self, .init(session: token, position: position))
        if invocation.global.json { Output.json(dismissed); return .ok }
        Output.line(dismissed.dismissed ? "dismissed \(position)" : "\(position) was already dismissed")
        return .ok
    }
}

/// An event in one line, for a person.
enum SyncText {
    static func line(_ event: SyncEvent) -> String {
        if let told = presence(event) { return "\(event.position) \(event.at) \(event.kind): \(told)" }
        let what: String = if let withheld = event.withheld { "(body withheld: \(withheld))" }
            else if event.sealed != nil { "(end-to-end encrypted to the account's devices; not readable here)" } else { switch event.body {
        case .object(let members) where members["text"]?.stringValue != nil: members["text"]!.stringValue!
        default: (try? WireCodec.encodeJSONText(event.body)) ?? ""
        } }
        let place = event.conversation.map { " [\($0)]" } ?? ""
        return "\(event.position) \(event.at) \(event.kind)\(place) from \(event.sender.machine): \(what)"
    }

    /// A friend's ping or a friend request, in words.
    private static func presence(_ event: SyncEvent) -> String? {
        let who = event.body["email"]?.stringValue ?? event.body["account"]?.stringValue ?? "someone"
        switch event.kind {
        case "device.linked":
            let name = event.body["name"]?.stringValue ?? "unnamed"
            return "a new device \(name)\(event.body["device_id"]?.stringValue.map { " (id \($0))" } ?? "") was added to your account"
        case "friend.added": return "\(who) added you as a friend"
        case "presence":
            let hotspot = event.body["hotspot"]?["name"]?.stringValue ?? "a hotspot"
            let state = event.body["state"]?.stringValue ?? "?"
            return state == "left" ? "\(who) left \(hotspot)" : state == "pinned" ? "\(who) pinned a point in \(hotspot)" : "\(who) is at \(hotspot)"
        default: return nil
        }
    }
}
