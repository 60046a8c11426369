import Foundation
import Glibc

/// PAM stacks for one test, in a private directory that libpam_wrapper reads instead of
/// /etc/pam.d (`PAM_WRAPPER_SERVICE_DIR`), run by pamtester on a terminal of its own as sudo
/// would run them. The module is the one built beside authd; the machine's stacks are never read.
final class PAMStack: Sendable {
    let directory: String
    static let service = "authd-test"
    static var modulePath: String { DaemonHarness.buildDirectory + "/libpam_authd.so" }

    /// The directory of the system's PAM modules (pam_permit.so, pam_deny.so) and the one of
    /// libpam_wrapper.so: the multiarch library directory.
    static let libraryDirectory: String = {
        var name = utsname()
        uname(&name)
        let machine = withUnsafeBytes(of: &name.machine) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        return "/usr/lib/\(machine == "aarch64" ? "aarch64" : machine)-linux-gnu"
    }()
    static var securityDirectory: String { libraryDirectory + "/security" }
    static var wrapperPath: String { libraryDirectory + "/libpam_wrapper.so" }

    /// Writes `stack` as the service `authd-test`: `pam_authd.so` stands for the built module
    /// with `socket=` set to `socket`, other module names for the system's.
    init(socket: String, _ stack: String) throws {
        var template = Array("/tmp/authd-pam-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw HarnessError("mkdtemp failed") }
        directory = String(cString: made)
        try write(stack, socket: socket)
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    func write(_ stack: String, socket: String) throws {
        let lines = stack.split(separator: "\n").map { line -> String in
            var words = line.split(separator: " ").map(String.init)
            guard words.count >= 3 else { return String(line) }
            if words[2] == "pam_authd.so" {
                words[2] = Self.modulePath
                words.insert("socket=\(socket)", at: 3)
            } else if words[2].hasSuffix(".so") && !words[2].hasPrefix("/") {
                words[2] = Self.securityDirectory + "/" + words[2]
            }
            return words.joined(separator: " ")
        }
        try (lines.joined(separator: "\n") + "\n").write(toFile: directory + "/" + Self.service, atomically: true, encoding: .utf8)
    }

    var environment: [String: String] {
        ["PATH": "/usr/bin:/bin", "LD_PRELOAD": Self.wrapperPath, "PAM_WRAPPER": "1", "PAM_WRAPPER_SERVICE_DIR": directory]
    }

    /// pamtester for `user` with `operations` (`authenticate`, `acct_mgmt`), on a terminal.
    func pamtester(_ user: String, _ operations: [String] = ["authenticate"], items: [String] = []) throws -> TerminalSession {
        try TerminalSession(["/usr/bin/pamtester", "-v"] + items.flatMap { ["-I", $0] } + [Self.service, user] + operations, environment: environment)
    }

    /// Runs pamtester, answering each question (a text that appears, then the line to type) in
    /// turn; its exit status, the terminal's transcript, and how long it took.
    func run(_ user: String, _ operations: [String] = ["authenticate"], answers: [(String, String)] = [], items: [String] = [],
             seconds: Double = 30) throws -> (status: Int32, transcript: String, elapsed: Double) {
        let started = Date()
        let session = try pamtester(user, operations, items: items)
        for (question, line) in answers { try session.answer(question, line) }
        let status = try session.finish(seconds: seconds)
        return (status, session.transcript, Date().timeIntervalSince(started))
    }
}
