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

    static let help = """
          --socket PATH   talk to the daemon at PATH (env AUTHD_SOCKET)
          --system        talk to the system daemon (/run/authd/authd.sock)
          --json          print results as JSON, one object per line
          -h, --help      show help for the command
          --version       print authctl's version
        """
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

    var help: String {
        var text = "Usage: authctl \(name)\(synopsis.isEmpty ? "" : " " + synopsis)\n\n\(abstract)\n"
        if !options.isEmpty {
            text += "\nOptions:\n"
            for option in options {
                let flag = "--\(option.name)" + (option.value.map { " \($0)" } ?? "")
                text += "  \(flag.padding(toLength: 18, withPad: " ", startingAt: 0)) \(option.help)\n"
            }
        }
        text += "\nGlobal options:\n\(GlobalOptions.help)\n\nSee authctl(1)."
        return text
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
        let words = rest.prefix { !$0.hasPrefix("-") }
        let command = commands
            .filter { $0.path.count <= words.count && Array(words.prefix($0.path.count)) == $0.path }
            .max { $0.path.count < $1.path.count }
        guard let command else {
            if wantsHelp || words.isEmpty { return .help(overview(commands, under: Array(words))) }
            if words.count == 1, commands.contains(where: { $0.path.first == words.first }) {
                throw .usage("'\(words[0])' needs a subcommand:\n" + overview(commands, under: Array(words)))
            }
            if commands.contains(where: { $0.path.first == words.first }) {
                throw .usage("unknown command '\(words.joined(separator: " "))'; try 'authctl \(words.first!) --help'")
            }
            throw .usage("unknown command '\(words.first!)'; try 'authctl --help'")
        }
        if wantsHelp { return .help(command.help) }

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
                throw .usage("unknown option '\(name)' for 'authctl \(command.name)'; try --help")
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

    static func overview(_ commands: [Command], under prefix: [String]) -> String {
        let shown = commands.filter { Array($0.path.prefix(prefix.count)) == prefix }
        let list = (shown.isEmpty ? commands : shown).map { command in
            "  \(command.name.padding(toLength: 22, withPad: " ", startingAt: 0)) \(command.abstract.split(separator: "\n").first ?? "")"
        }.joined(separator: "\n")
        return """
            Usage: authctl [GLOBAL OPTIONS] COMMAND [ARGUMENTS]

            Talks to authd, the authentication daemon, over its socket.

            Commands:
            \(list)

            Global options:
            \(GlobalOptions.help)

            Exit codes: 0 ok, 1 failure, 2 usage, 3 cancelled, 4 timed out, 5 authentication
            failed, 6 locked or blocked, 7 not logged in, 69 daemon unavailable. See authctl(1).
            """
    }
}

/// Writes to stdout and stderr with one `write(2)` per line (no interleaving, no buffering
/// surprises when piped into another program).
enum Output {
    static func line(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
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
