import Foundation
import Protocol

// authctl: parse, run one command, map the outcome to an exit code. Commands live one group
// per file; this list is the whole CLI.
extension Command {
    static let allCommands: [Command] = [
        .status,
        .tokenLocal, .tokenVerify, .keysJWKS,
        .adminStatus, .adminReload, .adminBackup, .adminKeysRotate, .adminAudit, .adminSMSLast,
        .register, .login, .whoami, .logout, .passwordSet, .passwordChange, .twoFactor, .sessions, .devices, .tokenAccount, .accountEmail, .accountDeactivate,
        .adminAccounts,
        .cardReaders, .cardRead, .cardLogin, .cardSign, .cardCANSet, .cardCANShow, .cardCANClear, .cardPIN1Save, .cardPIN1Clear,
        .consentsList, .consentsRevoke, .webeidInstall, .webeidStatus,
        .lock, .unlock, .biometric, .cardBiometric,
        .federationLogin, .federationStatus, .federationLogout, .tokenRemote, .remoteFetch, .remoteReport401, .events,
        .passkeyList, .passkeyDelete, .passkeyRegister, .passkeyAccount,
        .deviceID, .deviceName, .hubStatus,
        .syncSend, .syncWatch, .syncRead, .syncHistory, .syncUnread, .syncDismiss,
        .friends, .groups, .hotspots, .presence, .adminHotspots,
        .pamLinkCard, .pamLinkAccount, .pamUnlink, .pamStatus,
        .call, .completion, .helpCommand,
    ]
}

let version = "0.1.0"

func runCLI() -> Int32 {
    do throws(CLIError) {
        switch try ArgumentParser.parse(Array(CommandLine.arguments.dropFirst()), commands: Command.allCommands) {
        case .version:
            Output.line("authctl \(version)")
            return ExitCode.ok.rawValue
        case .help(let text):
            Output.line(text)
            return ExitCode.ok.rawValue
        case .run(let command, let invocation):
            return try command.run(invocation).rawValue
        }
    } catch {
        Output.error(error.line)
        return error.exitCode.rawValue
    }
}

// A reader that has gone (`authctl sync watch | head -1`) ends authctl quietly, as it ends any
// filter, even when authctl was started with SIGPIPE ignored (systemd's services are, and
// children of programs that ignore it): FileHandle's write would otherwise stop it with a crash
// report. Its socket to authd never raises the signal (MSG_NOSIGNAL).
signal(SIGPIPE, SIG_DFL)
exit(runCLI())
