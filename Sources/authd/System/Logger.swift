import FoundationEssentials
import Protocol
import Synchronization

/// Syslog priorities, as journald stores them.
enum LogLevel: Int, Comparable, Sendable, CaseIterable {
    case error = 3, warning = 4, notice = 5, info = 6, debug = 7

    /// Ordered by severity: `debug < info < … < error`.
    static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rawValue > rhs.rawValue }

    init?(name: String) {
        guard let level = LogLevel.allCases.first(where: { $0.name == name }) else { return nil }
        self = level
    }

    var name: String {
        switch self {
        case .error: "error"
        case .warning: "warning"
        case .notice: "notice"
        case .info: "info"
        case .debug: "debug"
        }
    }
}

/// One structured log entry. Field names are journald-style upper case (`AUTHD_METHOD`).
/// Callers must never put a secret in a message or field: requests are logged through their
/// redacted description only.
struct LogEntry: Sendable {
    var level: LogLevel
    var message: String
    var fields: [(String, String)]
}

protocol LogSink: Sendable {
    func write(_ entry: LogEntry)
}

/// A small swift-log-shaped logger: code that logs is handed one, never reaches for a global.
final class Logger: Sendable {
    private let sinkBox: Mutex<any LogSink>
    private let threshold: Mutex<LogLevel>

    init(sink: any LogSink, level: LogLevel = .info) {
        sinkBox = Mutex(sink)
        threshold = Mutex(level)
    }

    /// Replaces where entries go (on reload, when `log.target` changes).
    func setSink(_ sink: any LogSink) { sinkBox.withLock { $0 = sink } }

    /// The sink a `log.target` setting means: `auto` is the journal when stderr is connected
    /// to it (systemd sets `JOURNAL_STREAM`), else stderr.
    static func sink(for target: Config.LogTarget) -> any LogSink {
        switch target {
        case .journal: JournalSink()
        case .stderr: StderrSink()
        case .auto: Systemd.stderrIsJournal ? JournalSink() : StderrSink()
        }
    }

    var level: LogLevel {
        get { threshold.withLock { $0 } }
        set { threshold.withLock { $0 = newValue } }
    }

    func log(_ level: LogLevel, _ message: @autoclosure () -> String, _ fields: [(String, String)] = []) {
        guard level >= self.level else { return }
        let sink = sinkBox.withLock { $0 }
        sink.write(LogEntry(level: level, message: message(), fields: fields))
    }

    func debug(_ message: @autoclosure () -> String, _ fields: [(String, String)] = []) { log(.debug, message(), fields) }
    func info(_ message: @autoclosure () -> String, _ fields: [(String, String)] = []) { log(.info, message(), fields) }
    func notice(_ message: @autoclosure () -> String, _ fields: [(String, String)] = []) { log(.notice, message(), fields) }
    func warning(_ message: @autoclosure () -> String, _ fields: [(String, String)] = []) { log(.warning, message(), fields) }
    func error(_ message: @autoclosure () -> String, _ fields: [(String, String)] = []) { log(.error, message(), fields) }
}

/// Structured entries to journald through `sd_journal_sendv`.
struct JournalSink: LogSink {
    func write(_ entry: LogEntry) {
        var fields = [("MESSAGE", entry.message), ("PRIORITY", String(entry.level.rawValue)), ("SYSLOG_IDENTIFIER", "authd")]
        fields += entry.fields
        if !Systemd.journalSend(fields) {
            StderrSink().write(entry)
        }
    }
}

/// One line per entry on stderr: `authd: <level>: message KEY=value …`. Each line is written with
/// a single `write(2)` so concurrent entries never interleave.
struct StderrSink: LogSink {
    func write(_ entry: LogEntry) {
        var line = "authd: \(entry.level.name): \(Redaction.printable(entry.message, limit: 2000))"
        for (key, value) in entry.fields {
            let printable = Redaction.printable(value, limit: 500)
            line += printable.contains(" ") || printable.isEmpty ? " \(key)=\"\(printable)\"" : " \(key)=\(printable)"
        }
        Syscalls.writeStderr(line + "\n")
    }
}

/// Keeps entries in memory, for tests.
final class MemorySink: LogSink {
    private let entries = Mutex<[LogEntry]>([])
    func write(_ entry: LogEntry) { entries.withLock { $0.append(entry) } }
    var all: [LogEntry] { entries.withLock { $0 } }
}
