import Foundation
import Protocol

// authctl federation … / token remote / remote … / events: sign-in through an OpenID provider,
// the tokens authd keeps for its APIs, and the event stream that says when a 401 logged you out.
extension Command {
    static let federationLogin = Command(
        path: ["federation", "login"], synopsis: "[PROVIDER] [--device] [--no-browser]",
        abstract: """
            Sign in through an OpenID provider configured in authd.conf ([federation.NAME]). authctl prints the
            address to open and opens it with xdg-open when there is a display; --device uses the device
            authorization grant instead (open the address on any device and type the code shown). The first
            sign-in registers an account linked to the provider's identity. The session is saved.
            """,
        options: [
            OptionSpec(name: "device", value: nil, help: "device authorization grant (for machines without a browser)"),
            OptionSpec(name: "no-browser", value: nil, help: "print the address but do not run xdg-open"),
            sessionFileOption,
        ],
        positionals: 0...1
    ) { invocation throws(CLIError) in
        let connection = try invocation.connect()
        var prompter = RequestPrompter(invocation: invocation, connection: connection)
        let result = try prompter.run(FederationLogin.self, .init(provider: invocation.positionals.first, flow: invocation.flag("device") ? "device" : "code"))
        try SessionFile.save(result.session.token, invocation: invocation)
        if invocation.global.json { Output.json(result); return .ok }
        Output.line("signed in with \(result.provider) as \(result.subject) (\(result.account.id))" + (result.created ? "; account registered" : ""))
        return .ok
    }

    static let federationStatus = Command(
        path: ["federation", "status"], synopsis: "",
        abstract: "The configured OpenID providers and whether you are signed in, signed out, or logged out by a 401 (and by what)."
    ) { invocation throws(CLIError) in
        let result = try invocation.connect().call(FederationStatus.self, NoParams())
        if invocation.global.json { Output.json(result); return .ok }
        if result.providers.isEmpty { Output.line("no OpenID provider is configured") }
        for provider in result.providers {
            var line = "\(provider.name)\(provider.isDefault ? " (default)" : "")  \(provider.issuer)  \(provider.state.replacingOccurrences(of: "_", with: " "))"
            if let subject = provider.subject, provider.state == "signed_in" { line += " as \(subject)" + (provider.email.map { " <\($0)>" } ?? "") }
            if let expires = provider.accessExpiresAt { line += "; access token until \(expires)" }
            if provider.state == "signed_in" && !provider.hasRefreshToken { line += "; no refresh token" }
            if let at = provider.loggedOutAt { line += " at \(at) (401 from \(provider.loggedOutBy ?? "?"))" }
            Output.line(line)
        }
        return .ok
    }

    static let federationLogout = Command(
        path: ["federation", "logout"], synopsis: "[PROVIDER]",
        abstract: "Sign out of the provider on this machine: its tokens are revoked where it allows and deleted, and the sessions it started end.",
        positionals: 0...1
    ) { invocation throws(CLIError) in
        let result = try invocation.connect().call(FederationLogout.self, .init(provider: invocation.positionals.first))
        if invocation.global.json { Output.json(result); return .ok }
        Output.line("signed out of \(result.provider); \(result.sessionsEnded) session(s) ended" + (result.revoked ? "; tokens revoked" : ""))
        return .ok
    }

    static let tokenRemote = Command(
        path: ["token", "remote"], synopsis: "[PROVIDER]",
        abstract: """
            Print a valid access token for the provider's APIs (refreshed first when it has under 30 s left), e.g.
            curl -H "Authorization: Bearer $(authctl token remote)" … Exit 7 when a 401 logged you out.
            """,
        positionals: 0...1
    ) { invocation throws(CLIError) in
        let result = try invocation.connect().call(RemoteToken.self, .init(provider: invocation.positionals.first))
        if invocation.global.json { Output.json(result) } else { Output.line(result.accessToken) }
        return .ok
    }

    static let remoteFetch = Command(
        path: ["remote", "fetch"], synopsis: "URL [--provider NAME] [--method M] [--header 'Name: value']… [--data TEXT | --data-fd N] [--include]",
        abstract: """
            authd performs the request with your access token and prints the body (--include: status and headers
            first). The URL must be one of the provider's api origins. A 401 logs you out of the provider (exit 7);
            another status of 400 or more exits 1 after printing the body.
            """,
        options: [
            OptionSpec(name: "provider", value: "NAME", help: "the provider (default: the only or default one)"),
            OptionSpec(name: "method", value: "M", help: "GET (default), HEAD, POST, PUT, PATCH or DELETE"),
            OptionSpec(name: "header", value: "'N: V'", help: "a request header (repeatable)"),
            OptionSpec(name: "data", value: "TEXT", help: "the request body"),
            OptionSpec(name: "data-fd", value: "N", help: "read the request body from file descriptor N"),
            OptionSpec(name: "include", value: nil, help: "print the status line and headers before the body"),
        ],
        positionals: 1...1
    ) { invocation throws(CLIError) in
        var headers: [String: String] = [:]
        for header in invocation.values("header") {
            guard let colon = header.firstIndex(of: ":") else { throw .usage("--header takes 'Name: value'") }
            headers[String(header[..<colon]).trimmingCharacters(in: .whitespaces)] = String(header[header.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
        }
        var body = invocation.value("data")
        var bodyBase64: String?
        if let fdText = invocation.value("data-fd") {
            guard body == nil else { throw .usage("give --data or --data-fd, not both") }
            guard let fd = Int32(fdText), fd >= 0 else { throw .usage("--data-fd needs a file descriptor number") }
            let bytes = FileHandle(fileDescriptor: fd, closeOnDealloc: false).readDataToEndOfFile()
            // Bytes that are not UTF-8 travel as base64, unchanged.
            if let text = String(data: bytes, encoding: .utf8) { body = text } else { bodyBase64 = bytes.base64EncodedString() }
        }
        let result = try invocation.connect().call(RemoteFetch.self, .init(
            provider: invocation.value("provider"), method: invocation.value("method"), url: invocation.positionals[0],
            headers: headers.isEmpty ? nil : headers, body: body, bodyBase64: bodyBase64))
        if invocation.global.json { Output.json(result) } else {
            if invocation.flag("include") {
                Output.line("HTTP \(result.status)")
                for (name, value) in result.headers.sorted(by: { $0.key < $1.key }) { Output.line("\(name): \(value)") }
                Output.line("")
            }
            if let text = result.body {
                FileHandle.standardOutput.write(Data(text.utf8))
            } else if let encoded = result.bodyBase64, let bytes = Data(base64Encoded: encoded) {
                FileHandle.standardOutput.write(bytes)
            }
        }
        return result.status >= 400 ? .failure : .ok
    }

    static let remoteReport401 = Command(
        path: ["remote", "report-401"], synopsis: "[PROVIDER]",
        abstract: """
            Tell authd that the provider's API answered 401 to the token from `authctl token remote`: authd logs you
            out of the provider (tokens and cached data deleted, its sessions ended) until you sign in again.
            """,
        positionals: 0...1
    ) { invocation throws(CLIError) in
        let event = try invocation.connect().call(RemoteUnauthorized.self, .init(provider: invocation.positionals.first))
        if invocation.global.json { Output.json(event) } else { Output.line("logged out of \(event.provider); \(event.sessionsEnded) session(s) ended") }
        return .ok
    }

    static let events = Command(
        path: ["events"], synopsis: "",
        abstract: "Follow authd's events for this user (session.logged_out after a 401, session.ended when the hub ends a session, presence.ask when this machine entered a hotspot in ask mode; sync.notification and sync.dismiss for this user's desktop from a system authd), one line each, until interrupted."
    ) { invocation throws(CLIError) in
        let connection = try invocation.connect()
        _ = try connection.call(EventsSubscribe.self, NoParams())
        // A person at a terminal would otherwise see nothing and wonder whether it works;
        // scripts reading stderr get no line they did not ask for.
        if isatty(STDERR_FILENO) == 1 { Output.error("Waiting for events (Ctrl-C to stop)…") }
        while true {
            let (method, params) = try connection.nextNotification()
            guard method == EventNotification.name, let params,
                  let event = try? WireCodec.decode(EventNotification.Params.self, from: params) else { continue }
            if invocation.global.json { Output.json(event); continue }
            if let out = event.loggedOut {
                Output.line("\(out.at) \(event.type) provider=\(out.provider) source=\(out.source) account=\(out.account ?? "-") sessions_ended=\(out.sessionsEnded)")
            } else if let ended = event.ended {
                Output.line("\(ended.at) \(event.type) cause=\(ended.cause) account=\(ended.account) session=\(ended.session)"
                            + (ended.machineUnlinked ? " (this machine holds no session at the hub now: sign in again)" : ""))
            } else if let question = event.presence {
                Output.line("\(event.type) account=\(question.account) hotspot=\(question.hotspot.name) (\(question.hotspot.id)): "
                            + "tell whom? authctl presence answer \(question.hotspot.id) [GROUP]")
            } else if let sync = event.sync {
                Output.line("\(sync.event.at) \(event.type) account=\(sync.account) position=\(sync.event.position) from=\(sync.event.sender.machine)")
            } else {
                Output.line(event.type)
            }
        }
    }
}
