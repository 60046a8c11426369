import FoundationEssentials

// authd: wires options to the daemon and nothing else. See Server/Daemon.swift.
switch DaemonOptions.parse(Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment) {
case .exit(let message, let status):
    if status == 0 { print(message) } else { Syscalls.writeStderr(message + "\n") }
    Syscalls.exitProcess(status)
case .desktop(let socketPath):
    DesktopAgent.run(socketPath: socketPath)
case .run(let options):
    Syscalls.exitProcess(await Daemon.run(options))
}
