import Dispatch
import Glibc
import Protocol
import Synchronization

// The desktop agent's service on the session bus (`org.authd.Desktop`): how a desktop or
// Flatpak app (`--talk-name=org.authd.Desktop`) asks authd for a token. The bus says who calls
// (GetConnectionCredentials), never the app; the agent hands each call to authd with that
// identity, and authd asks for consent and PINs itself (DESIGN.md §12).

/// One method call from an app on the session bus, as the agent passes it to authd.
struct AgentBusCall: Sendable {
    enum Request: Sendable, Equatable {
        case cardLogin(audience: String, nonce: String?)
        case cardSign(audience: String, description: String, hashAlg: String, hash: String)
        case accountToken(audience: String, nonce: String?)
    }

    let request: Request
    /// The calling process, as the bus daemon vouches for it.
    let pid: Int32
    let uid: UInt32
    /// Sends a Progress signal to the caller (any thread). Dropped once the call is answered.
    let progress: @Sendable (_ kind: String, _ message: String, _ secondsLeft: Int?) -> Void
}

/// Why authd refused or could not finish a call: its stable reason (`consent.denied`,
/// `pin.wrong`, …) and one human sentence. The caller sees the D-Bus error ``errorName`` with
/// `message` as its text.
struct AgentBusFailure: Error, Sendable, Equatable {
    let reason: String
    let message: String

    /// The prefix of every error authd names on the bus.
    static let errorPrefix = "org.authd.Error."

    /// `org.authd.Error.` and the reason, each dot-separated part CamelCased at its `_` (and
    /// `-`): `consent.denied` → `org.authd.Error.Consent.Denied`, `card.can_mismatch` →
    /// `org.authd.Error.Card.CanMismatch`, `prompt.no_desktop` → `org.authd.Error.Prompt.NoDesktop`.
    /// Reasons are lowercase ASCII, so the mapping is one-to-one on them. What a D-Bus error
    /// name cannot hold is left out (other characters, empty parts); a part that would start
    /// with a digit gets a leading `_`. A reason with nothing left, or a name over D-Bus's 255
    /// bytes, is `org.authd.Error.Failed`.
    static func errorName(forReason reason: String) -> String {
        var elements: [String] = []
        for part in reason.split(separator: ".") {
            var element = ""
            for word in part.split(whereSeparator: { $0 == "_" || $0 == "-" }) {
                let kept = word.unicodeScalars.filter { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0)) }
                guard let first = kept.first else { continue }
                element += String(first).uppercased() + String(String.UnicodeScalarView(kept.dropFirst()))
            }
            guard let first = element.unicodeScalars.first else { continue }
            elements.append(("0"..."9").contains(first) ? "_" + element : element)
        }
        let name = errorPrefix + elements.joined(separator: ".")
        return elements.isEmpty || name.utf8.count > 255 ? errorPrefix + "Failed" : name
    }

    var errorName: String { Self.errorName(forReason: reason) }
}

/// Why the service could not start; `nameTaken` when another connection holds the name.
struct AgentBusStartFailure: Error, Sendable, CustomStringConvertible {
    let description: String
    let nameTaken: Bool
}

/// The methods of `org.authd.Desktop1`, what each takes, and how a call is checked: pure, so
/// that every refusal is table-tested without a bus.
enum AgentBusInterface {
    static let name = "org.authd.Desktop"
    static let path = "/org/authd/Desktop"
    static let interface = "org.authd.Desktop1"
    static let introspectable = "org.freedesktop.DBus.Introspectable"
    static let progressSignal = "Progress"

    enum Method: String, CaseIterable, Sendable {
        case cardLogin = "CardLogin"
        case cardSign = "CardSign"
        case accountToken = "AccountToken"

        /// The names of its string arguments, in order; it returns one string, `token`.
        var arguments: [String] {
            switch self {
            case .cardLogin, .accountToken: ["audience", "nonce"]
            case .cardSign: ["audience", "description", "hash_alg", "hash"]
            }
        }

        var signature: String { String(repeating: "s", count: arguments.count) }
    }

    /// The most bytes each argument may have: an audience or description is a name or a
    /// sentence, a hash is at most SHA-512's 86 base64url characters. Longer is refused, never
    /// cut, so nothing is signed that the caller did not send.
    static let limits: [String: Int] = ["audience": 4096, "nonce": 1024, "description": 4096, "hash_alg": 32, "hash": 1024]

    /// What a call that passed the gate is.
    enum Route: Equatable {
        case introspect
        case method(Method)
        /// A D-Bus error name and its message.
        case refuse(String, String)
    }

    /// Which method `member` of `interface` (a call may name none) is, and whether `signature`
    /// is what it takes.
    static func route(interface: String?, member: String?, signature: String) -> Route {
        let member = member ?? ""
        let shownSignature = Redaction.printable(signature, limit: 64)
        if member == "Introspect", interface == nil || interface == introspectable {
            return signature.isEmpty ? .introspect : .refuse(BusError.invalidArgs, "Introspect takes no arguments, not (\(shownSignature)).")
        }
        guard interface == nil || interface == Self.interface, let method = Method(rawValue: member) else {
            return .refuse(BusError.unknownMethod, "\(name) has no method \(Redaction.printable(member, limit: 64)) on interface \(Redaction.printable(interface ?? "(none)", limit: 128)).")
        }
        guard signature == method.signature else {
            return .refuse(BusError.invalidArgs, "\(method.rawValue) takes (\(method.signature)), not (\(shownSignature)).")
        }
        return .method(method)
    }

    /// Why a call's arguments were refused: the text of its InvalidArgs error.
    struct InvalidArguments: Error, Equatable {
        let message: String
    }

    /// The request a method's string arguments make, or why not: the first argument that is
    /// empty where it may not be, or too long. An empty nonce is no nonce.
    static func request(_ method: Method, _ values: [String]) -> Result<AgentBusCall.Request, InvalidArguments> {
        guard values.count == method.arguments.count else {
            return .failure(InvalidArguments(message: "\(method.rawValue) takes \(method.arguments.count) strings."))
        }
        for (name, value) in zip(method.arguments, values) {
            if let limit = limits[name], value.utf8.count > limit {
                return .failure(InvalidArguments(message: "\(name) is longer than \(limit) bytes."))
            }
            if name != "nonce", value.isEmpty { return .failure(InvalidArguments(message: "\(name) is empty.")) }
        }
        switch method {
        case .cardLogin: return .success(.cardLogin(audience: values[0], nonce: values[1].isEmpty ? nil : values[1]))
        case .accountToken: return .success(.accountToken(audience: values[0], nonce: values[1].isEmpty ? nil : values[1]))
        case .cardSign: return .success(.cardSign(audience: values[0], description: values[1], hashAlg: values[2], hash: values[3]))
        }
    }

    /// The object's introspection data, made from the method table.
    static let introspection: String = {
        var xml = """
        <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
        <node>
         <interface name="\(interface)">

        """
        for method in Method.allCases {
            xml += "  <method name=\"\(method.rawValue)\">\n"
            for argument in method.arguments { xml += "   <arg name=\"\(argument)\" type=\"s\" direction=\"in\"/>\n" }
            xml += "   <arg name=\"token\" type=\"s\" direction=\"out\"/>\n  </method>\n"
        }
        xml += """
          <signal name="\(progressSignal)">
           <arg name="kind" type="s"/>
           <arg name="message" type="s"/>
           <arg name="seconds_left" type="i"/>
          </signal>
         </interface>
         <interface name="\(introspectable)">
          <method name="Introspect">
           <arg name="xml_data" type="s" direction="out"/>
          </method>
         </interface>
         <interface name="org.freedesktop.DBus.Peer">
          <method name="Ping"/>
          <method name="GetMachineId">
           <arg name="machine_uuid" type="s" direction="out"/>
          </method>
         </interface>
        </node>

        """
        return xml
    }()

    /// A Progress signal's texts, cut to what a notification shows: the kind to 64 bytes, the
    /// message to 1 KiB (at a character's edge).
    static func progressText(_ text: String, limit: Int) -> String {
        guard text.utf8.count > limit else { return text }
        var cut = ""
        var bytes = 0
        for character in text {
            bytes += character.utf8.count
            guard bytes <= limit else { break }
            cut.append(character)
        }
        return cut
    }
}

/// `org.authd.Desktop` on the session bus: takes the name, exports `/org/authd/Desktop`, and
/// hands each call whose caller the bus vouches is this user to `handle`, on a task of its own.
///
/// sd-bus does no locking, so one thread owns the connection: the loop's, from `start()` on
/// (before it, the thread that made the service). The handler's tasks reach it only through an
/// outbox and a wake-up pipe: the answer, and Progress signals sent unicast to the caller alone.
///
/// Every call passes one gate before anything else is done with it: within the limits of calls
/// at once (32, 4 per caller), then the bus daemon's GetConnectionCredentials for the sender:
/// a ProcessID, and a UnixUserID that is this agent's. Only then is the method looked at. A
/// caller that leaves the bus has its handler's task cancelled; its answer goes nowhere.
final class AgentBus: Sendable {
    private let outbox: AgentBusOutbox
    private let service: AgentBusService
    private let phase = Mutex(Phase.ready)
    private let ended = DispatchSemaphore(value: 0)

    private enum Phase { case ready, running, stopped }

    /// Connects to the session bus (or `address` for tests), exports the object and takes the
    /// name; throws ``AgentBusStartFailure`` (`nameTaken` when another connection holds it).
    /// `handle` runs for each call on its own task, cancelled if the caller leaves the bus; its
    /// result becomes the reply. Calls may overlap (a card login takes up to 90 s; another app
    /// may call meanwhile). `uid` is whose calls are served (the agent's own user); `logger`
    /// hears of refused callers and of the bus going away.
    init(address: String?, uid: UInt32 = Syscalls.effectiveUserID(), logger: Logger? = nil,
         handle: @escaping @Sendable (AgentBusCall) async -> Result<String, AgentBusFailure>) throws {
        let bus: Bus
        do throws(BusError) {
            if let address { bus = try Bus.open(address: address) } else { bus = try Bus.openSession() }
        } catch {
            throw AgentBusStartFailure(description: "cannot connect to the session bus\(address.map { " at \($0)" } ?? ""): \(error)", nameTaken: false)
        }
        outbox = try AgentBusOutbox()
        service = try AgentBusService(bus: bus, uid: uid, logger: logger, outbox: outbox, handle: handle)
    }

    /// Runs the bus loop on its own thread until `stop()`.
    func start() {
        let begin = phase.withLock { phase -> Bool in
            guard phase == .ready else { return false }
            phase = .running
            return true
        }
        guard begin else { return }
        let service = self.service, ended = self.ended
        // A thread of its own while it runs: a serial queue not targeted at a shared one gets
        // one from libdispatch and keeps it while it blocks.
        DispatchQueue(label: "authd.agent-bus", qos: .userInitiated).async {
            service.run()
            ended.signal()
        }
    }

    /// Leaves the bus: the name and the object go, running handlers' tasks are cancelled and
    /// their answers dropped. Returns once the connection is closed.
    func stop() {
        let was = phase.withLock { phase -> Phase in
            defer { phase = .stopped }
            return phase
        }
        switch was {
        case .ready: service.close()
        case .running:
            outbox.post(.stop)
            ended.wait()
        case .stopped: break
        }
    }

    deinit { stop() }
}

/// What the handlers' tasks hand the loop, and the pipe that wakes it.
private final class AgentBusOutbox: Sendable {
    enum Item: Sendable {
        case answer(UInt64, Result<String, AgentBusFailure>)
        case progress(UInt64, kind: String, message: String, secondsLeft: Int32)
        case stop
    }

    /// Progress beyond this many waiting is dropped: a handler cannot grow the queue without
    /// bound. Answers are bounded by the calls at once.
    static let progressLimit = 1024

    private let items = Mutex<[Item]>([])
    /// Set with each item, cleared when they are taken: the loop's `wait` stops for it.
    let pending = Atomic<Bool>(false)
    let wake: (read: Int32, write: Int32)

    init() throws(SystemError) { wake = try Syscalls.makeWakePipe() }

    // Closed only when nothing can post any more: a task's progress closure may outlive the loop.
    deinit {
        Syscalls.close(wake.read)
        Syscalls.close(wake.write)
    }

    func post(_ item: Item) {
        let accepted = items.withLock { items -> Bool in
            if case .progress = item, items.count >= Self.progressLimit { return false }
            items.append(item)
            return true
        }
        guard accepted else { return }
        pending.store(true, ordering: .releasing)
        Syscalls.writeOneByte(wake.write)
    }

    func take() -> [Item] {
        Syscalls.drain(wake.read)
        pending.store(false, ordering: .releasing)
        return items.withLock { items in
            defer { items = [] }
            return items
        }
    }
}

/// The connection and the calls in flight.
///
/// `@unchecked Sendable`: its mutable state is touched by one thread at a time — the thread that
/// made it until `AgentBus.start()` hands it to the loop's thread, which alone touches it from
/// then on (or `AgentBus.stop()` closes it on the caller's thread when it never ran). The
/// phase lock in `AgentBus` orders those hand-overs. Other threads reach it only through the
/// outbox.
private final class AgentBusService: @unchecked Sendable {
    private struct InFlight {
        let call: BusMessage
        let sender: String
        /// Nil while the bus is asked who the caller is.
        var task: Task<Void, Never>?
    }

    static let maximumCalls = 32
    static let maximumCallsPerCaller = 4
    static let credentialsTimeout: Duration = .seconds(5)

    private var bus: Bus?
    private var object: BusSlot?
    private var departures: BusSlot?
    private var calls: [UInt64: InFlight] = [:]
    private var nextID: UInt64 = 0
    private let uid: UInt32
    private let logger: Logger?
    private let outbox: AgentBusOutbox
    private let handle: @Sendable (AgentBusCall) async -> Result<String, AgentBusFailure>

    init(bus: Bus, uid: UInt32, logger: Logger?, outbox: AgentBusOutbox,
         handle: @escaping @Sendable (AgentBusCall) async -> Result<String, AgentBusFailure>) throws {
        self.bus = bus
        self.uid = uid
        self.logger = logger
        self.outbox = outbox
        self.handle = handle
        do throws(BusError) {
            // The object before the name: whoever sees the name appear finds the object there.
            object = try bus.exportObject(AgentBusInterface.path) { [weak self] message in
                self?.received(message)
                return true
            }
            departures = try bus.match(sender: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                                       member: "NameOwnerChanged") { [weak self] message in
                // (s name, s old owner, s new owner): a connection left when a unique name has no new owner.
                guard let name = try? message.string(), name.hasPrefix(":"), (try? message.string()) != nil,
                      (try? message.string()) == "" else { return }
                self?.departed(name)
            }
            try bus.requestName(AgentBusInterface.name)
        } catch {
            close()
            if error.errno == EEXIST {
                throw AgentBusStartFailure(description: "another program holds \(AgentBusInterface.name) on this session bus (is another authd --desktop running?)",
                                           nameTaken: true)
            }
            throw AgentBusStartFailure(description: "cannot serve \(AgentBusInterface.name) on the session bus: \(error.message): \(error)", nameTaken: false)
        }
    }

    /// The loop, on its own thread: the bus's messages, then whatever the tasks posted.
    func run() {
        while let bus {
            for item in outbox.take() {
                if case .stop = item {
                    close()
                    return
                }
                perform(item, on: bus)
            }
            let outbox = self.outbox
            let end = bus.wait(until: { outbox.pending.load(ordering: .acquiring) },
                               deadline: Syscalls.monotonicMicroseconds() + 60_000_000, cancelFD: outbox.wake.read)
            if end == .disconnected {
                logger?.warning("desktop: the session bus went away; \(AgentBusInterface.name) is no longer served")
                close()
                return
            }
        }
    }

    /// Cancels what runs and closes the connection (the name goes with it).
    func close() {
        for call in calls.values { call.task?.cancel() }
        // The messages hold the connection: they go first.
        calls = [:]
        departures = nil
        object = nil
        bus = nil
    }

    private func perform(_ item: AgentBusOutbox.Item, on bus: Bus) {
        switch item {
        case .answer(let id, let result):
            guard let answered = calls.removeValue(forKey: id) else { return }
            switch result {
            case .success(let token): try? bus.reply(to: answered.call, [.string(token)])
            case .failure(let failure): refuse(answered.call, failure.errorName, failure.message)
            }
        case .progress(let id, let kind, let message, let secondsLeft):
            // Only while the call is open, and only to its caller.
            guard let open = calls[id] else { return }
            try? bus.emitSignal(AgentBusInterface.path, AgentBusInterface.interface, AgentBusInterface.progressSignal, destination: open.sender,
                                arguments: [.string(kind), .string(message), .int32(secondsLeft)])
        case .stop:
            break
        }
    }

    // MARK: The gate

    private func received(_ message: BusMessage) {
        guard let bus else { return }
        // Only a direct (peer-to-peer) connection has no sender; the agent is never served so.
        guard let sender = message.sender else { return refuse(message, BusError.accessDenied, "The caller is unknown.") }
        guard calls.count < Self.maximumCalls, calls.values.count(where: { $0.sender == sender }) < Self.maximumCallsPerCaller else {
            return refuse(message, BusError.limitsExceeded, "Too many calls to \(AgentBusInterface.name) at once; try again when one has ended.")
        }
        let id = nextID
        nextID += 1
        calls[id] = InFlight(call: message, sender: sender)
        do throws(BusError) {
            try bus.callLater("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetConnectionCredentials",
                              arguments: [.string(sender)], timeout: Self.credentialsTimeout) { [weak self] reply in
                self?.identified(id, reply)
            }
        } catch {
            calls[id] = nil
            refuse(message, BusError.failed, "The bus could not be asked who is calling.")
        }
    }

    private func identified(_ id: UInt64, _ reply: Result<BusMessage, BusError>) {
        guard let bus, let inFlight = calls[id] else { return }
        let message = inFlight.call
        let credentials = try? reply.get()
        var pid: UInt32?, callerUID: UInt32?
        if let credentials, let read = try? Self.processAndUser(in: credentials) { (pid, callerUID) = read }
        guard let pid, pid > 0, pid <= UInt32(Int32.max), let callerUID, callerUID == uid else {
            calls[id] = nil
            if credentials != nil {
                logger?.notice("desktop: refused a call to \(AgentBusInterface.name) from uid \(callerUID.map(String.init) ?? "unknown"), pid \(pid.map(String.init) ?? "unknown")")
            }
            return refuse(message, BusError.accessDenied, "Only processes of this user may ask \(AgentBusInterface.name).")
        }
        let method: AgentBusInterface.Method
        switch AgentBusInterface.route(interface: message.interface, member: message.member, signature: message.signature) {
        case .introspect:
            calls[id] = nil
            try? bus.reply(to: message, [.string(AgentBusInterface.introspection)])
            return
        case .refuse(let name, let text):
            calls[id] = nil
            return refuse(message, name, text)
        case .method(let routed):
            method = routed
        }
        var values: [String] = []
        for _ in method.arguments {
            guard let value = try? message.string() else { break }
            values.append(value)
        }
        let request: AgentBusCall.Request
        switch AgentBusInterface.request(method, values) {
        case .success(let made): request = made
        case .failure(let invalid):
            calls[id] = nil
            return refuse(message, BusError.invalidArgs, invalid.message)
        }
        let outbox = self.outbox, handle = self.handle
        let call = AgentBusCall(request: request, pid: Int32(pid), uid: callerUID) { kind, text, secondsLeft in
            outbox.post(.progress(id, kind: AgentBusInterface.progressText(kind, limit: 64), message: AgentBusInterface.progressText(text, limit: 1024),
                                  secondsLeft: Int32(clamping: secondsLeft ?? -1)))
        }
        calls[id]?.task = Task {
            let result = await handle(call)
            outbox.post(.answer(id, result))
        }
    }

    /// ProcessID and UnixUserID from GetConnectionCredentials' `a{sv}`.
    private static func processAndUser(in reply: BusMessage) throws(BusError) -> (UInt32?, UInt32?) {
        var pid: UInt32?
        var uid: UInt32?
        guard try reply.enterContainer("a", "{sv}") else { return (nil, nil) }
        while try reply.enterContainer("e", "sv") {
            let key = try reply.string()
            if key == "ProcessID" || key == "UnixUserID" {
                try reply.enterVariant("u")
                let value = try reply.uint32()
                try reply.exitContainer()
                if key == "ProcessID" { pid = value } else { uid = value }
            } else {
                try reply.skip("v")
            }
            try reply.exitContainer()
        }
        try reply.exitContainer()
        return (pid, uid)
    }

    /// A caller left the bus: what it started is cancelled (the answer will go nowhere).
    private func departed(_ name: String) {
        for (id, call) in calls where call.sender == name {
            if let task = call.task { task.cancel() } else { calls[id] = nil }
        }
    }

    private func refuse(_ message: BusMessage, _ name: String, _ text: String) {
        guard let bus else { return }
        try? bus.replyError(to: message, name: name, message: text)
    }
}
