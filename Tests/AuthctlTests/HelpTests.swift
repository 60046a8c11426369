import Protocol
import Testing
@testable import authctl

/// Words separated by single spaces, so wrapped help compares with the abstract it came from.
private func words(_ text: String) -> String {
    text.split(whereSeparator: \.isWhitespace).joined(separator: " ")
}

@Suite("authctl help")
struct HelpTests {
    @Test("authctl --help lists every command of the table with its whole abstract")
    func overviewIsWhole() throws {
        guard case .help(let text) = try ArgumentParser.parse(["--help"], commands: Command.allCommands) else {
            Issue.record("--help did not give help")
            return
        }
        let flat = words(text)
        for command in Command.allCommands {
            #expect(flat.contains(words(command.name + " " + command.abstract)), "\(command.name) is missing or cut")
        }
        #expect(flat.contains("--passkey signs in with a passkey"))
        for line in text.split(separator: "\n") { #expect(line.count <= HelpText.width, "\(line)") }
        #expect(flat.contains("2fa fingerprint enable"))
    }

    @Test("a command's help shows every option whole, and no line is longer than 80 columns but an unbreakable word")
    func commandHelpIsWhole() {
        for command in Command.allCommands {
            let flat = words(command.help)
            #expect(flat.contains(words(command.abstract)), "\(command.name)")
            for option in command.options {
                let flag = "--\(option.name)" + (option.value.map { " \($0)" } ?? "")
                #expect(flat.contains(words(flag + " " + option.help)), "\(command.name) \(flag)")
            }
            for line in command.help.split(separator: "\n") where line.count > HelpText.width {
                #expect(!line.trimmingCharacters(in: .whitespaces).contains(" "), "\(command.name): \(line)")
            }
        }
        #expect(Command.login.help.contains("--session-file PATH"))
    }

    @Test("authctl help WORDS prints what WORDS --help prints", arguments: [["card", "login"], ["card"], ["2fa"], []])
    func helpCommand(_ words: [String]) throws {
        guard case .help(let expected) = try ArgumentParser.parse(words + ["--help"], commands: Command.allCommands) else {
            Issue.record("no help for \(words)")
            return
        }
        #expect(try ArgumentParser.helpText(for: words, commands: Command.allCommands) == expected)
        guard case .run(let command, let invocation) = try ArgumentParser.parse(["help"] + words, commands: Command.allCommands) else {
            Issue.record("authctl help \(words) did not run")
            return
        }
        #expect(command.name == "help")
        #expect(invocation.positionals == words)
    }

    @Test("typos get the nearest command or option, as a usage error", arguments: [
        (["lgin"], "did you mean 'login'?"),
        (["regster", "+37255550001"], "did you mean 'register'?"),
        (["card", "lgoin", "--aud", "a"], "did you mean 'card login'?"),
        (["tokn", "local"], "did you mean 'token'?"),
        (["help", "card", "raed"], "did you mean 'card read'?"),
        (["card", "lgin", "can"], "did you mean 'card login'?"),
        (["token", "local", "--aud", "a", "--nonse", "n"], "did you mean '--nonce'?"),
        (["login", "--paskey"], "did you mean '--passkey'?"),
        (["status", "--jsn"], "did you mean '--json'?"),
        (["--jsn", "status"], "did you mean '--json'?"),
        (["--sytem", "admin", "status"], "did you mean '--system'?"),
        (["--sokcet", "/x", "status"], "did you mean '--socket'?"),
        (["-j", "status"], "unknown option '-j'"),
    ])
    func didYouMean(_ arguments: [String], suggestion: String) throws {
        do throws(CLIError) {
            if case .run(let command, let invocation) = try ArgumentParser.parse(arguments, commands: Command.allCommands), command.name == "help" {
                _ = try ArgumentParser.helpText(for: invocation.positionals, commands: Command.allCommands)
            }
            Issue.record("\(arguments) was accepted")
        } catch {
            #expect(error.exitCode == .usage)
            #expect(error.line.contains(suggestion), "\(error.line)")
            #expect(error.line.contains("Usage: authctl"), "the usage follows: \(error.line)")
        }
    }

    @Test("nothing near: no guess")
    func noGuess() {
        #expect(Suggestion.nearest(to: "frobnicate", among: ["login", "logout", "register"]) == nil)
        #expect(Suggestion.nearest(to: "reg", among: ["login", "logout", "register"]) == "register", "the only command it begins")
        #expect(Suggestion.distance("lgoin", "login") == 1)
        #expect(Suggestion.distance("", "abc") == 3)
    }

    @Test("wrapping never cuts a word and keeps bracketed groups together")
    func wrapping() {
        let long = String(repeating: "word ", count: 40) + String(repeating: "x", count: 100)
        let lines = HelpText.lines(long, width: 30)
        #expect(lines.allSatisfy { $0.count <= 30 || !$0.contains(" ") })
        #expect(words(lines.joined(separator: " ")) == words(long))
        let usage = HelpText.hanging("Usage: authctl card sign", Command.cardSign.synopsis)
        #expect(usage.split(separator: "\n").count > 1)
        #expect(usage.contains("[--timeout S]"))
        #expect(words(usage) == words("Usage: authctl card sign " + Command.cardSign.synopsis))
    }
}
