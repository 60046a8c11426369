import Foundation
import Protocol

// authctl lock / unlock / biometric …: the lock of this local user, and fingerprints through
// fprintd. authd runs the interaction; authctl shows "Touch the fingerprint reader" and its
// retry messages on stderr and asks for the password when authd falls back to it.
extension Command {
    static let lock = Command(
        path: ["lock"], synopsis: "[--status]",
        abstract: """
            Lock authd for this user: until unlocked, nothing issues a token or releases a secret
            (session.locked, exit 6). --status prints whether it is locked. authd also locks by
            itself after [lock] idle of inactivity.
            """,
        options: [OptionSpec(name: "status", value: nil, help: "print the lock state instead of locking")]
    ) { invocation throws(CLIError) in
        let connection = try invocation.connect()
        if invocation.flag("status") {
            let status = try connection.call(LockStatus.self, NoParams())
            if invocation.global.json { Output.json(status); return .ok }
            Output.line(status.locked ? "locked" : "unlocked")
            if let account = status.account { Output.line("account: \(account)") }
            Output.line("auto-lock: " + (status.idleSeconds == 0 ? "off" : "after \(status.idleSeconds) s idle"))
            return .ok
        }
        let state = try connection.call(Lock.self, NoParams())
        if invocation.global.json { Output.json(state) } else { Output.line("locked") }
        return .ok
    }

    static let unlock = Command(
        path: ["unlock"], synopsis: "[--fingerprint | --password-fd N]",
        abstract: """
            Unlock authd for this user. authd asks for a finger when fingerprint unlock is on and a
            reader is there, and for the account password when the finger fails, is unavailable or
            you press Ctrl-D at the fingerprint prompt. --fingerprint tries the finger once with no
            fallback; --password-fd reads the password and skips the finger.
            """,
        options: [
            OptionSpec(name: "fingerprint", value: nil, help: "one fingerprint attempt, no password fallback"),
            OptionSpec(name: "password-fd", value: "N", help: "read the password from file descriptor N"),
        ]
    ) { invocation throws(CLIError) in
        let connection = try invocation.connect()
        var prompter = RequestPrompter(invocation: invocation, connection: connection)
        let state: LockState
        if invocation.flag("fingerprint") {
            state = try prompter.run(UnlockBiometric.self, NoParams())
        } else if invocation.value("password-fd") != nil {
            let password = try Prompt.answer(invocation, fdOption: "password-fd", question: "Password: ", secret: true)
            state = try connection.call(Unlock.self, .init(password: password))
        } else {
            state = try prompter.run(Unlock.self, .init())
        }
        if invocation.global.json { Output.json(state) } else { Output.line("unlocked (\(state.method ?? "?"))") }
        return .ok
    }

    static let biometric = Command(
        path: ["biometric"], synopsis: "status|enable|disable",
        abstract: """
            Fingerprint unlock and fingerprint sign-in (fprintd). enable needs an enrolled finger
            (fprintd-enroll) and one matching scan; disable also turns off fingerprint-released PIN1.
            """,
        positionals: 1...1
    ) { invocation throws(CLIError) in
        let connection = try invocation.connect()
        var prompter = RequestPrompter(invocation: invocation, connection: connection)
        let status: BiometricStatus.Result
        switch invocation.positionals[0] {
        case "status": status = try connection.call(BiometricStatus.self, NoParams())
        case "enable": status = try prompter.run(BiometricEnable.self, NoParams())
        case "disable": status = try connection.call(BiometricDisable.self, NoParams())
        default: throw .usage("biometric takes status, enable or disable")
        }
        printBiometricStatus(status, json: invocation.global.json)
        return .ok
    }

    static let cardBiometric = Command(
        path: ["card", "biometric"], synopsis: "enable|disable",
        abstract: """
            Let a matching finger release the saved PIN1 during card login (needs a saved PIN1 and an
            enrolled finger). If the card refuses that PIN1, this stays off until a new PIN1 is saved.
            """,
        positionals: 1...1
    ) { invocation throws(CLIError) in
        let connection = try invocation.connect()
        let status: BiometricStatus.Result
        switch invocation.positionals[0] {
        case "enable": status = try connection.call(CardBiometricEnable.self, NoParams())
        case "disable": status = try connection.call(CardBiometricDisable.self, NoParams())
        default: throw .usage("card biometric takes enable or disable")
        }
        printBiometricStatus(status, json: invocation.global.json)
        return .ok
    }

    private static func printBiometricStatus(_ status: BiometricStatus.Result, json: Bool) {
        if json { return Output.json(status) }
        Output.line("fingerprint unlock: \(status.enabled ? "on" : "off")")
        Output.line("reader:             " + (status.available ? "\(status.reader ?? "yes") (\(status.fingers.joined(separator: ", ")))"
                                                                : "unavailable: \(status.unavailableReason ?? "unknown")"))
        Output.line("failures in a row:  \(status.failures)" + (status.cutOff ? " — off until a password unlock" : ""))
        Output.line("card PIN1:          \(status.cardPin1)")
    }
}
