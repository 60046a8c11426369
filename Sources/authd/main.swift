import Dispatch
import FoundationEssentials
import Synchronization

// authd: wires options to the daemon and nothing else. See Server/Daemon.swift.
switch DaemonOptions.parse(Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment) {
case .exit(let message, let status):
    if status == 0 { print(message) } else { Syscalls.writeStderr(message + "\n") }
    Syscalls.exitProcess(status)
case .desktop(let socketPath, let pinentry):
    DesktopAgent.run(socketPath: socketPath, pinentry: pinentry)
case .run(let options):
    MemoryReturn.configureAllocator()
    // The main thread waits for the daemon here, not in dispatch_main as under an async top
    // level: dispatch_main ends the thread with pthread_exit, whose unwinding reads some 600 KB
    // of unwind tables into memory for good. Nothing in authd runs on the main actor.
    let status = Mutex<Int32>(1)
    let finished = DispatchSemaphore(value: 0)
    Task.detached {
        let exitStatus = await Daemon.run(options)
        status.withLock { $0 = exitStatus }
        finished.signal()
    }
    finished.wait()
    Syscalls.exitProcess(status.withLock { $0 })
}
