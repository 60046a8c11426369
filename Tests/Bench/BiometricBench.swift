import Foundation
import Glibc

// How long after fprintd's verify-match signal authd answers. The fprintd stand-in
// (the tests' python-dbusmock template) runs on a private dbus-daemon and records when it sent
// each VerifyStatus (CLOCK_MONOTONIC); the bench reads the same clock when the answer arrives.

/// A private system bus with one python-dbusmock stand-in on it (a template of the tests').
final class MockBusStack {
    let directory: String
    var address: String { "unix:path=\(directory)/bus" }
    private var children: [pid_t] = []

    static func template(_ name: String) -> String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("IntegrationTests/Python/\(name)").path
    }

    /// Starts the bus and the stand-in `template` (with `parameters`), and returns once it owns
    /// `name`. When it does not, what was started is stopped and removed, and the error quotes
    /// the end of the stand-in's log.
    init(template: String, parameters: String, owning name: String) throws {
        var folder = Array("/tmp/authd-bench-bus-XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&folder)!)
        do {
            try start(template: template, parameters: parameters, owning: name)
        } catch {
            stop()
            throw error
        }
    }

    private func start(template: String, parameters: String, owning name: String) throws {
        try """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig><type>system</type><listen>unix:path=\(directory)/bus</listen><auth>EXTERNAL</auth>
        <policy context="default"><allow user="*"/><allow own="*"/><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/></policy>
        </busconfig>
        """.write(toFile: directory + "/bus.conf", atomically: true, encoding: .utf8)
        // The address line is printed once the bus listens: that is the readiness signal.
        children.append(try CardStack.spawn(["/usr/bin/dbus-daemon", "--config-file=\(directory)/bus.conf", "--nofork", "--print-address=1"],
                                            log: directory + "/bus.log"))
        for _ in 0..<500 where !((try? String(contentsOfFile: directory + "/bus.log", encoding: .utf8)) ?? "").contains("\n") { usleep(10_000) }
        children.append(try CardStack.spawn(["/usr/bin/python3", "-m", "dbusmock", "--template", template, "-p", parameters],
                                            log: directory + "/mock.log", environment: ["DBUS_SYSTEM_BUS_ADDRESS=\(address)"]))
        for _ in 0..<200 {
            if (try? busctl(["status", name])) != nil { return }
            usleep(50_000)
        }
        let log = (try? String(contentsOfFile: directory + "/mock.log", encoding: .utf8)) ?? ""
        throw BenchError(description: "the \(name) stand-in did not come up; its log ends:\n" + log.split(separator: "\n").suffix(5).joined(separator: "\n"))
    }

    func stop() {
        for pid in children.reversed() { kill(pid, SIGKILL); var status: Int32 = 0; waitpid(pid, &status, 0) }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Runs busctl on this bus (posix_spawn and waitpid: Foundation's Process can hang in
    /// waitpid beside other spawned children) and returns what it printed.
    @discardableResult
    func busctl(_ arguments: [String]) throws -> String {
        let output = directory + "/busctl.out"
        unlink(output)
        let pid = try CardStack.spawn(["/usr/bin/busctl", "--address=\(address)"] + arguments, log: output)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        guard status == 0 else { throw BenchError(description: "busctl \(arguments.joined(separator: " ")) failed") }
        return (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
    }
}

/// A private system bus with the fprintd stand-in on it.
final class FprintdStack {
    private let stack: MockBusStack
    var address: String { stack.address }

    init(user: String) throws {
        stack = try MockBusStack(template: MockBusStack.template("fprintd_mock.py"), parameters: #"{"enrolled":{"\#(user)":["right-index-finger"]}}"#,
                                 owning: "net.reactivated.Fprint")
    }

    func stop() { stack.stop() }

    private func control(_ method: String, _ arguments: [String] = []) throws -> String {
        try stack.busctl(["call", "--", "net.reactivated.Fprint", "/net/reactivated/Fprint/Manager", "net.reactivated.Fprint.Mock", method] + arguments)
    }

    /// The next VerifyStart gets a match `delay` ms after it starts.
    func scriptMatch(delay: Int = 30) throws {
        _ = try control("SetScript", ["a(sbi)", "1", "verify-match", "true", String(delay)])
    }

    /// When the last VerifyStatus went out (CLOCK_MONOTONIC µs).
    func lastStatusTime() throws -> UInt64 {
        let words = try control("StatusTimes").split(whereSeparator: \.isWhitespace)
        guard let last = words.last, let value = UInt64(last) else { throw BenchError(description: "no VerifyStatus was sent") }
        return value
    }
}

func monotonicMicroseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
}

func biometricFigures() throws {
    let rounds = 30
    let user = String(cString: getpwuid(geteuid()).pointee.pw_name)
    let fprintd = try FprintdStack(user: user)
    defer { fprintd.stop() }
    let card = try CardStack(mode: "contact")
    defer { card.stop() }
    let daemon = try Daemon(environment: ["DBUS_SYSTEM_BUS_ADDRESS": fprintd.address, "PCSCLITE_CSOCK_NAME": card.socket])
    defer { daemon.stop() }
    let client = try Client(daemon.socket)

    // An account signed in from this user: the lock's owner.
    let phone = "+37250009999"
    let start = try client.call("account.register.start", #"{"phone":"\#(phone)"}"#)
    guard let flow = String(decoding: start, as: UTF8.self).firstMatch(of: /"flow":"([^"]+)"/)?.output.1 else {
        throw BenchError(description: "register.start failed: \(String(decoding: start, as: UTF8.self))")
    }
    let code = try daemon.spooledCode(to: phone, after: 0)
    _ = try client.call("account.register.verify", #"{"flow":"\#(flow)","code":"\#(code)","password":"bench password 12345"}"#)
    try fprintd.scriptMatch()
    let enabled = try client.callAnswering("biometric.enable", "{}", answers: [:])
    guard enabled["enabled"] == true else { throw BenchError(description: "biometric.enable failed: \(enabled)") }

    var unlock: [Double] = []
    for _ in 0..<rounds {
        _ = try client.call("lock")
        try fprintd.scriptMatch()
        let answer = try client.callAnswering("unlock.biometric", "{}", answers: [:])
        let answered = monotonicMicroseconds()
        guard answer["method"] == "fingerprint" else { throw BenchError(description: "unlock.biometric failed: \(answer)") }
        unlock.append(Double(answered - (try fprintd.lastStatusTime())) / 1000)
    }
    unlock.sort()
    row("verify-match → unlock.biometric answered (n=\(rounds))", String(format: "p50 %.1f ms, p99 %.1f ms (promise: 2 s)", percentile(unlock, 0.5), percentile(unlock, 0.99)))

    _ = try client.call("card.pin1.save", #"{"pin":"1234"}"#)
    let cardEnabled = try client.call("card.biometric.enable")
    guard String(decoding: cardEnabled, as: UTF8.self).contains(#""card_pin1":"on""#) else {
        throw BenchError(description: "card.biometric.enable failed: \(String(decoding: cardEnabled, as: UTF8.self))")
    }
    var login: [Double] = []
    for _ in 0..<rounds {
        try fprintd.scriptMatch()
        // No answers: a pin1 prompt would mean the finger did not release the saved PIN1.
        let answer = try client.callAnswering("card.login", #"{"aud":"bench"}"#, answers: [:])
        let answered = monotonicMicroseconds()
        guard answer["token"]?.stringValue != nil else { throw BenchError(description: "card.login failed: \(answer)") }
        login.append(Double(answered - (try fprintd.lastStatusTime())) / 1000)
    }
    login.sort()
    row("verify-match → card.login answered, released PIN1", String(format: "p50 %.1f ms, p99 %.1f ms (n=\(rounds), incl. the card's work)", percentile(login, 0.5), percentile(login, 0.99)))
}
