import Foundation
import Glibc
import Protocol
import Testing
@testable import authd

@Suite("Configuration file")
struct ConfigTests {
    @Test("a file with several problems reports each, in order; the lines of an unknown section are not judged")
    func everyProblem() throws {
        do {
            _ = try Config.parse("""
                [server]
                max_connections = many
                [nosuch]
                whatever = 1
                [log]
                level = loud
                [accounts]
                session_idle = 2h
                session_lifetime = 1h
                """, file: "t.conf")
            Issue.record("accepted")
        } catch {
            #expect(error.line == 2 && error.reason.contains("max_connections"), "\(error.report)")
            #expect(error.more.map(\.line) == [3, 6, 0], "\(error.report)")
            #expect(error.report.split(separator: "\n").count == 4)
            #expect(error.description.hasSuffix("(and 3 more problems: authd --check-config lists them)"))
        }
    }

    @Test("a full valid file")
    func valid() throws {
        let config = try Config.parse("""
            # comment
            ; another
            [server]
            max_connections = 100
            shutdown_timeout = 2s

            [log]
            level = debug
            target = stderr
            [tokens]
            issuer = https://authd.example
              lifetime   =   1h
            [admin]
            group = wheel
            """, file: "t.conf")
        #expect(config.maxConnections == 100)
        #expect(config.shutdownTimeoutSeconds == 2)
        #expect(config.logLevel == .debug)
        #expect(config.logTarget == .stderr)
        #expect(config.tokenIssuer == "https://authd.example")
        #expect(config.tokenLifetimeSeconds == 3600)
        #expect(config.adminGroup == "wheel")
        #expect(config.changes(from: Config()).count == 7)
        #expect(try Config.parse("", file: "empty") == Config())
    }

    @Test("errors name the line and the problem", arguments: [
        ("key = 1", 1, "must follow a [section]"),
        ("[nope]", 1, "unknown section [nope]"),
        ("[server]\nmax_conn = 5", 2, "unknown key 'max_conn'"),
        ("[server]\nmax_connections = 5", 2, "from 16 to 1000000"),
        ("[server]\nmax_connections = 100\nmax_connections = 200", 3, "set twice"),
        ("[tokens]\nlifetime = 5", 2, "10s to 3600s"),
        ("[tokens]\nlifetime = 2h", 2, "10s to 3600s"),
        ("[tokens]\nlifetime = 5x", 2, "duration"),
        ("[tokens]\nissuer = has space", 2, "printable ASCII"),
        ("[log]\nlevel = loud", 2, "debug"),
        ("[server\n", 1, "must end with ']'"),
        ("[log]\njust words", 2, "expected 'key = value'"),
    ])
    func invalid(text: String, line: Int, problem: String) {
        do {
            _ = try Config.parse(text, file: "/etc/authd/authd.conf")
            Issue.record("accepted: \(text)")
        } catch {
            #expect(error.line == line)
            #expect(error.reason.contains(problem), "\(error.reason)")
            #expect(error.description.hasPrefix("/etc/authd/authd.conf:\(line): "))
        }
    }

    @Test("inline comments: '#' or ';' after a space or tab starts one; without a space before it, it is part of the value")
    func inlineComments() throws {
        // The README's example, exactly as pasted.
        let config = try Config.parse("""
            [federation.work]
            issuer = https://id.example.com/realms/work   # exactly as its discovery document says
            client_id = authd                              # redirect URI: http://127.0.0.1/callback, any port
            api = https://api.example.com                  # where remote.fetch may send the token
            """, file: "t.conf")
        let provider = try #require(config.federationProviders.first)
        #expect(provider.issuer == "https://id.example.com/realms/work")
        #expect(provider.clientID == "authd")
        #expect(provider.apiOrigins == ["https://api.example.com"])
        let other = try Config.parse("[tokens]\t; the issuer\nissuer = https://authd.example/#main\t; a tab before it\n", file: "t.conf")
        #expect(other.tokenIssuer == "https://authd.example/#main")
        #expect(throws: ConfigError.self) { try Config.parse("[tokens]\nlifetime = 2m;x", file: "t.conf") }
        #expect(try Config.parse("[server] # the listener\nmax_connections = 100 ;\n", file: "t.conf").maxConnections == 100)
    }

    @Test("a bad value's error names the file, the line, the key, what it must be and what was read", arguments: [
        ("[federation.work]\nissuer = http://id.example.com   # plain http\nclient_id = a", 2,
         "federation.work.issuer: must be an https:// URL", "not 'http://id.example.com'"),
        ("[log]\nlevel = loud # too much", 2, "log.level: must be one of", "not 'loud'"),
        ("[sms]\nbackend = carrier-pigeon", 2, "sms.backend: must be spool, command or http", "not 'carrier-pigeon'"),
        ("[sms]\nurl = ftp://gw.example/send?key=SECRET", 2, "sms.url: must be an https:// URL", "not 'ftp://gw.example/send?…'"),
        ("[passkeys]\norigins = https://localhost ftp://x", 2, "passkeys.origins: must be space-separated origins", "not 'https://localhost ftp://x'"),
    ])
    func valueErrors(text: String, line: Int, problem: String, shown: String) {
        do {
            _ = try Config.parse(text, file: "/etc/authd/authd.conf")
            Issue.record("accepted: \(text)")
        } catch {
            #expect(error.description.hasPrefix("/etc/authd/authd.conf:\(line): \(problem)"), "\(error)")
            #expect(error.reason.contains(shown), "\(error.reason)")
            #expect(!error.reason.contains("SECRET"))
        }
    }

    /// A device's `[hub]` with `url` as given, and a pinned key (so that no file is read).
    private static func device(url: String) throws(ConfigError) -> Config {
        try Config.parse("[hub]\nurl = \(url)\npin = sha256//\(Data(repeating: 7, count: 32).base64EncodedString())\n", file: "/etc/authd/authd.conf")
    }

    private static let sixteen = (1...16).map { "hub\($0).example.org:7443" }

    @Test("hub.url takes the hub's address, or several separated by commas, kept in the order given", arguments: [
        ("hub.example.org:7443", ["hub.example.org:7443"]),
        ("hub1.example.org:7443, hub2.example.org:7443", ["hub1.example.org:7443", "hub2.example.org:7443"]),
        ("[::1]:7443,127.0.0.1:7444 ,\thub.example.org:1", ["[::1]:7443", "127.0.0.1:7444", "hub.example.org:1"]),
        ("hub.example.org:7443, hub.example.org:7444", ["hub.example.org:7443", "hub.example.org:7444"]),
        (sixteen.joined(separator: ", "), sixteen),
    ])
    func hubURLs(value: String, addresses: [String]) throws {
        let config = try Self.device(url: value)
        #expect(config.hubURLs.map(\.description) == addresses)
        #expect(config.role == .device)
    }

    @Test("a bad hub.url names the line, what it must be and what was read", arguments: [
        ("", "hub.url: must be the hub's HOST:PORT", "not ''"),
        ("hub.example.org", "hub.url: must be the hub's HOST:PORT", "not 'hub.example.org'"),
        ("a.example:1, ", "hub.url: must be the hub's HOST:PORT", "not ''"),
        ("a.example:1,,b.example:2", "hub.url: must be the hub's HOST:PORT", "not ''"),
        ("a.example:1 b.example:2", "hub.url: must be the hub's HOST:PORT", "not 'a.example:1 b.example:2'"),
        ("a.example:1, b.example:0", "hub.url: must be the hub's HOST:PORT", "not 'b.example:0'"),
        ("a.example:1, b.example:2, A.Example:1", "hub.url: names", "'A.Example:1' twice"),
        ((sixteen + ["hub17.example.org:7443"]).joined(separator: ","), "hub.url: lists 17 addresses", "at most 16"),
    ])
    func badHubURLs(value: String, problem: String, shown: String) {
        do {
            _ = try Self.device(url: value)
            Issue.record("accepted: \(value)")
        } catch {
            #expect(error.description.hasPrefix("/etc/authd/authd.conf:2: \(problem)"), "\(error)")
            #expect(error.reason.contains(shown), "\(error.reason)")
        }
    }

    @Test("hub.database takes a postgresql:// URI or a libpq keyword string as libpq reads it")
    func hubDatabase() throws {
        for value in ["postgresql://authd@db.example.org/authd?sslmode=verify-full", "host=/run/postgresql dbname=authd"] {
            #expect(try Config.parse("[hub]\ndatabase = \(value)\n", file: "/etc/authd/authd.conf").hubDatabase == value)
        }
    }

    @Test("hub.database_connections is 4 unless set, from 1 to 64")
    func hubDatabaseConnections() throws {
        #expect(try Config.parse("", file: "/etc/authd/authd.conf").hubDatabaseConnections == 4)
        #expect(try Config.parse("[hub]\ndatabase_connections = 2\n", file: "/etc/authd/authd.conf").hubDatabaseConnections == 2)
        for bad in ["0", "65", "many"] {
            #expect(throws: ConfigError.self) { try Config.parse("[hub]\ndatabase_connections = \(bad)\n", file: "/etc/authd/authd.conf") }
        }
    }

    @Test("a bad hub.database is refused with the line and never shows a password it holds", arguments: [
        ("host=db dbname=authd password=hunter2-secret", "must not hold a password"),
        ("postgresql://authd:hunter2-secret@db/authd", "must not hold a password"),
        ("authd", "must be a postgresql:// URI or a libpq keyword string"),
        ("host=db nonsense_keyword=1", "is not a connection string libpq can read"),
    ])
    func badHubDatabase(value: String, problem: String) {
        do {
            _ = try Config.parse("[hub]\ndatabase = \(value)\n", file: "/etc/authd/authd.conf")
            Issue.record("accepted: \(value)")
        } catch {
            #expect(error.description.hasPrefix("/etc/authd/authd.conf:2: hub.database: \(problem)"), "\(error)")
            #expect(!error.description.contains("hunter2"), "the password is not shown: \(error)")
        }
    }

    @Test("libpq is opened by its name when first needed; a missing library, or one without libpq's functions, is refused in the dynamic linker's words")
    func libpqOpened() throws {
        guard case .failure(let missing) = LibPQ.open("libauthd-no-such-libpq.so.5") else { Issue.record("opened a library that does not exist"); return }
        #expect(missing.message == "cannot load libpq: libauthd-no-such-libpq.so.5: cannot open shared object file: No such file or directory")
        guard case .failure(let other) = LibPQ.open("libc.so.6") else { Issue.record("took libc for libpq"); return }
        #expect(other.message.hasPrefix("cannot load libpq: ") && other.message.hasSuffix("libc.so.6: undefined symbol: PQclear"), "\(other.message)")
        // Debian's libpq5, which hub.database needs, is installed with the build's packages.
        _ = try LibPQ.functions.get()
    }

    @Test("durations", arguments: [("90", 90), ("90s", 90), ("5m", 300), ("1h", 3600), ("0s", 0)])
    func durations(text: String, seconds: Int) throws {
        #expect(try Config.duration(text, in: 0...3600) == seconds)
    }

    @Test("a missing file means the defaults; a directory, a FIFO or non-UTF-8 is an error; CRLF and a BOM are fine")
    func files() throws {
        let directory = TemporaryDirectory()
        #expect(try Config.load(path: "/nonexistent/authd.conf") == Config())
        #expect(throws: ConfigError.self) { try Config.load(path: "/") }
        let fifo = directory.path + "/fifo.conf"
        #expect(mkfifo(fifo, 0o600) == 0)
        #expect(throws: ConfigError.self) { try Config.load(path: fifo) }  // must not block
        let windows = directory.path + "/crlf.conf"
        try Data([0xEF, 0xBB, 0xBF] + Array("[tokens]\r\nlifetime = 1m\r\n".utf8)).write(to: URL(fileURLWithPath: windows))
        #expect(try Config.load(path: windows).tokenLifetimeSeconds == 60)
        let latin1 = directory.path + "/latin1.conf"
        try Data([0x5B, 0x6C, 0x6F, 0x67, 0x5D, 0x0A, 0x23, 0xE9, 0x0A]).write(to: URL(fileURLWithPath: latin1))
        do {
            _ = try Config.load(path: latin1)
            Issue.record("accepted a non-UTF-8 file")
        } catch {
            #expect(error.reason == "the file is not valid UTF-8")
        }
    }
}

@Suite("Daemon options")
struct DaemonOptionsTests {
    @Test("flags beat environment beat mode defaults")
    func precedence() {
        let environment = ["AUTHD_SOCKET": "/env/s.sock", "XDG_RUNTIME_DIR": "/run/user/1000", "HOME": "/home/a", "XDG_STATE_HOME": "/home/a/state"]
        guard case .run(let user) = DaemonOptions.parse([], environment: ["XDG_RUNTIME_DIR": "/run/user/1000", "HOME": "/home/a"]) else { Issue.record(); return }
        #expect(user.socketPath == "/run/user/1000/authd/authd.sock")
        #expect(user.stateDirectory == "/home/a/.local/state/authd")
        #expect(user.configPath == "/home/a/.config/authd/authd.conf")
        guard case .run(let env) = DaemonOptions.parse([], environment: environment) else { Issue.record(); return }
        #expect(env.socketPath == "/env/s.sock")
        #expect(env.stateDirectory == "/home/a/state/authd")
        guard case .run(let flag) = DaemonOptions.parse(["--socket=/flag.sock", "--state-dir", "/st"], environment: environment) else { Issue.record(); return }
        #expect(flag.socketPath == "/flag.sock")
        #expect(flag.stateDirectory == "/st")
        guard case .run(let system) = DaemonOptions.parse(["--system"], environment: ["HOME": "/root"]) else { Issue.record(); return }
        #expect(system.mode == .system)
        #expect(system.socketPath == "/run/authd/authd.sock")
        #expect(system.stateDirectory == "/var/lib/authd")
        #expect(system.configPath == "/etc/authd/authd.conf")
    }

    @Test("user mode without XDG_RUNTIME_DIR: the socket goes to /tmp/authd-UID, where authctl looks for it")
    func socketWithoutRuntimeDirectory() {
        guard case .run(let options) = DaemonOptions.parse([], environment: ["HOME": "/h"], userID: 1234) else { Issue.record(); return }
        #expect(options.socketPath == "/tmp/authd-1234/authd/authd.sock")
        #expect(DaemonSocket.candidates(environment: ["HOME": "/h"], userID: 1234).first == options.socketPath)
        guard case .run(let relative) = DaemonOptions.parse([], environment: ["XDG_RUNTIME_DIR": "run"], userID: 1234) else { Issue.record(); return }
        #expect(relative.socketPath == "/tmp/authd-1234/authd/authd.sock", "a relative XDG_RUNTIME_DIR is ignored, as the XDG spec says")
        guard case .run(let runtime) = DaemonOptions.parse([], environment: ["XDG_RUNTIME_DIR": "/run/user/1234"], userID: 1234) else { Issue.record(); return }
        #expect(DaemonSocket.candidates(environment: ["XDG_RUNTIME_DIR": "/run/user/1234"], userID: 1234) == [runtime.socketPath, "/run/authd/authd.sock"])
    }

    @Test("a runtime directory in /tmp is made 0700, and used only when it is ours, a directory and 0700")
    func privateRuntimeDirectory() throws {
        let folder = TemporaryDirectory()
        let fresh = folder.path + "/authd-1"
        try Syscalls.ensurePrivateDirectory(fresh)
        #expect(Syscalls.fileStatus(atPath: fresh, followingLinks: false).map(\.permissions) == 0o700)
        try Syscalls.ensurePrivateDirectory(fresh)  // already right: accepted
        let open = folder.path + "/authd-2"
        #expect(mkdir(open, 0o700) == 0 && chmod(open, 0o755) == 0)
        #expect(throws: FileError.self) { try Syscalls.ensurePrivateDirectory(open) }
        #expect(Syscalls.fileStatus(atPath: open, followingLinks: false).map(\.permissions) == 0o755, "left as it was")
        let link = folder.path + "/authd-3"
        #expect(symlink(fresh, link) == 0)
        #expect(throws: FileError.self) { try Syscalls.ensurePrivateDirectory(link) }
        // Only root can give a directory to another user.
        guard getuid() == 0 else { return }
        let taken = folder.path + "/authd-4"
        #expect(mkdir(taken, 0o700) == 0 && chown(taken, 65534, 65534) == 0)
        do {
            try Syscalls.ensurePrivateDirectory(taken)
            Issue.record("accepted a directory of another user")
        } catch {
            #expect("\(error)".contains("is owned by uid 65534"), "\(error)")
            #expect("\(error)".contains("another user"), "\(error)")
        }
    }

    @Test("--desktop follows the system daemon's socket unless told another; it takes no other option but --pinentry")
    func desktop() {
        #expect(DaemonOptions.parse(["--desktop"], environment: ["HOME": "/h", "XDG_RUNTIME_DIR": "/run/user/1"])
                    == .desktop(socketPath: "/run/authd/authd.sock", pinentry: nil))
        #expect(DaemonOptions.parse(["--desktop"], environment: ["AUTHD_SOCKET": "/e.sock"]) == .desktop(socketPath: "/e.sock", pinentry: nil))
        #expect(DaemonOptions.parse(["--socket=/f.sock", "--desktop"], environment: ["AUTHD_SOCKET": "/e.sock"]) == .desktop(socketPath: "/f.sock", pinentry: nil))
        #expect(DaemonOptions.parse(["--desktop", "--pinentry", "/usr/bin/pinentry-tty"], environment: [:])
                    == .desktop(socketPath: "/run/authd/authd.sock", pinentry: "/usr/bin/pinentry-tty"))
    }

    @Test("usage errors exit 2", arguments: [["--bogus"], ["--socket"], ["--socket", "relative.sock"], ["--user=x"], ["--socket=", "--system"], ["--bogus=1"],
                                             ["--desktop", "--system"], ["--desktop", "--state-dir", "/s"], ["--desktop=1"], ["--desktop", "--socket", "rel"],
                                             ["--desktop", "--pinentry", "rel"], ["--pinentry", "/usr/bin/pinentry"], ["--desktop", "--pinentry"]])
    func usageErrors(arguments: [String]) {
        guard case .exit(_, let status) = DaemonOptions.parse(arguments, environment: ["HOME": "/h"]) else {
            Issue.record("accepted \(arguments)")
            return
        }
        #expect(status == 2)
    }
}
