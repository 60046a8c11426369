import Foundation
import Protocol

// authctl lock / unlock / biometric …: the lock of this local user, and fingerprints through
// fprintd. authd runs the interaction; authctl shows "Touch the fingerprint reader" and its
// retry messages on stderr and asks for the password, or the SMS code, when authd falls back
// to it.
extension Command {
    static let lock = Command(
        path: ["lock"], synopsis: "[--status]",
        abstract: """
            Lock authd for this user: until unlocked, nothing issues a token or releases a secret
            (session.locked, exit 6). --status prints whether it is locked and what unlocks it.
            authd also locks by itself after [lock] idle of inactivity. Refused
            (lock.no_unlock_method) when the account has no password and no phone number:
            nothing could unlock it again.
            """,
        options: [OptionSpec(name: "status", value: nil, help: "print the lock state instead of locking")]
    ) { invocation throws(CLIError) in
        let connection = try invocation.connect()
        if invocation.flag("status") {
            let status = try connection.call(LockStatus.self, NoParams())
            if invocation.global.json { Output.json(status); return .ok }
            Output.line(status.locked ? "locked" : "unlocked")
            if let account = status.account { Output.line("account: \(account)") }
            if status.account != nil {
                Output.line("unlock with: " + (status.unlockMethods.isEmpty ? "nothing (set a password with `authctl password set`)"
                                                                            : status.unlockMethods.map(unlockMethodName).joined(separator: ", ")))
            }
            let unarmed = status.account != nil && status.unlockMethods.isEmpty
            Output.line("auto-lock: " + (status.idleSeconds == 0 ? "off" : unarmed ? "off until something can unlock" : "after \(status.idleSeconds) s idle"))
            return .ok
        }
        let state = try connection.call(Lock.self, NoParams())
        if invocation.global.json { Output.json(state) } else { Output.line("locked") }
        return .ok
    }

    /// How a person reads an unlock method's wire name.
    private static func unlockMethodName(_ method: String) -> String {
        method == "sms" ? "SMS code" : method
    }

    static let unlock = Command(
        path: ["unlock"], synopsis: "[--fingerprint | --sms | --password-fd N] [--code-fd N]",
        abstract: """
            Unlock authd for this user. authd asks for a finger when fingerprint unlock is on and a
            reader is there; then for the account password, or, for an account without one, for a
            6-digit code it sends by SMS to the account's number. --fingerprint tries the finger
            once with no fallback; --sms asks for a code even when there is a password;
            --password-fd reads the password and skips the finger.
            """,
        options: [
            OptionSpec(name: "fingerprint", value: nil, help: "one fingerprint attempt, no password fallback"),
            OptionSpec(name: "sms", value: nil, help: "unlock with a code sent by SMS to the account's number"),
            OptionSpec(name: "password-fd", value: "N", help: "read the password from file descriptor N"),
            OptionSpec(name: "code-fd", value: "N", help: "read the SMS code from file descriptor N, one line per code asked"),
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
            state = try prompter.run(Unlock.self, .init(sms: invocation.flag("sms") ? true : nil))
        }
        if invocation.global.json { Output.json(state) } else { Output.line("unlocked (\(unlockMethodName(state.method ?? "?")))") }
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
        Output.line("failures in a row:  \(status.failures)" + (status.cutOff ? " — off until an unlock by password or SMS code" : ""))
        Output.line("card PIN1:          \(status.cardPin1)")
    }
}
