import Foundation
import Glibc
import Testing

/// `make run`'s checks before it starts anything. The real target runs, with the build replaced
/// by `true` and no package check, so the test takes a second and touches nothing of a
/// `make run` the person may have going: every path and the port are the test's own.
@Suite("make run")
struct MakeRunTests {
    static let root = PackagingTests.root

    /// `make run` with the build skipped, the built binaries, and the given paths.
    static func makeRun(socket: String, runtime: String, vcardDirectory: String, port: Int) throws -> DaemonHarness.CommandResult {
        try DaemonHarness.run(["/usr/bin/make", "-s", "-C", root, "run", "SWIFT=true", "DEBIAN_PACKAGES=", "RUN_BIN=\(DaemonHarness.buildDirectory)",
                               "RUN_SOCKET=\(socket)", "RUN_RUNTIME_DIR=\(runtime)", "VCARD_DIR=\(vcardDirectory)", "VCARD_PORT=\(port)", "RUN_WAIT=5"],
                              environment: ["PATH": "/usr/bin:/bin", "HOME": runtime])
    }

    /// A card directory as a running instance has it, with a file to notice its removal by.
    static func runningCardDirectory(in directory: String) -> String {
        let cards = directory + "/authd-vcard"
        try? FileManager.default.createDirectory(atPath: cards, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: cards + "/profile.json", contents: Data("the running card".utf8))
        return cards
    }

    /// A TCP port on the loopback that nothing listens on right now.
    static func freePort() throws -> (Int32, Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw HarnessError("cannot bind a TCP port") }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    @Test("a second make run finds the daemon answering on its socket and changes nothing")
    func daemonAlreadyRunning() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let cards = Self.runningCardDirectory(in: daemon.directory)
        let (fd, port) = try Self.freePort()
        close(fd)
        let result = try Self.makeRun(socket: daemon.socketPath, runtime: daemon.directory, vcardDirectory: cards, port: port)
        #expect(result.status != 0)
        #expect(result.stderr.contains("make: authd is already running on \(daemon.socketPath); nothing was changed."), "\(result.stdout)\(result.stderr)")
        #expect(FileManager.default.contents(atPath: cards + "/profile.json") == Data("the running card".utf8))
        #expect(try daemon.connect().result("hello")["protocol_version"] != nil, "the first daemon still answers")
    }

    @Test("a second make run finds the virtual card's port taken and changes nothing")
    func cardPortTaken() throws {
        let scratch = try DaemonHarness()  // not started: a private directory, removed with it
        let cards = Self.runningCardDirectory(in: scratch.directory)
        let (fd, port) = try Self.freePort()
        defer { close(fd) }
        #expect(listen(fd, 1) == 0)
        let result = try Self.makeRun(socket: scratch.directory + "/authd/authd.sock", runtime: scratch.directory, vcardDirectory: cards, port: port)
        #expect(result.status != 0)
        #expect(result.stderr.contains("make: TCP port \(port), the virtual card's reader, is in use"), "\(result.stdout)\(result.stderr)")
        #expect(FileManager.default.contents(atPath: cards + "/profile.json") == Data("the running card".utf8))
        #expect(!FileManager.default.fileExists(atPath: scratch.directory + "/authd"), "no socket directory was made")
    }

    /// `make run-hub` started in a session of its own (so the whole rig can be stopped as one),
    /// its output in `log`; waits (at most 90 s) until it says it is ready.
    static func startRunHub(directory: String, runtime: String, port: Int, fresh: Bool, log: String) throws -> pid_t {
        var arguments = ["/usr/bin/setsid", "/usr/bin/make", "-s", "-C", root, "run-hub", "SWIFT=true", "DEBIAN_PACKAGES=",
                         "RUN_BIN=\(DaemonHarness.buildDirectory)", "HUB_DIR=\(directory)", "HUB_PORT=\(port)", "RUN_RUNTIME_DIR=\(runtime)", "RUN_WAIT=60"]
        if fresh { arguments.append("FRESH=1") }
        try? FileManager.default.removeItem(atPath: log)
        let pid = try ChildProcess.spawn(arguments, environment: ["PATH=/usr/bin:/bin", "HOME=\(runtime)"], stdout: .file(log))
        let deadline = Date().addingTimeInterval(90)
        while Date() < deadline {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            if text.contains("make: ready") { return pid }
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid { throw HarnessError("make run-hub ended before it was ready: \(text)") }
            usleep(100_000)
        }
        kill(-pid, SIGTERM)
        throw HarnessError("make run-hub was not ready within 90 s: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
    }

    /// Stops the whole rig (SIGTERM to its session, again every 5 s as a person presses Ctrl-C
    /// again) and waits, at most 30 s, for make to end; `alsoReaping` is a process of the test's
    /// the rig stops too, reaped as soon as it ends (whether it did).
    @discardableResult
    static func stopRunHub(_ pid: pid_t, alsoReaping other: pid_t? = nil) -> Bool {
        kill(-pid, SIGTERM)
        let deadline = Date().addingTimeInterval(30)
        var nextSignal = Date().addingTimeInterval(5)
        var status: Int32 = 0
        var otherEnded = false
        while waitpid(pid, &status, WNOHANG) != pid && Date() < deadline {
            if let other, !otherEnded { otherEnded = waitpid(other, &status, WNOHANG) == other }
            if Date() > nextSignal {
                kill(-pid, SIGTERM)
                nextSignal = Date().addingTimeInterval(5)
            }
            usleep(50_000)
        }
        ChildProcess.reap(pid)
        // The other may end a moment after the rig: waited for within the same deadline.
        while let other, !otherEnded, Date() < deadline {
            otherEnded = waitpid(other, &status, WNOHANG) == other
            if !otherEnded { usleep(50_000) }
        }
        return otherEnded
    }

    static func linkState(_ socket: String) throws -> String? {
        try LineClient(socketPath: socket).result("hub.status")["link"]?["state"]?.stringValue
    }

    @Test("make run-hub: the hub stops and starts alone while the devices keep running and relink; a second run keeps the accounts and says so; FRESH=1 starts afresh")
    func runHub() throws {
        let scratch = try DaemonHarness()  // not started: a private directory, removed with it
        let directory = scratch.directory + "/rig", log = scratch.directory + "/make.log"
        let (fd, port) = try Self.freePort()
        close(fd)
        var make = try Self.startRunHub(directory: directory, runtime: scratch.directory, port: port, fresh: false, log: log)
        defer { Self.stopRunHub(make) }
        #expect(try DaemonHarness.run([DaemonHarness.authctlPath, "--socket", directory + "/device-b/authd.sock", "device", "id"]).stdout.hasSuffix("  device-b\n"),
                "the rig names its machines")
        var said = try String(contentsOfFile: log, encoding: .utf8)
        #expect(said.contains("starting afresh") && said.contains("127.0.0.1:\(port)") && said.contains(directory + "/stop-hub"), "\(said)")
        let hub = directory + "/hub/authd.sock", deviceA = directory + "/device-a/authd.sock"
        let clientA = try LineClient(socketPath: deviceA)
        let flow = try #require(try clientA.result("account.register.start", ["phone": "+37251234567"])["flow"])
        let sms = try #require(try LineClient(socketPath: hub).result("admin.sms.last")["text"]?.stringValue)
        let code = try #require(sms.split(whereSeparator: { !$0.isNumber }).first { $0.count == 6 }, "\(sms)")
        _ = try clientA.result("account.register.verify", ["flow": flow, "code": .string(String(code)), "password": "a long enough passphrase"])

        // The hub alone stops: the devices stay, say hub.unavailable, and relink when it is back.
        #expect(try DaemonHarness.run([directory + "/stop-hub"]).status == 0)
        var deadline = Date().addingTimeInterval(20)
        while try Self.linkState(deviceA) == "connected", Date() < deadline { usleep(50_000) }
        #expect(try clientA.call("auth.login", ["login": "+37251234567", "password": "a long enough passphrase"]).errorReason == "hub.unavailable")
        let restarted = try ChildProcess.spawn([directory + "/start-hub"], environment: ["PATH=/usr/bin:/bin"], stdout: .file(scratch.directory + "/start-hub.out"))
        var restartedEnded = false
        defer { if !restartedEnded { ChildProcess.reap(restarted) } }
        deadline = Date().addingTimeInterval(60)
        while try Self.linkState(deviceA) != "connected", Date() < deadline { usleep(100_000) }
        #expect(try Self.linkState(deviceA) == "connected", "device A relinked to the restarted hub")
        var status: Int32 = 0
        #expect(waitpid(make, &status, WNOHANG) == 0, "the rig kept running while the hub was away")
        // Stopping the rig stops the hub too, the one started again by hand included.
        restartedEnded = Self.stopRunHub(make, alsoReaping: restarted)
        #expect(restartedEnded, "the restarted hub stopped with the rig; its log:\n\((try? String(contentsOfFile: directory + "/hub/authd.log", encoding: .utf8))?.suffix(3000) ?? "")")

        // A second run keeps the account, and says so; FRESH=1 starts afresh.
        make = try Self.startRunHub(directory: directory, runtime: scratch.directory, port: port, fresh: false, log: log)
        said = try String(contentsOfFile: log, encoding: .utf8)
        #expect(said.contains("keeping the accounts"), "\(said)")
        #expect(try LineClient(socketPath: hub).result("admin.accounts.list")["accounts"]?.arrayValue?.count == 1)
        Self.stopRunHub(make)
        make = try Self.startRunHub(directory: directory, runtime: scratch.directory, port: port, fresh: true, log: log)
        #expect(try String(contentsOfFile: log, encoding: .utf8).contains("starting afresh"))
        #expect(try LineClient(socketPath: hub).result("admin.accounts.list")["accounts"]?.arrayValue?.count == 0)
    }
}
