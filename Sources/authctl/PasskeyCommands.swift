import Foundation
import Protocol

// authctl passkey …: the passkeys authd holds for you as this machine's authenticator, and the
// passkeys registered to your authd account (`login --passkey` lives with the other sign-ins).
extension Command {
    static let passkeyList = Command(
        path: ["passkey", "list"], synopsis: "[--rp RP_ID]",
        abstract: "The passkeys authd holds for you (for any site or app, and for authd itself), newest first.",
        options: [OptionSpec(name: "rp", value: "RP_ID", help: "only the passkeys for this RP ID, e.g. example.com")]
    ) { invocation throws(CLIError) in
        let result = try invocation.connect().call(PasskeyList.self, .init(rpId: invocation.value("rp")))
        if invocation.global.json { Output.json(result); return .ok }
        if result.passkeys.isEmpty { Output.line("no passkeys") }
        for passkey in result.passkeys {
            Output.line("\(passkey.id)  \(passkey.rpId)  \(passkey.userName)  created \(passkey.createdAt)"
                        + (passkey.lastUsedAt.map { ", last used \($0)" } ?? ", never used"))
        }
        return .ok
    }

    static let passkeyDelete = Command(
        path: ["passkey", "delete"], synopsis: "ID",
        abstract: "Delete one of the passkeys authd holds for you (ID from `passkey list`). Its private key is gone for good.",
        positionals: 1...1
    ) { invocation throws(CLIError) in
        let result = try invocation.connect().call(PasskeyDelete.self, .init(id: invocation.positionals[0]))
        if invocation.global.json { Output.json(result) } else { Output.line("passkey \(result.id) deleted") }
        return .ok
    }

    static let passkeyRegister = Command(
        path: ["passkey", "register"], synopsis: "[--pin-fd N]",
        abstract: """
            Add a passkey for your authd account, held by authd on this machine: authd verifies you (finger, or
            your PIN), makes the key, and registers it with your account. Then `authctl login --passkey` signs in.
            """,
        options: [OptionSpec(name: "pin-fd", value: "N", help: "read the PIN (when the finger is not used) from N"), sessionFileOption]
    ) { invocation throws(CLIError) in
        let token = try SessionFile.load(invocation)
        let connection = try invocation.connect()
        let begun = try connection.call(AuthPasskeyRegisterBegin.self, .init(session: token))
        var prompter = RequestPrompter(invocation: invocation, connection: connection)
        let credential = try prompter.run(PasskeyCreate.self, .init(origin: begun.origin, options: begun.options))
        let result = try connection.call(AuthPasskeyRegisterFinish.self, .init(session: token, flow: begun.flow, credential: credential))
        if invocation.global.json { Output.json(result) } else { Output.line("passkey \(result.id) registered for \(begun.options.user.name)") }
        return .ok
    }

    static let passkeyAccount = Command(
        path: ["passkey", "account"], synopsis: "[remove ID]",
        abstract: "The passkeys registered to your authd account (from any authenticator), or remove one so it can no longer sign in.",
        options: [sessionFileOption], positionals: 0...2
    ) { invocation throws(CLIError) in
        let token = try SessionFile.load(invocation)
        let connection = try invocation.connect()
        if invocation.positionals.first == "remove" {
            guard invocation.positionals.count == 2 else { throw .usage("passkey account remove needs a passkey ID") }
            let result = try connection.call(AuthPasskeyRemove.self, .init(session: token, id: invocation.positionals[1]))
            if invocation.global.json { Output.json(result) } else { Output.line("passkey \(result.id) removed from the account") }
            return .ok
        }
        guard invocation.positionals.isEmpty else { throw .usage("passkey account takes nothing or 'remove ID'") }
        let result = try connection.call(AuthPasskeyList.self, .init(session: token))
        if invocation.global.json { Output.json(result); return .ok }
        if result.passkeys.isEmpty { Output.line("no passkeys") }
        for passkey in result.passkeys {
            Output.line("\(passkey.id)  created \(passkey.createdAt)" + (passkey.lastUsedAt.map { ", last used \($0)" } ?? ", never used"))
        }
        return .ok
    }

    /// `login --passkey [LOGIN]`: authd's relying party begins, authd's authenticator answers
    /// (after the finger or the PIN), the relying party checks and opens a session.
    static func passkeyLogin(_ invocation: Invocation, connection: DaemonConnection) throws(CLIError) -> SignedIn {
        let login = invocation.positionals.first
        let begun = try connection.call(AuthPasskeyLoginBegin.self, .init(login: login, region: invocation.value("region")))
        var prompter = RequestPrompter(invocation: invocation, connection: connection)
        let assertion: PasskeyAssertion
        do throws(CLIError) {
            assertion = try prompter.run(PasskeyGet.self, .init(origin: begun.origin, options: begun.options))
        } catch where error.reason == "passkey.none" {
            let who = login ?? "LOGIN"
            throw CLIError(message: "this device holds no passkey for " + (login.map { "the account \($0)" } ?? "an authd account")
                           + "; sign in with the password (authctl login \(who)) or an SMS code (authctl login --otp \(who)),"
                           + " then `authctl passkey register` adds one here", reason: "passkey.none", exitCode: .failure)
        }
        return try connection.call(AuthPasskeyLoginFinish.self, .init(flow: begun.flow, credential: assertion))
    }
}
