import Foundation
import CLinux
import Glibc
import OpenSSLCrypto

// The hub's figures: a forwarded account call next to the same call on a standalone authd, TLS
// handshakes per second at the hub next to openssl's own server (`openssl s_server`, measured by
// the same client loop: s_time reuses one certificate, and the hub holds at most four connections
// per device), and the hub's memory with 1,000 device connections.

/// A CA and a hub certificate for 127.0.0.1, made with the openssl CLI.
private struct BenchPKI {
    let directory: String

    init() throws {
        var template = Array("/tmp/authd-bench-pki-XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template)!)
        try openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-subj", "/CN=bench CA",
                     "-keyout", directory + "/ca.key", "-out", directory + "/ca.pem"])
        try openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=hub",
                     "-keyout", directory + "/hub.key", "-out", directory + "/hub.csr"])
        try "subjectAltName=IP:127.0.0.1\n".write(toFile: directory + "/hub.ext", atomically: true, encoding: .utf8)
        try openssl(["x509", "-req", "-in", directory + "/hub.csr", "-CA", directory + "/ca.pem", "-CAkey", directory + "/ca.key",
                     "-CAcreateserial", "-days", "2", "-extfile", directory + "/hub.ext", "-out", directory + "/hub.pem"])
    }

    func openssl(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw BenchError(description: "openssl \(arguments[0]) failed") }
    }
}

/// Full TLS 1.3 handshakes per second a client loop completes against `port` in `seconds`:
/// connect, handshake with one of `contexts` in turn (a certificate per device, as devices
/// have), close. The same loop measures the hub and openssl's own server.
private func handshakeRate(port: UInt16, contexts: [TLSContext], seconds: Double) throws -> Double {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    let started = ContinuousClock.now
    var count = 0
    while ContinuousClock.now < deadline {
        _ = try HeldDevice(port: port, context: contexts[count % contexts.count])
        count += 1
    }
    return Double(count) / (ContinuousClock.now - started).milliseconds * 1000
}

/// An `openssl s_server` with the hub's certificate, asking for a client certificate as the hub does.
private func startSServer(pki: BenchPKI) throws -> (Process, UInt16) {
    let port = UInt16(try freeTCPPortPair())
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    process.arguments = ["s_server", "-accept", "127.0.0.1:\(port)", "-tls1_3", "-cert", pki.directory + "/hub.pem", "-key", pki.directory + "/hub.key",
                         "-verify", "1", "-no_ticket", "-quiet", "-naccept", "1000000"]
    process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
    process.standardError = FileHandle(forWritingAtPath: "/dev/null")
    process.standardInput = Pipe()
    try process.run()
    usleep(300_000)
    return (process, port)
}

/// A device connection held open: a TLS client with a certificate of its own.
private final class HeldDevice {
    let fd: Int32
    let stream: TLSStream

    init(port: UInt16, context: TLSContext) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.fd = fd
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw BenchError(description: "connect to the hub failed: \(errno)") }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        stream = try TLSStream(context: context, fd: fd, host: "127.0.0.1")
        let deadline = ContinuousClock.now + .seconds(10)
        while true {
            switch try stream.handshake() {
            case .done: return
            case .closed: throw BenchError(description: "the server closed the connection during the handshake")
            case .wantRead, .wantWrite:
                guard ContinuousClock.now < deadline else { throw BenchError(description: "a device handshake took over 10 s") }
                var descriptor = pollfd(fd: fd, events: Int16(POLLIN | POLLOUT), revents: 0)
                _ = poll(&descriptor, 1, 100)
            }
        }
    }

    deinit { close(fd) }
}

func hubFigures() throws {
    let pki = try BenchPKI()
    defer { try? FileManager.default.removeItem(atPath: pki.directory) }
    let hub = try Daemon(config: """
        [accounts]
        starts_per_minute = 100000
        logins_per_minute = 100000
        [sync]
        writes_per_minute = 1000000
        [hub]
        listen = 127.0.0.1:0
        cert_file = \(pki.directory)/hub.pem
        key_file = \(pki.directory)/hub.key
        """)
    defer { hub.stop() }
    let hubClient = try Client(hub.socket)
    let status = String(decoding: try hubClient.call("hub.status"), as: UTF8.self)
    guard let port = status.firstMatch(of: /"listen":"127\.0\.0\.1:([0-9]+)"/).flatMap({ UInt16($0.output.1) }) else {
        throw BenchError(description: "the hub reports no port: \(status)")
    }
    let idle = hub.residentBytes
    let device = try Daemon(config: "[hub]\nurl = 127.0.0.1:\(port)\nca_file = \(pki.directory)/ca.pem\n")
    defer { device.stop() }
    let deviceClient = try Client(device.socket)
    for _ in 0..<200 where !String(decoding: try deviceClient.call("hub.status"), as: UTF8.self).contains(#""state":"connected""#) { usleep(50_000) }
    let standalone = try Daemon(config: "[accounts]\nstarts_per_minute = 100000\n")
    defer { standalone.stop() }

    // One account on each side, and the same call timed on both.
    func session(on client: Client, codes daemon: Daemon) throws -> String {
        let started = String(decoding: try client.call("account.register.start", #"{"phone":"+37250009999"}"#), as: UTF8.self)
        guard let flow = started.firstMatch(of: /"flow":"([^"]+)"/)?.output.1 else { throw BenchError(description: started) }
        let code = try daemon.spooledCode(to: "+37250009999", after: 0)
        let verified = String(decoding: try client.call("account.register.verify", #"{"flow":"\#(flow)","code":"\#(code)"}"#), as: UTF8.self)
        guard let token = verified.firstMatch(of: /"token":"(as1\.[^"]+)"/)?.output.1 else { throw BenchError(description: verified) }
        return String(token)
    }
    func timed(_ client: Client, _ params: String, count: Int) throws -> [Double] {
        for _ in 0..<200 { try client.call("session.get", params) }
        var latencies: [Double] = []
        for _ in 0..<count {
            let started = ContinuousClock.now
            try client.call("session.get", params)
            latencies.append((ContinuousClock.now - started).milliseconds)
        }
        return latencies.sorted()
    }
    let forwardedToken = try session(on: deviceClient, codes: hub)
    let localToken = try session(on: try Client(standalone.socket), codes: standalone)
    let forwarded = try timed(deviceClient, #"{"session":"\#(forwardedToken)"}"#, count: 3000)
    let local = try timed(try Client(standalone.socket), #"{"session":"\#(localToken)"}"#, count: 3000)
    row("session.get on a standalone authd", String(format: "p50 %.3f ms, p99 %.3f ms", percentile(local, 0.5), percentile(local, 0.99)))
    row("session.get device → hub → device", String(format: "p50 %.3f ms, p99 %.3f ms", percentile(forwarded, 0.5), percentile(forwarded, 0.99)))

    try syncFigures(hub: hub, port: port, pki: pki)

    // 1,000 device connections, four per device key (the hub's limit per device).
    var contexts: [TLSContext] = []
    for index in 0..<250 {
        let key = try P256PrivateKey.generate()
        let certificate = try X509Certificate.selfSigned(commonName: "bench device \(index)", key: key, serial: index + 1, days: 2)
        contexts.append(try TLSContext.client(certificate: certificate, key: key, trust: .certificateAuthority(file: pki.directory + "/ca.pem")))
    }
    // Handshakes: the same client loop against the hub, then against openssl's own server.
    let atHub = try handshakeRate(port: port, contexts: contexts, seconds: 5)
    let (server, serverPort) = try startSServer(pki: pki)
    let atOpenSSL = try handshakeRate(port: serverPort, contexts: contexts, seconds: 5)
    server.terminate()
    server.waitUntilExit()
    row("TLS 1.3 handshakes/s: hub ÷ openssl s_server", String(format: "%.0f ÷ %.0f = %.2f", atHub, atOpenSSL, atHub / atOpenSSL))

    var held: [HeldDevice] = []
    for index in 0..<1000 { held.append(try HeldDevice(port: port, context: contexts[index % contexts.count])) }
    var connected = 0
    for _ in 0..<100 {
        let text = String(decoding: try hubClient.call("hub.status"), as: UTF8.self)
        connected = text.firstMatch(of: /"devices_connected":([0-9]+)/).flatMap { Int($0.output.1) } ?? 0
        if connected >= 1000 { break }
        usleep(50_000)
    }
    row("hub RSS idle, with \(connected) device connections", String(format: "%.1f MB, %.1f MB (target ≤ 100 MB)", Double(idle) / 1e6, Double(hub.residentBytes) / 1e6))
    held.removeAll()
}

/// Sync through the hub: one account on two devices; an event sent on A, timed until B's
/// subscriber reads it (the send's own round trip included: an upper bound of commit →
/// delivery); sustained events per second end to end; and a subscriber catching up on 10,000
/// events it missed.
private func syncFigures(hub: Daemon, port: UInt16, pki: BenchPKI) throws {
    let link = "[hub]\nurl = 127.0.0.1:\(port)\nca_file = \(pki.directory)/ca.pem\n"
    let (a, b) = (try Daemon(config: link), try Daemon(config: link))
    defer { a.stop(); b.stop() }
    let clientA = try Client(a.socket), clientB = try Client(b.socket)
    for client in [clientA, clientB] {
        for _ in 0..<200 where !String(decoding: try client.call("hub.status"), as: UTF8.self).contains(#""state":"connected""#) { usleep(50_000) }
    }
    let phone = "+37250008888"
    let started = String(decoding: try clientA.call("account.register.start", #"{"phone":"\#(phone)"}"#), as: UTF8.self)
    guard let flow = started.firstMatch(of: /"flow":"([^"]+)"/)?.output.1 else { throw BenchError(description: started) }
    let code = try hub.spooledCode(to: phone, after: 0)
    let verified = String(decoding: try clientA.call("account.register.verify", #"{"flow":"\#(flow)","code":"\#(code)","password":"bench passphrase long enough"}"#),
                          as: UTF8.self)
    let login = String(decoding: try clientB.call("auth.login", #"{"login":"\#(phone)","password":"bench passphrase long enough"}"#), as: UTF8.self)
    guard let tokenA = verified.firstMatch(of: /"token":"(as1\.[^"]+)"/)?.output.1, let tokenB = login.firstMatch(of: /"token":"(as1\.[^"]+)"/)?.output.1 else {
        throw BenchError(description: verified + login)
    }
    let watcher = try Client(b.socket)
    try watcher.call("sync.subscribe", #"{"session":"\#(tokenB)"}"#)
    let token = String(tokenA)
    let sendParams = { @Sendable (index: Int) -> String in #"{"session":"\#(token)","kind":"message","conversation":"bench","body":{"n":\#(index)}}"# }
    func send(_ client: Client, _ index: Int) throws { try client.call("sync.send", sendParams(index)) }
    /// Senders on their own threads (a Client is one thread's).
    func senders(_ count: Int, each: Int, offset: Int) -> [Thread] {
        let socket = a.socket
        return (0..<count).map { worker in
            Thread {
                guard let client = try? Client(socket) else { return }
                for index in 0..<each { _ = try? client.call("sync.send", sendParams(offset + worker * 100_000 + index)) }
            }
        }
    }
    func receive() throws {
        while let line = try watcher.connection.readLine() {
            if line.starts(with: Array(#"{"jsonrpc":"2.0","method":"sync.event""#.utf8)) || String(decoding: line, as: UTF8.self).contains(#""method":"sync.event""#) { return }
        }
        throw BenchError(description: "the subscriber's stream closed")
    }
    for index in 0..<100 { try send(clientA, index); try receive() }
    var latencies: [Double] = []
    for index in 0..<1000 {
        let started = ContinuousClock.now
        try send(clientA, index)
        try receive()
        latencies.append((ContinuousClock.now - started).milliseconds)
    }
    latencies.sort()
    row("sync: sent on A → at B's subscriber (2 devices)", String(format: "p50 %.2f ms, p99 %.2f ms (target p99 ≤ 50 ms)", percentile(latencies, 0.5), percentile(latencies, 0.99)))

    // Sustained: four senders on A, everything read at B.
    let total = 4000
    let flowStarted = ContinuousClock.now
    senders(4, each: total / 4, offset: 0).forEach { $0.start() }
    for _ in 0..<total { try receive() }
    row("sync: events/s through one hub, A → B", String(format: "%.0f/s (%d events, 4 senders)", Double(total) / (ContinuousClock.now - flowStarted).milliseconds * 1000, total))

    // Catch-up: 10,000 events sent while no one on B followed, then read from position 0 on.
    let before = String(decoding: try clientB.call("sync.events", #"{"session":"\#(tokenB)","after":0,"limit":1}"#), as: UTF8.self)
    guard let head = before.firstMatch(of: /"head":([0-9]+)/).flatMap({ Int($0.output.1) }) else { throw BenchError(description: before) }
    let missed = 10_000
    let late = try Client(b.socket)
    senders(4, each: missed / 4, offset: 1_000_000).forEach { $0.start() }
    var sentAll = false
    for _ in 0..<6000 {
        let text = String(decoding: try clientB.call("sync.events", #"{"session":"\#(tokenB)","after":0,"limit":1}"#), as: UTF8.self)
        if let now = text.firstMatch(of: /"head":([0-9]+)/).flatMap({ Int($0.output.1) }), now >= head + missed { sentAll = true; break }
        usleep(20_000)
    }
    guard sentAll else { throw BenchError(description: "the 10,000 events were not all sent") }
    let catchUpStarted = ContinuousClock.now
    try late.call("sync.subscribe", #"{"session":"\#(tokenB)","since":\#(head)}"#)
    var caught = 0
    while caught < missed, let line = try late.connection.readLine() {
        if String(decoding: line, as: UTF8.self).contains(#""method":"sync.event""#) { caught += 1 }
    }
    row("sync: catch-up of 10,000 missed events at B", String(format: "%.0f ms (%.0f events/s)", (ContinuousClock.now - catchUpStarted).milliseconds,
                                                              Double(caught) / (ContinuousClock.now - catchUpStarted).milliseconds * 1000))
}
