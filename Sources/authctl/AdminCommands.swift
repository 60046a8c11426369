import Foundation
import Protocol

extension Command {
    static let adminStatus = Command(
        path: ["admin", "status"], synopsis: "",
        abstract: "Show the daemon's health: uptime, paths, connections, memory, signing keys, store integrity, audit log size."
    ) { invocation throws(CLIError) in
        let status = try invocation.connect().call(AdminStatus.self, NoParams())
        // The exit status says the same with --json: monitoring scripts read both.
        let healthy = status.store.integrity == "ok" && (status.audit?.integrity ?? "ok") == "ok" && (status.accountStore?.state ?? "ok") == "ok"
        if invocation.global.json {
            Output.json(status)
            return healthy ? .ok : .failure
        }
        Output.line("authd \(status.daemonVersion) (protocol \(status.protocolVersion)), \(status.mode) mode, pid \(status.pid)")
        Output.line("up \(status.uptimeSeconds) s since \(status.startedAt)")
        Output.line("socket:      \(status.paths.socket)")
        Output.line("state:       \(status.paths.stateDirectory)")
        Output.line("config:      \(status.paths.config)")
        Output.line("master key:  \(status.paths.masterKey)")
        Output.line("connections: \(status.connections), open fds: \(status.openFileDescriptors), rss: \(status.residentMemoryBytes / 1024) KiB"
                    + (status.passwordHashingBytes.map { " (password hashing \($0 / 1024) KiB)" } ?? "") + ", "
                    + "unread answers: \(status.unreadOutputBytes / 1024) KiB"
                    + (status.unfinishedInputBytes.map { ", unfinished lines: \($0 / 1024) KiB" } ?? ""))
        Output.line("store:       integrity \(status.store.integrity), schema \(status.store.schemaVersion), \(status.store.sizeBytes) bytes, journal \(status.store.journalMode)")
        if let accounts = status.accountStore {
            if accounts.state == "ok" {
                let roundTrip = accounts.roundTripMs.map { String(format: "%.2f ms", $0) } ?? "?"
                Output.line("accounts:    \(accounts.engine) \(accounts.serverVersion ?? "?"), schema \(accounts.schemaVersion.map(String.init) ?? "?"), round trip \(roundTrip), "
                            + "\(accounts.callsInFlight) call(s) on \(accounts.connections) connection(s)")
            } else {
                Output.line("accounts:    \(accounts.engine), unreachable: \(accounts.state)")
            }
            for replica in accounts.replicas {
                Output.line("replica:     \(replica.name) (\(replica.id))\(replica.this ? ", this one" : ""), seen \(replica.seenAt)")
            }
        }
        if let audit = status.audit {
            Output.line("audit:       integrity \(audit.integrity), \(audit.rows) records, \(audit.bytes) of \(audit.maxBytes) bytes, "
                        + "oldest \(audit.oldest ?? "none"), kept \(audit.retentionSeconds / 86400) days"
                        + (audit.purgedThrough > 0 ? ", purged through id \(audit.purgedThrough)" : ""))
        }
        if let hub = status.hub, hub.role != "standalone" {
            Output.line("role:        \(hub.role), device id \(hub.deviceID)")
            for line in HubStatusText.lines(hub).dropFirst(2) { Output.line("             " + line) }
        }
        for key in status.keys {
            Output.line("key:         \(key.kid) \(key.alg) \(key.status), created \(key.createdAt)\(key.publishedUntil.map { ", published until \($0)" } ?? "")")
        }
        return healthy ? .ok : .failure
    }

    static let adminReload = Command(
        path: ["admin", "reload"], synopsis: "",
        abstract: "Re-read authd.conf. An invalid file is refused (file, line, reason) and the running configuration stays."
    ) { invocation throws(CLIError) in
        let result = try invocation.connect().call(AdminReload.self, NoParams())
        if invocation.global.json { Output.json(result); return .ok }
        Output.line("reloaded \(result.config): " + (result.changed.isEmpty ? "nothing changed" : "changed " + result.changed.joined(separator: ", ")))
        return .ok
    }

    static let adminBackup = Command(
        path: ["admin", "backup"], synopsis: "PATH",
        abstract: """
            Write a consistent copy of the store to PATH (a new file, mode 0600). The copy holds only
            sealed secrets: restoring it also needs the master key (authd.key credential or master.key).
            """,
        positionals: 1...1
    ) { invocation throws(CLIError) in
        var path = invocation.positionals[0]
        if !path.hasPrefix("/") { path = FileManager.default.currentDirectoryPath + "/" + path }
        let result = try invocation.connect().call(AdminBackup.self, .init(path: path))
        if invocation.global.json { Output.json(result); return .ok }
        Output.line("backup written to \(result.path) (\(result.bytes) bytes)")
        if let note = result.accountData { Output.line(note) }
        return .ok
    }

    static let adminKeysRotate = Command(
        path: ["admin", "keys", "rotate"], synopsis: "",
        abstract: "Make a new token-signing key. The old key stops signing now and stays in the JWKS until its tokens expire."
    ) { invocation throws(CLIError) in
        let result = try invocation.connect().call(AdminKeysRotate.self, NoParams())
        if invocation.global.json { Output.json(result); return .ok }
        Output.line("new signing key: \(result.kid)")
        if let previous = result.previousKid {
            Output.line("retired key:     \(previous), published until \(result.previousPublishedUntil ?? "?")")
        }
        return .ok
    }

    static let adminAudit = Command(
        path: ["admin", "audit"], synopsis: "[--limit N] [--follow]",
        abstract: "Print the newest audit records (tokens issued, admin actions); --follow keeps printing new ones.",
        options: [
            OptionSpec(name: "limit", value: "N", help: "how many records (0–10000, default 50)"),
            OptionSpec(name: "follow", value: nil, help: "keep printing records as they are written"),
        ]
    ) { invocation throws(CLIError) in
        let limit = try invocation.number("limit", in: 0...10_000)
        let follow = invocation.flag("follow")
        let connection = try invocation.connect()
        let result = try connection.call(AdminAuditTail.self, .init(limit: limit, follow: follow ? true : nil))
        let json = invocation.global.json
        for record in result.records { printRecord(record, json: json) }
        guard follow else { return .ok }
        while true {
            let (method, params) = try connection.nextNotification()
            guard method == AuditRecordNotification.name, let params,
                  let notification = try? WireCodec.decode(AuditRecordNotification.Params.self, from: params)
            else { continue }
            printRecord(notification.record, json: json)
        }
    }

    static let adminSMSLast = Command(
        path: ["admin", "sms", "last"], synopsis: "[NUMBER]",
        abstract: """
            Print the newest SMS the development spool backend wrote instead of sending it (to NUMBER, in
            international form, when given): the code a registration or sign-in is waiting for.
            """,
        positionals: 0...1
    ) { invocation throws(CLIError) in
        let result = try invocation.connect().call(AdminSMSLast.self, .init(number: invocation.positionals.first))
        if invocation.global.json { Output.json(result); return .ok }
        Output.line("To \(result.to), spooled \(result.spooledAt) in \(result.file):")
        Output.line(result.text)
        return .ok
    }

    private static func printRecord(_ record: AuditRecord, json: Bool) {
        if json { Output.json(record); return }
        var line = "\(record.time) uid=\(record.caller.uid) pid=\(record.caller.pid) exe=\(record.caller.exe ?? "?") \(record.method) \(record.outcome)"
        if let reason = record.reason { line += " reason=\(reason)" }
        for (key, value) in record.detail.sorted(by: { $0.key < $1.key }) {
            switch value {
            case .string(let text): line += " \(key)=\(text)"
            default: line += " \(key)=\((try? WireCodec.encodeJSONText(value)) ?? "")"
            }
        }
        Output.line(line)
    }
}
