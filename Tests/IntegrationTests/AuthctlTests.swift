import Foundation
import Glibc
import Protocol
import Testing

@Suite("authctl")
struct AuthctlTests {
    @Test("token local prints the token alone on stdout")
    func tokenOnStdout() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let result = try daemon.authctl(["token", "local", "--aud", "myapp"])
        #expect(result.status == 0)
        #expect(result.stderr.isEmpty)
        let lines = result.stdout.split(separator: "\n")
        #expect(lines.count == 1)
        #expect(lines.first?.split(separator: ".").count == 3)
        let verify = try daemon.authctl(["token", "verify", String(lines[0]), "--aud", "myapp"])
        #expect(verify.status == 0)
        #expect(verify.stdout.contains("\"sub\" : \"unix:\(getuid())\""))
        let fromStdin = try daemon.authctl(["token", "verify", "-", "--json"], stdin: String(lines[0]) + "\n")
        #expect(fromStdin.status == 0)
        #expect(fromStdin.stdout.hasPrefix("{\"claims\""))
    }

    @Test("exit codes and the one-line error format", arguments: [
        (["token", "verify", "abc"], Int32(5), "(token.malformed)"),
        (["token", "local"], Int32(2), "--aud is required"),
        (["token", "local", "--aud"], Int32(2), "--aud needs a value"),
        (["token", "local", "--aud", "x", "--bogus"], Int32(2), "unknown option '--bogus'"),
        (["frobnicate"], Int32(2), "unknown command 'frobnicate'"),
        (["lgin"], Int32(2), "unknown command 'lgin'; did you mean 'login'?"),
        (["card", "lgin", "--aud", "a"], Int32(2), "did you mean 'card login'?"),
        (["token", "local", "--aud", "x", "--nonse", "n"], Int32(2), "unknown option '--nonse' for 'authctl token local'; did you mean '--nonce'?"),
        (["call", "no.such"], Int32(1), "(rpc.unknown_method)"),
        (["call", "auth.local", "{\"aud\":7}"], Int32(2), "(rpc.invalid_params)"),
        (["call", "hello", "[1]"], Int32(2), "PARAMS must be a JSON object"),
        (["admin", "backup", "/nonexistent-dir/x.db"], Int32(1), "(admin.backup_failed)"),
        (["status", "--json=no"], Int32(2), "--json takes no value"),
        (["call", "admin.audit.tail", "{\"limit\":1.5}"], Int32(2), "Parameter 'limit' has a value of the wrong type"),
    ])
    func exitCodes(arguments: [String], status: Int32, message: String) throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let result = try daemon.authctl(arguments)
        #expect(result.status == status)
        #expect(result.stderr.hasPrefix("authctl: "))
        #expect(result.stderr.contains(message), "\(result.stderr)")
        #expect(result.stderr.split(separator: "\n").count == 1 || status == 2)
    }

    @Test("output to a reader that has gone ends authctl by SIGPIPE, quietly, even when it was started with SIGPIPE ignored")
    func readerGone() throws {
        ChildProcess.ignoreBrokenPipes()  // what the child inherits from Foundation's Process
        let process = Process()
        process.executableURL = URL(fileURLWithPath: DaemonHarness.authctlPath)
        process.arguments = ["--help"]
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try out.fileHandleForReading.close()
        try process.run()
        let errors = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGPIPE,
                "\(process.terminationReason.rawValue) \(process.terminationStatus)")
        #expect(errors.isEmpty, "\(String(decoding: errors.prefix(300), as: UTF8.self))")
    }

    @Test("with no OpenID provider configured, federation commands name the configuration file to add one to")
    func noProviderNamesConfig() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let login = try daemon.authctl(["federation", "login"])
        #expect(login.status == 1 && login.stderr.contains("federation.unknown_provider"), "\(login)")
        #expect(login.stderr.contains("[federation.NAME] section to \(daemon.configPath)"), "\(login.stderr)")
    }

    @Test("no daemon: exit 69 with a clear message")
    func daemonUnavailable() throws {
        let result = try DaemonHarness.run([DaemonHarness.authctlPath, "--socket", "/tmp/authd-no-such-dir/authd.sock", "status"])
        #expect(result.status == 69)
        #expect(result.stderr == "authctl: cannot connect to authd at /tmp/authd-no-such-dir/authd.sock: No such file or directory; is the daemon running? "
                + "To start one: 'make run' (or 'make run-hub', a hub and its devices) in the source tree, 'systemctl --user start authd.socket', "
                + "or 'authd --user' (daemon.unavailable)\n")
    }

    @Test("--help on every command, --version, and JSON output")
    func helpAndVersion() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        for command in [["status"], ["token", "local"], ["token", "verify"], ["keys", "jwks"], ["admin", "status"], ["admin", "reload"],
                        ["admin", "backup"], ["admin", "keys", "rotate"], ["admin", "audit"], ["call"], ["completion", "bash"],
                        ["register"], ["whoami"], ["logout"], ["login"], ["2fa"], ["sessions"], ["devices"], ["token", "account"],
                        ["account", "deactivate"], ["admin", "accounts"]] {
            let help = try daemon.authctl(command + ["--help"])
            #expect(help.status == 0)
            #expect(help.stdout.hasPrefix("Usage: authctl \(command.joined(separator: " "))"))
        }
        // Help is wrapped, never cut: every abstract whole, every option whole, `help WORDS` = `WORDS --help`.
        func words(_ text: String) -> String { text.split(whereSeparator: \.isWhitespace).joined(separator: " ") }
        let overview = try daemon.authctl(["--help"])
        #expect(overview.status == 0)
        for text in ["--passkey signs in with a passkey authd holds on this device (finger or PIN first; LOGIN optional).",
                     "`2fa fingerprint enable` makes this user's finger the account's second step",
                     "The copy holds only sealed secrets: restoring it also needs the master key", "help Show what a command does"] {
            #expect(words(overview.stdout).contains(text), "\(text) is cut from the help")
        }
        #expect(words(try daemon.authctl(["register", "--help"]).stdout).contains("(or 'r' to have a new one sent)"))
        #expect(try daemon.authctl(["login", "--help"]).stdout.contains("--session-file PATH"))
        for command in [["card", "login"], ["card"], ["admin", "keys"]] {
            let viaHelp = try daemon.authctl(["help"] + command)
            #expect(viaHelp.status == 0)
            #expect(viaHelp.stdout == (try daemon.authctl(command + ["--help"])).stdout, "authctl help \(command)")
        }
        #expect(try daemon.authctl(["--version"]).stdout == "authctl 0.1.0\n")
        let status = try daemon.authctl(["status", "--json"])
        let hello = try WireCodec.decode(Hello.Result.self, from: Data(status.stdout.utf8))
        #expect(hello.protocolVersion == protocolVersion)
        #expect(hello.caller.uid == getuid())
        let admin = try daemon.authctl(["admin", "status"])
        #expect(admin.stdout.contains("integrity ok"))
    }

    @Test("2fa enable on a terminal: a weak PIN is refused before the repeat, a differing repeat asks both again")
    func twoFactorAsksAgain() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let environment = ["PATH": "/usr/bin:/bin", "HOME": daemon.directory]
        let register = try TerminalSession([DaemonHarness.authctlPath, "--socket", daemon.socketPath, "register", "+37251234567", "--with-password"],
                                           environment: environment)
        try register.answer("New password: ", "a long enough passphrase")
        try register.answer("Repeat the password: ", "a long enough passphrase, mistyped")
        try register.expect("authctl: the passwords differ")
        try register.answer("New password: ", "a long enough passphrase")
        try register.answer("Repeat the password: ", "a long enough passphrase")
        try register.expect("Code (or r to resend")
        register.type(try RegistrationTests.spooledCode(daemon, to: "+37251234567"))
        #expect(try register.finish() == 0, "\(register.transcript)")

        let enable = try TerminalSession([DaemonHarness.authctlPath, "--socket", daemon.socketPath, "2fa", "enable"], environment: environment)
        try enable.answer("New 6-digit account PIN: ", "123456")
        try enable.expect("authctl: That PIN is too easy to guess; choose another (pin.weak)")
        try enable.answer("New 6-digit account PIN: ", "480317")
        try enable.answer("Repeat the account PIN: ", "480318")
        try enable.expect("authctl: the PINs differ")
        try enable.answer("New 6-digit account PIN: ", "480317")
        try enable.answer("Repeat the account PIN: ", "480317")
        try enable.expect("PIN second factor on")
        #expect(try enable.finish() == 0, "\(enable.transcript)")

        // The second step says whose PIN it asks for: the account's, not an ID card's.
        let login = try TerminalSession([DaemonHarness.authctlPath, "--socket", daemon.socketPath, "login", "+37251234567"], environment: environment)
        try login.answer("Password: ", "a long enough passphrase")
        try login.answer("Account PIN (second step): ", "480317")
        #expect(try login.finish() == 0, "\(login.transcript)")
        #expect(login.transcript.contains("signed in as +37251234567"))
    }

    @Test("authctl events says on a terminal that it is waiting")
    func eventsSaysWaiting() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let events = try TerminalSession([DaemonHarness.authctlPath, "--socket", daemon.socketPath, "events"],
                                         environment: ["PATH": "/usr/bin:/bin", "HOME": daemon.directory])
        try events.expect("Waiting for events (Ctrl-C to stop)")
    }

    @Test("sync watch on a standalone daemon ends, saying why, when its session is revoked from another")
    func watchEndsWhenTheSessionIsRevoked() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        _ = try LoginTests.register(daemon, try daemon.connect(), phone: "+37251234567", password: "a long enough passphrase")
        let (watched, other) = (daemon.directory + "/watched", daemon.directory + "/other")
        for file in [watched, other] {
            #expect(try daemon.authctl(["login", "+37251234567", "--password-fd", "0", "--session-file", file], stdin: "a long enough passphrase\n").status == 0)
        }
        let watch = try TerminalSession([DaemonHarness.authctlPath, "--socket", daemon.socketPath, "sync", "watch", "--session-file", watched],
                                        environment: ["PATH": "/usr/bin:/bin", "HOME": daemon.directory])
        try watch.expect("Waiting for events")
        let id = try #require(try daemon.connect().result("session.get", ["session": .string(try String(contentsOfFile: watched, encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines))])["id"]?.stringValue)
        #expect(try daemon.authctl(["sessions", "revoke", id, "--session-file", other]).status == 0)
        #expect(try watch.finish(seconds: 10) == 7, "\(watch.transcript)")
        #expect(watch.transcript.contains("the stream ended") && watch.transcript.contains("(session.invalid)"), "\(watch.transcript)")
    }

    @Test("empty lists say so, each the same way: no accounts, no hotspots, no unread messages, no passkeys")
    func emptyListsSaySo() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        #expect(try daemon.authctl(["admin", "accounts", "list"]).stdout == "no accounts\n")
        #expect(try daemon.authctl(["admin", "accounts", "list", "--json"]).stdout == "", "scripts get no words")
        _ = try LoginTests.register(daemon, try daemon.connect(), phone: "+37251234567", password: "a long enough passphrase")
        let file = ["--session-file", daemon.directory + "/cli-session"]
        #expect(try daemon.authctl(["login", "+37251234567", "--password-fd", "0"] + file, stdin: "a long enough passphrase\n").status == 0)
        #expect(try daemon.authctl(["hotspots", "list"] + file).stdout == "no hotspots\n")
        #expect(try daemon.authctl(["sync", "unread"] + file).stdout == "no unread messages\n")
        #expect(try daemon.authctl(["passkey", "account"] + file).stdout == "no passkeys\n")
    }

    @Test("a mistyped action gets the list and the nearest action, before any session or daemon is needed", arguments: [
        (["friends", "ad", "bob@example.org"], "did you mean 'friends add'?"),
        (["groups", "lsit"], "did you mean 'groups list'?"),
        (["presence", "stauts"], "did you mean 'presence status'?"),
        (["hotspots", "remve", "h1"], "did you mean 'hotspots remove'?"),
        (["admin", "accounts", "shwo", "a"], "did you mean 'admin accounts show'?"),
    ])
    func actionTypos(arguments: [String], suggestion: String) throws {
        let daemon = try DaemonHarness()
        let result = try daemon.authctl(arguments)
        #expect(result.status == 2 && result.stderr.contains("unknown action") && result.stderr.contains(suggestion), "\(result)")
    }

    @Test("a followed stream (events, sync watch, admin audit --follow) that the daemon ends says so and exits 69")
    func streamsSayWhenTheDaemonStops() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        _ = try LoginTests.register(daemon, try daemon.connect(), phone: "+37251234567", password: "a long enough passphrase")
        let file = daemon.directory + "/cli-session"
        #expect(try daemon.authctl(["login", "+37251234567", "--password-fd", "0", "--session-file", file], stdin: "a long enough passphrase\n").status == 0)
        _ = try daemon.authctl(["admin", "backup", daemon.directory + "/b.db"])
        let environment = ["PATH": "/usr/bin:/bin", "HOME": daemon.directory]
        let base = [DaemonHarness.authctlPath, "--socket", daemon.socketPath]
        let events = try TerminalSession(base + ["events"], environment: environment)
        let watch = try TerminalSession(base + ["sync", "watch", "--session-file", file], environment: environment)
        let audit = try TerminalSession(base + ["admin", "audit", "--follow", "--limit", "1"], environment: environment)
        try events.expect("Waiting for events")
        try watch.expect("Waiting for events")
        try audit.expect("admin.backup")
        try daemon.terminate()
        for stream in [events, watch, audit] {
            #expect(try stream.finish(seconds: 10) == 69, "\(stream.transcript)")
            #expect(stream.transcript.contains("authd closed the connection") && stream.transcript.contains("(daemon.closed)"), "\(stream.transcript)")
        }
    }

    @Test("admin commands: reload, backup, rotate, audit")
    func adminCommands() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        #expect(try daemon.authctl(["admin", "reload"]).stdout.contains("nothing changed"))
        let backup = try daemon.authctl(["admin", "backup", daemon.directory + "/b.db"])
        #expect(backup.status == 0 && backup.stdout.hasPrefix("backup written to \(daemon.directory)/b.db"))
        let rotate = try daemon.authctl(["admin", "keys", "rotate"])
        #expect(rotate.stdout.hasPrefix("new signing key: "))
        let audit = try daemon.authctl(["admin", "audit", "--limit", "2", "--json"])
        let records = audit.stdout.split(separator: "\n").compactMap { try? WireCodec.decode(AuditRecord.self, from: Data($0.utf8)) }
        #expect(records.map(\.method) == ["admin.backup", "admin.keys.rotate"])
        #expect(try daemon.authctl(["admin", "audit", "--limit", "-1"]).status == 2)
    }

    @Test("bash completion is valid bash and knows the commands")
    func completion() throws {
        let daemon = try DaemonHarness()
        let script = try daemon.authctl(["completion", "bash"]).stdout
        let check = try DaemonHarness.run(["/bin/bash", "-c", script + "\nCOMP_WORDS=(authctl admin ''); COMP_CWORD=2; _authctl; echo \"${COMPREPLY[*]}\""])
        #expect(check.status == 0)
        #expect(check.stdout.contains("audit"))
        #expect(check.stdout.contains("keys"))
    }
}
