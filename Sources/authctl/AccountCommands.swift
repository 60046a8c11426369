import Foundation
import Protocol

extension Command {
    static let register = Command(
        path: ["register"], synopsis: "PHONE [--region CC] [--email ADDRESS] [--with-password] [--code-fd N] [--password-fd N]",
        abstract: """
            Create an account for PHONE: authd sends a 6-digit code by SMS, you type it (or 'r' to have a
            new one sent), and the new session is saved for later commands (whoami, logout).
            """,
        options: [
            OptionSpec(name: "region", value: "CC", help: "country for national numbers, e.g. EE"),
            OptionSpec(name: "email", value: "ADDRESS", help: "an email address for the account"),
            OptionSpec(name: "with-password", value: nil, help: "also set a password (asked without echo)"),
            OptionSpec(name: "code-fd", value: "N", help: "read the code from file descriptor N"),
            OptionSpec(name: "password-fd", value: "N", help: "read the password from file descriptor N"),
            sessionFileOption,
        ],
        positionals: 1...1
    ) { invocation throws(CLIError) in
        let connection = try invocation.connect()
        var flow = try connection.call(AccountRegisterStart.self, .init(phone: invocation.positionals[0], region: invocation.value("region")))
        var password: String?
        if invocation.flag("with-password") || invocation.value("password-fd") != nil {
            password = try newPassword(invocation)
        }
        var codeJustSent = true
        while true {
            if codeJustSent {
                Output.error("A \(flow.codeLength)-digit code was sent to \(flow.phone); \(timeLeft(until: flow.expiresAt)).")
                codeJustSent = false
            }
            let answer = try Prompt.answer(invocation, fdOption: "code-fd",
                                           question: "Code (or r to resend, \(flow.resendsLeft) left): ", secret: false)
                .trimmingCharacters(in: .whitespaces)
            if answer == "r" && invocation.value("code-fd") == nil {
                do throws(CLIError) {
                    flow = try connection.call(AccountRegisterResend.self, .init(flow: flow.flow))
                    codeJustSent = true
                } catch {
                    Output.error(error.line)
                }
                continue
            }
            do throws(CLIError) {
                let signedIn = try connection.call(AccountRegisterVerify.self, .init(
                    flow: flow.flow, code: answer, email: invocation.value("email"), password: password))
                try SessionFile.save(signedIn.session.token, invocation: invocation)
                if invocation.global.json { Output.json(signedIn.account) } else {
                    Output.line("registered \(signedIn.account.phone ?? "-") as \(signedIn.account.id); signed in on this device")
                }
                return .ok
            } catch where error.reason == "otp.wrong" && invocation.value("code-fd") == nil {
                Output.error(error.line)
            } catch where error.reason == "password.weak" && invocation.value("password-fd") == nil && invocation.value("code-fd") == nil {
                // The daemon kept the flow open: ask for another password, then the code again.
                Output.error(error.line)
                password = try newPassword(invocation)
            }
        }
    }

    /// A new password from `--password-fd`, or typed twice at the terminal (again when the two differ).
    private static func newPassword(_ invocation: Invocation) throws(CLIError) -> String {
        try Prompt.newSecret(invocation, fdOption: "password-fd", question: "New password: ", repeatQuestion: "Repeat the password: ",
                             differ: "the passwords differ")
    }

    static let whoami = Command(
        path: ["whoami"], synopsis: "",
        abstract: "Show the account and device of the saved session. Exit 7 when not logged in.",
        options: [sessionFileOption]
    ) { invocation throws(CLIError) in
        let token = try SessionFile.load(invocation)
        let session = try invocation.connect().call(SessionGet.self, .init(session: token))
        if invocation.global.json { Output.json(session); return .ok }
        Output.line("\(session.account.phone ?? "federated account") (\(session.account.id))\(session.account.email.map { ", \($0)" } ?? "")")
        Output.line("device: \(session.device.name) (\(session.device.id)); signed in with \(SignInMethods.describe(session.amr)) at \(session.createdAt)")
        return .ok
    }

    static let accountEmail = Command(
        path: ["account", "email"], synopsis: "set ADDRESS [--password-fd N]",
        abstract: """
            Set or change the account's email address (how friends find you). Asks for the current password
            when the account has one; an account makes only a few changes an hour.
            """,
        options: [
            OptionSpec(name: "password-fd", value: "N", help: "read the current password from file descriptor N"),
            sessionFileOption,
        ],
        positionals: 2...2
    ) { invocation throws(CLIError) in
        guard invocation.positionals[0] == "set" else { throw .usage("account email takes set ADDRESS") }
        let address = invocation.positionals[1]
        let token = try SessionFile.load(invocation)
        let connection = try invocation.connect()
        var current: String?
        if try connection.call(AccountPasswordCheck.self, .init(session: token)).hasPassword {
            current = try Prompt.answer(invocation, fdOption: "password-fd", question: "Current password: ", secret: true)
        }
        let account = try connection.call(AccountProfileSet.self, .init(session: token, email: address, currentPassword: current))
        if invocation.global.json { Output.json(account) } else { Output.line("email set to \(account.email ?? address)") }
        return .ok
    }

    static let logout = Command(
        path: ["logout"], synopsis: "",
        abstract: "End the saved session (here and in authd).",
        options: [sessionFileOption]
    ) { invocation throws(CLIError) in
        let token = try SessionFile.load(invocation)
        do throws(CLIError) {
            _ = try invocation.connect().call(AuthLogout.self, .init(session: token))
        } catch where error.exitCode == .notLoggedIn {
            // Already ended in authd: removing the local copy is all that is left to do.
        }
        // Only now: if authd could not be reached, the session is still live and the file is
        // the only way to end it later.
        SessionFile.remove(invocation)
        if invocation.global.json { Output.json(["logged_out": true]) } else { Output.line("logged out") }
        return .ok
    }
}

/// A session's sign-in methods (its `amr` values, RFC 8176) in words: "password and account PIN".
enum SignInMethods {
    /// Each `amr` value authd writes for an account session, as a person says it.
    static let words: [String: String] = [
        "pwd": "password", "otp": "SMS code", "pin": "account PIN", "fpt": "fingerprint",
        "fed": "identity provider", "sc": "ID card", "hwk": "security key",
    ]

    /// The methods joined with "and"; `pop` with `mfa` (a passkey with user verification) is
    /// "passkey", and a value without a word is shown as it is.
    static func describe(_ amr: [String]) -> String {
        var methods = amr
        if methods.contains("pop") {
            methods.removeAll { $0 == "pop" || $0 == "mfa" }
            methods.insert("passkey", at: 0)
        }
        let named = methods.map { words[$0] ?? $0 }
        return named.isEmpty ? "no recorded method" : named.joined(separator: " and ")
    }
}

/// "it expires in 9 min 58 s" from an RFC 3339 time, or the time itself if it cannot be read.
func timeLeft(until timestamp: String) -> String {
    guard let date = ISO8601DateFormatter().date(from: timestamp) else { return "it expires at \(timestamp)" }
    let seconds = Int(date.timeIntervalSinceNow.rounded())
    if seconds <= 0 { return "it has expired" }
    return "it expires in " + (seconds >= 60 ? "\(seconds / 60) min \(seconds % 60) s" : "\(seconds) s")
}
