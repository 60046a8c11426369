import Foundation
import Protocol

// Passkey sign-in, auth.passkey.login.begin → passkey.get → auth.passkey.login.finish →
// session, with authd's own authenticator. The user's own time is the finger: the fprintd
// stand-in sends verify-match 30 ms after the scan starts, and the figure that matters for the
// "within 3 s of the user's confirmation" promise runs from that signal to the session.

func passkeyFigures() throws {
    let rounds = 200
    let user = String(cString: getpwuid(geteuid()).pointee.pw_name)
    let fprintd = try FprintdStack(user: user)
    defer { fprintd.stop() }
    // Sign-in begins are rate limited like password sign-ins; the bench signs in 250 times.
    let daemon = try Daemon(config: "[accounts]\nlogins_per_minute = 100000\n", environment: ["DBUS_SYSTEM_BUS_ADDRESS": fprintd.address])
    defer { daemon.stop() }
    let client = try Client(daemon.socket)

    func object(_ method: String, _ params: String, answers: [String: String] = [:]) throws -> JSONValue {
        try client.callAnswering(method, params, answers: answers)
    }
    func text(_ value: JSONValue) throws -> String { String(decoding: try WireCodec.encodeJSON(value), as: UTF8.self) }
    /// The begin result's options with `origin` added: the params of passkey.create / passkey.get.
    func clientParams(_ begun: JSONValue) throws -> String {
        guard case .object(var params)? = begun["options"] else { throw BenchError(description: "no options in \(begun)") }
        params["origin"] = begun["origin"]
        return try text(.object(params))
    }

    // An account signed in from this user (the lock's owner) with a PIN, fingerprint unlock on.
    let phone = "+37250007777", pin = "582910"
    let start = try object("account.register.start", #"{"phone":"\#(phone)"}"#)
    let code = try daemon.spooledCode(to: phone, after: 0)
    let registered = try object("account.register.verify", #"{"flow":\#(try text(start["flow"]!)),"code":"\#(code)","password":"bench password 12345"}"#)
    let session = try text(registered["session"]!["token"]!)
    _ = try object("twofactor.pin.enable", #"{"session":\#(session),"pin":"\#(pin)","confirm":"\#(pin)"}"#)
    try fprintd.scriptMatch()
    _ = try object("biometric.enable", "{}")

    // One passkey for the account, held by authd.
    let registerBegun = try object("auth.passkey.register.begin", #"{"session":\#(session)}"#)
    try fprintd.scriptMatch()
    let credential = try object("passkey.create", try clientParams(registerBegun))
    _ = try object("auth.passkey.register.finish", #"{"session":\#(session),"flow":\#(try text(registerBegun["flow"]!)),"credential":\#(try text(credential))}"#)

    func signIn(answers: [String: String]) throws -> (begin: Double, afterMatch: Double, total: Double) {
        let started = monotonicMicroseconds()
        let begun = try object("auth.passkey.login.begin", "{}")
        let begunAt = monotonicMicroseconds()
        let assertion = try object("passkey.get", try clientParams(begun), answers: answers)
        let finished = try object("auth.passkey.login.finish", #"{"flow":\#(try text(begun["flow"]!)),"credential":\#(try text(assertion))}"#)
        let done = monotonicMicroseconds()
        guard finished["session"]?["token"] != nil else { throw BenchError(description: "no session: \(finished)") }
        let matched = answers.isEmpty ? try fprintd.lastStatusTime() : begunAt
        return (Double(begunAt - started) / 1000, Double(done - matched) / 1000, Double(done - started) / 1000)
    }

    var begins: [Double] = [], afterMatch: [Double] = [], totals: [Double] = []
    for _ in 0..<rounds {
        try fprintd.scriptMatch()
        let figures = try signIn(answers: [:])
        begins.append(figures.begin)
        afterMatch.append(figures.afterMatch)
        totals.append(figures.total)
    }
    begins.sort(); afterMatch.sort(); totals.sort()
    row("passkey login.begin (n=\(rounds))", String(format: "p50 %.2f ms, p99 %.2f ms", percentile(begins, 0.5), percentile(begins, 0.99)))
    row("passkey: verify-match → session", String(format: "p50 %.1f ms, p99 %.1f ms (promise: 3 s)", percentile(afterMatch, 0.5), percentile(afterMatch, 0.99)))
    row("passkey: begin → session, finger after 30 ms", String(format: "p50 %.1f ms, p99 %.1f ms", percentile(totals, 0.5), percentile(totals, 0.99)))

    row("RSS after the finger rounds", String(format: "%.1f MB", Double(daemon.residentBytes) / 1e6))

    // The PIN instead of the finger: the Argon2id check of the PIN is part of authd's time.
    _ = try object("biometric.disable", "{}")
    var withPIN: [Double] = []
    for _ in 0..<(rounds / 4) { withPIN.append(try signIn(answers: ["pin": pin]).total) }
    withPIN.sort()
    row("passkey: begin → session, PIN typed at once (n=\(rounds / 4))", String(format: "p50 %.1f ms, p99 %.1f ms", percentile(withPIN, 0.5), percentile(withPIN, 0.99)))
    row("RSS after the PIN rounds (Argon2id, m = 19 MiB)", String(format: "%.1f MB", Double(daemon.residentBytes) / 1e6))
}
