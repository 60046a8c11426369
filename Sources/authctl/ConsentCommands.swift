import Foundation
import Protocol

// authctl consents …: what the person let programs have without asking again, when authd asks
// on the desktop (prompt: desktop). Each is keyed by the program authd read (exe:PATH,
// flatpak:APP-ID, snap:NAME), the purpose (card_login, card_sign, card_certificate,
// account_token) and the audience.
extension Command {
    static let consentsList = Command(
        path: ["consents", "list"], synopsis: "",
        abstract: """
            List what you let programs have without asking again ("Always allow"): the program, the
            purpose, the audience and when.
            """
    ) { invocation throws(CLIError) in
        let result = try invocation.connect().call(ConsentsList.self, NoParams())
        if invocation.global.json { Output.json(result); return .ok }
        if result.consents.isEmpty { Output.line("no consents remembered") }
        for consent in result.consents {
            let granted = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(consent.grantedAt)))
            Output.line("\(consent.program)\t\(consent.purpose.rawValue)\t\(consent.audience)\t\(granted)")
        }
        return .ok
    }

    static let consentsRevoke = Command(
        path: ["consents", "revoke"], synopsis: "PROGRAM [--purpose PURPOSE] [--aud AUDIENCE]",
        abstract: """
            Forget the consents of PROGRAM (as consents list shows it: exe:PATH, flatpak:APP-ID or
            snap:NAME), for PURPOSE or every purpose and AUDIENCE or every audience: the desktop
            asks again next time. Exit 1 (consent.unknown) when none matched.
            """,
        options: [OptionSpec(name: "purpose", value: "PURPOSE", help: "only the consent for this purpose (\(Self.consentPurposes))"),
                  OptionSpec(name: "aud", value: "AUDIENCE", help: "only the consent for this audience")],
        positionals: 1...1
    ) { invocation throws(CLIError) in
        var purpose: ConsentPurpose?
        if let named = invocation.value("purpose") {
            guard let known = ConsentPurpose(rawValue: named) else { throw .usage("--purpose must be one of \(Self.consentPurposes)") }
            purpose = known
        }
        let result = try invocation.connect().call(ConsentsRevoke.self, .init(program: invocation.positionals[0], purpose: purpose,
                                                                              audience: invocation.value("aud")))
        if invocation.global.json { Output.json(result) } else { Output.line("forgot \(result.revoked) consent\(result.revoked == 1 ? "" : "s")") }
        return .ok
    }

    /// "card_login, card_sign, card_certificate, account_token".
    private static let consentPurposes = ConsentPurpose.allCases.map(\.rawValue).joined(separator: ", ")
}
