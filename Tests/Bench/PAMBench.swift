import Foundation
import Glibc
import Protocol

// What pam_authd adds to a sign-in: pamtester (libpam, the module with the Swift runtime inside,
// its connection, hello and prompts) against the same check through authctl, alternately in one
// run, for the account password; and for the virtual card's PIN1, with the card's own time (the
// sign-in's PIN1 session replayed straight over PC/SC) reported apart.

/// A PAM stack for the service `authd-bench` in a private directory (libpam_wrapper), and
/// pamtester runs of it with the answers on stdin.
struct PAMBenchStack {
    let directory: String
    static let libraries = "/usr/lib/\(machine())-linux-gnu"

    static func machine() -> String {
        var name = utsname()
        uname(&name)
        return withUnsafeBytes(of: &name.machine) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }

    static var available: Bool {
        access("/usr/bin/pamtester", X_OK) == 0 && access(libraries + "/libpam_wrapper.so", R_OK) == 0
    }

    init(socket: String) throws {
        var template = Array("/tmp/authd-bench-pam-XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template)!)
        // PAM takes a relative module path as relative to its own directory: this one is absolute.
        let module = URL(fileURLWithPath: binDirectory + "/libpam_authd.so").standardizedFileURL.path
        try "auth required \(module) socket=\(socket)\n".write(toFile: directory + "/authd-bench", atomically: true, encoding: .utf8)
    }

    /// One `pamtester authenticate` for `user`, answering from `input`; its wall time in ms.
    func authenticate(_ user: String, input: String) throws -> Double {
        try timedRun(["/usr/bin/pamtester", "authd-bench", user, "authenticate"], input: input, environment: [
            "PATH": "/usr/bin:/bin", "LD_PRELOAD": Self.libraries + "/libpam_wrapper.so", "PAM_WRAPPER": "1", "PAM_WRAPPER_SERVICE_DIR": directory,
        ])
    }
}

/// Runs a program with `input` on stdin to its end; its wall time in ms (failing unless it exits 0).
func timedRun(_ command: [String], input: String, environment: [String: String] = ["PATH": "/usr/bin:/bin"]) throws -> Double {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: command[0])
    process.arguments = Array(command.dropFirst())
    process.environment = environment
    let stdin = Pipe(), output = Pipe()
    process.standardInput = stdin
    process.standardOutput = output
    process.standardError = output
    let started = ContinuousClock.now
    try process.run()
    try stdin.fileHandleForWriting.write(contentsOf: Data(input.utf8))
    try stdin.fileHandleForWriting.close()
    let said = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let elapsed = (ContinuousClock.now - started).milliseconds
    guard process.terminationStatus == 0 else {
        throw BenchError(description: "\(command.joined(separator: " ")) failed: \(String(decoding: said, as: UTF8.self))")
    }
    return elapsed
}

/// An account with a password, signed up from this process (root), so root's local user is
/// signed in to it; its id.
func benchAccount(_ daemon: Daemon, password: String) throws -> String {
    let client = try Client(daemon.socket)
    let phone = "+37250009999"
    let start = String(decoding: try client.call("account.register.start", #"{"phone":"\#(phone)"}"#), as: UTF8.self)
    guard let flow = start.firstMatch(of: /"flow":"([^"]+)"/)?.output.1 else { throw BenchError(description: "register.start failed: \(start)") }
    let code = try daemon.spooledCode(to: phone, after: 0)
    let verified = String(decoding: try client.call("account.register.verify", #"{"flow":"\#(flow)","code":"\#(code)","password":"\#(password)"}"#), as: UTF8.self)
    guard let account = verified.firstMatch(of: /"account":\{[^}]*"id":"([^"]+)"/)?.output.1 else { throw BenchError(description: "register.verify failed: \(verified)") }
    return String(account)
}

func pamFigures() throws {
    guard PAMBenchStack.available else {
        row("pam_authd", "skipped: pamtester or libpam-wrapper is not installed (make deps)")
        return
    }
    let rounds = 20
    let password = "bench password 12345"
    let daemon = try Daemon(config: "[accounts]\nlogins_per_minute = 100000\n", arguments: ["--system"])
    defer { daemon.stop() }
    let account = try benchAccount(daemon, password: password)
    let linked = String(decoding: try Client(daemon.socket).call("pam.link.account", #"{"user":"nobody","account":"\#(account)"}"#), as: UTF8.self)
    guard linked.contains(#""result""#) else { throw BenchError(description: "pam.link.account failed: \(linked)") }
    let stack = try PAMBenchStack(socket: daemon.socket)
    defer { try? FileManager.default.removeItem(atPath: stack.directory) }
    let authctl = [binDirectory + "/authctl", "--socket", daemon.socket, "unlock", "--password-fd", "0"]
    _ = try stack.authenticate("nobody", input: password + "\n")  // warm-up
    _ = try timedRun(authctl, input: password + "\n")
    var viaPAM: [Double] = [], viaAuthctl: [Double] = []
    for _ in 0..<rounds {
        viaPAM.append(try stack.authenticate("nobody", input: password + "\n"))
        viaAuthctl.append(try timedRun(authctl, input: password + "\n"))
    }
    viaPAM.sort()
    viaAuthctl.sort()
    row("pamtester authenticate, account password (n=\(rounds))", String(format: "p50 %.1f ms, p99 %.1f ms", percentile(viaPAM, 0.5), percentile(viaPAM, 0.99)))
    row("authctl unlock, the same password check", String(format: "p50 %.1f ms, p99 %.1f ms", percentile(viaAuthctl, 0.5), percentile(viaAuthctl, 0.99)))
    row("pam_authd ÷ authctl, p50 (target ≤ 1.2)", String(format: "%.2f", percentile(viaPAM, 0.5) / percentile(viaAuthctl, 0.5)))

    // The card: the same PIN1 sign-in through pamtester, and its PIN1 session replayed.
    let card = try CardStack(mode: "contact")
    defer { card.stop() }
    let cardDaemon = try Daemon(config: "[pam]\nca_file = \(card.directory)/ca.pem\n", environment: ["PCSCLITE_CSOCK_NAME": card.socket], arguments: ["--system"])
    defer { cardDaemon.stop() }
    let client = try Client(cardDaemon.socket)
    // The card may still be on its way into the reader: the link waits for it (a card prompt).
    let cardLinked = try client.callAnswering("pam.link.card", #"{"user":"nobody","timeout_s":30}"#, answers: [:])
    guard cardLinked["card"] != nil else { throw BenchError(description: "pam.link.card failed: \(cardLinked)") }
    let cardStack = try PAMBenchStack(socket: cardDaemon.socket)
    defer { try? FileManager.default.removeItem(atPath: cardStack.directory) }
    _ = try cardStack.authenticate("nobody", input: "1234\n")  // warm-up, and the traced sign-in
    let session = try card.lastSession()
    let direct = try DirectPCSC(socket: card.socket)
    var cardViaPAM: [Double] = [], replayed: [Double] = []
    for _ in 0..<rounds {
        cardViaPAM.append(try cardStack.authenticate("nobody", input: "1234\n"))
        let started = ContinuousClock.now
        try direct.replay(session)
        replayed.append((ContinuousClock.now - started).milliseconds)
    }
    cardViaPAM.sort()
    replayed.sort()
    row("pamtester authenticate, card PIN1 (n=\(rounds))", String(format: "p50 %.1f ms, p99 %.1f ms", percentile(cardViaPAM, 0.5), percentile(cardViaPAM, 0.99)))
    row("the card's own time: its \(session.count) PIN1 APDUs replayed", String(format: "p50 %.1f ms, p99 %.1f ms", percentile(replayed, 0.5), percentile(replayed, 0.99)))
    row("what the PAM path adds to the card, p50", String(format: "%.1f ms", percentile(cardViaPAM, 0.5) - percentile(replayed, 0.5)))
}
