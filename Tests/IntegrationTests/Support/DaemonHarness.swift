import CLinux
import Foundation
import Synchronization
import Glibc
import Protocol

/// Starts the real `authd` binary in a private temporary directory: its own socket, state,
/// config and sd_notify socket. Nothing is shared between tests or with the machine.
final class DaemonHarness {
    let directory: String
    var socketPath: String { directory + "/run/authd.sock" }
    var stateDirectory: String { directory + "/state" }
    var configPath: String { directory + "/authd.conf" }
    var logPath: String { directory + "/authd.log" }
    private(set) var process: Process?
    private let notifyFD: Int32
    private var notifications: [String] = []

    static let buildDirectory: String = {
        if let explicit = ProcessInfo.processInfo.environment["AUTHD_BUILD_DIR"] { return explicit }
        // swift test runs .build/<triple>/debug/authdPackageTests.xctest; the binaries sit beside it.
        let runner = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        if FileManager.default.isExecutableFile(atPath: runner.appendingPathComponent("authd").path) { return runner.path }
        let package = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return package.appendingPathComponent(".build/debug").path
    }()
    static var authdPath: String { buildDirectory + "/authd" }
    static var authctlPath: String { buildDirectory + "/authctl" }

    init(config: String? = nil) throws {
        ChildProcess.ignoreBrokenPipes()
        var template = Array("/tmp/authd-test-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw HarnessError("mkdtemp failed") }
        directory = String(cString: made)
        chmod(directory, 0o755)
        if let config { try config.write(toFile: directory + "/authd.conf", atomically: true, encoding: .utf8) }
        notifyFD = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = Array((directory + "/notify.sock").utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(notifyFD, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else { throw HarnessError("cannot bind the notify socket") }
        var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(notifyFD, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit {
        if let process, process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
        Glibc.close(notifyFD)
        try? FileManager.default.removeItem(atPath: directory)
    }

    var environment: [String: String] {
        [
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": directory,
            "AUTHD_SOCKET": socketPath,
            "AUTHD_STATE_DIR": stateDirectory,
            "AUTHD_CONFIG": configPath,
            "NOTIFY_SOCKET": directory + "/notify.sock",
        ].merging(Self.sanitizerOptions) { own, _ in own }
    }

    /// The sanitizers' options from the test run (`TSAN_OPTIONS=log_path=…` and the like), so
    /// that a suite built with `-sanitize=` collects the daemons' and authctl's reports too.
    static let sanitizerOptions: [String: String] = ProcessInfo.processInfo.environment.filter { name, _ in
        ["TSAN_OPTIONS", "ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS"].contains(name)
    }

    /// The PostgreSQL database this daemon keeps its account data in, when the suite runs on
    /// PostgreSQL (`PostgreSQLCluster.isSelected`): made at its first start, kept across restarts.
    private(set) var accountDatabase: (name: String, connection: String)?

    /// On the PostgreSQL pass, a standalone authd or a hub whose configuration names no account
    /// database gets a fresh one of the suite's cluster (`[hub] database`); a device has none.
    private func placeAccountData() throws {
        guard PostgreSQLCluster.isSelected else { return }
        let text = (try? String(contentsOfFile: configPath, encoding: .utf8)) ?? ""
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        func key(_ line: String) -> String { line.split(separator: "=").first.map { $0.trimmingCharacters(in: .whitespaces) } ?? "" }
        guard !lines.contains(where: { ["url", "database"].contains(key($0)) }) else { return }
        if accountDatabase == nil { accountDatabase = try PostgreSQLCluster.shared.get().createDatabase() }
        let setting = "database = \(accountDatabase!.connection)"
        var placed = lines
        if let section = lines.firstIndex(where: { $0.trimmingCharacters(in: .whitespaces) == "[hub]" }) {
            placed.insert(setting, at: section + 1)
        } else {
            placed += ["", "[hub]", setting, ""]
        }
        try placed.joined(separator: "\n").write(toFile: configPath, atomically: true, encoding: .utf8)
    }

    /// Starts authd and waits for READY=1 on the notify socket.
    func start(arguments: [String] = [], environment extra: [String: String] = [:], executable: String? = nil, waitForReady: Bool = true) throws {
        precondition(process == nil || !process!.isRunning, "already running")
        try placeAccountData()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable ?? Self.authdPath)
        process.arguments = arguments
        process.environment = environment.merging(extra) { _, new in new }
        if !FileManager.default.fileExists(atPath: logPath) { _ = FileManager.default.createFile(atPath: logPath, contents: nil) }
        let log = FileHandle(forWritingAtPath: logPath)!
        log.seekToEndOfFile()
        process.standardError = log
        process.standardOutput = log
        notifications.removeAll()
        try process.run()
        self.process = process
        if waitForReady { try waitForNotification("READY=1", seconds: 30) }
    }

    /// Waits until a datagram containing `text` arrives on the notify socket.
    func waitForNotification(_ text: String, seconds: Double) throws {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if notifications.contains(where: { $0.contains(text) }) { return }
            let exited = process.map { !$0.isRunning } ?? true
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = recv(notifyFD, &buffer, buffer.count, 0)
            if count > 0 {
                notifications.append(String(decoding: buffer[0..<count], as: UTF8.self))
                continue
            }
            // Only give up once the process is gone and nothing more is queued.
            if exited, let process { throw HarnessError("authd exited (\(process.terminationStatus)) before \(text):\n\(log)") }
        }
        throw HarnessError("no \(text) from authd within \(seconds) s:\n\(log)")
    }

    var receivedNotifications: [String] { notifications }

    /// SIGTERM, then waits for the exit status.
    @discardableResult
    func terminate(timeoutSeconds: Double = 15) throws -> Int32 {
        guard let process else { throw HarnessError("not running") }
        kill(process.processIdentifier, SIGTERM)
        return try wait(process, timeoutSeconds: timeoutSeconds)
    }

    func kill9() throws {
        guard let process else { throw HarnessError("not running") }
        kill(process.processIdentifier, SIGKILL)
        _ = try wait(process, timeoutSeconds: 15)
    }

    func signal(_ number: Int32) {
        if let process { kill(process.processIdentifier, number) }
    }

    private func wait(_ process: Process, timeoutSeconds: Double) throws -> Int32 {
        let deadline = Date().addingTimeInterval(timeoutSeconds)
        while process.isRunning {
            guard Date() < deadline else {
                kill(process.processIdentifier, SIGKILL)
                throw HarnessError("authd did not exit within \(timeoutSeconds) s")
            }
            usleep(10_000)
        }
        return process.terminationStatus
    }

    var pid: Int32 { process?.processIdentifier ?? -1 }
    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    func connect() throws -> LineClient { try LineClient(socketPath: socketPath) }

    struct CommandResult {
        let status: Int32
        let stdout: String
        let stderr: String
    }

    /// Runs authctl against this daemon. `user` runs it as another account via setpriv.
    func authctl(_ arguments: [String], stdin: String? = nil, user: String? = nil, socket: String? = nil) throws -> CommandResult {
        var command = [Self.authctlPath, "--socket", socket ?? socketPath] + arguments
        if let user { command = ["/usr/bin/setpriv", "--reuid=\(user)", "--regid=\(user == "nobody" ? "nogroup" : user)", "--clear-groups"] + command }
        return try Self.run(command, stdin: stdin, environment: ["PATH": "/usr/bin:/bin", "HOME": directory].merging(Self.sanitizerOptions) { own, _ in own })
    }

    /// Runs `command` to its end, at most `timeout`: past it the command is killed and the call
    /// throws with what it had printed (no caller waits for ever on a command that hangs).
    static func run(_ command: [String], stdin: String? = nil, environment: [String: String]? = nil, timeout: Duration = .seconds(120)) throws -> CommandResult {
        ChildProcess.ignoreBrokenPipes()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        if let environment { process.environment = environment }
        let out = Pipe(), err = Pipe(), input = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = input
        try process.run()
        let killed = Atomic(false)
        let watchdog = DispatchWorkItem {
            guard process.isRunning else { return }
            killed.store(true, ordering: .relaxed)
            kill(process.processIdentifier, SIGKILL)
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(timeout.components.seconds * 1000)), execute: watchdog)
        // A command that exits without reading all of its input (EPIPE) shows it in its result.
        if let stdin { try? input.fileHandleForWriting.write(contentsOf: Data(stdin.utf8)) }
        try input.fileHandleForWriting.close()
        let stdoutData = out.fileHandleForReading.readDataToEndOfFile()
        let stderrData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        watchdog.cancel()
        let result = CommandResult(status: process.terminationStatus, stdout: String(decoding: stdoutData, as: UTF8.self),
                                   stderr: String(decoding: stderrData, as: UTF8.self))
        if killed.load(ordering: .relaxed) {
            throw HarnessError("\(command.joined(separator: " ")) did not finish within \(timeout), and was killed:\n\(result.stdout)\n\(result.stderr)")
        }
        return result
    }
}

extension DaemonHarness {
    /// The tables of account data, which live in PostgreSQL when the daemon's are there.
    static let accountTables = ["accounts", "devices", "sessions", "login_flows", "otp_flows", "sms_sends", "federated_identities", "used_id_tokens", "account_passkeys",
                                "passkey_flows", "sync_heads", "sync_events", "sync_read_markers", "sync_cursors", "device_e2ee_keys", "audit"]

    /// The rows of a query on authd's store, columns joined by '|': on its SQLite file, read (or,
    /// `readOnly` false, written) by Python's sqlite3 beside the running daemon; or, for a query
    /// of account tables when the daemon's account data is in PostgreSQL, by psql (`hex(x)`
    /// becomes PostgreSQL's spelling of it).
    func storeRows(_ sql: String, readOnly: Bool = true) throws -> [String] {
        let words = Set(sql.split(whereSeparator: { !$0.isLetter && !$0.isNumber && $0 != "_" }).map { $0.lowercased() })
        if let database = accountDatabase, !words.isDisjoint(with: Self.accountTables) || words.contains(where: { $0.hasPrefix("presence_") }) {
            let postgres = sql.replacingOccurrences(of: #"hex\(([a-z_.]+)\)"#, with: "upper(encode($1, 'hex'))", options: .regularExpression)
            return try PostgreSQLCluster.shared.get().psql(postgres, database: database.name)
        }
        let script = """
            import sqlite3, sys
            c = sqlite3.connect('file:' + sys.argv[1] + ('?mode=ro' if sys.argv[3] == 'ro' else ''), uri=True, timeout=10)
            for row in c.execute(sys.argv[2]): print('|'.join(str(v) for v in row))
            c.commit()
            """
        let result = try DaemonHarness.run(["/usr/bin/python3", "-c", script, stateDirectory + "/authd.db", sql, readOnly ? "ro" : "rw"])
        guard result.status == 0 else { throw HarnessError("sqlite3: \(result.stderr)") }
        return result.stdout.split(separator: "\n").map(String.init)
    }
}
