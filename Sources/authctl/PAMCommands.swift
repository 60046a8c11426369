import Foundation
import Protocol

// authctl pam …: which ID card and which account a Unix user signs in with through pam_authd
// (sudo, login, a display manager). A user links their own; an admin (root or the authd-admin
// group) any user's, with --user. The links live in the system authd, so these commands talk
// to it (`--socket` or AUTHD_SOCKET name another).
extension Command {
    private static let userOption = OptionSpec(name: "user", value: "USER", help: "the Unix user (admins only; default: yourself)")

    static let pamLinkCard = Command(
        path: ["pam", "link", "card"], synopsis: "[--user USER] [--timeout S] [--pin-fd N] [--can-fd N]",
        abstract: """
            Link the ID card in the reader to your Unix user: pam_authd then takes that card and its
            PIN1. authd reads the card's authentication certificate and keeps its holder's personal
            code, so a renewed card of the same person keeps working. You prove the card is yours
            with its PIN1; an admin links any user's card without it.
            """,
        options: [
            userOption, OptionSpec(name: "timeout", value: "S", help: "wait at most S seconds for the card (default 90)"),
            OptionSpec(name: "pin-fd", value: "N", help: "read PIN1 from file descriptor N"),
            OptionSpec(name: "can-fd", value: "N", help: "read the CAN from file descriptor N"),
        ]
    ) { invocation throws(CLIError) in
        let connection = try invocation.connect(preferSystem: true)
        var prompter = RequestPrompter(invocation: invocation, connection: connection)
        let links = try prompter.run(PAMLinkCard.self, .init(user: invocation.value("user"), timeoutS: try invocation.number("timeout", in: 1...600)))
        printPAMLinks(links, json: invocation.global.json)
        return .ok
    }

    static let pamLinkAccount = Command(
        path: ["pam", "link", "account"], synopsis: "[--user USER] [--account ID]",
        abstract: """
            Link the account you are signed in to (authctl login) to your Unix user: pam_authd then
            takes its password, and its PIN when it has one. Admins name any account with --account.
            """,
        options: [userOption, OptionSpec(name: "account", value: "ID", help: "the account id to link (admins only)")]
    ) { invocation throws(CLIError) in
        let links = try invocation.connect(preferSystem: true).call(PAMLinkAccount.self, .init(user: invocation.value("user"), account: invocation.value("account")))
        printPAMLinks(links, json: invocation.global.json)
        return .ok
    }

    static let pamUnlink = Command(
        path: ["pam", "unlink"], synopsis: "[--user USER] [--card | --account]",
        abstract: "Remove the card link, the account link, or both (the default), of your Unix user.",
        options: [
            userOption,
            OptionSpec(name: "card", value: nil, help: "only the card link"),
            OptionSpec(name: "account", value: nil, help: "only the account link"),
        ]
    ) { invocation throws(CLIError) in
        if invocation.flag("card") && invocation.flag("account") { throw .usage("give --card or --account, or neither for both") }
        let kind: String? = invocation.flag("card") ? "card" : invocation.flag("account") ? "account" : nil
        let links = try invocation.connect(preferSystem: true).call(PAMUnlink.self, .init(user: invocation.value("user"), kind: kind))
        printPAMLinks(links, json: invocation.global.json)
        return .ok
    }

    static let pamStatus = Command(
        path: ["pam", "status"], synopsis: "[--user USER]",
        abstract: "Show which ID card and which account your Unix user signs in with through pam_authd.",
        options: [userOption]
    ) { invocation throws(CLIError) in
        let links = try invocation.connect(preferSystem: true).call(PAMStatus.self, .init(user: invocation.value("user")))
        printPAMLinks(links, json: invocation.global.json)
        return .ok
    }

    private static func printPAMLinks(_ links: PAMLinks, json: Bool) {
        if json { return Output.json(links) }
        Output.line("user:    \(links.user)")
        Output.line("card:    " + (links.card.map { "\($0.holder) (\($0.personalCode))" } ?? "none"))
        Output.line("account: " + (links.account ?? "none"))
    }
}
