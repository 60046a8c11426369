import Foundation
import Protocol

extension Command {
    /// Why `login --fast` could not sign in that makes the password the way on: the finger did
    /// not do, the remembered sign-in is gone, or the person cancelled. Any other refusal (the
    /// lock, the daemon) is reported as it is.
    static let fastSignInFallsBack: Set<String> = [
        Reason.biometricNoMatch, .biometricFailed, .biometricUnavailable, .biometricTimeout, .biometricNotEnabled, .biometricCutOff,
        .rememberedInvalid, .userCancelled,
    ].reduce(into: []) { $0.insert($1.rawValue) }

    static let sessionFileOption = OptionSpec(name: "session-file", value: "PATH", help: "where the session is kept (default $XDG_STATE_HOME/authctl/session)")

    static let login = Command(
        path: ["login"], synopsis: "[LOGIN] [--fast | --passkey | --otp] [--region CC] [--password-fd N] [--pin-fd N] [--code-fd N]",
        abstract: """
            Sign in with a phone number or email and the password (asked without echo), then the account's second
            step (PIN, or fingerprint) when it has one; --otp signs in with a code sent by SMS instead. --fast signs
            in to the account last used here with a finger, and falls back to the password. --passkey signs in with
            a passkey authd holds on this device (finger or PIN first; LOGIN optional). The session is saved.
            """,
        options: [
            OptionSpec(name: "region", value: "CC", help: "country for national phone numbers, e.g. EE"),
            OptionSpec(name: "otp", value: nil, help: "sign in with an SMS code instead of the password"),
            OptionSpec(name: "fast", value: nil, help: "fingerprint sign-in to the remembered account (fast-forward)"),
            OptionSpec(name: "passkey", value: nil, help: "sign in with a passkey held on this device"),
            OptionSpec(name: "password-fd", value: "N", help: "read the password from file descriptor N"),
            OptionSpec(name: "pin-fd", value: "N", help: "read the PIN from file descriptor N"),
            OptionSpec(name: "code-fd", value: "N", help: "read the SMS code from file descriptor N"),
            sessionFileOption,
        ],
        positionals: 0...1
    ) { invocation throws(CLIError) in
        let connection = try invocation.connect()
        if invocation.flag("passkey") {
            return try finishLogin(try passkeyLogin(invocation, connection: connection), invocation)
        }
        if invocation.flag("fast") {
            var prompter = RequestPrompter(invocation: invocation, connection: connection)
            do throws(CLIError) {
                let signedIn = try prompter.run(AuthFast.self, NoParams())
                return try finishLogin(signedIn, invocation)
            } catch where error.reason.map(Command.fastSignInFallsBack.contains) == true {
                // The fallback the user expects: the password sign-in.
                Output.error(error.line)
                guard !invocation.positionals.isEmpty else { throw .usage("sign in with the password: authctl login LOGIN") }
                Output.error("Sign in with the password instead.")
            }
        }
        guard let login = invocation.positionals.first else { throw .usage("login needs the phone number or email (or --fast)") }
        try requireHubLink(connection)
        let signedIn: SignedIn
        if invocation.flag("otp") {
            let flow = try connection.call(AuthOTPStart.self, .init(phone: login, region: invocation.value("region")))
            Output.error("If \(flow.phone) has an account, a \(flow.codeLength)-digit code was sent to it.")
            while true {
                let code = try Prompt.answer(invocation, fdOption: "code-fd", question: "Code: ", secret: false).trimmingCharacters(in: .whitespaces)
                do throws(CLIError) {
                    signedIn = try connection.call(AuthOTPVerify.self, .init(flow: flow.flow, code: code))
                    break
                } catch where error.reason == "otp.wrong" && invocation.value("code-fd") == nil {
                    Output.error(error.line)
                }
            }
        } else {
            let password = try Prompt.answer(invocation, fdOption: "password-fd", question: "Password: ", secret: true)
            let step = try connection.call(AuthLogin.self, .init(login: login, password: password, region: invocation.value("region")))
            if let account = step.account, let session = step.session {
                signedIn = SignedIn(account: account, session: session)
            } else if let flow = step.flow, step.next == "pin" {
                let pin = try Prompt.answer(invocation, fdOption: "pin-fd", question: secondStepPIN, secret: true)
                signedIn = try connection.call(AuthLoginPIN.self, .init(flow: flow, pin: pin))
            } else if let flow = step.flow, step.next == "fingerprint" {
                var prompter = RequestPrompter(invocation: invocation, connection: connection)
                do throws(CLIError) {
                    signedIn = try prompter.run(AuthLoginFingerprint.self, .init(flow: flow))
                } catch where error.fallback == "pin" {
                    Output.error(error.line)
                    let pin = try Prompt.answer(invocation, fdOption: "pin-fd", question: secondStepPIN, secret: true)
                    signedIn = try connection.call(AuthLoginPIN.self, .init(flow: flow, pin: pin))
                }
            } else {
                throw CLIError(message: "authd asked for a sign-in step this authctl does not know (\(step.next ?? "?"))", reason: nil, exitCode: .failure)
            }
        }
        return try finishLogin(signedIn, invocation)
    }

    /// On a device, whether its hub can be reached, asked before any secret is: a password typed
    /// for a sign-in that cannot happen is a password typed for nothing. Standalone and hub
    /// daemons, which hold their accounts, always pass.
    static func requireHubLink(_ connection: DaemonConnection) throws(CLIError) {
        let status = try connection.call(HubStatus.self, NoParams())
        guard let link = status.link, link.state != "connected" else { return }
        let reason = link.state == "untrusted" ? Reason.hubUntrusted.rawValue : Reason.hubUnavailable.rawValue
        throw CLIError(message: "this machine's hub \(HubStatusText.address(link)) cannot be reached (\(link.state)\(link.lastError.map { ": \($0)" } ?? ""))"
                           + "; sign in when it is back (authctl hub status)",
                       reason: reason, exitCode: ExitCode.forReason(reason))
    }

    /// The second step's question: the account's PIN, not an ID card's PIN1 or PIN2.
    static let secondStepPIN = "Account PIN (second step): "

    private static func finishLogin(_ signedIn: SignedIn, _ invocation: Invocation) throws(CLIError) -> ExitCode {
        try SessionFile.save(signedIn.session.token, invocation: invocation)
        if invocation.global.json { Output.json(signedIn.account) } else { Output.line("signed in as \(signedIn.account.phone ?? signedIn.account.email ?? "-") (\(signedIn.account.id))") }
        return .ok
    }

    static let twoFactor = Command(
        path: ["2fa"], synopsis: "[fingerprint] enable|disable [--pin-fd N] [--password-fd N]",
        abstract: """
            Turn the 6-digit PIN second factor on (PIN asked twice) or off (password and PIN asked).
            `2fa fingerprint enable` makes this user's finger the account's second step (one scan now);
            `2fa fingerprint disable` asks for the password.
            """,
        options: [
            OptionSpec(name: "pin-fd", value: "N", help: "read the PIN (and for enable, its confirmation: two lines) from N"),
            OptionSpec(name: "password-fd", value: "N", help: "read the password from file descriptor N (disable)"),
            sessionFileOption,
        ],
        positionals: 1...2
    ) { invocation throws(CLIError) in
        let token = try SessionFile.load(invocation)
        let connection = try invocation.connect()
        if invocation.positionals[0] == "fingerprint" {
            var prompter = RequestPrompter(invocation: invocation, connection: connection)
            let result: TwoFactorFingerprintEnable.Result
            switch invocation.positionals.dropFirst().first {
            case "enable": result = try prompter.run(TwoFactorFingerprintEnable.self, .init(session: token))
            case "disable":
                let password = try Prompt.answer(invocation, fdOption: "password-fd", question: "Password: ", secret: true)
                result = try connection.call(TwoFactorFingerprintDisable.self, .init(session: token, password: password))
            default: throw .usage("2fa fingerprint takes enable or disable")
            }
            if invocation.global.json { Output.json(result) } else { Output.line("fingerprint second step " + (result.enabled ? "on" : "off")) }
            return .ok
        }
        guard invocation.positionals.count == 1 else { throw .usage("2fa takes enable, disable, or fingerprint enable|disable") }
        switch invocation.positionals[0] {
        case "enable":
            let pin: String
            let confirm: String
            if invocation.value("pin-fd") != nil {
                // A script gives both lines; authd checks them and says what is wrong.
                pin = try Prompt.answer(invocation, fdOption: "pin-fd", question: newAccountPIN, secret: true)
                confirm = try Prompt.answer(invocation, fdOption: "pin-fd", question: repeatAccountPIN, secret: true)
            } else {
                pin = try Prompt.newSecret(invocation, fdOption: "pin-fd", question: newAccountPIN, repeatQuestion: repeatAccountPIN,
                                           differ: "the PINs differ", weakness: accountPINWeakness)
                confirm = pin
            }
            let result = try connection.call(TwoFactorPINEnable.self, .init(session: token, pin: pin, confirm: confirm))
            if invocation.global.json { Output.json(result) } else { Output.line("PIN second factor on") }
        case "disable":
            let password = try Prompt.answer(invocation, fdOption: "password-fd", question: "Password: ", secret: true)
            let pin = try Prompt.answer(invocation, fdOption: "pin-fd", question: "Account PIN: ", secret: true)
            let result = try connection.call(TwoFactorPINDisable.self, .init(session: token, password: password, pin: pin))
            if invocation.global.json { Output.json(result) } else { Output.line("PIN second factor off") }
        default:
            throw .usage("2fa takes enable or disable")
        }
        return .ok
    }

    static let newAccountPIN = "New 6-digit account PIN: "
    static let repeatAccountPIN = "Repeat the account PIN: "

    /// What is wrong with a new account PIN, told before its repeat is asked (authd checks the
    /// same rules, `pin.weak`).
    static func accountPINWeakness(_ pin: String) -> CLIError? {
        AccountPINRules.violation(pin).map { CLIError(message: $0.message, reason: "pin.weak", exitCode: ExitCode.forReason("pin.weak")) }
    }

    static let sessions = Command(
        path: ["sessions"], synopsis: "[revoke ID]",
        abstract: "List the account's live sessions, or end one.",
        options: [sessionFileOption], positionals: 0...2
    ) { invocation throws(CLIError) in
        let token = try SessionFile.load(invocation)
        let connection = try invocation.connect()
        if invocation.positionals.first == "revoke" {
            guard invocation.positionals.count == 2 else { throw .usage("sessions revoke needs a session ID") }
            let result = try connection.call(SessionRevoke.self, .init(session: token, id: invocation.positionals[1]))
            if invocation.global.json { Output.json(result) } else { Output.line("session \(invocation.positionals[1]) ended") }
            return .ok
        }
        guard invocation.positionals.isEmpty else { throw .usage("sessions takes nothing or 'revoke ID'") }
        let list = try connection.call(SessionList.self, .init(session: token))
        if invocation.global.json { Output.json(list); return .ok }
        for session in list.sessions {
            Output.line("\(session.current ? "*" : " ") \(session.id)  device \(session.deviceID)  \(SignInMethods.describe(session.amr))  last used \(session.lastUsedAt)")
        }
        return .ok
    }

    static let devices = Command(
        path: ["devices"], synopsis: "[revoke ID]",
        abstract: "List the account's devices (and the device limit), or remove one, ending its sessions.",
        options: [sessionFileOption], positionals: 0...2
    ) { invocation throws(CLIError) in
        let token = try SessionFile.load(invocation)
        let connection = try invocation.connect()
        if invocation.positionals.first == "revoke" {
            guard invocation.positionals.count == 2 else { throw .usage("devices revoke needs a device ID") }
            let result = try connection.call(DeviceRevoke.self, .init(session: token, id: invocation.positionals[1]))
            if invocation.global.json { Output.json(result) } else { Output.line("device \(invocation.positionals[1]) removed") }
            return .ok
        }
        guard invocation.positionals.isEmpty else { throw .usage("devices takes nothing or 'revoke ID'") }
        let list = try connection.call(DeviceList.self, .init(session: token))
        if invocation.global.json { Output.json(list); return .ok }
        Output.line("device limit: \(list.limit)")
        for device in list.devices {
            Output.line("\(device.current ? "*" : " ") \(device.id)  \(device.name)\(device.deviceID.map { "  device id \($0)" } ?? "")  "
                        + "first seen \(device.firstSeen), last seen \(device.lastSeen)\(device.current ? "  (this machine)" : "")")
        }
        return .ok
    }

    static let tokenAccount = Command(
        path: ["token", "account"], synopsis: "--aud AUDIENCE [--nonce NONCE] [--desktop]",
        abstract: "Print a JWT in which authd asserts your signed-in account (sub = account id), for AUDIENCE.",
        options: [
            OptionSpec(name: "aud", value: "AUDIENCE", help: "who the token is for (required)"),
            OptionSpec(name: "nonce", value: "NONCE", help: "a value to echo in the nonce claim"),
            OptionSpec(name: "desktop", value: nil, help: "authd asks on your desktop whether authctl may have it (consent)"),
            sessionFileOption,
        ]
    ) { invocation throws(CLIError) in
        guard let audience = invocation.value("aud") else { throw .usage("--aud is required") }
        let token = try SessionFile.load(invocation)
        let issued = try invocation.connect().call(AuthToken.self, .init(session: token, aud: audience, nonce: invocation.value("nonce"),
                                                                       prompt: promptRoute(invocation)))
        if invocation.global.json { Output.json(issued) } else { Output.line(issued.token) }
        return .ok
    }

    static let accountDeactivate = Command(
        path: ["account", "deactivate"], synopsis: "[--pin] [--password-fd N] [--pin-fd N]",
        abstract: "Deactivate your account for good: every session ends and it can never sign in again. Confirm with the password (or --pin).",
        options: [
            OptionSpec(name: "pin", value: nil, help: "confirm with the PIN instead of the password"),
            OptionSpec(name: "password-fd", value: "N", help: "read the password from file descriptor N"),
            OptionSpec(name: "pin-fd", value: "N", help: "read the PIN from file descriptor N"),
            sessionFileOption,
        ]
    ) { invocation throws(CLIError) in
        let token = try SessionFile.load(invocation)
        let params: AccountDeactivate.Params
        if invocation.flag("pin") || invocation.value("pin-fd") != nil {
            params = .init(session: token, pin: try Prompt.answer(invocation, fdOption: "pin-fd", question: "Account PIN: ", secret: true))
        } else {
            params = .init(session: token, password: try Prompt.answer(invocation, fdOption: "password-fd", question: "Password: ", secret: true))
        }
        let result = try invocation.connect().call(AccountDeactivate.self, params)
        SessionFile.remove(invocation)
        if invocation.global.json { Output.json(result) } else { Output.line("account deactivated") }
        return .ok
    }

    static let adminAccounts = Command(
        path: ["admin", "accounts"],
        synopsis: "list [--limit N] | show|unlock|deactivate ACCOUNT | set ACCOUNT [--device-limit N] [--device-policy P] | e2ee ACCOUNT required|off",
        abstract: "Accounts for admins: ACCOUNT is an account id, a phone number or an email address.",
        options: [
            OptionSpec(name: "limit", value: "N", help: "how many to list (1–1000, default 100)"),
            OptionSpec(name: "device-limit", value: "N", help: "set: the account's device limit (omit for the global one)"),
            OptionSpec(name: "device-policy", value: "P", help: "set: deny or replace_oldest (omit for the global one)"),
        ],
        positionals: 1...3
    ) { invocation throws(CLIError) in
        let action = try invocation.action(of: "admin accounts", among: ["list", "show", "unlock", "deactivate", "set", "e2ee"])
        let connection = try invocation.connect()
        func show(_ record: AccountRecord) {
            if invocation.global.json { Output.json(record); return }
            var flags: [String] = []
            if record.deactivatedAt != nil { flags.append("deactivated") }
            if let locked = record.lockedUntil { flags.append("locked until \(locked)") }
            if record.hasPIN { flags.append("PIN") }
            if record.pinSwitchedOff == true { flags.append("PIN switched off") }
            if let e2ee = record.e2ee { flags.append(e2ee == .required ? "end-to-end encrypted" : "not end-to-end encrypted") }
            Output.line("\(record.id)  \(record.phone ?? "-")  \(record.email ?? "-")  devices \(record.activeDevices)  created \(record.createdAt)\(flags.isEmpty ? "" : "  [" + flags.joined(separator: ", ") + "]")")
        }
        if action == "list" {
            guard invocation.positionals.count == 1 else { throw .usage("admin accounts list takes no ACCOUNT") }
            let limit = try invocation.number("limit")
            let accounts = try connection.call(AdminAccountsList.self, .init(limit: limit)).accounts
            if invocation.global.json || !accounts.isEmpty { accounts.forEach(show) } else { Output.line("no accounts") }
            return .ok
        }
        if action == "e2ee" {
            guard invocation.positionals.count == 3, let mode = E2EEMode(rawValue: invocation.positionals[2]) else {
                throw .usage("admin accounts e2ee needs ACCOUNT and required or off")
            }
            show(try connection.call(AdminAccountsE2EE.self, .init(account: invocation.positionals[1], e2ee: mode)))
            return .ok
        }
        guard invocation.positionals.count == 2 else { throw .usage("admin accounts \(action) needs ACCOUNT") }
        let selector = AccountSelector(account: invocation.positionals[1])
        switch action {
        case "show": show(try connection.call(AdminAccountsShow.self, selector))
        case "unlock": show(try connection.call(AdminAccountsUnlock.self, selector))
        case "deactivate": show(try connection.call(AdminAccountsDeactivate.self, selector))
        case "set":
            let limit = try invocation.number("device-limit")
            show(try connection.call(AdminAccountsSet.self, .init(account: selector.account, deviceLimit: limit, devicePolicy: invocation.value("device-policy"))))
        default: throw .usage("admin accounts takes list, show, unlock, deactivate, set or e2ee")
        }
        return .ok
    }
}
