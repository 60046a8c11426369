import CLinux
import Foundation
import Glibc
import Protocol
import Testing

/// A hub and its devices for one test, all real authd processes on loopback: a test CA made with
/// the `openssl` CLI in a temporary directory, a hub certificate for 127.0.0.1 from it, the hub
/// on a port the kernel picks, and devices trusting the CA (or a pinned key).
final class HubRig {
    let directory: String
    var caFile: String { directory + "/ca.pem" }
    var certificateFile: String { directory + "/hub.pem" }
    var keyFile: String { directory + "/hub.key" }
    private(set) var hub: DaemonHarness!
    private(set) var port: UInt16 = 0

    /// Makes the PKI and starts the hub (`extra`: more `[hub]` lines, or other sections after).
    init(hubConfig extra: String = "") throws {
        var template = Array("/tmp/authd-hub-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw HarnessError("mkdtemp failed") }
        directory = String(cString: made)
        try Self.makeCA(in: directory, name: "ca")
        try Self.issue(in: directory, ca: "ca", name: "hub", subjectAltName: "IP:127.0.0.1")
        hub = try startHub(port: 0, extra: extra)
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    static func openssl(_ arguments: [String]) throws {
        let result = try DaemonHarness.run(["/usr/bin/openssl"] + arguments)
        guard result.status == 0 else { throw HarnessError("openssl \(arguments.first ?? "") failed: \(result.stderr)") }
    }

    /// A self-signed P-256 CA: NAME.pem and NAME.key in `directory`.
    static func makeCA(in directory: String, name: String) throws {
        try openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-subj", "/CN=authd test CA \(name)",
                     "-keyout", "\(directory)/\(name).key", "-out", "\(directory)/\(name).pem"])
    }

    /// A P-256 certificate NAME.pem (key NAME.key) issued by the CA named `ca`.
    static func issue(in directory: String, ca: String, name: String, subjectAltName: String) throws {
        let path = directory + "/" + name
        try openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=\(name)",
                     "-keyout", path + ".key", "-out", path + ".csr"])
        try "subjectAltName=\(subjectAltName)\n".write(toFile: path + ".ext", atomically: true, encoding: .utf8)
        try openssl(["x509", "-req", "-in", path + ".csr", "-CA", "\(directory)/\(ca).pem", "-CAkey", "\(directory)/\(ca).key",
                     "-CAcreateserial", "-days", "2", "-extfile", path + ".ext", "-out", path + ".pem"])
    }

    /// Starts a hub on `port` (0: any) with this rig's certificate; learns the port it got.
    /// `harness`: restart that hub (its store kept) on `port`.
    func startHub(port: UInt16, extra: String = "", harness: DaemonHarness? = nil) throws -> DaemonHarness {
        let daemon = try harness ?? DaemonHarness()
        try """
            [hub]
            listen = 127.0.0.1:\(port)
            cert_file = \(certificateFile)
            key_file = \(keyFile)
            \(extra)
            """.write(toFile: daemon.configPath, atomically: true, encoding: .utf8)
        try daemon.start()
        let status = try daemon.connect().result("hub.status")
        guard let listen = status["hub"]?["listen"]?.stringValue, let bound = listen.split(separator: ":").last.flatMap({ UInt16($0) }) else {
            throw HarnessError("the hub reports no port: \(status)")
        }
        self.port = bound
        return daemon
    }

    /// Starts a device of the hub trusting `trust` (default: this rig's CA); with `waitForLink`,
    /// waits (at most 15 s) until its link is up.
    /// `url`: the device's `[hub] url` (default: this rig's hub).
    /// `environment`: more variables for the device (the fprintd stand-in's bus, say).
    func startDevice(trust: String? = nil, url: String? = nil, waitForLink: Bool = true, extra: String = "", arguments: [String] = [],
                     environment: [String: String] = [:]) throws -> DaemonHarness {
        let device = try DaemonHarness(config: """
            [hub]
            url = \(url ?? "127.0.0.1:\(port)")
            \(trust ?? "ca_file = \(caFile)")
            \(extra)
            """)
        try device.start(arguments: arguments, environment: environment)
        if waitForLink { try Self.waitForLink(device, state: "connected") }
        return device
    }

    /// Registers `phone` with `password` through `device` (the code from the hub's SMS spool);
    /// the verify result: the account and the session bound to that machine.
    func register(on device: DaemonHarness, phone: String = "+37251234567", password: String = "a long enough passphrase",
                  email: String? = nil) throws -> JSONValue {
        let client = try device.connect()
        let flow = try #require(try client.result("account.register.start", ["phone": .string(phone)])["flow"])
        let code = try RegistrationTests.spooledCode(hub, to: phone)
        var params: [String: JSONValue] = ["flow": flow, "code": .string(code), "password": .string(password)]
        if let email { params["email"] = .string(email) }
        return try client.result("account.register.verify", .object(params))
    }

    /// Registers `phone` with `password` through a hand-made machine, as a process of it (uid
    /// 1000): the verify result, whose session is bound to that machine.
    func register(on machine: HandMadeMachine, phone: String, password: String = "a long enough passphrase") throws -> JSONValue {
        let started = try machine.forward("account.register.start", ["phone": .string(phone)])
        let flow = try #require(started["result"]?["flow"], "\(started)")
        let code = try RegistrationTests.spooledCode(hub, to: phone)
        let verified = try machine.forward("account.register.verify", ["flow": flow, "code": .string(code), "password": .string(password)])
        return try #require(verified["result"], "\(verified)")
    }

    /// Waits until `device`'s link reports `state` (at `url`, when given), at most `seconds`.
    static func waitForLink(_ device: DaemonHarness, state: String, url: String? = nil, seconds: Double = 15) throws {
        let client = try device.connect()
        let deadline = Date().addingTimeInterval(seconds)
        var last: JSONValue = .null
        while Date() < deadline {
            last = try client.result("hub.status")
            if last["link"]?["state"]?.stringValue == state && (url == nil || last["link"]?["url"]?.stringValue == url) { return }
            usleep(50_000)
        }
        throw HarnessError("the link did not become \(state)\(url.map { " at \($0)" } ?? "") within \(seconds) s: \(last)\n\(device.log)")
    }

    /// A machine by hand, as the authd(8) recipe has it: `openssl s_client` with a self-made
    /// certificate (`name`.pem, made at the first link of that name: the same machine each time)
    /// on the hub's port, its stdin and stdout as the link. Ends with `close()`.
    func handMadeMachine(name: String = "debug") throws -> HandMadeMachine {
        if !FileManager.default.fileExists(atPath: "\(directory)/\(name).pem") {
            try Self.openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj", "/CN=\(name)",
                              "-keyout", "\(directory)/\(name).key", "-out", "\(directory)/\(name).pem"])
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["s_client", "-quiet", "-tls1_3", "-connect", "127.0.0.1:\(port)", "-cert", "\(directory)/\(name).pem",
                             "-key", "\(directory)/\(name).key", "-CAfile", caFile, "-verify_return_error"]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        return HandMadeMachine(process: process, input: input, output: output)
    }

    final class HandMadeMachine {
        private let process: Process
        private let input: Pipe
        private let output: Pipe
        /// What `call` read past the answer it waited for.
        private var unread: [UInt8] = []
        private var lastID: Int64 = 0

        fileprivate init(process: Process, input: Pipe, output: Pipe) {
            self.process = process
            self.input = input
            self.output = output
        }

        deinit { close() }

        /// Writes each line, then reads as many answers (in the order they come), within `seconds`.
        func exchange(_ lines: [String], seconds: Double = 10) throws -> [String] {
            for line in lines { try input.fileHandleForWriting.write(contentsOf: Data(line.utf8 + [0x0A])) }
            return try HubRig.readLines(output.fileHandleForReading.fileDescriptor, count: lines.count, seconds: seconds)
        }

        /// Writes `request` and reads until the answer with its id, within `seconds`, passing
        /// over what the hub pushes meanwhile (`link.sync_event`, `link.sessions_ended`).
        private func call(_ request: JSONValue, seconds: Double) throws -> JSONValue {
            try input.fileHandleForWriting.write(contentsOf: Data(try WireCodec.encodeJSONText(request).utf8 + [0x0A]))
            let fd = output.fileHandleForReading.fileDescriptor
            let deadline = Date().addingTimeInterval(seconds)
            while true {
                while let end = unread.firstIndex(of: 0x0A) {
                    let line = Array(unread[..<end])
                    unread.removeSubrange(...end)
                    let message = try WireCodec.decode(JSONValue.self, from: Data(line))
                    if message["method"] == nil && message["id"] == request["id"] { return message }
                }
                guard Date() < deadline else { throw HarnessError("no answer to \(request["method"] ?? .null) within \(seconds) s") }
                var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&descriptor, 1, 100) == 1 else { continue }
                var buffer = [UInt8](repeating: 0, count: 65536)
                let got = read(fd, &buffer, buffer.count)
                guard got > 0 else { throw HarnessError("s_client ended before the answer to \(request["method"] ?? .null)") }
                unread += buffer[0..<got]
            }
        }

        /// `method` as a device's authd forwards it for `caller`, a process there; the answer.
        func forward(_ method: String, _ params: JSONValue, caller: JSONValue = ["uid": 1000], seconds: Double = 10) throws -> JSONValue {
            try call("link.forward", ["method": .string(method), "params": params, "caller": caller], seconds: seconds)
        }

        /// `method` with `params` as this machine itself (a link method); the answer.
        func call(_ method: String, _ params: JSONValue, seconds: Double = 10) throws -> JSONValue {
            lastID += 1
            return try call(["jsonrpc": "2.0", "id": .integer(lastID), "method": .string(method), "params": params], seconds: seconds)
        }

        func close() {
            try? input.fileHandleForWriting.close()
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
    }

    /// `count` lines from `fd`, waiting at most `seconds` in all.
    static func readLines(_ fd: Int32, count: Int, seconds: Double) throws -> [String] {
        var bytes: [UInt8] = []
        let deadline = Date().addingTimeInterval(seconds)
        while bytes.filter({ $0 == 0x0A }).count < count {
            guard Date() < deadline else { throw HarnessError("only \(String(decoding: bytes, as: UTF8.self)) within \(seconds) s") }
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 100) == 1 else { continue }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let got = read(fd, &buffer, buffer.count)
            guard got > 0 else { throw HarnessError("s_client ended: \(String(decoding: bytes, as: UTF8.self))") }
            bytes += buffer[0..<got]
        }
        return String(decoding: bytes, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    /// A loopback port where nothing listens: bound by the kernel's choice, then closed.
    static func deadPort() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket failed: \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw HarnessError("bind to a free loopback port failed: \(errno)") }
        return UInt16(bigEndian: address.sin_port)
    }
}
