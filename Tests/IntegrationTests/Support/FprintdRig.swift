import CLinux
import Foundation
import Glibc

/// A private stand-in for fprintd for one test: its own dbus-daemon (a "system" bus on a socket
/// in a temporary directory) and python-dbusmock running `Python/fprintd_mock.py` on it. The
/// daemon under test finds it through `environment` (DBUS_SYSTEM_BUS_ADDRESS). The machine's
/// system bus is never touched, and nothing on this bus is ever activated, so without the mock
/// a call to net.reactivated.Fprint fails at once with ServiceUnknown ("fprintd absent").
///
/// The rig stops everything when it is released. Should the test process die without that (a
/// crash, a killed test run), a watchdog shell sees the end of its stdin pipe and stops the bus,
/// and the mock exits with its bus. Keep it alive for the whole test, e.g. end the
/// test with `withExtendedLifetime(rig) {}` or a last `rig.callCounts()`: an optimised build may
/// release an object after its last use, not at the end of the scope.
final class FprintdRig {
    /// One VerifyStatus signal the mock sends after VerifyStart, `delayMS` after the previous one
    /// of the same VerifyStart (negative: before the VerifyStart reply).
    struct Step: Encodable, Equatable {
        let result: String
        let done: Bool
        let delayMS: Int

        init(_ result: String, done: Bool, delayMS: Int = 20) {
            self.result = result
            self.done = done
            self.delayMS = delayMS
        }

        static let match = Step("verify-match", done: true)
        static let noMatch = Step("verify-no-match", done: true)
        static let unknownError = Step("verify-unknown-error", done: true)
        static let disconnected = Step("verify-disconnected", done: true)
        /// A retry result (done=false): verify-retry-scan, verify-swipe-too-short,
        /// verify-finger-not-centered or verify-remove-and-retry.
        static func retry(_ result: String = "verify-retry-scan", delayMS: Int = 20) -> Step {
            Step(result, done: false, delayMS: delayMS)
        }
        /// The reader is unplugged: the device object goes and InterfacesRemoved is sent.
        static let vanish = Step("MOCK: vanish", done: false)
        /// fprintd dies: the mock process exits and net.reactivated.Fprint loses its owner.
        static let quit = Step("MOCK: quit", done: false)

        /// The same step with another delay.
        func after(_ delayMS: Int) -> Step { Step(result, done: done, delayMS: delayMS) }

        func encode(to encoder: Encoder) throws {
            var container = encoder.unkeyedContainer()
            try container.encode(result)
            try container.encode(done)
            try container.encode(delayMS)
        }
    }

    static let busName = "net.reactivated.Fprint"
    static let managerPath = "/net/reactivated/Fprint/Manager"
    static let devicePath = "/net/reactivated/Fprint/Device/0"
    static let templatePath = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Python/fprintd_mock.py").path

    let directory: String
    /// The private bus, as dbus-daemon printed it (`unix:path=…,guid=…`).
    let address: String
    private let bus: pid_t
    private let busOutput: Int32
    private let watchdog: pid_t
    private let watchdogInput: Int32
    private var mock: pid_t?
    private var stopped = false

    /// What the daemon under test needs to reach this bus.
    var environment: [String: String] { ["DBUS_SYSTEM_BUS_ADDRESS": address] }
    var mockLogPath: String { directory + "/mock.log" }
    /// The mock's output: every call it got and every signal it sent, with times; tracebacks.
    var mockLog: String { (try? String(contentsOfFile: mockLogPath, encoding: .utf8)) ?? "" }
    var busLog: String { (try? String(contentsOfFile: directory + "/bus.log", encoding: .utf8)) ?? "" }
    /// False once the mock was stopped or has exited (after "MOCK: quit").
    var isMockRunning: Bool {
        guard let pid = mock else { return false }
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) == pid else { return true }
        mock = nil
        return false
    }

    /// Whether the mock, quitting on its own, has exited within `timeout`: it gives up its bus
    /// name (which the daemon sees at once) a moment before its process ends.
    func mockExits(within timeout: Duration) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while isMockRunning {
            guard ContinuousClock.now < deadline else { return false }
            usleep(10_000)
        }
        return true
    }

    /// Starts the bus and, unless `startMock` is false, the mock with these parameters.
    init(enrolled: [String: [String]] = [:], script: [Step] = [], device: Bool = true, startMock: Bool = true) throws {
        var template = Array("/tmp/authd-fprint-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw HarnessError("mkdtemp failed") }
        let directory = String(cString: made)
        self.directory = directory
        let started: (pid: pid_t, output: Int32, address: String)
        do {
            started = try Self.startBus(in: directory)
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
        let guarded: (pid: pid_t, input: Int32)
        do {
            guarded = try Self.startWatchdog(for: started.pid)
        } catch {
            ChildProcess.reap(started.pid)
            Glibc.close(started.output)
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
        bus = started.pid
        busOutput = started.output
        address = started.address
        watchdog = guarded.pid
        watchdogInput = guarded.input
        if startMock {
            do {
                try self.startMock(enrolled: enrolled, script: script, device: device)
            } catch {
                stopAll()
                throw error
            }
        }
    }

    deinit {
        stopAll()
    }

    /// Starts the mock (again) with these parameters. A new mock starts with fresh call counts.
    func startMock(enrolled: [String: [String]] = [:], script: [Step] = [], device: Bool = true) throws {
        guard !isMockRunning else { throw HarnessError("the fprintd mock is already running") }
        guard access(Self.templatePath, R_OK) == 0 else { throw HarnessError("no mock template at \(Self.templatePath)") }
        struct Parameters: Encodable { let enrolled: [String: [String]]; let script: [Step]; let device: Bool }
        let json = String(decoding: try JSONEncoder().encode(Parameters(enrolled: enrolled, script: script, device: device)), as: UTF8.self)
        let pid = try ChildProcess.spawn(["/usr/bin/python3", "-m", "dbusmock", "--template", Self.templatePath, "-p", json],
                                 environment: ["DBUS_SYSTEM_BUS_ADDRESS=\(address)", "PATH=/usr/bin:/bin", "PYTHONUNBUFFERED=1"],
                                 stdout: .file(mockLogPath))
        mock = pid
        let deadline = Date().addingTimeInterval(20)
        while try !nameHasOwner() {
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                mock = nil
                throw HarnessError("the fprintd mock exited (wait status \(status)) before taking \(Self.busName):\n\(mockLog)")
            }
            guard Date() < deadline else {
                stopMock()
                throw HarnessError("the fprintd mock did not take \(Self.busName) within 20 s:\n\(mockLog)")
            }
            usleep(50_000)
        }
    }

    /// Kills the mock (if it is still running) and waits until its name is gone. The bus stays:
    /// calls to net.reactivated.Fprint now fail with ServiceUnknown, as when fprintd is absent.
    func stopMock() {
        guard let pid = mock else { return }
        ChildProcess.reap(pid)
        mock = nil
        let deadline = Date().addingTimeInterval(5)
        while (try? nameHasOwner()) == true, Date() < deadline { usleep(20_000) }
    }

    /// Replaces the mock's remaining script.
    func setScript(_ steps: [Step]) throws {
        var arguments = ["a(sbi)", String(steps.count)]
        for step in steps { arguments += [step.result, step.done ? "true" : "false", String(step.delayMS)] }
        try control("SetScript", arguments)
    }

    /// Replaces the enrolled fingers (user → finger names).
    func setEnrolled(_ enrolled: [String: [String]]) throws {
        var arguments = ["a{sas}", String(enrolled.count)]
        for (user, fingers) in enrolled { arguments += [user, String(fingers.count)] + fingers }
        try control("SetEnrolled", arguments)
    }

    /// fprintd method name → calls the mock has answered (manager and device methods; failed
    /// calls too). Methods never called are absent.
    func callCounts() throws -> [String: Int] {
        try control("CallCounts", returning: [String: Int].self)
    }

    /// The user the device is claimed for, "" when it is not claimed.
    func claimedBy() throws -> String {
        try control("ClaimedBy", returning: String.self)
    }

    /// `busctl call` on this bus; `arguments` as busctl takes them (signature, then values).
    /// Throws, with busctl's message, when the call fails.
    func call(_ destination: String, _ path: String, _ interface: String, _ method: String, _ arguments: [String] = []) throws {
        _ = try busctl(destination, path, interface, method, arguments)
    }

    /// The same, for a method with one result (decoded from busctl --json=short's `data`).
    func call<Value: Decodable>(_ destination: String, _ path: String, _ interface: String, _ method: String, _ arguments: [String] = [],
                                returning: Value.Type) throws -> Value {
        let output = try busctl(destination, path, interface, method, arguments)
        guard let reply = try? JSONDecoder().decode(BusctlReply<Value>.self, from: Data(output.utf8)), let value = reply.data.first else {
            throw HarnessError("busctl call \(interface).\(method): unexpected output \(output.debugDescription)")
        }
        return value
    }

    private func busctl(_ destination: String, _ path: String, _ interface: String, _ method: String, _ arguments: [String]) throws -> String {
        // `--` so that a negative number among the arguments is not read as an option.
        let result = try DaemonHarness.run(["/usr/bin/busctl", "--address=\(address)", "--json=short", "--timeout=10", "call", "--",
                                            destination, path, interface, method] + arguments,
                                           environment: ["PATH": "/usr/bin:/bin"])
        guard result.status == 0 else {
            throw HarnessError("busctl call \(interface).\(method) failed (\(result.status)): \(result.stderr)")
        }
        return result.stdout
    }

    private func control(_ method: String, _ arguments: [String] = []) throws {
        guard mock != nil else { throw HarnessError("\(method): the fprintd mock is not running") }
        try call(Self.busName, Self.managerPath, "net.reactivated.Fprint.Mock", method, arguments)
    }

    private func control<Value: Decodable>(_ method: String, returning: Value.Type) throws -> Value {
        guard mock != nil else { throw HarnessError("\(method): the fprintd mock is not running") }
        return try call(Self.busName, Self.managerPath, "net.reactivated.Fprint.Mock", method, returning: Value.self)
    }

    private func nameHasOwner() throws -> Bool {
        try call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameHasOwner", ["s", Self.busName], returning: Bool.self)
    }

    /// Runs once, from deinit or from a failing init (whichever comes first).
    private func stopAll() {
        guard !stopped else { return }
        stopped = true
        // The watchdog first, so that it never signals a pid this process has already reaped.
        ChildProcess.reap(watchdog)
        Glibc.close(watchdogInput)
        if let pid = mock { ChildProcess.reap(pid) }
        mock = nil
        ChildProcess.reap(bus)
        Glibc.close(busOutput)
        try? FileManager.default.removeItem(atPath: directory)
    }

    // MARK: - Processes

    /// Writes the bus configuration, starts dbus-daemon and reads the address it prints once it
    /// listens. Returns its pid, the read end of its stdout (kept open while it runs) and the address.
    private static func startBus(in directory: String) throws -> (pid: pid_t, output: Int32, address: String) {
        let config = directory + "/bus.conf"
        try """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>system</type>
          <listen>unix:path=\(directory)/system_bus_socket</listen>
          <auth>EXTERNAL</auth>
          <policy context="default">
            <allow user="*"/>
            <allow own="*"/>
            <allow send_destination="*" eavesdrop="true"/>
            <allow eavesdrop="true"/>
          </policy>
        </busconfig>

        """.write(toFile: config, atomically: true, encoding: .utf8)
        var fds: [Int32] = [-1, -1]
        guard authd_pipe_cloexec(&fds) == 0 else { throw HarnessError("pipe2: \(String(cString: strerror(errno)))") }
        let pid: pid_t
        do {
            pid = try ChildProcess.spawn(["/usr/bin/dbus-daemon", "--config-file=\(config)", "--nofork", "--print-address=1"],
                            environment: ["PATH=/usr/bin:/bin"], stdout: .pipe(fds[1]), stderr: directory + "/bus.log")
        } catch {
            Glibc.close(fds[0])
            Glibc.close(fds[1])
            throw error
        }
        Glibc.close(fds[1])
        var line: [UInt8] = []
        var failure: String?
        let deadline = Date().addingTimeInterval(10)
        while !line.contains(0x0a) {
            let remaining = deadline.timeIntervalSinceNow
            guard remaining > 0 else { failure = "dbus-daemon printed no address within 10 s"; break }
            var poller = pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, Int32(min(remaining, 1) * 1000) + 1)
            if ready < 0, errno == EINTR { continue }
            guard ready >= 0 else { failure = "poll: \(String(cString: strerror(errno)))"; break }
            if ready == 0 { continue }
            var buffer = [UInt8](repeating: 0, count: 512)
            let count = read(fds[0], &buffer, buffer.count)
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { failure = "dbus-daemon exited before printing its address"; break }
            line += buffer[0..<count]
        }
        let address = String(decoding: line.prefix { $0 != 0x0a }, as: UTF8.self)
        if failure == nil, !address.hasPrefix("unix:") { failure = "dbus-daemon printed \(address.debugDescription), not an address" }
        if let failure {
            ChildProcess.reap(pid)
            Glibc.close(fds[0])
            let log = (try? String(contentsOfFile: directory + "/bus.log", encoding: .utf8)) ?? ""
            throw HarnessError("\(failure):\n\(log)")
        }
        return (pid, fds[0], address)
    }

    /// `sh` waiting on a pipe that only this process holds (close-on-exec, so no other child
    /// inherits it). When this process dies the read ends, and the shell sends SIGTERM to `pid`.
    private static func startWatchdog(for pid: pid_t) throws -> (pid: pid_t, input: Int32) {
        var fds: [Int32] = [-1, -1]
        guard authd_pipe_cloexec(&fds) == 0 else { throw HarnessError("pipe2: \(String(cString: strerror(errno)))") }
        defer { Glibc.close(fds[0]) }
        do {
            let watchdog = try ChildProcess.spawn(["/bin/sh", "-c", "read -r _; kill \"$1\"", "fprintd-rig-watchdog", String(pid)],
                                     environment: ["PATH=/usr/bin:/bin"], stdin: fds[0], stdout: .file("/dev/null"))
            return (watchdog, fds[1])
        } catch {
            Glibc.close(fds[1])
            throw error
        }
    }

}

/// What `busctl --json=short call` prints: {"type":"…","data":[values…]}.
private struct BusctlReply<Value: Decodable>: Decodable {
    let data: [Value]
}
