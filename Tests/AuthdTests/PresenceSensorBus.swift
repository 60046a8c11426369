import Foundation
import Glibc
import Synchronization
@testable import authd

/// A private system bus for one test, with python-dbusmock stand-ins: GeoClue2 (our
/// `geoclue_mock.py`), NetworkManager (dbusmock's own `networkmanager` template) and BlueZ (its
/// `bluez5` template). Nothing on
/// the bus is ever activated, so without a stand-in its name is simply absent. The monitor under
/// test is given `address`; the machine's own buses are never touched.
///
/// dbus-daemon runs under a shell that waits for a line on a pipe from this process: the rig
/// sends it on release, and should the test process die without releasing the rig, the shell sees
/// the pipe end and stops the bus all the same. SIGKILL throughout: the test process may have
/// blocked SIGTERM, and its children inherit that.
final class SensorBus {
    static let geoClueTemplate = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("IntegrationTests/Python/geoclue_mock.py").path
    static let geoClue = "org.freedesktop.GeoClue2"
    static let geoClueManager = "/org/freedesktop/GeoClue2/Manager"
    static let networkManager = "org.freedesktop.NetworkManager"
    static let networkManagerPath = "/org/freedesktop/NetworkManager"
    static let bluez = "org.bluez"

    let directory = TemporaryDirectory()
    /// `unix:path=…,guid=…`.
    let address: String
    private let bus = Process()
    private let busInput = Pipe()
    private var standIns: [String: Process] = [:]

    init() throws {
        Syscalls.ignoreBrokenPipes()  // `stop` writes to the shell, which may have gone
        let config = directory.path + "/bus.conf"
        try """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>system</type>
          <listen>unix:path=\(directory.path)/system_bus_socket</listen>
          <auth>EXTERNAL</auth>
          <policy context="default">
            <allow user="*"/>
            <allow own="*"/>
            <allow send_destination="*" eavesdrop="true"/>
            <allow eavesdrop="true"/>
          </policy>
        </busconfig>
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let output = Pipe()
        bus.executableURL = URL(fileURLWithPath: "/bin/sh")
        bus.arguments = ["-c", "/usr/bin/dbus-daemon --config-file=\"$1\" --nofork --print-address=1 2>\"$2\" & read -r _; kill -KILL $!",
                         "sensor-bus", config, directory.path + "/bus.log"]
        bus.environment = ["PATH": "/usr/bin:/bin"]
        bus.standardInput = busInput
        bus.standardOutput = output
        try bus.run()
        address = printedBusAddress(output)
        guard address.hasPrefix("unix:") else {
            stop()
            throw SensorBusError("dbus-daemon printed no address: \(address)")
        }
    }

    deinit { stop() }

    private func stop() {
        for process in standIns.values where process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        standIns = [:]
        // A line, not only the end of the pipe: other children started meanwhile (other tests'
        // rigs) may hold a copy of its write end.
        try? busInput.fileHandleForWriting.write(contentsOf: Data("stop\n".utf8))
        try? busInput.fileHandleForWriting.close()
        if bus.isRunning { bus.waitUntilExit() }
    }

    /// Starts the GeoClue2 stand-in; `refuse` makes it answer that method with that error.
    func startGeoClue(refuse: (method: String, name: String, message: String)? = nil) async throws {
        var parameters = "{}"
        if let refuse {
            let object = ["method": refuse.method, "name": refuse.name, "message": refuse.message]
            parameters = #"{"refuse": \#(String(decoding: try JSONEncoder().encode(object), as: UTF8.self))}"#
        }
        try await startStandIn(Self.geoClue, template: Self.geoClueTemplate, parameters: parameters)
    }

    /// Starts the NetworkManager stand-in with one Wi-Fi device and no access point; returns
    /// the device's path.
    func startNetworkManager() async throws -> String {
        try await startStandIn(Self.networkManager, template: "networkmanager", parameters: "{}")
        // 100: NM_DEVICE_STATE_ACTIVATED.
        return try await call(Self.networkManager, Self.networkManagerPath, "org.freedesktop.DBus.Mock", "AddWiFiDevice",
                        ["ssi", "wlan0", "wlan0", "100"], returning: String.self)
    }

    /// An access point `device` sees now; returns its path.
    func addAccessPoint(_ name: String, bssid: String, on device: String) async throws -> String {
        // mode 2 (infrastructure), 2412 MHz, 54 Mbit/s, strength 80, no security.
        try await call(Self.networkManager, Self.networkManagerPath, "org.freedesktop.DBus.Mock", "AddAccessPoint",
                 ["ssssuuuyu", device, name, name, bssid, "2", "2412", "54000", "80", "0"], returning: String.self)
    }

    func removeAccessPoint(_ path: String, from device: String) async throws {
        _ = try await busctl(["call", Self.networkManager, Self.networkManagerPath, "org.freedesktop.DBus.Mock", "RemoveAccessPoint", "ss", device, path])
    }

    /// Starts the BlueZ stand-in with one adapter, hci0, not discovering; returns its path.
    func startBlueZ() async throws -> String {
        try await startStandIn(Self.bluez, template: "bluez5", parameters: "{}")
        let adapter = try await call(Self.bluez, "/", "org.bluez.Mock", "AddAdapter", ["ss", "hci0", "machine"], returning: String.self)
        // The template's StartDiscovery and StopDiscovery read a DiscoveryFilter property that
        // only SetDiscoveryFilter creates, and fail without it: an empty filter, as BlueZ's own
        // default is, lets them work as BlueZ's do.
        _ = try await busctl(["call", Self.bluez, adapter, "org.freedesktop.DBus.Mock", "AddProperty", "ssv", "org.bluez.Adapter1", "DiscoveryFilter", "a{sv}", "0"])
        return adapter
    }

    /// A Bluetooth device hci0 sees now (the template gives it an RSSI of −79); returns its path.
    func addBluetoothDevice(_ address: String, name: String) async throws -> String {
        try await call(Self.bluez, "/", "org.bluez.Mock", "AddDevice", ["sss", "hci0", address, name], returning: String.self)
    }

    /// Sets the signal strength BlueZ reports for a device (dBm).
    func setStrength(_ rssi: Int16, of device: String) async throws {
        _ = try await busctl(["call", Self.bluez, device, "org.freedesktop.DBus.Mock", "UpdateProperties", "sa{sv}", "org.bluez.Device1", "1", "RSSI", "n", String(rssi)])
    }

    /// A device BlueZ remembers but did not see in this discovery: Device1 with no RSSI.
    func addRememberedDevice(_ address: String) async throws {
        let path = "/org/bluez/hci0/dev_" + address.replacingOccurrences(of: ":", with: "_")
        _ = try await busctl(["call", Self.bluez, "/", "org.freedesktop.DBus.Mock", "AddObject", "ssa{sv}a(ssss)", path, "org.bluez.Device1",
                        "1", "Address", "s", address, "0"])
    }

    func removeBluetoothDevice(_ path: String) async throws {
        _ = try await busctl(["call", Self.bluez, "/org/bluez/hci0", "org.bluez.Adapter1", "RemoveDevice", "o", path])
    }

    /// The methods a stand-in's object answered so far, in order (python-dbusmock's call log:
    /// methods of its template, not property reads).
    func calls(_ destination: String, _ path: String) async throws -> [String] {
        let output = try await busctl(["call", destination, path, "org.freedesktop.DBus.Mock", "GetCalls"])
        // {"type":"a(tsav)","data":[[[time, method, [arguments]], …]]}
        guard let reply = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any],
              let calls = (reply["data"] as? [Any])?.first as? [[Any]]
        else { throw SensorBusError("GetCalls on \(path): unexpected output \(output.debugDescription)") }
        return calls.compactMap { $0.count > 1 ? $0[1] as? String : nil }
    }

    /// How many polls the monitor has begun: it asks NetworkManager's GetDevices first in each
    /// (needs `startNetworkManager`).
    func polls() async throws -> Int {
        try await calls(Self.networkManager, Self.networkManagerPath).filter { $0 == "GetDevices" }.count
    }

    /// Waits (at most 15 s) until `count` polls that began after this call have ended, that is
    /// until the one after them has begun: what they saw has then been reported (a poll reports
    /// before the next begins), so "nothing changed" is proven by an ordering marker, not by a
    /// sleep. A signal sent before this call (a GeoClue2 move) may be taken only after the first
    /// of them: ask for two to judge what such a move made the monitor do.
    func pollsPass(_ count: Int) async throws {
        let begun = try await polls()
        let deadline = ContinuousClock.now + .seconds(15)
        while try await polls() < begun + count + 1 {
            guard ContinuousClock.now < deadline else { throw SensorBusError("\(count) polls did not pass within 15 s after \(begun):\n\(logs)") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Whether hci0 is discovering now.
    func discovering() async throws -> Bool {
        let output = try await busctl(["get-property", Self.bluez, "/org/bluez/hci0", "org.bluez.Adapter1", "Discovering"])
        struct Value: Decodable { let data: Bool }
        return try JSONDecoder().decode(Value.self, from: Data(output.utf8)).data
    }

    /// Moves the machine; true when an active GeoClue client was told.
    @discardableResult
    func setLocation(latitude: Double, longitude: Double, accuracy: Double) async throws -> Bool {
        try await call(Self.geoClue, Self.geoClueManager, "org.freedesktop.GeoClue2.Mock", "SetLocation",
                 ["ddd", String(latitude), String(longitude), String(accuracy)], returning: Bool.self)
    }

    /// The GeoClue methods the stand-in answered, in order.
    func geoClueCalls() async throws -> [String] {
        try await call(Self.geoClue, Self.geoClueManager, "org.freedesktop.GeoClue2.Mock", "Calls", [], returning: [String].self)
    }

    struct GeoClueClient: Decodable, Equatable {
        let owner: String
        let active: Bool
        let desktopID: String
        let accuracyLevel: UInt32

        init(from decoder: Decoder) throws {
            var fields = try decoder.unkeyedContainer()
            owner = try fields.decode(String.self)
            active = try fields.decode(Bool.self)
            desktopID = try fields.decode(String.self)
            accuracyLevel = try fields.decode(UInt32.self)
        }
    }

    func geoClueClients() async throws -> [GeoClueClient] {
        try await call(Self.geoClue, Self.geoClueManager, "org.freedesktop.GeoClue2.Mock", "Clients", [], returning: [GeoClueClient].self)
    }

    /// Whether a bus name (a client's unique name) is still connected.
    func isConnected(_ name: String) async throws -> Bool {
        try await call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameHasOwner", ["s", name], returning: Bool.self)
    }

    var logs: String {
        ["bus.log", "GeoClue2.log", "NetworkManager.log", "bluez.log"].map { name in
            "--- \(name)\n" + ((try? String(contentsOfFile: directory.path + "/" + name, encoding: .utf8)) ?? "")
        }.joined(separator: "\n")
    }

    private func startStandIn(_ name: String, template: String, parameters: String) async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-m", "dbusmock", "--template", template, "-p", parameters]
        process.environment = ["DBUS_SYSTEM_BUS_ADDRESS": address, "PATH": "/usr/bin:/bin", "PYTHONUNBUFFERED": "1"]
        let logPath = directory.path + "/" + name.split(separator: ".").last! + ".log"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process.standardOutput = log
        process.standardError = log
        process.standardInput = FileHandle.nullDevice
        try process.run()
        standIns[name] = process
        let deadline = ContinuousClock.now + .seconds(20)
        while try await !isConnected(name) {
            guard process.isRunning, ContinuousClock.now < deadline else { throw SensorBusError("the \(name) stand-in did not start:\n\(logs)") }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// `busctl call` with `arguments` as busctl takes them (signature, then values); the reply's
    /// one value, decoded from `--json=short`.
    private func call<Value: Decodable>(_ destination: String, _ path: String, _ interface: String, _ method: String, _ arguments: [String],
                                        returning: Value.Type) async throws -> Value {
        let output = try await busctl(["call", destination, path, interface, method] + arguments)
        guard let reply = try? JSONDecoder().decode(BusctlValues<Value>.self, from: Data(output.utf8)), let value = reply.data.first else {
            throw SensorBusError("busctl call \(interface).\(method): unexpected output \(output.debugDescription)")
        }
        return value
    }

    /// Runs busctl (which gives up on a call after 10 s); its output.
    private func busctl(_ arguments: [String]) async throws -> String {
        // `--` before the call, so that a negative number is not read as an option.
        let run = try await ChildProcess("/usr/bin/busctl", ["--address=\(address)", "--json=short", "--timeout=10", arguments[0], "--"] + arguments.dropFirst(),
                                         directory: directory.path).finish(within: 20)
        guard run.ended else { throw SensorBusError("busctl \(arguments.joined(separator: " ")) did not end within 20 s") }
        guard run.status == 0 else { throw SensorBusError("busctl \(arguments.joined(separator: " ")): \(run.errors)") }
        return run.output
    }
}

/// What `busctl --json=short call` prints: {"type":"…","data":[values…]}.
private struct BusctlValues<Value: Decodable>: Decodable {
    let data: [Value]
}

struct SensorBusError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The first line a `dbus-daemon --print-address` writes to `output` (its address), within 10 s.
func printedBusAddress(_ output: Pipe) -> String {
    var line: [UInt8] = []
    let deadline = Date().addingTimeInterval(10)
    let fd = output.fileHandleForReading.fileDescriptor
    while !line.contains(0x0a), Date() < deadline {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, 200) > 0 else { continue }
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = read(fd, &buffer, buffer.count)
        if count <= 0 { break }
        line += buffer[0..<count]
    }
    return String(decoding: line.prefix { $0 != 0x0a }, as: UTF8.self)
}
