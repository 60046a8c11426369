import Foundation
import Glibc
import Protocol
import Synchronization
import Testing

@Suite("Start, signals, restart")
struct LifecycleTests {
    @Test("READY, then SIGTERM: STOPPING, exit 0, socket removed")
    func sigterm() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        #expect(daemon.receivedNotifications.contains { $0.contains("READY=1") && $0.contains("STATUS=") })
        let client = try daemon.connect()
        _ = try client.result("hello")
        #expect(try daemon.terminate() == 0)
        try daemon.waitForNotification("STOPPING=1", seconds: 5)
        #expect(access(daemon.socketPath, F_OK) != 0, "the socket file is removed")
        #expect(try client.readLine() == nil, "open connections are closed")
    }

    @Test("SIGTERM while a stream is open still exits promptly with 0")
    func sigtermWithFollower() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let follower = try daemon.connect()
        _ = try follower.result("admin.audit.tail", ["follow": true])
        let started = Date()
        #expect(try daemon.terminate() == 0)
        #expect(Date().timeIntervalSince(started) < 5, "streams are not in-flight work and must not hold up shutdown")
    }

    @Test("restart keeps the master key, signing key and audit log")
    func restartKeepsState() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let first = try daemon.connect()
        let token = try #require(try first.result("auth.local", ["aud": "app"])["token"]?.stringValue)
        let jwks = try first.result("keys.jwks")
        #expect(try daemon.terminate() == 0)
        try daemon.start()
        let second = try daemon.connect()
        #expect(try second.result("keys.jwks") == jwks)
        #expect(try second.result("token.verify", ["token": .string(token), "aud": "app"])["claims"]?["aud"] == "app")
        let records = try #require(try second.result("admin.audit.tail")["records"]?.arrayValue)
        #expect(records.contains { $0["method"] == "auth.local" })
        // The key file was created 0600 and never rewritten.
        var info = stat()
        #expect(stat(daemon.stateDirectory + "/master.key", &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
    }

    @Test("kill -9 in the middle of writes, then restart: keys, audit log and store intact")
    func killDuringWrites() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let kid = try daemon.connect().result("keys.jwks")["keys"]?.arrayValue?.first?["kid"]
        let socket = daemon.socketPath
        // Writers hammer auth.local (each one an audit commit) while the daemon is killed.
        let issued = Atomic<Int>(0)
        let writers = Thread {
            _ = onThreads(8) { _ in
                let client = try LineClient(socketPath: socket)
                while (try? client.result("auth.local", ["aud": "x"])) != nil { issued.add(1, ordering: .relaxed) }
            }
        }
        writers.start()
        // Bounded: writers that cannot write fail the test rather than hang it.
        let deadline = Date().addingTimeInterval(30)
        while issued.load(ordering: .relaxed) < 200, Date() < deadline { usleep(1000) }
        try #require(issued.load(ordering: .relaxed) >= 200, "200 tokens issued within 30 s before the kill:\n\(daemon.log)")
        try daemon.kill9()
        try daemon.start()
        let client = try daemon.connect()
        let status = try client.result("admin.status")
        #expect(status["store"]?["integrity"] == "ok")
        #expect(try client.result("keys.jwks")["keys"]?.arrayValue?.first?["kid"] == kid)
        let records = try #require(try client.result("admin.audit.tail", ["limit": 10])["records"]?.arrayValue)
        #expect(records.count == 10, "audit records written before the kill survive")
        #expect(records.filter { $0["method"] == "auth.local" }.count >= 9)
        #expect(try client.result("auth.local", ["aud": "after"])["token"] != nil)
    }

    @Test("a wrong master key is refused at start, not silently replaced")
    func wrongMasterKey() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        #expect(try daemon.terminate() == 0)
        let keyFile = daemon.stateDirectory + "/master.key"
        try Data((0..<32).map { _ in UInt8.random(in: 0...255) }).write(to: URL(fileURLWithPath: keyFile))
        chmod(keyFile, 0o600)
        #expect(throws: HarnessError.self) { try daemon.start() }
        #expect(daemon.log.contains("master key does not open this store"))
    }

    @Test("a key file readable by others is refused")
    func looseKeyFile() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        #expect(try daemon.terminate() == 0)
        chmod(daemon.stateDirectory + "/master.key", 0o644)
        #expect(throws: HarnessError.self) { try daemon.start() }
        #expect(daemon.log.contains("must be 0600"))
    }

    @Test("libauthd-phonenumber.so missing or not a library: said at start, the rest served, a phone number an internal error (a phone login too, not a wrong password); once mended, the next number is read")
    func phoneLibrary() throws {
        let daemon = try DaemonHarness()
        // The same authd, copied into a directory of its own (a copy: /tmp may be another file
        // system than the build): the shim is looked for beside the binary.
        let directory = daemon.directory + "/bin"
        let library = directory + "/libauthd-phonenumber.so"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        try FileManager.default.copyItem(atPath: DaemonHarness.authdPath, toPath: directory + "/authd")
        try daemon.start(executable: directory + "/authd")
        #expect(daemon.log.contains("libauthd-phonenumber.so, which reads phone numbers, is in none of \(directory)/../lib/authd/libauthd-phonenumber.so, \(library): reinstall authd; until then, requests with a phone number fail"))
        let client = try daemon.connect()
        #expect(try client.result("hello")["protocol_version"] == 1, "everything else is served")
        for broken in [false, true] {
            if broken { try Data("not a library".utf8).write(to: URL(fileURLWithPath: library)) }
            let refused = try client.call("account.register.start", ["phone": "+37251234567"])
            #expect(refused["error"]?["data"]?["reason"] == "internal")
            let login = try client.call("auth.login", ["login": "+37251234567", "password": "a long enough passphrase"])
            #expect(login["error"]?["data"]?["reason"] == "internal", "not auth.failed: the password was never the question")
        }
        #expect(daemon.log.contains("account.register.start failed: \(library): file too short"), "the log has the dynamic linker's words")
        #expect(!daemon.log.contains("37251234567"), "and never the number")
        let spooled = (try? FileManager.default.contentsOfDirectory(atPath: daemon.stateDirectory + "/sms-spool")) ?? []
        #expect(spooled.isEmpty, "no SMS was sent")

        // A failure to open is not kept: with the library mended, the next number is read.
        try FileManager.default.removeItem(atPath: library)
        try FileManager.default.copyItem(atPath: DaemonHarness.buildDirectory + "/libauthd-phonenumber.so", toPath: library)
        #expect(try client.result("account.register.start", ["phone": "+37251234567"])["phone"] == "+37251234567")
    }

    @Test("the systemd credential authd.key is used when present")
    func credentialKey() throws {
        let daemon = try DaemonHarness()
        let credentials = daemon.directory + "/credentials"
        try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: true)
        try Data(repeating: 7, count: 32).write(to: URL(fileURLWithPath: credentials + "/authd.key"))
        try daemon.start(environment: ["CREDENTIALS_DIRECTORY": credentials])
        let status = try daemon.connect().result("admin.status")
        #expect(status["paths"]?["master_key"] == "credential")
        #expect(access(daemon.stateDirectory + "/master.key", F_OK) != 0, "no key file when the credential is used")
    }

    @Test("socket activation: authd serves on the socket systemd passes")
    func socketActivation() throws {
        let daemon = try DaemonHarness()
        try FileManager.default.createDirectory(atPath: daemon.directory + "/run", withIntermediateDirectories: true)
        var environment: [String] = []
        for (key, value) in daemon.environment where key != "AUTHD_SOCKET" { environment += ["-E", "\(key)=\(value)"] }
        // systemd-socket-activate binds the socket and execs authd with LISTEN_FDS=1.
        try daemon.start(
            arguments: ["-l", daemon.socketPath] + environment + [DaemonHarness.authdPath, "--socket", daemon.directory + "/unused.sock"],
            executable: "/usr/bin/systemd-socket-activate", waitForReady: false)
        // systemd-socket-activate binds first and execs authd on the first connection.
        var client: LineClient?
        for _ in 0..<500 where client == nil {
            client = try? daemon.connect()
            if client == nil { usleep(10_000) }
        }
        let connected = try #require(client)
        let hello = try connected.result("hello")
        #expect(hello["protocol_version"] == 1)
        #expect(access(daemon.directory + "/unused.sock", F_OK) != 0, "authd must not bind its own socket")
        try daemon.waitForNotification("READY=1", seconds: 20)
    }

    @Test("system mode creates missing socket directories reachable by other users")
    func systemSocketDirectories() throws {
        let daemon = try DaemonHarness()
        let socket = daemon.directory + "/sys/a/b/authd.sock"
        try daemon.start(arguments: ["--system", "--socket", socket])
        for directory in ["/sys", "/sys/a", "/sys/a/b"] {
            var info = stat()
            #expect(stat(daemon.directory + directory, &info) == 0)
            #expect(info.st_mode & 0o777 == 0o755, "\(directory)")
        }
        var info = stat()
        #expect(stat(socket, &info) == 0 && info.st_mode & 0o777 == 0o666)
        #expect(try LineClient(socketPath: socket).result("hello")["mode"] == "system")
    }

    @Test("core dumps are disabled")
    func noCoreDumps() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let limits = try String(contentsOfFile: "/proc/\(daemon.pid)/limits", encoding: .utf8)
        let core = try #require(limits.split(separator: "\n").first { $0.hasPrefix("Max core file size") })
        #expect(core.split(separator: " ", omittingEmptySubsequences: true).dropFirst(4).prefix(2).allSatisfy { $0 == "0" })
    }

    @Test("authd ignores SIGPIPE itself: started with it at its default, as a shell starts it, it runs with it ignored")
    func ignoresBrokenPipes() throws {
        let daemon = try DaemonHarness()
        // The harness's own children inherit SIGPIPE ignored; env sets it back to its default
        // and runs authd in its place (the same process).
        try daemon.start(arguments: ["--default-signal=PIPE", DaemonHarness.authdPath], executable: "/usr/bin/env")
        let status = try String(contentsOfFile: "/proc/\(daemon.pid)/status", encoding: .utf8)
        let ignored = try #require(status.split(separator: "\n").first { $0.hasPrefix("SigIgn:") }?.split(separator: "\t").last)
        let mask = try #require(UInt64(ignored, radix: 16))
        #expect(mask & (1 << (UInt64(SIGPIPE) - 1)) != 0, "SigIgn \(ignored)")
        #expect(try daemon.connect().result("hello")["protocol_version"] == 1)
    }

    @Test("a second daemon on the same socket refuses to start")
    func secondDaemonRefused() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let second = Process()
        second.executableURL = URL(fileURLWithPath: DaemonHarness.authdPath)
        second.environment = daemon.environment.merging(["AUTHD_STATE_DIR": daemon.directory + "/state2", "NOTIFY_SOCKET": ""]) { _, new in new }
        let errors = Pipe()
        second.standardError = errors
        try second.run()
        second.waitUntilExit()
        #expect(second.terminationStatus == 1)
        #expect(String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).contains("already listening"))
        #expect(try daemon.connect().result("hello")["protocol_version"] == 1)
    }
}

@Suite("Configuration")
struct ConfigurationTests {
    static func lifetime(_ client: LineClient) throws -> Int64 {
        let token = try #require(try client.result("auth.local", ["aud": "x"])["token"]?.stringValue)
        let claims = try #require(try client.result("token.verify", ["token": .string(token)])["claims"])
        return (claims["exp"]?.integerValue ?? 0) - (claims["iat"]?.integerValue ?? 0)
    }

    @Test("admin.reload applies a valid file and reports what changed")
    func reload() throws {
        let daemon = try DaemonHarness(config: "[tokens]\nlifetime = 2m\n")
        try daemon.start()
        let client = try daemon.connect()
        #expect(try Self.lifetime(client) == 120)
        try "[tokens]\nlifetime = 10m\nissuer = me\n".write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        let result = try client.result("admin.reload")
        #expect(result["changed"] == ["tokens.issuer", "tokens.lifetime"])
        #expect(try Self.lifetime(client) == 600)
    }

    @Test("an invalid file is refused with file, line and reason; the running config stays")
    func invalidReload() throws {
        let daemon = try DaemonHarness(config: "[tokens]\nlifetime = 2m\n")
        try daemon.start()
        let client = try daemon.connect()
        try "[tokens]\nlifetime = 10m\n\n[tokens]\nlifetim = 5m\n".write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        let response = try client.call("admin.reload")
        #expect(response.errorReason == "config.invalid")
        #expect(response["error"]?["data"]?["line"] == 5)
        #expect(response["error"]?["data"]?["file"] == .string(daemon.configPath))
        #expect(try Self.lifetime(client) == 120, "the old lifetime stays in force")
    }

    @Test("SIGHUP reloads; an invalid file on SIGHUP is logged and ignored")
    func sighup() throws {
        let daemon = try DaemonHarness(config: "[tokens]\nlifetime = 2m\n")
        try daemon.start()
        let client = try daemon.connect()
        try "[tokens]\nlifetime = 3m\n".write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        daemon.signal(SIGHUP)
        try daemon.waitForNotification("RELOADING=1", seconds: 10)
        var lifetime: Int64 = 0
        for _ in 0..<100 {
            lifetime = try Self.lifetime(client)
            if lifetime == 180 { break }
            usleep(20_000)
        }
        #expect(lifetime == 180)
        try "[tokens]\nlifetime = forever\n".write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        daemon.signal(SIGHUP)
        for _ in 0..<100 where !daemon.log.contains("not reloaded") { usleep(20_000) }
        #expect(daemon.log.contains("authd.conf:2: tokens.lifetime"))
        #expect(try Self.lifetime(client) == 180)
    }

    @Test("an invalid file at start is refused with file and line")
    func invalidAtStart() throws {
        let daemon = try DaemonHarness(config: "[server]\nmax_connections = lots\n")
        #expect(throws: HarnessError.self) { try daemon.start() }
        #expect(daemon.log.contains("authd.conf:2: server.max_connections"))
        let check = try DaemonHarness.run([DaemonHarness.authdPath, "--check-config", "--config", daemon.configPath])
        #expect(check.status == 1)
    }
}
