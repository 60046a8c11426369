import Foundation
import Glibc
import Protocol
import Synchronization
import Testing
@testable import authd

@Suite("Agent bus: what a call to org.authd.Desktop is, without a bus")
struct AgentBusInterfaceTests {
    @Test("a reason becomes org.authd.Error. and its parts CamelCased", arguments: [
        ("consent.denied", "org.authd.Error.Consent.Denied"),
        ("pin.wrong", "org.authd.Error.Pin.Wrong"),
        ("card.can_mismatch", "org.authd.Error.Card.CanMismatch"),
        ("prompt.no_desktop", "org.authd.Error.Prompt.NoDesktop"),
        ("user.cancelled", "org.authd.Error.User.Cancelled"),
        ("internal", "org.authd.Error.Internal"),
        ("device.limit_reached", "org.authd.Error.Device.LimitReached"),
        // What an error name cannot hold is left out; a digit cannot start a part.
        ("2fa.required", "org.authd.Error._2fa.Required"),
        ("pin..wrong_", "org.authd.Error.Pin.Wrong"),
        ("bad name!.x-y", "org.authd.Error.Badname.XY"),
        ("", "org.authd.Error.Failed"),
        ("._.", "org.authd.Error.Failed"),
        ("é.ü", "org.authd.Error.Failed"),
        (String(repeating: "a.", count: 200), "org.authd.Error.Failed"),
    ])
    func errorNames(reason: String, name: String) {
        #expect(AgentBusFailure.errorName(forReason: reason) == name)
        #expect(AgentBusFailure(reason: reason, message: "m").errorName == name)
    }

    @Test("every error name is a valid D-Bus error name")
    func errorNamesAreValid() {
        for reason in ["consent.denied", "2fa.required", "a_b_c.d-e", "x", String(repeating: "z", count: 300)] {
            let name = AgentBusFailure.errorName(forReason: reason)
            let elements = name.split(separator: ".", omittingEmptySubsequences: false)
            #expect(name.utf8.count <= 255 && elements.count >= 2)
            for element in elements {
                #expect(!element.isEmpty && !element.first!.isNumber && element.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") })
            }
        }
    }

    @Test("calls are routed by interface, member and signature", arguments: [
        (nil, "CardLogin", "ss", AgentBusInterface.Route.method(.cardLogin)),
        ("org.authd.Desktop1", "CardSign", "ssss", .method(.cardSign)),
        ("org.authd.Desktop1", "AccountToken", "ss", .method(.accountToken)),
        ("org.freedesktop.DBus.Introspectable", "Introspect", "", .introspect),
        (nil, "Introspect", "", .introspect),
        ("org.authd.Desktop1", "CardLogin", "s", .refuse(BusError.invalidArgs, "CardLogin takes (ss), not (s).")),
        ("org.authd.Desktop1", "CardSign", "ss", .refuse(BusError.invalidArgs, "CardSign takes (ssss), not (ss).")),
        ("org.authd.Desktop1", "AccountToken", "x", .refuse(BusError.invalidArgs, "AccountToken takes (ss), not (x).")),
        ("org.freedesktop.DBus.Introspectable", "Introspect", "s", .refuse(BusError.invalidArgs, "Introspect takes no arguments, not (s).")),
        ("org.authd.Desktop1", "Format", "", .refuse(BusError.unknownMethod, "org.authd.Desktop has no method Format on interface org.authd.Desktop1.")),
        ("org.example.Other", "CardLogin", "ss", .refuse(BusError.unknownMethod, "org.authd.Desktop has no method CardLogin on interface org.example.Other.")),
        ("org.freedesktop.DBus.Properties", "GetAll", "s", .refuse(BusError.unknownMethod,
                                                                   "org.authd.Desktop has no method GetAll on interface org.freedesktop.DBus.Properties.")),
    ] as [(String?, String, String, AgentBusInterface.Route)])
    func routes(interface: String?, member: String, signature: String, route: AgentBusInterface.Route) {
        #expect(AgentBusInterface.route(interface: interface, member: member, signature: signature) == route)
    }

    @Test("arguments make a request, or are refused as empty or too long", arguments: [
        (AgentBusInterface.Method.cardLogin, ["bank.example", ""], Result<AgentBusCall.Request, AgentBusInterface.InvalidArguments>.success(.cardLogin(audience: "bank.example", nonce: nil))),
        (.cardLogin, ["bank.example", "n1"], .success(.cardLogin(audience: "bank.example", nonce: "n1"))),
        (.accountToken, ["mail.example", ""], .success(.accountToken(audience: "mail.example", nonce: nil))),
        (.cardSign, ["notary.example", "Deed", "SHA-256", "abc"], .success(.cardSign(audience: "notary.example", description: "Deed", hashAlg: "SHA-256", hash: "abc"))),
        (.cardLogin, ["", "n"], .failure(.init(message: "audience is empty."))),
        (.cardSign, ["a", "d", "", "h"], .failure(.init(message: "hash_alg is empty."))),
        (.cardLogin, ["a*4097", ""], .failure(.init(message: "audience is longer than 4096 bytes."))),
        (.accountToken, ["a", "n*1025"], .failure(.init(message: "nonce is longer than 1024 bytes."))),
        (.cardSign, ["a", "d*4097", "SHA-256", "h"], .failure(.init(message: "description is longer than 4096 bytes."))),
        (.cardSign, ["a", "d", "SHA-256", "h*1025"], .failure(.init(message: "hash is longer than 1024 bytes."))),
        (.cardSign, ["a", "d", "h*32", "h"], .success(.cardSign(audience: "a", description: "d", hashAlg: String(repeating: "h", count: 32), hash: "h"))),
        (.cardSign, ["a", "d", "h*33", "h"], .failure(.init(message: "hash_alg is longer than 32 bytes."))),
        (.cardSign, ["a", "d"], .failure(.init(message: "CardSign takes 4 strings."))),
    ])
    func requests(method: AgentBusInterface.Method, values: [String], expected: Result<AgentBusCall.Request, AgentBusInterface.InvalidArguments>) {
        // "x*N" stands for N x's, so that the test's name stays short.
        let values = values.map { value in
            let parts = value.split(separator: "*")
            guard parts.count == 2, let count = Int(parts[1]) else { return value }
            return String(repeating: String(parts[0]), count: count)
        }
        #expect(AgentBusInterface.request(method, values) == expected)
    }

    @Test("an audience of exactly 4096 bytes is taken")
    func audienceAtTheLimit() {
        let audience = String(repeating: "é", count: 2048)
        #expect(AgentBusInterface.request(.cardLogin, [audience, ""]) == .success(.cardLogin(audience: audience, nonce: nil)))
        #expect(AgentBusInterface.request(.cardLogin, [audience + "a", ""]) == .failure(.init(message: "audience is longer than 4096 bytes.")))
    }

    @Test("the introspection data names every method, its arguments and the signal")
    func introspection() {
        let xml = AgentBusInterface.introspection
        for method in AgentBusInterface.Method.allCases { #expect(xml.contains("<method name=\"\(method.rawValue)\">")) }
        #expect(xml.contains("<arg name=\"hash_alg\" type=\"s\" direction=\"in\"/>"))
        #expect(xml.contains("<signal name=\"Progress\">") && xml.contains("<arg name=\"seconds_left\" type=\"i\"/>"))
        #expect(xml.hasPrefix("<!DOCTYPE node") && xml.hasSuffix("</node>\n"))
    }

    @Test("progress texts are cut at a character's edge", arguments: [
        ("short", 10, "short"), ("abcdef", 3, "abc"), ("ééé", 5, "éé"), ("👍🏽x", 8, "👍🏽"), ("👍🏽x", 7, ""),
    ])
    func progressText(text: String, limit: Int, cut: String) {
        #expect(AgentBusInterface.progressText(text, limit: limit) == cut)
    }
}

@Suite("Agent bus: org.authd.Desktop on a private session bus, called by gdbus, busctl and a GDBus app", .serialized)
final class AgentBusTests {
    let bus: PrivateSessionBus
    let handler = AgentBusRecorder()

    init() throws { bus = try PrivateSessionBus() }

    private func serve(uid: UInt32 = Syscalls.effectiveUserID()) throws -> AgentBus {
        let handler = self.handler
        let service = try AgentBus(address: bus.address, uid: uid) { await handler.handle($0) }
        service.start()
        return service
    }

    @Test("gdbus calls CardLogin: the token comes back, the handler saw gdbus's pid and uid")
    func gdbusCardLogin() async throws {
        let service = try serve()
        defer { service.stop() }
        let run = try await bus.run("/usr/bin/gdbus", ["call", "--address", bus.address, "--dest", AgentBusInterface.name, "--object-path", AgentBusInterface.path,
                                                 "--timeout", "60", "--method", "org.authd.Desktop1.CardLogin", "bank.example", "nonce-1"])
        #expect(run.status == 0, "\(run.errors)")
        #expect(run.output == "('login:bank.example:nonce-1',)\n")
        let calls = handler.calls
        #expect(calls.count == 1)
        #expect(calls.first?.request == .cardLogin(audience: "bank.example", nonce: "nonce-1"))
        #expect(calls.first?.pid == run.pid)
        #expect(calls.first?.uid == getuid())
    }

    @Test("busctl calls CardSign and AccountToken; an empty nonce is none")
    func busctlCalls() async throws {
        let service = try serve()
        defer { service.stop() }
        let sign = try await bus.busctl(["call", AgentBusInterface.name, AgentBusInterface.path, AgentBusInterface.interface, "CardSign", "ssss",
                                   "notary.example", "Deed of sale", "SHA-256", "q83vEjRWeJA"])
        #expect(sign.output == "s \"sign:notary.example:Deed of sale:SHA-256:q83vEjRWeJA\"\n", "\(sign.errors)")
        let account = try await bus.busctl(["call", AgentBusInterface.name, AgentBusInterface.path, AgentBusInterface.interface, "AccountToken", "ss",
                                      "mail.example", ""])
        #expect(account.output == "s \"account:mail.example:-\"\n", "\(account.errors)")
        #expect(handler.calls.map(\.request) == [.cardSign(audience: "notary.example", description: "Deed of sale", hashAlg: "SHA-256", hash: "q83vEjRWeJA"),
                                                 .accountToken(audience: "mail.example", nonce: nil)])
    }

    @Test("Progress reaches the caller alone, before its answer; a second app on the bus hears nothing")
    func progressIsUnicast() async throws {
        let service = try serve()
        defer { service.stop() }
        let listener = try await bus.startListener()
        let result = try await bus.app(["call", bus.address, "CardLogin", "ss", #"["progress", ""]"#])
        #expect(result.results == [.init(reply: "login:progress:-", error: nil)])
        #expect(result.signals == [[.string("card"), .string("Insert your ID card."), .integer(30)],
                                   [.string("pin1"), .string("Enter PIN1 on the desktop."), .integer(-1)]])
        #expect(handler.calls.first?.pid == result.pid)
        #expect(try await listener.finish() == [])
    }

    @Test("a failure is the D-Bus error its reason names, with its message")
    func failureMapsToErrorName() async throws {
        let service = try serve()
        defer { service.stop() }
        let result = try await bus.app(["call", bus.address, "AccountToken", "ss", #"["fail", ""]"#])
        #expect(result.results == [.init(reply: nil, error: .init(name: "org.authd.Error.Consent.Denied", message: "You did not allow this app to sign you in."))])
        let gdbus = try await bus.run("/usr/bin/gdbus", ["call", "--address", bus.address, "--dest", AgentBusInterface.name, "--object-path", AgentBusInterface.path,
                                                   "--timeout", "60", "--method", "org.authd.Desktop1.CardLogin", "fail", ""])
        #expect(gdbus.status != 0)
        #expect(gdbus.errors.contains("GDBus.Error:org.authd.Error.Consent.Denied: You did not allow this app to sign you in."))
    }

    @Test("an unknown method, a wrong signature and a huge audience get errors, and the service answers on")
    func hostileCalls() async throws {
        let service = try serve()
        defer { service.stop() }
        let unknown = try await bus.app(["call", bus.address, "Format", "s", #"["/"]"#])
        #expect(unknown.results.first?.error?.name == BusError.unknownMethod)
        let wrong = try await bus.app(["call", bus.address, "CardLogin", "x", "[5]"])
        #expect(wrong.results == [.init(reply: nil, error: .init(name: BusError.invalidArgs, message: "CardLogin takes (ss), not (x)."))])
        let huge = try await bus.app(["call", bus.address, "CardLogin", "ss", "[\"\(String(repeating: "a", count: 64 * 1024))\", \"\"]"])
        #expect(huge.results == [.init(reply: nil, error: .init(name: BusError.invalidArgs, message: "audience is longer than 4096 bytes."))])
        let busctl = try await bus.busctl(["call", AgentBusInterface.name, AgentBusInterface.path, "org.freedesktop.DBus.Properties", "GetAll", "s", "x"])
        #expect(busctl.status != 0 && busctl.errors.contains("no method GetAll"), "\(busctl.errors)")
        #expect(handler.calls.isEmpty)
        let after = try await bus.app(["call", bus.address, "CardLogin", "ss", #"["bank.example", ""]"#])
        #expect(after.results == [.init(reply: "login:bank.example:-", error: nil)])
    }

    @Test("Introspect answers XML naming the three methods and the signal; gdbus introspect reads it")
    func introspect() async throws {
        let service = try serve()
        defer { service.stop() }
        let run = try await bus.run("/usr/bin/gdbus", ["introspect", "--address", bus.address, "--dest", AgentBusInterface.name, "--object-path", AgentBusInterface.path])
        #expect(run.status == 0, "\(run.errors)")
        for line in ["interface org.authd.Desktop1 {", "CardLogin(in  s audience,", "CardSign(in  s audience,", "AccountToken(in  s audience,",
                     "out s token);", "signals:", "Progress(s kind,"] {
            #expect(run.output.contains(line), "\(line) not in \(run.output)")
        }
    }

    @Test("a caller of another uid is refused before the handler runs")
    func otherUserRefused() async throws {
        let service = try serve(uid: getuid() &+ 1)
        defer { service.stop() }
        let result = try await bus.app(["call", bus.address, "CardLogin", "ss", #"["bank.example", ""]"#])
        #expect(result.results.first?.error?.name == BusError.accessDenied)
        let introspect = try await bus.busctl(["introspect", AgentBusInterface.name, AgentBusInterface.path])
        // busctl prints the error's own text for names it knows.
        #expect(introspect.status != 0 && introspect.errors.contains("Access denied"), "\(introspect.errors)")
        #expect(handler.calls.isEmpty)
    }

    @Test("calls overlap: a slow card login does not hold up another app's call")
    func callsOverlap() async throws {
        let service = try serve()
        defer { service.stop() }
        let slow = try bus.startApp(["call", bus.address, "CardLogin", "ss", #"["slow", ""]"#])
        #expect(await handler.waitFor(count: 1))
        let fast = try await bus.app(["call", bus.address, "AccountToken", "ss", #"["fast", ""]"#])
        #expect(fast.results == [.init(reply: "account:fast:-", error: nil)])
        handler.release()
        #expect(try await slow.finish().results == [.init(reply: "login:slow:-", error: nil)])
    }

    @Test("one app may have four calls open at once; a fifth is refused with LimitsExceeded")
    func callsPerCallerAreBounded() async throws {
        let service = try serve()
        defer { service.stop() }
        let burst = try bus.startApp(["call", bus.address, "CardLogin", "ss", #"["slow", ""]"#, "5"])
        #expect(await handler.waitFor(count: 4))
        // The fifth was refused at once (the app says so as it happens), so its four siblings
        // are all that run.
        _ = await eventually { burst.started.output.contains(#""refused""#) }
        #expect(burst.started.output.contains("LimitsExceeded"), "\(burst.started.output)")
        #expect(handler.calls.count == 4)
        handler.release()
        let results = try await burst.finish().results
        #expect(results.filter { $0.reply == "login:slow:-" }.count == 4)
        #expect(results.compactMap(\.error?.name) == [BusError.limitsExceeded])
    }

    @Test("a caller that leaves the bus has its call's task cancelled; the service answers on")
    func departedCallerCancels() async throws {
        let service = try serve()
        defer { service.stop() }
        let app = try bus.startApp(["call", bus.address, "CardLogin", "ss", #"["hang", ""]"#])
        #expect(await handler.waitFor(count: 1))
        await app.kill()
        #expect(await handler.waitForCancelled())
        let after = try await bus.app(["call", bus.address, "CardLogin", "ss", #"["bank.example", ""]"#])
        #expect(after.results == [.init(reply: "login:bank.example:-", error: nil)])
    }

    @Test("a second service on the same bus says the name is taken; stopping frees it")
    func nameTaken() async throws {
        let first = try serve()
        let error = #expect(throws: AgentBusStartFailure.self) {
            _ = try AgentBus(address: self.bus.address) { _ in .success("x") }
        }
        #expect(error?.nameTaken == true)
        #expect(error?.description.contains("another program holds org.authd.Desktop") == true)
        first.stop()
        let second = try serve()
        defer { second.stop() }
        let after = try await bus.app(["call", bus.address, "CardLogin", "ss", #"["bank.example", ""]"#])
        #expect(after.results == [.init(reply: "login:bank.example:-", error: nil)])
    }

    @Test("a service never started closes cleanly; stop is idempotent")
    func stopWithoutStart() async throws {
        let service = try AgentBus(address: bus.address) { _ in .success("x") }
        service.stop()
        service.stop()
        let again = try serve()
        again.stop()
        again.stop()
    }
}

// MARK: Support

/// The handler the tests give the service: records each call, and answers by its audience —
/// `fail` with consent.denied, `progress` after two Progress signals, `slow` once released,
/// `hang` only when cancelled; anything else at once with a token made of the request.
final class AgentBusRecorder: Sendable {
    struct Seen: Sendable {
        let request: AgentBusCall.Request
        let pid: Int32
        let uid: UInt32
    }

    private let seen = Mutex<[Seen]>([])
    private let released = Atomic<Bool>(false)
    private let cancelled = Atomic<Bool>(false)

    var calls: [Seen] { seen.withLock { $0 } }

    func handle(_ call: AgentBusCall) async -> Result<String, AgentBusFailure> {
        seen.withLock { $0.append(Seen(request: call.request, pid: call.pid, uid: call.uid)) }
        let token: String
        let audience: String
        switch call.request {
        case .cardLogin(let aud, let nonce):
            audience = aud
            token = "login:\(aud):\(nonce ?? "-")"
        case .accountToken(let aud, let nonce):
            audience = aud
            token = "account:\(aud):\(nonce ?? "-")"
        case .cardSign(let aud, let description, let hashAlg, let hash):
            audience = aud
            token = "sign:\(aud):\(description):\(hashAlg):\(hash)"
        }
        switch audience {
        case "fail":
            return .failure(AgentBusFailure(reason: "consent.denied", message: "You did not allow this app to sign you in."))
        case "progress":
            call.progress("card", "Insert your ID card.", 30)
            call.progress("pin1", "Enter PIN1 on the desktop.", nil)
        case "slow":
            let deadline = ContinuousClock.now + .seconds(90)
            while !released.load(ordering: .acquiring), ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(10)) }
        case "hang":
            let deadline = ContinuousClock.now + .seconds(90)
            while !Task.isCancelled, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(10)) }
            if Task.isCancelled { cancelled.store(true, ordering: .releasing) }
            return .failure(AgentBusFailure(reason: "user.cancelled", message: "The app went away."))
        default:
            break
        }
        return .success(token)
    }

    func release() { released.store(true, ordering: .releasing) }

    /// Whether `count` calls have reached the handler within 60 s. The handler runs on the
    /// test process's cooperative pool, behind whatever the tests running beside it queued there.
    func waitFor(count: Int) async -> Bool {
        await eventually(seconds: 60) { self.calls.count >= count }
    }

    func waitForCancelled() async -> Bool {
        await eventually(seconds: 60) { self.cancelled.load(ordering: .acquiring) }
    }
}

/// A private session bus for one test: `dbus-daemon --session` listening in a temporary
/// directory. It runs under a shell that waits for a line on a pipe from this process, so it
/// stops on release, and when the test process dies without releasing it (as SensorBus's).
final class PrivateSessionBus {
    static let client = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("IntegrationTests/Python/agent_bus_client.py").path

    let directory = TemporaryDirectory()
    /// `unix:path=…,guid=…`.
    let address: String
    private let daemon = Process()
    private let daemonInput = Pipe()

    init() throws {
        Syscalls.ignoreBrokenPipes()  // `stop` writes to the shell, which may have gone
        let output = Pipe()
        daemon.executableURL = URL(fileURLWithPath: "/bin/sh")
        daemon.arguments = ["-c", "/usr/bin/dbus-daemon --session --address=\"$1\" --nofork --print-address=1 2>\"$2\" & read -r _; kill -KILL $!",
                            "agent-bus", "unix:path=\(directory.path)/bus", directory.path + "/bus.log"]
        daemon.environment = ["PATH": "/usr/bin:/bin"]
        daemon.standardInput = daemonInput
        daemon.standardOutput = output
        try daemon.run()
        address = printedBusAddress(output)
        guard address.hasPrefix("unix:") else {
            stop()
            throw SensorBusError("dbus-daemon printed no address: \(address)")
        }
    }

    deinit { stop() }

    private func stop() {
        try? daemonInput.fileHandleForWriting.write(contentsOf: Data("stop\n".utf8))
        try? daemonInput.fileHandleForWriting.close()
        if daemon.isRunning { daemon.waitUntilExit() }
    }

    /// Long enough for gdbus', busctl's or the app's own 60 s for a call, so that a call that is
    /// not answered fails with their error.
    static let patience: Double = 90
    static let python = ["PYTHONUNBUFFERED": "1"]

    func run(_ path: String, _ arguments: [String]) async throws -> ChildProcess.Run {
        try await ChildProcess(path, arguments, directory: directory.path).finish(within: Self.patience)
    }

    func busctl(_ arguments: [String]) async throws -> ChildProcess.Run {
        try await run("/usr/bin/busctl", ["--address=\(address)", "--timeout=60", arguments[0], "--"] + arguments.dropFirst())
    }

    /// What agent_bus_client.py's `call` prints.
    struct AppResult: Decodable {
        struct Outcome: Decodable, Equatable {
            struct Failure: Decodable, Equatable {
                let name: String
                let message: String
            }

            let reply: String?
            let error: Failure?
        }

        let pid: Int32
        let results: [Outcome]
        let signals: [[JSONValue]]
    }

    /// An app started on the bus; `finish` waits for its result.
    final class App {
        let started: ChildProcess
        fileprivate init(_ started: ChildProcess) { self.started = started }

        func finish() async throws -> AppResult {
            let run = await started.finish(within: PrivateSessionBus.patience)
            guard let last = run.output.split(separator: "\n").last, let result = try? JSONDecoder().decode(AppResult.self, from: Data(last.utf8)) else {
                throw SensorBusError("agent_bus_client.py: status \(run.status), output \(run.output.debugDescription), errors \(run.errors)")
            }
            return result
        }

        func kill() async { await started.kill() }
    }

    func startApp(_ arguments: [String]) throws -> App {
        App(try ChildProcess("/usr/bin/python3", [Self.client] + arguments, environment: Self.python, directory: directory.path))
    }

    func app(_ arguments: [String]) async throws -> AppResult {
        try await startApp(arguments).finish()
    }

    /// Another app on the bus that listens for Progress signals from anyone.
    final class Listener {
        let started: ChildProcess
        fileprivate init(_ started: ChildProcess) { self.started = started }

        /// The signals it heard.
        func finish() async throws -> [[JSONValue]] {
            started.say("stop")
            let run = await started.finish(within: PrivateSessionBus.patience)
            struct Heard: Decodable { let signals: [[JSONValue]] }
            guard let last = run.output.split(separator: "\n").last, let heard = try? JSONDecoder().decode(Heard.self, from: Data(last.utf8)) else {
                throw SensorBusError("listener: output \(run.output.debugDescription), errors \(run.errors)")
            }
            return heard.signals
        }
    }

    /// Starts a listener and waits (30 s at most) until its match is in place.
    func startListener() async throws -> Listener {
        let started = try ChildProcess("/usr/bin/python3", [Self.client, "listen", address], environment: Self.python, directory: directory.path)
        _ = await eventually(seconds: 30) { started.output.contains("\"ready\"") || !started.process.isRunning }
        guard started.output.contains("\"ready\"") else { throw SensorBusError("the listener did not start: \(await started.finish(within: 0).errors)") }
        return Listener(started)
    }
}
