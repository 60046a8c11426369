import Protocol

extension Command {
    static let status = Command(
        path: ["status"], synopsis: "",
        abstract: "Show whether authd answers, its version and mode, and who it thinks you are."
    ) { invocation throws(CLIError) in
        let connection = try invocation.connect()
        let hello = try connection.call(Hello.self, NoParams())
        if invocation.global.json {
            Output.json(hello)
            return .ok
        }
        let caller = hello.caller
        Output.line("authd \(hello.daemonVersion) (protocol \(hello.protocolVersion)), \(hello.mode) mode, at \(connection.socketPath)")
        Output.line("you: uid \(caller.uid)\(caller.username.map { " (\($0))" } ?? ""), pid \(caller.pid), \(caller.exe ?? "unknown executable")")
        Output.line("features: \(hello.features.joined(separator: ", "))")
        // A device says how its hub is: account commands depend on it.
        if hello.features.contains("hub"), let hub = try? connection.call(HubStatus.self, NoParams()), let link = hub.link {
            Output.line(HubStatusText.linkLine(link))
        }
        return .ok
    }
}
