import Foundation
import Glibc
import Protocol

/// Options every command takes.
struct GlobalOptions {
    var socket: String?
    var system = false
    var json = false

    /// The socket named by `--socket`, `--system` or `AUTHD_SOCKET`, in that order; nil when
    /// none names one, and the daemon is looked for where ``DaemonSocket`` says (the user's
    /// daemon, then the system daemon's, so `sudo authctl admin status` on a server finds it).
    func socketPath(environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        if let socket { return socket }
        if system { return DaemonSocket.systemPath }
        if let socket = environment["AUTHD_SOCKET"], !socket.isEmpty { return socket }
        return nil
    }

    /// The global options and what each does, for help and for "did you mean".
    static let table: [(flag: String, help: String)] = [
        ("--socket PATH", "talk to the daemon at PATH (env AUTHD_SOCKET)"),
        ("--system", "talk to the system daemon (/run/authd/authd.sock)"),
        ("--json", "print results as JSON, one object per line"),
        ("-h, --help", "show help for the command"),
        ("--version", "print authctl's version"),
    ]

    /// The names a global option is spelled with.
    static let names = ["--socket", "--system", "--json", "--help", "-h", "--version"]

    /// The global options as help lists them (no final newline).
    static var help: String { String(HelpText.table(table).dropLast()) }
}

/// A command-specific option. `value` is the metavariable for options that take one.
struct OptionSpec: Sendable {
    let name: String
    let value: String?
    let help: String
}

/// One command: its words, its synopsis, and what it does. Arguments are checked before the
/// daemon is contacted, so a usage error never reaches it.
struct Command: Sendable {
    let path: [String]
    let synopsis: String
    let abstract: String
    var options: [OptionSpec] = []
    var positionals: ClosedRange<Int> = 0...0
    let run: @Sendable (Invocation) throws(CLIError) -> ExitCode

    var name: String { path.joined(separator: " ") }

    /// The command's help: usage, the whole abstract and every option, wrapped (never cut) to
    /// ``HelpText/width`` columns.
    var help: String {
        var text = HelpText.hanging("Usage: authctl \(name)", synopsis) + "\n\n" + HelpText.wrap(abstract) + "\n"
        if !options.isEmpty {
            text += "\nOptions:\n"
            text += HelpText.table(options.map { option in ("--\(option.name)" + (option.value.map { " \($0)" } ?? ""), option.help) })
        }
        text += "\nGlobal options:\n\(GlobalOptions.help)\n\nSee authctl(1)."
        return text
    }
}

extension Command {
    /// `authctl help [COMMAND…]`: the same text as `authctl COMMAND… --help`.
    static let helpCommand = Command(
        path: ["help"], synopsis: "[COMMAND…]",
        abstract: "Show what a command does and its options (the same as 'authctl COMMAND --help'), the commands of a group such as 'card', or, with no COMMAND, every command.",
        positionals: 0...4
    ) { invocation throws(CLIError) in
        Output.line(try ArgumentParser.helpText(for: invocation.positionals, commands: allCommands))
        return .ok
    }
}

/// A parsed command line, ready to run.
struct Invocation {
    let global: GlobalOptions
    let options: [String: String]
    let positionals: [String]
    /// Every value of an option given more than once (`value` holds the last).
    var repeated: [String: [String]] = [:]

    func flag(_ name: String) -> Bool { options[name] != nil }

    /// The action word (the first positional) of `command`, checked before anything is asked or
    /// sent: an unknown one is a usage error listing `actions`, with the nearest of them.
    func action(of command: String, among actions: [String]) throws(CLIError) -> String {
        let word = positionals.first ?? ""
        guard !actions.contains(word) else { return word }
        var message = "\(command): unknown action '\(word)' (\(actions.joined(separator: ", ")))"
        if let guess = Suggestion.nearest(to: word, among: Set(actions)) { message += "; did you mean '\(command) \(guess)'?" }
        throw .usage(message)
    }
    func value(_ name: String) -> String? { options[name] }
    func values(_ name: String) -> [String] { repeated[name] ?? [] }

    /// A whole-number option, if given; a usage error when it is not a number (in `range`).
    func number(_ name: String, in range: ClosedRange<Int>? = nil) throws(CLIError) -> Int? {
        guard let text = options[name] else { return nil }
        guard let number = Int(text), range?.contains(number) ?? true else {
            throw .usage(range.map { "--\(name) must be a number from \($0.lowerBound) to \($0.upperBound)" } ?? "--\(name) needs a number")
        }
        return number
    }

    func connect() throws(CLIError) -> DaemonConnection {
        if let path = global.socketPath() { return try DaemonConnection(socketPath: path) }
        return try DaemonConnection(discoveringIn: ProcessInfo.processInfo.environment)
    }

    /// For commands about what only the system daemon holds (pam_authd's links): without
    /// --socket or AUTHD_SOCKET, the system socket, never the user's own daemon.
    func connect(preferSystem: Bool) throws(CLIError) -> DaemonConnection {
        guard preferSystem, global.socketPath() == nil else { return try connect() }
        return try DaemonConnection(socketPath: DaemonSocket.systemPath)
    }
}

enum ArgumentParser {
    enum Outcome {
        case run(Command, Invocation)
        case help(String)
        case version
    }

    static func parse(_ arguments: [String], commands: [Command]) throws(CLIError) -> Outcome {
        var global = GlobalOptions()
        var rest: [String] = []
        var wantsHelp = false
        var iterator = arguments.makeIterator()
        var afterTerminator = false
        while let argument = iterator.next() {
            if afterTerminator { rest.append(argument); continue }
            let (name, inline) = split(argument)
            if ["--system", "--json", "--help", "-h", "--version"].contains(name) && inline != nil {
                throw .usage("\(name) takes no value")
            }
            switch name {
            case "--": afterTerminator = true; rest.append(argument)
            case "--socket":
                guard let value = inline ?? iterator.next(), !value.isEmpty else { throw .usage("--socket needs a path") }
                global.socket = value
            case "--system": global.system = true
            case "--json": global.json = true
            case "--help", "-h": wantsHelp = true
            case "--version": return .version
            default: rest.append(argument)
            }
        }
        // An option before the command that is not a global one is a typo (`--jsn`, `--sytem`):
        // a usage error naming the nearest, never the overview with exit 0 (a script would take
        // the help text for its result).
        if let first = rest.first, first.hasPrefix("-"), first != "-", first != "--" {
            throw unknownGlobalOption(split(first).0)
        }
        let words = Array(rest.prefix { !$0.hasPrefix("-") })
        if wantsHelp { return .help(try helpText(for: words, commands: commands)) }
        guard let command = command(words, in: commands) else {
            if words.isEmpty { return .help(overview(commands, under: [])) }
            if isGroup(words, in: commands) {
                throw .usage("'\(words.joined(separator: " "))' needs a subcommand:\n" + overview(commands, under: words))
            }
            throw unknownCommand(words, commands: commands)
        }

        var options: [String: String] = [:]
        var repeated: [String: [String]] = [:]
        var positionals: [String] = []
        var remaining = rest.dropFirst(command.path.count).makeIterator()
        var positionalOnly = false
        while let argument = remaining.next() {
            if positionalOnly || !argument.hasPrefix("--") || argument == "-" {
                positionals.append(argument)
                continue
            }
            if argument == "--" { positionalOnly = true; continue }
            let (name, inline) = split(argument)
            guard let spec = command.options.first(where: { "--\($0.name)" == name }) else {
                throw unknownOption(name, of: command)
            }
            if spec.value != nil {
                guard let value = inline ?? remaining.next() else { throw .usage("\(name) needs a value (\(spec.value!))") }
                options[spec.name] = value
                repeated[spec.name, default: []].append(value)
            } else {
                guard inline == nil else { throw .usage("\(name) takes no value") }
                options[spec.name] = ""
            }
        }
        guard command.positionals.contains(positionals.count) else {
            throw .usage("wrong number of arguments; usage: authctl \(command.name) \(command.synopsis)")
        }
        return .run(command, Invocation(global: global, options: options, positionals: positionals, repeated: repeated))
    }

    private static func split(_ argument: String) -> (String, String?) {
        guard argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") else { return (argument, nil) }
        return (String(argument[..<equals]), String(argument[argument.index(after: equals)...]))
    }

    /// The command `words` begin with (the longest match), if any.
    static func command(_ words: [String], in commands: [Command]) -> Command? {
        commands
            .filter { $0.path.count <= words.count && Array(words.prefix($0.path.count)) == $0.path }
            .max { $0.path.count < $1.path.count }
    }

    /// Whether `words` name a group: the first words of longer commands (`card`, `admin keys`).
    static func isGroup(_ words: [String], in commands: [Command]) -> Bool {
        !words.isEmpty && commands.contains { $0.path.count > words.count && Array($0.path.prefix(words.count)) == words }
    }

    /// What `authctl WORDS --help` and `authctl help WORDS` print: the command's help, a group's
    /// list, or everything; a usage error (with a suggestion) for words no command has.
    static func helpText(for words: [String], commands: [Command]) throws(CLIError) -> String {
        if words.isEmpty { return overview(commands, under: []) }
        if let command = command(words, in: commands) { return command.help }
        if isGroup(words, in: commands) { return overview(commands, under: words) }
        throw unknownCommand(words, commands: commands)
    }

    /// "unknown command", naming the nearest word at the first one no command has.
    static func unknownCommand(_ words: [String], commands: [Command]) -> CLIError {
        // The longest run of leading words that name a group; the next word is the typo.
        var known: [String] = []
        while known.count < words.count - 1, isGroup(known + [words[known.count]], in: commands) { known.append(words[known.count]) }
        let typo = words[known.count]
        let next = Set(commands.compactMap { command in
            command.path.count > known.count && Array(command.path.prefix(known.count)) == known ? command.path[known.count] : nil
        })
        var message = "unknown command '\((known + [typo]).joined(separator: " "))'"
        if let guess = Suggestion.nearest(to: typo, among: next) {
            message += "; did you mean '\((known + [guess]).joined(separator: " "))'?"
        }
        let group = known.isEmpty ? "" : " " + known.joined(separator: " ")
        message += "\nUsage: authctl\(group) \(known.isEmpty ? "COMMAND" : "SUBCOMMAND") [ARGUMENTS]; 'authctl help\(group)' lists them"
        return .usage(message)
    }

    /// "unknown option" before any command, naming the nearest global option.
    static func unknownGlobalOption(_ name: String) -> CLIError {
        var message = "unknown option '\(name)'"
        // A one-letter option is too short to guess from ('-j' is as near '-h' as anything).
        if name.hasPrefix("--"), let guess = Suggestion.nearest(to: name, among: Set(GlobalOptions.names)) { message += "; did you mean '\(guess)'?" }
        return .usage(message + "\nUsage: authctl [GLOBAL OPTIONS] COMMAND [ARGUMENTS]; 'authctl help' lists the commands")
    }

    /// "unknown option", naming the nearest option of the command (or a global one).
    static func unknownOption(_ name: String, of command: Command) -> CLIError {
        var message = "unknown option '\(name)' for 'authctl \(command.name)'"
        if let guess = Suggestion.nearest(to: name, among: Set(command.options.map { "--\($0.name)" } + GlobalOptions.names)) {
            message += "; did you mean '\(guess)'?"
        }
        message += "\n" + HelpText.hanging("Usage: authctl \(command.name)", command.synopsis)
        return .usage(message)
    }

    /// Every command (under `prefix`) with its whole abstract.
    static func overview(_ commands: [Command], under prefix: [String]) -> String {
        let shown = commands.filter { Array($0.path.prefix(prefix.count)) == prefix }
        let list = HelpText.table((shown.isEmpty ? commands : shown).map { ($0.name, $0.abstract) }, column: 24)
        let usage = prefix.isEmpty ? "Usage: authctl [GLOBAL OPTIONS] COMMAND [ARGUMENTS]"
                                   : "Usage: authctl [GLOBAL OPTIONS] \(prefix.joined(separator: " ")) SUBCOMMAND [ARGUMENTS]"
        return """
            \(usage)

            Talks to authd, the authentication daemon, over its socket. 'authctl help
            COMMAND' (or 'authctl COMMAND --help') shows a command's options.

            Commands:
            \(list)
            Global options:
            \(GlobalOptions.help)

            Exit codes: 0 ok, 1 failure, 2 usage, 3 cancelled, 4 timed out, 5 authentication
            failed, 6 locked or blocked, 7 not logged in, 69 daemon unavailable.
            See authctl(1).
            """
    }
}

/// "Did you mean": the candidate nearest a mistyped word.
enum Suggestion {
    /// The candidate within a typo's reach of `word` (one edit for short words, two for longer
    /// ones, or the only candidate `word` begins), nearest first, alphabetical among equals.
    static func nearest(to word: String, among candidates: Set<String>) -> String? {
        let reach = word.count <= 4 ? 1 : 2
        let scored = candidates.map { ($0, distance(word, $0)) }.filter { $0.1 <= reach }
        if let best = scored.min(by: { ($0.1, $0.0) < ($1.1, $1.0) }) { return best.0 }
        let extensions = candidates.filter { word.count >= 2 && $0.hasPrefix(word) }
        return extensions.count == 1 ? extensions.first : nil
    }

    /// Edits (insert, delete, replace, swap two neighbours) that turn `a` into `b`: the
    /// optimal-string-alignment distance, so "lgoin" is one swap from "login".
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty || b.isEmpty { return max(a.count, b.count) }
        var table = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { table[i][0] = i }
        for j in 0...b.count { table[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                table[i][j] = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    table[i][j] = min(table[i][j], table[i - 2][j - 2] + 1)
                }
            }
        }
        return table[a.count][b.count]
    }
}

/// Help laid out for an 80-column terminal: text re-wrapped at spaces, never cut, so a
/// sentence of any length reads whole.
enum HelpText {
    static let width = 80

    /// `text` (its line breaks and runs of spaces taken as single spaces) in lines of at most
    /// `width` columns; a word longer than that stands alone on its line.
    static func lines(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        var line = ""
        for word in text.split(whereSeparator: \.isWhitespace) {
            if line.isEmpty {
                line = String(word)
            } else if line.count + 1 + word.count <= width {
                line += " " + word
            } else {
                lines.append(line)
                line = String(word)
            }
        }
        if !line.isEmpty { lines.append(line) }
        return lines
    }

    /// A paragraph wrapped to ``width``.
    static func wrap(_ text: String) -> String {
        lines(text, width: width).joined(separator: "\n")
    }

    /// `head` followed by `tail`, whose continuation lines line up after `head`. `tail` breaks
    /// only between bracketed groups, so `[--timeout S]` stays on one line.
    static func hanging(_ head: String, _ tail: String) -> String {
        guard !tail.isEmpty else { return head }
        let indent = head.count + 1 <= width / 2 ? head.count + 1 : 4
        var groups: [String] = []
        var group = ""
        var depth = 0
        for character in tail {
            if character == " " && depth == 0 {
                if !group.isEmpty { groups.append(group) }
                group = ""
                continue
            }
            if "[(".contains(character) { depth += 1 }
            if "])".contains(character) { depth = max(0, depth - 1) }
            group.append(character)
        }
        if !group.isEmpty { groups.append(group) }
        var lines = [head]
        for group in groups {
            if lines[lines.count - 1].count + 1 + group.count <= width {
                lines[lines.count - 1] += " " + group
            } else {
                lines.append(String(repeating: " ", count: indent) + group)
            }
        }
        return lines.joined(separator: "\n")
    }

    /// Two columns: each term indented by two spaces, its description from `column` on,
    /// wrapped; a term too wide for its column has its description start on the next line.
    /// Every line ends with a newline.
    static func table(_ rows: [(String, String)], column: Int? = nil) -> String {
        let column = column ?? min(26, 2 + (rows.map(\.0.count).max() ?? 0) + 2)
        let margin = String(repeating: " ", count: column)
        var text = ""
        for (term, description) in rows {
            let described = lines(description, width: max(30, width - column))
            let left = "  " + term
            if left.count + 2 <= column {
                text += left + String(repeating: " ", count: column - left.count) + (described.first ?? "") + "\n"
            } else {
                text += left + "\n" + (described.first.map { margin + $0 + "\n" } ?? "")
            }
            for line in described.dropFirst() { text += margin + line + "\n" }
        }
        return text
    }
}

/// Writes to stdout and stderr with one `write(2)` per line (no interleaving, no buffering
/// surprises when piped into another program).
enum Output {
    static func line(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    /// One line per item, or `no NOUN` when there is none: every list says it the same way.
    static func list<Item>(_ items: [Item], none noun: String, _ line: (Item) -> String) {
        if items.isEmpty { self.line("no \(noun)") }
        for item in items { self.line(line(item)) }
    }

    static func error(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }

    /// Compact, key-sorted JSON on one line (for scripts and jq).
    static func json(_ value: some Encodable) {
        guard let data = try? WireCodec.encodeJSON(value) else { return }
        line(String(decoding: data, as: UTF8.self))
    }

    /// Indented JSON for people.
    static func prettyJSON(_ value: some Encodable) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(value) else { return }
        line(String(decoding: data, as: UTF8.self))
    }
}
