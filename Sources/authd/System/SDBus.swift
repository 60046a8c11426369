import CSystemd
import Glibc

// The only file that calls libsystemd's sd-bus (the rest of libsystemd is Systemd.swift's).

/// A D-Bus error as the peer or the bus named it. Match on `name`: sd-bus maps most peer
/// errors to the same errno (EIO).
struct BusError: Error, Sendable, CustomStringConvertible {
    let name: String
    let message: String
    let errno: Int32

    var description: String { name.isEmpty ? "sd-bus: \(Syscalls.errorDescription(errno))" : "\(name): \(message)" }

    static let serviceUnknown = "org.freedesktop.DBus.Error.ServiceUnknown"
    static let unknownMethod = "org.freedesktop.DBus.Error.UnknownMethod"
    static let unknownObject = "org.freedesktop.DBus.Error.UnknownObject"
    static let noReply = "org.freedesktop.DBus.Error.NoReply"
    static let accessDenied = "org.freedesktop.DBus.Error.AccessDenied"
    static let invalidArgs = "org.freedesktop.DBus.Error.InvalidArgs"
    static let limitsExceeded = "org.freedesktop.DBus.Error.LimitsExceeded"
    static let failed = "org.freedesktop.DBus.Error.Failed"
}

/// The libsystemd sd-bus wrapper: one private connection to the system bus (honouring
/// `DBUS_SYSTEM_BUS_ADDRESS`), to the user's session bus (`DBUS_SESSION_BUS_ADDRESS`) or to a
/// bus at a given address, method calls with basic arguments, properties read and set, signal
/// matches, and a bounded wait that another thread can cut short; as a service, a well-known
/// name, an object whose method calls are answered now or later, calls whose replies come back
/// through the wait, and unicast signals. sd-bus does no locking: a `Bus` is used by one thread at a time (inside the
/// `FingerprintDevice` actor, the desktop notifier's queue, or the presence monitor's), and
/// closed there.
/// Every call blocks, the wait for as long as its deadline allows: only for actors of the
/// `BlockingExecutor` shape.
final class Bus {
    private let bus: OpaquePointer

    private init(_ bus: OpaquePointer) { self.bus = bus }

    static func openSystem() throws(BusError) -> Bus {
        var bus: OpaquePointer?
        let status = sd_bus_open_system(&bus)
        guard status >= 0, let bus else { throw BusError(name: "", message: "cannot connect to the system bus", errno: -status) }
        return Bus(bus)
    }

    /// The session bus of the user authd runs as.
    static func openSession() throws(BusError) -> Bus {
        var bus: OpaquePointer?
        let status = sd_bus_open_user(&bus)
        guard status >= 0, let bus else { throw BusError(name: "", message: "cannot connect to the session bus", errno: -status) }
        return Bus(bus)
    }

    /// A bus at `address` (`unix:path=…`), as a client that says Hello like on the system bus:
    /// for a daemon told which bus to use rather than reading the environment (tests that run
    /// side by side in one process, each with a private bus).
    static func open(address: String) throws(BusError) -> Bus {
        var bus: OpaquePointer?
        var status = sd_bus_new(&bus)
        guard status >= 0, let bus else { throw BusError(name: "", message: "cannot create a bus connection", errno: -status) }
        status = sd_bus_set_address(bus, address)
        if status >= 0 { status = sd_bus_set_bus_client(bus, 1) }
        if status >= 0 { status = sd_bus_start(bus) }
        guard status >= 0 else {
            sd_bus_flush_close_unref(bus)
            throw BusError(name: "", message: "cannot connect to the bus", errno: -status)
        }
        return Bus(bus)
    }

    /// An argument of a method call.
    indirect enum Argument {
        case string(String)
        case objectPath(String)
        case uint32(UInt32)
        case int32(Int32)
        case stringArray([String])
        /// `a{sv}` with string values (hints, options).
        case stringVariants([(String, String)])
        /// `v` holding a string, object path or integer (a property's new value).
        case variant(Argument)

        /// The signature of a string, object path or integer, which is all a `variant` holds.
        fileprivate var basicSignature: String? {
            switch self {
            case .string: "s"
            case .objectPath: "o"
            case .uint32: "u"
            case .int32: "i"
            case .stringArray, .stringVariants, .variant: nil
            }
        }
    }

    static let propertiesInterface = "org.freedesktop.DBus.Properties"

    /// Reads property `name` of `interface` (org.freedesktop.DBus.Properties.Get): the reply,
    /// entered into its variant, which must hold `contents` (e.g. "d", "o", "ao"); the next read
    /// is the value.
    func property(_ destination: String, _ path: String, _ interface: String, _ name: String, contents: String,
                  timeout: Duration) throws(BusError) -> BusMessage {
        let reply = try call(destination, path, Self.propertiesInterface, "Get", [interface, name], timeout: timeout)
        try reply.enterVariant(contents)
        return reply
    }

    /// Sets property `name` of `interface` to `value`, a string, object path or integer
    /// (org.freedesktop.DBus.Properties.Set).
    func setProperty(_ destination: String, _ path: String, _ interface: String, _ name: String, _ value: Argument,
                     timeout: Duration) throws(BusError) {
        _ = try call(destination, path, Self.propertiesInterface, "Set", arguments: [.string(interface), .string(name), .variant(value)],
                     timeout: timeout)
    }

    deinit { sd_bus_flush_close_unref(bus) }

    /// Calls `member` with string arguments and returns the reply. `timeout` bounds the wait.
    func call(_ destination: String, _ path: String, _ interface: String, _ member: String, _ arguments: [String] = [],
              timeout: Duration) throws(BusError) -> BusMessage {
        try call(destination, path, interface, member, arguments: arguments.map(Argument.string), timeout: timeout)
    }

    /// A method call message with `arguments`, which the caller unreferences.
    private func methodCall(_ destination: String, _ path: String, _ interface: String, _ member: String,
                            _ arguments: [Argument]) throws(BusError) -> OpaquePointer {
        var message: OpaquePointer?
        var status = sd_bus_message_new_method_call(bus, &message, destination, path, interface, member)
        guard status >= 0, let message else { throw BusError(name: "", message: "cannot build a call", errno: -status) }
        for argument in arguments {
            status = Self.append(argument, to: message)
            guard status >= 0 else {
                sd_bus_message_unref(message)
                throw BusError(name: "", message: "cannot append an argument", errno: -status)
            }
        }
        return message
    }

    /// Calls `member` with `arguments` and returns the reply. `timeout` bounds the wait.
    func call(_ destination: String, _ path: String, _ interface: String, _ member: String, arguments: [Argument],
              timeout: Duration) throws(BusError) -> BusMessage {
        let message = try methodCall(destination, path, interface, member, arguments)
        defer { sd_bus_message_unref(message) }
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        var reply: OpaquePointer?
        let status = sd_bus_call(bus, message, Self.microseconds(timeout), &error, &reply)
        guard status >= 0, let reply else {
            throw BusError(name: error.name.map { String(cString: $0) } ?? "", message: error.message.map { String(cString: $0) } ?? "",
                           errno: -status)
        }
        return BusMessage(adopting: reply)
    }

    /// Delivers matching signals to `handler` while `wait` dispatches. Keep the match alive as
    /// long as the signals are wanted.
    func match(sender: String?, path: String?, interface: String, member: String,
               _ handler: @escaping (BusMessage) -> Void) throws(BusError) -> BusSlot {
        let box = Unmanaged.passRetained(HandlerBox(handler))
        var slot: OpaquePointer?
        let status = sd_bus_match_signal(bus, &slot, sender, path, interface, member, busSignalTrampoline, box.toOpaque())
        guard status >= 0, let slot else {
            box.release()
            throw BusError(name: "", message: "cannot add a signal match", errno: -status)
        }
        return BusSlot(slot: slot) { box.release() }
    }

    enum WaitEnd: Equatable { case condition, deadline, cancelled, disconnected }

    /// Dispatches incoming messages until `done()` holds, `deadline` (CLOCK_MONOTONIC µs,
    /// `Syscalls.monotonicMicroseconds`) passes, `cancelFD` becomes readable, or the connection breaks.
    func wait(until done: () -> Bool, deadline: UInt64, cancelFD: Int32) -> WaitEnd {
        while true {
            if done() { return .condition }
            let processed = sd_bus_process(bus, nil)
            if processed < 0 { return .disconnected }
            if processed > 0 { continue }
            if done() { return .condition }
            let now = Syscalls.monotonicMicroseconds()
            if now >= deadline { return .deadline }
            var busTimeout: UInt64 = .max
            _ = sd_bus_get_timeout(bus, &busTimeout)
            let until = min(deadline, busTimeout)
            let milliseconds = until <= now ? 0 : Int32(min((until - now + 999) / 1000, UInt64(Int32.max)))
            let events = sd_bus_get_events(bus)
            if events < 0 { return .disconnected }
            var fds = [pollfd(fd: sd_bus_get_fd(bus), events: Int16(truncatingIfNeeded: events), revents: 0),
                       pollfd(fd: cancelFD, events: Int16(POLLIN), revents: 0)]
            guard (try? Syscalls.poll(&fds, timeoutMilliseconds: milliseconds)) != nil else { return .disconnected }
            if fds[1].revents != 0 { return .cancelled }
        }
    }

    private static func append(_ argument: Argument, to message: OpaquePointer) -> Int32 {
        func basic(_ type: UInt8, _ value: UnsafeRawPointer) -> Int32 { sd_bus_message_append_basic(message, CChar(type), value) }
        func string(_ text: String) -> Int32 { text.withCString { basic(UInt8(ascii: "s"), $0) } }
        switch argument {
        case .string(let text):
            return string(text)
        case .objectPath(let path):
            return path.withCString { basic(UInt8(ascii: "o"), $0) }
        case .uint32(var value):
            return basic(UInt8(ascii: "u"), &value)
        case .int32(var value):
            return basic(UInt8(ascii: "i"), &value)
        case .stringArray(let texts):
            var status = sd_bus_message_open_container(message, CChar(UInt8(ascii: "a")), "s")
            for text in texts where status >= 0 { status = string(text) }
            return status < 0 ? status : sd_bus_message_close_container(message)
        case .stringVariants(let pairs):
            var status = sd_bus_message_open_container(message, CChar(UInt8(ascii: "a")), "{sv}")
            for (key, value) in pairs where status >= 0 {
                status = sd_bus_message_open_container(message, CChar(UInt8(ascii: "e")), "sv")
                if status >= 0 { status = string(key) }
                if status >= 0 { status = sd_bus_message_open_container(message, CChar(UInt8(ascii: "v")), "s") }
                if status >= 0 { status = string(value) }
                if status >= 0 { status = sd_bus_message_close_container(message) }
                if status >= 0 { status = sd_bus_message_close_container(message) }
            }
            return status < 0 ? status : sd_bus_message_close_container(message)
        case .variant(let value):
            guard let signature = value.basicSignature else { return -EINVAL }
            var status = sd_bus_message_open_container(message, CChar(UInt8(ascii: "v")), signature)
            if status >= 0 { status = append(value, to: message) }
            return status < 0 ? status : sd_bus_message_close_container(message)
        }
    }

    static func microseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        return UInt64(max(0, seconds)) * 1_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000_000)
    }
}

// MARK: Serving

extension Bus {
    /// Takes the well-known `name`, neither queueing for it nor taking it over. `EEXIST`: another
    /// connection holds it. The corresponding C function is `sd_bus_request_name`.
    func requestName(_ name: String) throws(BusError) {
        let status = sd_bus_request_name(bus, name, 0)
        guard status >= 0 else { throw BusError(name: "", message: "cannot take the name \(name)", errno: -status) }
    }

    /// Hands every method call to the object at `path` to `handler` while `wait` dispatches (the
    /// standard `org.freedesktop.DBus.Peer` calls excepted, which sd-bus answers). The handler
    /// returns true when it has answered the call or will answer it later (``reply(to:_:)``,
    /// ``replyError(to:name:message:)``); false lets sd-bus answer that there is no such method.
    /// Keep the object alive as long as it is served.
    func exportObject(_ path: String, _ handler: @escaping (BusMessage) -> Bool) throws(BusError) -> BusSlot {
        let box = Unmanaged.passRetained(ObjectHandlerBox(handler))
        var slot: OpaquePointer?
        let status = sd_bus_add_object(bus, &slot, path, busObjectTrampoline, box.toOpaque())
        guard status >= 0, let slot else {
            box.release()
            throw BusError(name: "", message: "cannot export \(path)", errno: -status)
        }
        return BusSlot(slot: slot) { box.release() }
    }

    /// Answers `call` with `arguments`. Nothing is sent when the caller asked for no reply; a
    /// caller gone meanwhile never sees it (the bus drops it).
    func reply(to call: BusMessage, _ arguments: [Argument]) throws(BusError) {
        var message: OpaquePointer?
        var status = sd_bus_message_new_method_return(call.message, &message)
        guard status >= 0, let message else { throw BusError(name: "", message: "cannot build a reply", errno: -status) }
        defer { sd_bus_message_unref(message) }
        for argument in arguments {
            status = Self.append(argument, to: message)
            guard status >= 0 else { throw BusError(name: "", message: "cannot append an argument", errno: -status) }
        }
        status = sd_bus_send(bus, message, nil)
        guard status >= 0 else { throw BusError(name: "", message: "cannot send a reply", errno: -status) }
    }

    /// Answers `call` with the D-Bus error `name` (a valid error name, e.g.
    /// `org.freedesktop.DBus.Error.AccessDenied`) and the human `message`.
    func replyError(to call: BusMessage, name: String, message: String) throws(BusError) {
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        // Returns the errno the name maps to, not a failure.
        _ = sd_bus_error_set(&error, name, message)
        let status = sd_bus_reply_method_error(call.message, &error)
        guard status >= 0 else { throw BusError(name: "", message: "cannot send an error reply", errno: -status) }
    }

    /// Sends signal `member` of `interface` from the object at `path` with `arguments`: to the
    /// connection `destination` alone (a unique name) when given, else to whoever matches it.
    func emitSignal(_ path: String, _ interface: String, _ member: String, destination: String?, arguments: [Argument]) throws(BusError) {
        var message: OpaquePointer?
        var status = sd_bus_message_new_signal(bus, &message, path, interface, member)
        guard status >= 0, let message else { throw BusError(name: "", message: "cannot build a signal", errno: -status) }
        defer { sd_bus_message_unref(message) }
        if let destination { status = sd_bus_message_set_destination(message, destination) }
        for argument in arguments where status >= 0 { status = Self.append(argument, to: message) }
        if status >= 0 { status = sd_bus_send(bus, message, nil) }
        guard status >= 0 else { throw BusError(name: "", message: "cannot send a signal", errno: -status) }
    }

    /// Calls `member` without waiting: `handler` gets the reply, or the error the peer, the bus or
    /// the `timeout` made of it, on the thread that dispatches in `wait`. It is called once,
    /// unless the bus is closed first.
    func callLater(_ destination: String, _ path: String, _ interface: String, _ member: String, arguments: [Argument],
                   timeout: Duration, _ handler: @escaping (Result<BusMessage, BusError>) -> Void) throws(BusError) {
        let message = try methodCall(destination, path, interface, member, arguments)
        defer { sd_bus_message_unref(message) }
        let box = Unmanaged.passRetained(ReplyHandlerBox(handler))
        var slot: OpaquePointer?
        let status = sd_bus_call_async(bus, &slot, message, busReplyTrampoline, box.toOpaque(), Self.microseconds(timeout))
        guard status >= 0, let slot else {
            box.release()
            throw BusError(name: "", message: "cannot send a call", errno: -status)
        }
        // The bus keeps the slot until the reply (or the timeout) has been handed over, or until
        // the bus is freed; the box goes with it.
        sd_bus_slot_set_destroy_callback(slot, busReplyBoxRelease)
        sd_bus_slot_set_floating(slot, 1)
        sd_bus_slot_unref(slot)
    }
}

/// A signal match or an exported object, and the handler it calls; dropping it removes the
/// match or stops serving the object.
final class BusSlot {
    private let slot: OpaquePointer
    private let releaseHandler: () -> Void

    fileprivate init(slot: OpaquePointer, releaseHandler: @escaping () -> Void) {
        self.slot = slot
        self.releaseHandler = releaseHandler
    }

    deinit {
        sd_bus_slot_unref(slot)
        releaseHandler()
    }
}

private final class ObjectHandlerBox {
    let handler: (BusMessage) -> Bool
    init(_ handler: @escaping (BusMessage) -> Bool) { self.handler = handler }
}

private final class ReplyHandlerBox {
    let handler: (Result<BusMessage, BusError>) -> Void
    init(_ handler: @escaping (Result<BusMessage, BusError>) -> Void) { self.handler = handler }
}

private func busObjectTrampoline(_ message: OpaquePointer?, _ userdata: UnsafeMutableRawPointer?, _: UnsafeMutablePointer<sd_bus_error>?) -> Int32 {
    guard let message, let userdata else { return 0 }
    return Unmanaged<ObjectHandlerBox>.fromOpaque(userdata).takeUnretainedValue().handler(BusMessage(borrowing: message)) ? 1 : 0
}

private func busReplyTrampoline(_ message: OpaquePointer?, _ userdata: UnsafeMutableRawPointer?, _: UnsafeMutablePointer<sd_bus_error>?) -> Int32 {
    guard let message, let userdata else { return 0 }
    let handler = Unmanaged<ReplyHandlerBox>.fromOpaque(userdata).takeUnretainedValue().handler
    if let error = sd_bus_message_get_error(message) {
        handler(.failure(BusError(name: error.pointee.name.map { String(cString: $0) } ?? "",
                                  message: error.pointee.message.map { String(cString: $0) } ?? "", errno: sd_bus_message_get_errno(message))))
    } else {
        handler(.success(BusMessage(borrowing: message)))
    }
    return 1
}

private func busReplyBoxRelease(_ userdata: UnsafeMutableRawPointer?) {
    guard let userdata else { return }
    Unmanaged<ReplyHandlerBox>.fromOpaque(userdata).release()
}

/// A received message; reads advance through its arguments.
final class BusMessage {
    fileprivate let message: OpaquePointer

    init(adopting message: OpaquePointer) { self.message = message }
    /// A message borrowed from sd-bus for the duration of a callback.
    init(borrowing message: OpaquePointer) { self.message = sd_bus_message_ref(message) }
    deinit { sd_bus_message_unref(message) }

    /// The unique name of the connection that sent it (set by the bus).
    var sender: String? { sd_bus_message_get_sender(message).map { String(cString: $0) } }
    /// The interface a call names; a call may name none.
    var interface: String? { sd_bus_message_get_interface(message).map { String(cString: $0) } }
    var member: String? { sd_bus_message_get_member(message).map { String(cString: $0) } }
    /// The signature of all its arguments ("" for none).
    var signature: String { sd_bus_message_get_signature(message, 1).map { String(cString: $0) } ?? "" }

    private func malformed(_ status: Int32) -> BusError { BusError(name: "", message: "unexpected message contents", errno: -status) }

    /// Reads a string-like argument: `s` (string) or `o` (object path).
    func string(_ type: Character = "s") throws(BusError) -> String {
        var value: UnsafePointer<CChar>?
        let status = sd_bus_message_read_basic(message, CChar(type.asciiValue!), &value)
        guard status > 0, let value else { throw malformed(status) }
        return String(cString: value)
    }

    func uint32() throws(BusError) -> UInt32 {
        var value: UInt32 = 0
        let status = sd_bus_message_read_basic(message, CChar(UInt8(ascii: "u")), &value)
        guard status > 0 else { throw malformed(status) }
        return value
    }

    func double() throws(BusError) -> Double {
        var value = 0.0
        let status = sd_bus_message_read_basic(message, CChar(UInt8(ascii: "d")), &value)
        guard status > 0 else { throw malformed(status) }
        return value
    }

    func bool() throws(BusError) -> Bool {
        var value: Int32 = 0  // sd-bus writes an int for `b`, not a bool
        let status = sd_bus_message_read_basic(message, CChar(UInt8(ascii: "b")), &value)
        guard status > 0 else { throw malformed(status) }
        return value != 0
    }

    /// Enters a variant argument holding `contents` (e.g. "s"); the next read is its value.
    func enterVariant(_ contents: String) throws(BusError) {
        let status = contents.withCString { sd_bus_message_enter_container(message, CChar(UInt8(ascii: "v")), $0) }
        guard status > 0 else { throw malformed(status) }
    }

    func int16() throws(BusError) -> Int16 {
        var value: Int16 = 0
        let status = sd_bus_message_read_basic(message, CChar(UInt8(ascii: "n")), &value)
        guard status > 0 else { throw malformed(status) }
        return value
    }

    /// Enters the next argument, a container of `type` (`a` array, `e` dict entry, `v`
    /// variant, `r` struct) holding `contents` (e.g. "{sv}" for an array of them, "sv" for the
    /// entry). False when the enclosing container has no more elements: the loop over an array's
    /// entries ends there. Leave each one entered with `exitContainer()`.
    func enterContainer(_ type: Character, _ contents: String) throws(BusError) -> Bool {
        let status = contents.withCString { sd_bus_message_enter_container(message, CChar(type.asciiValue!), $0) }
        guard status >= 0 else { throw malformed(status) }
        return status > 0
    }

    /// Leaves the container entered last, once read to its end (`skip` what is not wanted).
    func exitContainer() throws(BusError) {
        let status = sd_bus_message_exit_container(message)
        guard status >= 0 else { throw malformed(status) }
    }

    /// Skips the next argument, of the single complete type `type` (e.g. "v"): for the values
    /// of a dictionary that the reader does not want.
    func skip(_ type: String) throws(BusError) {
        let status = type.withCString { sd_bus_message_skip(message, $0) }
        guard status >= 0 else { throw malformed(status) }
    }

    /// Reads an array of strings (`as`) or object paths (`ao`).
    func stringArray(_ type: Character = "s") throws(BusError) -> [String] {
        var status = String(type).withCString { sd_bus_message_enter_container(message, CChar(UInt8(ascii: "a")), $0) }
        guard status > 0 else { throw malformed(status) }
        var values: [String] = []
        while true {
            var value: UnsafePointer<CChar>?
            status = sd_bus_message_read_basic(message, CChar(type.asciiValue!), &value)
            guard status >= 0 else { throw malformed(status) }
            guard status > 0, let value else { break }
            values.append(String(cString: value))
        }
        sd_bus_message_exit_container(message)
        return values
    }
}

private final class HandlerBox {
    let handler: (BusMessage) -> Void
    init(_ handler: @escaping (BusMessage) -> Void) { self.handler = handler }
}

/// A plain function, not a closure written at top level: sd-bus calls it on the waiting thread.
private func busSignalTrampoline(_ message: OpaquePointer?, _ userdata: UnsafeMutableRawPointer?, _: UnsafeMutablePointer<sd_bus_error>?) -> Int32 {
    guard let message, let userdata else { return 0 }
    Unmanaged<HandlerBox>.fromOpaque(userdata).takeUnretainedValue().handler(BusMessage(borrowing: message))
    return 0
}
