import Foundation
import Protocol

// authctl password set / change: the password of the saved session's account. authd checks a
// new password against its policy before it is typed again (account.password.check), and a
// change needs the current password, which counts toward the account's lockout like any
// password check.
extension Command {
    static let passwordOption = OptionSpec(name: "password-fd", value: "N",
                                           help: "read the passwords from file descriptor N, one per line, not repeated")

    static let passwordSet = Command(
        path: ["password", "set"], synopsis: "[--password-fd N]",
        abstract: """
            Give the account a password, when it has none.
            As after `register` without --with-password; asked twice without echo and checked
            against the password policy before the repeat. It then signs in and unlocks authd.
            """,
        options: [passwordOption, sessionFileOption]
    ) { invocation throws(CLIError) in
        let token = try SessionFile.load(invocation)
        let connection = try invocation.connect()
        guard try !connection.call(AccountPasswordCheck.self, .init(session: token)).hasPassword else {
            throw CLIError(message: "the account already has a password; change it with `authctl password change`", reason: nil, exitCode: .failure)
        }
        let password = try newPassword(invocation, connection: connection, session: token)
        let account = try connection.call(AccountProfileSet.self, .init(session: token, password: password))
        if invocation.global.json { Output.json(account) } else { Output.line("password set") }
        return .ok
    }

    static let passwordChange = Command(
        path: ["password", "change"], synopsis: "[--password-fd N]",
        abstract: """
            Change the account's password.
            Asks for the current one (a wrong one counts toward the account's lock, as at sign-in),
            then the new one twice, checked against the password policy before the repeat. With
            --password-fd: the current, then the new one.
            """,
        options: [passwordOption, sessionFileOption]
    ) { invocation throws(CLIError) in
        let token = try SessionFile.load(invocation)
        let connection = try invocation.connect()
        guard try connection.call(AccountPasswordCheck.self, .init(session: token)).hasPassword else {
            throw CLIError(message: "the account has no password yet; set one with `authctl password set`", reason: nil, exitCode: .failure)
        }
        let current = try Prompt.answer(invocation, fdOption: "password-fd", question: "Current password: ", secret: true)
        if invocation.value("password-fd") == nil {
            // Checked at once, so nobody types a new password twice for nothing.
            _ = try connection.call(AccountPasswordCheck.self, .init(session: token, currentPassword: current))
        }
        let password = try newPassword(invocation, connection: connection, session: token)
        let account = try connection.call(AccountProfileSet.self, .init(session: token, password: password, currentPassword: current))
        if invocation.global.json { Output.json(account) } else { Output.line("password changed") }
        return .ok
    }

    /// The new password: one line from --password-fd (a script does not mistype; authd checks
    /// the policy when it is set), or asked on the terminal, checked by authd before the repeat,
    /// and asked again as every new secret is (``Prompt/newSecret``).
    private static func newPassword(_ invocation: Invocation, connection: DaemonConnection, session: String) throws(CLIError) -> String {
        try Prompt.newSecret(invocation, fdOption: "password-fd", question: "New password: ", repeatQuestion: "Repeat the new password: ",
                             differ: "the passwords differ") { password throws(CLIError) in
            do throws(CLIError) {
                _ = try connection.call(AccountPasswordCheck.self, .init(session: session, password: password))
                return nil
            } catch where error.reason == "password.weak" {
                return error
            }
        }
    }
}
