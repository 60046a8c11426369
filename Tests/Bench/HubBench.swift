import Foundation
import CLinux
import Glibc
import JOSE
import OpenSSLCrypto
import Protocol
import Synchronization

// The hub's figures: a forwarded account call next to the same call on a standalone authd, TLS
// handshakes per second at the hub next to openssl's own server (`openssl s_server`, measured by
// the same client loop: s_time reuses one certificate, and the hub holds at most four connections
// per device), the hub's memory with 1,000 device connections, and sync through the hub: two
// real devices (`syncFigures`), then 1,000 light ones of 500 accounts (`syncFiguresAtScale`).

/// A CA and a hub certificate for 127.0.0.1, made with the openssl CLI.
struct BenchPKI {
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

/// A hub for the benchmarks, on a loopback port the kernel picks, with a test CA.
func benchHub() throws -> (hub: Daemon, client: Client, port: UInt16, pki: BenchPKI) {
    let pki = try BenchPKI()
    let hub = try Daemon(config: benchHubConfig(pki))
    let hubClient = try Client(hub.socket)
    let status = String(decoding: try hubClient.call("hub.status"), as: UTF8.self)
    guard let port = status.firstMatch(of: /"listen":"127\.0\.0\.1:([0-9]+)"/).flatMap({ UInt16($0.output.1) }) else {
        hub.stop()
        throw BenchError(description: "the hub reports no port: \(status)")
    }
    return (hub, hubClient, port, pki)
}

/// A bench hub's configuration: limits out of the way, `extra` lines in `[hub]`.
func benchHubConfig(_ pki: BenchPKI, extra: String = "", sync: String = "") -> String {
    """
        [accounts]
        starts_per_minute = 100000
        logins_per_minute = 100000
        [sync]
        writes_per_minute = 1000000
        machine_writes_per_minute = 1000000
        \(sync)
        [presence]
        lookups_per_hour = 100000
        [hub]
        listen = 127.0.0.1:0
        cert_file = \(pki.directory)/hub.pem
        key_file = \(pki.directory)/hub.key
        # Every bench device connects from 127.0.0.1 before it signs in, and at scale the
        # last of 1,000 signs in minutes after it connected (the accounts' Argon2id hashes
        # come first): newcomer_timeout's 60 s would let it go before its turn.
        newcomers_per_address = 10000
        max_newcomers = 100000
        newcomer_timeout = 1h
        \(extra)
        """
}

/// `authd-bench BIN sync`: sync through one hub between two devices, alone.
func syncOnlyFigures() throws {
    let (hub, _, port, pki) = try benchHub()
    defer { try? FileManager.default.removeItem(atPath: pki.directory) }
    defer { hub.stop() }
    try syncFigures(hub: hub, port: port, pki: pki)
    try groupCommitFigures()
}

/// `authd-bench BIN presence`: the presence figures alone.
func presenceOnlyFigures() throws {
    let (hub, hubClient, port, pki) = try benchHub()
    defer {
        hub.stop()
        try? FileManager.default.removeItem(atPath: pki.directory)
    }
    try presenceFigures(hub: hub, hubClient: hubClient, port: port, pki: pki)
}

/// `authd-bench BIN forward`: the forwarded call and its standalone control, alone.
func forwardingOnlyFigures() throws {
    let (hub, _, port, pki) = try benchHub()
    defer { try? FileManager.default.removeItem(atPath: pki.directory) }
    defer { hub.stop() }
    try forwardingFigures(hub: hub, port: port, pki: pki)
}

/// `authd-bench BIN scale`: 1,000 light devices of 500 accounts on a hub of their own, as
/// `make bench` runs them too: on the hub of the figures before, what those leave in its memory
/// (their accounts, events, presence, a thousand connections' buffers) would be counted in the
/// hub's RSS at 1,000 signed-in devices.
/// `--accounts N`: N accounts instead, and sends in proportion: the same work on a smaller
/// scale, for a hub under a profiler (`make link-order`).
func scaleOnlyFigures() throws {
    var accounts = 500
    if let flag = CommandLine.arguments.firstIndex(of: "--accounts") {
        guard flag + 1 < CommandLine.arguments.count, let count = Int(CommandLine.arguments[flag + 1]), (1...500).contains(count) else {
            throw BenchError(description: "--accounts takes a number of accounts from 1 to 500")
        }
        accounts = count
    }
    let (hub, hubClient, port, pki) = try benchHub()
    defer { try? FileManager.default.removeItem(atPath: pki.directory) }
    defer { hub.stop() }
    try syncFiguresAtScale(hub: hub, hubClient: hubClient, port: port, pki: pki, label: "sync at \(grouped(2 * accounts)) devices", accounts: accounts)
}

func hubFigures() throws {
    let (hub, hubClient, port, pki) = try benchHub()
    defer { try? FileManager.default.removeItem(atPath: pki.directory) }
    defer { hub.stop() }
    let idle = hub.residentBytes
    try forwardingFigures(hub: hub, port: port, pki: pki)
    try e2eeCryptoFigures()
    try syncFigures(hub: hub, port: port, pki: pki)
    try groupCommitFigures()
    try presenceFigures(hub: hub, hubClient: hubClient, port: port, pki: pki)

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

/// `session.get` on a device, forwarded to `hub`, next to the same call on a standalone authd.
private func forwardingFigures(hub: Daemon, port: UInt16, pki: BenchPKI) throws {
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
    let warmUp = 200
    func timed(_ client: Client, _ params: String, count: Int) throws -> [Double] {
        for _ in 0..<warmUp { try client.call("session.get", params) }
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
    let cpuBefore = (cpuSeconds(of: device.process.processIdentifier), cpuSeconds(of: hub.process.processIdentifier))
    let forwarded = try timed(deviceClient, #"{"session":"\#(forwardedToken)"}"#, count: 3000)
    let cpu = (cpuSeconds(of: device.process.processIdentifier) - cpuBefore.0, cpuSeconds(of: hub.process.processIdentifier) - cpuBefore.1)
    let calls = Double(warmUp + forwarded.count)  // the warm-up ran in that CPU time too
    let localClient = try Client(standalone.socket)
    let localParams = #"{"session":"\#(localToken)"}"#
    let local = try timed(localClient, localParams, count: 3000)
    row("session.get on a standalone authd", String(format: "p50 %.3f ms, p99 %.3f ms (target p50 ≤ 0.10 ms)", percentile(local, 0.5), percentile(local, 0.99)))

    // The control: the same thread's round trip to ssh-agent, a C daemon answering a trivial
    // request, in turn with session.get (10 rounds of 300 each). Then both again with the
    // bench, authd and ssh-agent on one core: a wake-up there switches tasks on that core,
    // where across cores it wakes an idle one (on a VM whose idle vCPUs halt, a trip through
    // the host).
    let agent = try SSHAgent()
    defer { agent.stop() }
    let agentClient = try SSHAgentClient(agent.socket)
    for _ in 0..<warmUp { try agentClient.requestIdentities() }
    func inTurn() throws -> (sessionGet: [Double], agent: [Double]) {
        var (ours, theirs) = ([Double](), [Double]())
        for _ in 0..<10 {
            for _ in 0..<300 {
                let started = ContinuousClock.now
                try localClient.call("session.get", localParams)
                ours.append((ContinuousClock.now - started).milliseconds)
            }
            for _ in 0..<300 {
                let started = ContinuousClock.now
                try agentClient.requestIdentities()
                theirs.append((ContinuousClock.now - started).milliseconds)
            }
        }
        return (ours.sorted(), theirs.sorted())
    }
    let spread = try inTurn()
    row("  in turn with ssh-agent's trivial call", String(format: "session.get p50 %.3f ms, ssh-agent p50 %.3f ms", percentile(spread.sessionGet, 0.5),
                                                           percentile(spread.agent, 0.5)))
    let oneCore = try pinned([getpid(), standalone.process.processIdentifier, agent.process.processIdentifier], to: "0", inTurn)
    row("  the same, all three on one core", String(format: "session.get p50 %.3f ms, ssh-agent p50 %.3f ms", percentile(oneCore.sessionGet, 0.5),
                                                      percentile(oneCore.agent, 0.5)))
    row("session.get device → hub → device", String(format: "p50 %.3f ms, p99 %.3f ms (target p50 ≤ 0.35 ms)", percentile(forwarded, 0.5), percentile(forwarded, 0.99)))
    row("  CPU per forwarded call: device, hub", String(format: "%.0f µs, %.0f µs (user and kernel)", cpu.0 / calls * 1e6, cpu.1 / calls * 1e6))
    // Its control: the same calls with the bench, the device and the hub on one core (four
    // wake-ups a call, each across cores otherwise). The hub serves the benches after this one.
    let forwardedOneCore = try pinned([getpid(), device.process.processIdentifier, hub.process.processIdentifier], to: "0") {
        try timed(deviceClient, #"{"session":"\#(forwardedToken)"}"#, count: 3000)
    }
    row("  the same, bench, device and hub on one core", String(format: "p50 %.3f ms, p99 %.3f ms", percentile(forwardedOneCore, 0.5), percentile(forwardedOneCore, 0.99)))
}

/// Sync through the hub: one account on two devices; an event sent on A, timed until B's
/// subscriber reads it (the send's own round trip included: an upper bound of commit →
/// delivery); sustained events per second end to end; and a subscriber catching up on 10,000
/// events it missed.
/// Two devices linked to `hub`, one account signed in on both (registered on A): its phone
/// number and each device's session token. The caller stops the devices.
private func linkedPair(hub: Daemon, port: UInt16, pki: BenchPKI, phone: String) throws -> (a: Daemon, b: Daemon, tokenA: String, tokenB: String) {
    let link = "[hub]\nurl = 127.0.0.1:\(port)\nca_file = \(pki.directory)/ca.pem\n"
    let (a, b) = (try Daemon(config: link), try Daemon(config: link))
    let clientA = try Client(a.socket), clientB = try Client(b.socket)
    for client in [clientA, clientB] {
        for _ in 0..<200 where !String(decoding: try client.call("hub.status"), as: UTF8.self).contains(#""state":"connected""#) { usleep(50_000) }
    }
    let started = String(decoding: try clientA.call("account.register.start", #"{"phone":"\#(phone)"}"#), as: UTF8.self)
    guard let flow = started.firstMatch(of: /"flow":"([^"]+)"/)?.output.1 else { throw BenchError(description: started) }
    let code = try hub.spooledCode(to: phone, after: 0)
    let verified = String(decoding: try clientA.call("account.register.verify", #"{"flow":"\#(flow)","code":"\#(code)","password":"bench passphrase long enough"}"#),
                          as: UTF8.self)
    let login = String(decoding: try clientB.call("auth.login", #"{"login":"\#(phone)","password":"bench passphrase long enough"}"#), as: UTF8.self)
    guard let tokenA = verified.firstMatch(of: /"token":"(as1\.[^"]+)"/)?.output.1, let tokenB = login.firstMatch(of: /"token":"(as1\.[^"]+)"/)?.output.1 else {
        throw BenchError(description: verified + login)
    }
    return (a, b, String(tokenA), String(tokenB))
}

/// Group commit at a SQLite hub: 16 senders on device A, every event read at B's subscriber;
/// events/s, and sent → at B at that load, with group commit and, the control in the same run,
/// one commit per event (`[sync] group_commit = no`). Encryption off: the log's figure. Then
/// the ratio's bounds on this machine: the rate the cores allow at the group commit's CPU per
/// event, and the disk's fdatasync, which is all one commit per event waits for that group
/// commit could share.
func groupCommitFigures() throws {
    var rates: [Bool: Double] = [:]
    /// CPU seconds per event, the four processes together.
    var cpuPerEvent: [Bool: Double] = [:]
    for grouped in [false, true] {
        let pki = try BenchPKI()
        defer { try? FileManager.default.removeItem(atPath: pki.directory) }
        let hub = try Daemon(config: benchHubConfig(pki, sync: "group_commit = \(grouped ? "yes" : "no")"))
        defer { hub.stop() }
        let phone = "+37250006666"
        let (a, b, tokenA, tokenB) = try linkedPair(hub: hub, port: try hubPort(hub), pki: pki, phone: phone)
        defer { a.stop(); b.stop() }
        try Client(hub.socket).call("admin.accounts.e2ee", #"{"account":"\#(phone)","e2ee":"off"}"#)
        let watcher = try Client(b.socket)
        try watcher.call("sync.subscribe", #"{"session":"\#(tokenB)"}"#)
        let (senders, each) = (16, 250)
        let sentAt = Mutex<[Int: ContinuousClock.Instant]>([:])
        let socket = a.socket
        let threads = (0..<senders).map { worker in
            Thread {
                guard let client = try? Client(socket) else { return }
                for index in 0..<each {
                    let n = worker * 1000 + index
                    sentAt.withLock { $0[n] = .now }
                    _ = try? client.call("sync.send", #"{"session":"\#(tokenA)","kind":"message","conversation":"c\#(worker)","body":{"n":\#(n)}}"#)
                }
            }
        }
        let pids = [hub, a, b].map(\.process.processIdentifier) + [getpid()]
        let cpuBefore = pids.map(cpuSeconds(of:))
        let flowStarted = ContinuousClock.now
        threads.forEach { $0.start() }
        var latencies: [Double] = []
        // Read off the raw line, as the other sync rows do: the bench shares the two cores with
        // the three daemons, and with a regular expression per event it used twice the CPU.
        while latencies.count < senders * each, let line = try watcher.connection.readLine() {
            guard line.firstRange(of: subscriberEventMethod) != nil, let n = number(after: eventNumberKey, in: line) else { continue }
            let arrived = ContinuousClock.now
            if let sent = sentAt.withLock({ $0[n] }) { latencies.append((arrived - sent).milliseconds) }
        }
        let seconds = (ContinuousClock.now - flowStarted).milliseconds / 1000
        let rate = Double(senders * each) / seconds
        rates[grouped] = rate
        let busy = zip(pids.map(cpuSeconds(of:)), cpuBefore).map { ($0 - $1) / seconds * 100 }
        cpuPerEvent[grouped] = busy.reduce(0, +) / 100 / rate
        latencies.sort()
        let label = grouped ? "group commit" : "one commit per event"
        row("sync through a SQLite hub, 16 senders on A → B", String(format: "%.0f events/s, %@ (CPU: hub %.0f%%, A %.0f%%, B %.0f%%, bench %.0f%% of a core)",
                                                                       rate, label, busy[0], busy[1], busy[2], busy[3]))
        row("  sent on A → at B at that load", String(format: "p50 %.1f ms, p99 %.1f ms (target p99 ≤ 50 ms)", percentile(latencies, 0.5), percentile(latencies, 0.99)))
    }
    let perEventRate = max(1, rates[false] ?? 1)
    row("  group commit ÷ one commit per event (target ≥ 5)", String(format: "%.2f (target ≥ 4,000 events/s)", (rates[true] ?? 0) / perEventRate))
    // The controls: how far any grouping could take the ratio on this machine. The four
    // processes share its cores, so at the group commit's CPU per event no rate is above the
    // ceiling; and what one commit per event waits for the disk is its fdatasync.
    let cores = Double(ProcessInfo.processInfo.activeProcessorCount)
    if let cpu = cpuPerEvent[true], cpu > 0 {
        let ceiling = cores / cpu
        row("  ceiling at group commit's CPU per event", String(format: "%.0f events/s (%.0f cores ÷ %.0f µs) = %.2f× one commit per event",
                                                            ceiling, cores, cpu * 1e6, ceiling / perEventRate))
    }
    let syncs = try fdatasyncLatencies()
    row("  fdatasync on the hubs' disk (control)", String(format: "p50 %.0f µs, p99 %.0f µs: %.0f%% of one commit per event's %.0f µs",
                                                         percentile(syncs, 0.5) * 1000, percentile(syncs, 0.99) * 1000,
                                                         percentile(syncs, 0.5) / 1000 * perEventRate * 100, 1e6 / perEventRate))
}

/// fdatasync after a 4 KiB write, 1,000 times, in a file where the bench's daemons keep their
/// state: what a commit that waits for the disk waits for (ms, sorted).
private func fdatasyncLatencies() throws -> [Double] {
    var template = Array("/tmp/authd-bench-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { throw BenchError(description: "mkdtemp: \(String(cString: strerror(errno)))") }
    let directory = String(cString: made)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let fd = open(directory + "/journal", O_RDWR | O_CREAT, 0o600)
    guard fd >= 0 else { throw BenchError(description: "open: \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    let page = [UInt8](repeating: 0xA5, count: 4096)
    var latencies: [Double] = []
    for index in 0..<1000 {
        guard pwrite(fd, page, page.count, off_t(index % 64 * page.count)) == page.count else { throw BenchError(description: "pwrite: \(String(cString: strerror(errno)))") }
        let started = ContinuousClock.now
        guard fdatasync(fd) == 0 else { throw BenchError(description: "fdatasync: \(String(cString: strerror(errno)))") }
        latencies.append((ContinuousClock.now - started).milliseconds)
    }
    return latencies.sorted()
}

private func syncFigures(hub: Daemon, port: UInt16, pki: BenchPKI) throws {
    let (a, b, token, tokenB) = try linkedPair(hub: hub, port: port, pki: pki, phone: "+37250008888")
    defer { a.stop(); b.stop() }
    let phone = "+37250008888"
    let clientA = try Client(a.socket), clientB = try Client(b.socket)
    let watcher = try Client(b.socket)
    try watcher.call("sync.subscribe", #"{"session":"\#(tokenB)"}"#)
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
    // The same loops with the account's end-to-end encryption on (as every new account) and
    // off, one after the other in this run.
    let admin = try Client(hub.socket)
    for encrypted in [true, false] {
        try admin.call("admin.accounts.e2ee", #"{"account":"\#(phone)","e2ee":"\#(encrypted ? "required" : "off")"}"#)
        let mode = encrypted ? "end-to-end encrypted" : "not encrypted"
        for index in 0..<100 { try send(clientA, index); try receive() }
        var latencies: [Double] = []
        for index in 0..<1000 {
            let started = ContinuousClock.now
            try send(clientA, index)
            try receive()
            latencies.append((ContinuousClock.now - started).milliseconds)
        }
        latencies.sort()
        row("sync: sent on A → at B's subscriber (2 devices)", String(format: "p50 %.2f ms, p99 %.2f ms, %@ (target p99 ≤ 50 ms)",
                                                                       percentile(latencies, 0.5), percentile(latencies, 0.99), mode))

        // Sustained: four senders on A, everything read at B.
        let total = 4000
        let flowStarted = ContinuousClock.now
        senders(4, each: total / 4, offset: encrypted ? 0 : 500_000).forEach { $0.start() }
        for _ in 0..<total { try receive() }
        row("sync: events/s through one hub, A → B", String(format: "%.0f/s (%d events, 4 senders), %@",
                                                              Double(total) / (ContinuousClock.now - flowStarted).milliseconds * 1000, total, mode))
    }
    try admin.call("admin.accounts.e2ee", #"{"account":"\#(phone)","e2ee":"required"}"#)

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
    guard sentAll else { throw BenchError(description: "the 10,000 events were not all sent; device A \(a.state); device B \(b.state)") }
    let catchUpStarted = ContinuousClock.now
    try late.call("sync.subscribe", #"{"session":"\#(tokenB)","since":\#(head)}"#)
    var caught = 0
    while caught < missed, let line = try late.connection.readLine() {
        if String(decoding: line, as: UTF8.self).contains(#""method":"sync.event""#) { caught += 1 }
    }
    row("sync: catch-up of 10,000 missed events at B", String(format: "%.0f ms (%.0f events/s)", (ContinuousClock.now - catchUpStarted).milliseconds,
                                                              Double(caught) / (ContinuousClock.now - catchUpStarted).milliseconds * 1000))
}

/// What end-to-end encryption costs one event, as a device does it (the JOSE module authd uses):
/// sealing (one JWE to every device of the account, signed by the sender) and opening (the
/// signature checked, this device's key unwrapped, the content decrypted), for an account of 2
/// and of 10 devices; a body of a typical chat message.
func e2eeCryptoFigures() throws {
    let body = Array(#"{"kind":"message","conversation":"family","idempotency_key":"authd-0123456789abcdefghijkl","body":{"text":"dinner at 7? I'll bring the salad and something to drink"}}"#.utf8)
    let sender = try P256PrivateKey.generate()
    for count in [2, 10] {
        let agreements = try (0..<count).map { _ in try P256PrivateKey.generate() }
        let recipients = try agreements.enumerated().map { JWE.Recipient(kid: "device-\($0.offset)", key: try $0.element.publicKey()) }
        let signer = try sender.publicKey()
        var sealTimes: [Double] = [], openTimes: [Double] = []
        var sealed = ""
        for _ in 0..<1000 {
            let started = ContinuousClock.now
            sealed = try SignedEnvelope.sign(jwe: try JWE.encrypt(body, to: recipients), kid: "device-0", key: sender)
            sealTimes.append((ContinuousClock.now - started).milliseconds * 1000)
            let opening = ContinuousClock.now
            let plaintext = try JWE.decrypt(try SignedEnvelope.open(sealed, signerKey: signer), kid: "device-1", key: agreements[1])
            openTimes.append((ContinuousClock.now - opening).milliseconds * 1000)
            guard plaintext == body else { throw BenchError(description: "an opened event differs from what was sealed") }
        }
        sealTimes.sort()
        openTimes.sort()
        row("e2ee: seal one event, account of \(count) devices", String(format: "p50 %.0f µs, p99 %.0f µs (%d B of JSON → %d B sealed)",
                                                                          percentile(sealTimes, 0.5), percentile(sealTimes, 0.99), body.count, sealed.utf8.count))
        row("e2ee: open one event there", String(format: "p50 %.0f µs, p99 %.0f µs", percentile(openTimes, 0.5), percentile(openTimes, 0.99)))
    }
}

// MARK: Sync at 1,000 devices

/// A device without a daemon behind it: a TLS client with a certificate of its own (so a machine
/// of its own at the hub) that speaks the hub protocol itself, `link.forward` out and
/// `link.sync_event` in. It never blocks: `flush` and `readLines` do what the socket allows
/// now, so one thread polls all 1,000 of them (a daemon per device, or a thread per device,
/// would not fit on this machine beside the hub).
private final class LightDevice {
    let held: HeldDevice
    var fd: Int32 { held.fd }
    /// Its device key (the TLS key), device id and key-agreement key: it seals and opens
    /// events as a device's authd does.
    let key: P256PrivateKey
    let id: String
    let agreement: P256PrivateKey
    private var inbox: [UInt8] = []
    /// Bytes `SSL_write` was given and has not taken yet: OpenSSL wants a retry with the very
    /// same buffer, so it is not appended to while it waits; `queued` collects the rest.
    private var writing: [UInt8] = []
    private var queued: [UInt8] = []
    private var nextID = 1
    var wantsWrite: Bool { !writing.isEmpty || !queued.isEmpty }

    init(port: UInt16, context: TLSContext, key: P256PrivateKey) throws {
        held = try HeldDevice(port: port, context: context)
        self.key = key
        id = DeviceIDText.of(keySHA256: OpenSSL.sha256(try key.publicKey().spki))
        agreement = try P256PrivateKey.generate()
    }

    /// Tells the hub its key-agreement key, signed by its device key (`link.e2ee.publish`).
    func publish() throws {
        let statement = try PublishedDeviceKey.make(deviceID: id, signingKey: key, agreementKey: try agreement.publicKey()).statement
        let params = #"{"spki":"\#(Base64URL.encode(try key.publicKey().spki))","statement":"\#(statement)"}"#
        queued += #"{"jsonrpc":"2.0","id":\#(nextID),"method":"link.e2ee.publish","params":\#(params)}\#n"#.utf8
        nextID += 1
        try flush()
    }

    /// close_notify before `held` closes the socket, so the hub ends the connection at once.
    deinit { held.stream.shutdown() }

    /// Sends `method` for a process of uid 1000 on this machine.
    func forward(_ method: String, _ params: String) throws {
        queued += #"{"jsonrpc":"2.0","id":\#(nextID),"method":"link.forward","params":{"method":"\#(method)","params":\#(params),"caller":{"uid":1000}}}\#n"#.utf8
        nextID += 1
        try flush()
    }

    /// Writes what the socket takes now.
    func flush() throws {
        while true {
            if writing.isEmpty {
                guard !queued.isEmpty else { return }
                swap(&writing, &queued)
            }
            switch try writing.withUnsafeBytes({ try held.stream.write($0) }) {
            case .done: writing.removeAll(keepingCapacity: true)
            case .wantRead, .wantWrite: return
            case .closed: throw BenchError(description: "the hub closed a light device's connection")
            }
        }
    }

    /// The complete lines that can be read now.
    func readLines() throws -> [[UInt8]] {
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        reading: while true {
            switch try chunk.withUnsafeMutableBytes({ try held.stream.read(into: $0) }) {
            case .done(let count): inbox += chunk[0..<count]
            case .wantRead, .wantWrite: break reading
            case .closed: throw BenchError(description: "the hub closed a light device's connection")
            }
        }
        var lines: [[UInt8]] = []
        var start = 0
        while let newline = inbox[start...].firstIndex(of: UInt8(ascii: "\n")) {
            lines.append(Array(inbox[start..<newline]))
            start = newline + 1
        }
        inbox.removeFirst(start)
        return lines
    }
}

/// One thread's poll(2) over many light devices.
private struct LightDevicePoller {
    private var descriptors: [pollfd]

    init(_ devices: [LightDevice]) { descriptors = devices.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) } }

    /// Waits up to `milliseconds` for any device to be readable, then hands every complete
    /// line read to `handle` with the device's index.
    mutating func poll(_ devices: [LightDevice], milliseconds: Int32, handle: (Int, [UInt8]) throws -> Void) throws {
        for index in devices.indices {
            descriptors[index].events = Int16(POLLIN) | (devices[index].wantsWrite ? Int16(POLLOUT) : 0)
            descriptors[index].revents = 0
        }
        guard Glibc.poll(&descriptors, nfds_t(descriptors.count), milliseconds) > 0 else { return }
        for index in devices.indices where descriptors[index].revents != 0 {
            try devices[index].flush()
            for line in try devices[index].readLines() { try handle(index, line) }
        }
    }
}

private let syncEventMethod = Array(#""method":"link.sync_event""#.utf8)
private let subscriberEventMethod = Array(#""method":"sync.event""#.utf8)
private let eventNumberKey = Array(#""n":"#.utf8)
private let sealedKey = Array(#""sealed":""#.utf8)
private let benchSendKey = Array(#""bench_send":"#.utf8)

/// The `bench_send` number in an event's body, read off the raw line (no JSON decoding in
/// the timed loop: the figure is the hub's).
private func benchSend(in line: [UInt8]) -> Int? { number(after: benchSendKey, in: line) }

/// The digits right after `key` in `line`, as a number; nil when `key` is not there or no digit
/// follows it.
private func number(after key: [UInt8], in line: [UInt8]) -> Int? {
    guard let key = line.firstRange(of: key) else { return nil }
    var value = 0
    var index = key.upperBound
    while index < line.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(line[index]) {
        value = value * 10 + Int(line[index] - UInt8(ascii: "0"))
        index += 1
    }
    return index > key.upperBound ? value : nil
}

/// The code of the spooled SMS to each of `phones` (the spool names each file by its number),
/// waiting up to 10 s for them all.
private func spooledCodes(in spool: String, to phones: [String]) throws -> [String] {
    var codes: [String: String] = [:]
    for _ in 0..<1000 {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: spool)) ?? [] {
            // TIME-NUMBER-UNIQUE.sms; UNIQUE is base64url and may hold "-" too.
            let parts = name.split(separator: "-")
            guard parts.count >= 3, codes[String(parts[1])] == nil,
                  let text = try? String(contentsOfFile: spool + "/" + name, encoding: .utf8),
                  let range = text.range(of: #"code is [0-9]{6}"#, options: .regularExpression) else { continue }
            codes[String(parts[1])] = String(text[range].suffix(6))
        }
        if phones.allSatisfy({ codes[$0] != nil }) { return phones.map { codes[$0]! } }
        usleep(10_000)
    }
    throw BenchError(description: "the spool lacks SMS to \(phones.filter { codes[$0] == nil }.count) of the numbers")
}

/// Sync at scale: 500 accounts, each signed in on two light devices (1,000 connections, each a
/// machine of its own at the hub). An event sent by one device of an account is timed until the
/// other reads it as `link.sync_event` (the send's own round trip included, as in
/// `syncFigures`); then many senders at once, every delivery counted; and the hub's memory.
/// `receivers`: the daemon the B devices link to (another replica of the same database); the A
/// devices, the registrations and the hub's figures are at `hub`. `label` starts each row.
func syncFiguresAtScale(hub: Daemon, hubClient: Client, port: UInt16, pki: BenchPKI, receivers: Daemon? = nil,
                        label: String = "sync at 1,000 devices", accounts: Int = 500) throws {
    let password = "bench passphrase long enough"
    let phones = (0..<accounts).map { "+3725000\(1000 + $0)" }
    let setupStarted = ContinuousClock.now
    let receiverPort = try receivers.map(hubPort)
    /// What the daemon device `index` links to last said, for an error it answered the device.
    func said(to index: Int) -> String { " — " + (index % 2 == 1 ? receivers ?? hub : hub).state }

    // The devices: one handshake after another (the hub lets 64 run at once from one address;
    // one at a time is fast enough here and keeps the setup simple).
    var devices: [LightDevice] = []
    defer { devices.removeAll() }
    for index in 0..<2 * accounts {
        let key = try P256PrivateKey.generate()
        let certificate = try X509Certificate.selfSigned(commonName: "light device \(index)", key: key, serial: 10_000 + index, days: 2)
        let context = try TLSContext.client(certificate: certificate, key: key, trust: .certificateAuthority(file: pki.directory + "/ca.pem"))
        devices.append(try LightDevice(port: index % 2 == 1 ? receiverPort ?? port : port, context: context, key: key))
    }

    // The accounts, at the hub's own socket: every start first (no hashing), the codes from the
    // spool by number, then the verifications, each an Argon2id hash, on four connections so
    // the hub's hashing workers are never idle.
    var flows: [String] = []
    for phone in phones {
        let started = String(decoding: try hubClient.call("account.register.start", #"{"phone":"\#(phone)"}"#), as: UTF8.self)
        guard let flow = started.firstMatch(of: /"flow":"([^"]+)"/)?.output.1 else { throw BenchError(description: started) }
        flows.append(String(flow))
    }
    let jobs = Array(zip(flows, try spooledCodes(in: hub.directory + "/state/sms-spool", to: phones)))
    let failure = Mutex<String?>(nil)
    let finished = DispatchSemaphore(value: 0)
    let socket = hub.socket
    let workers = 4
    for worker in 0..<workers {
        Thread {
            defer { finished.signal() }
            do {
                let client = try Client(socket)
                for index in stride(from: worker, to: jobs.count, by: workers) {
                    let params = #"{"flow":"\#(jobs[index].0)","code":"\#(jobs[index].1)","password":"\#(password)"}"#
                    let verified = String(decoding: try client.call("account.register.verify", params), as: UTF8.self)
                    guard let token = verified.firstMatch(of: /"token":"(as1\.[^"]+)"/)?.output.1 else { throw BenchError(description: verified) }
                    // The registration's session holds one of the account's two device places
                    // (`[accounts] device_limit`); both are for the light devices.
                    try client.call("auth.logout", #"{"session":"\#(token)"}"#)
                }
            } catch {
                failure.withLock { $0 = $0 ?? "\(error)" }
            }
        }.start()
    }
    for _ in 0..<workers {
        guard finished.wait(timeout: .now() + .seconds(120)) == .success else { throw BenchError(description: "registering \(accounts) accounts took over 120 s") }
    }
    if let failed = failure.withLock({ $0 }) { throw BenchError(description: "registration: \(failed)") }

    var poller = LightDevicePoller(devices)
    // Sign-ins, eight in flight (setup: Argon2id bounds it, not the link). As a device's authd
    // does, each device tells its key-agreement key once its sign-in is answered (the hub takes
    // it from no machine without a session), and only then is it signed in for its user.
    var tokens = [String](repeating: "", count: devices.count)
    var published = [Bool](repeating: false, count: devices.count)
    var nextLogin = 0, signedIn = 0
    func signIn() throws {
        try devices[nextLogin].forward("auth.login", #"{"login":"\#(phones[nextLogin / 2])","password":"\#(password)"}"#)
        nextLogin += 1
    }
    while nextLogin < min(8, devices.count) { try signIn() }
    let signInDeadline = ContinuousClock.now + .seconds(120)
    while signedIn < devices.count {
        guard ContinuousClock.now < signInDeadline else { throw BenchError(description: "only \(signedIn) of \(devices.count) sign-ins in 120 s") }
        try poller.poll(devices, milliseconds: 100) { index, line in
            guard line.firstRange(of: syncEventMethod) == nil else { return }
            let text = String(decoding: line, as: UTF8.self)
            guard tokens[index].isEmpty else {
                guard !published[index] else { return }  // a notice: nothing more is answered to it here
                guard line.firstRange(of: Array(#""result""#.utf8)) != nil else { throw BenchError(description: "link.e2ee.publish: " + text + said(to: index)) }
                published[index] = true
                signedIn += 1
                if nextLogin < devices.count { try signIn() }
                return
            }
            guard let token = text.firstMatch(of: /"token":"(as1\.[^"]+)"/)?.output.1 else { throw BenchError(description: "auth.login: " + text + said(to: index)) }
            tokens[index] = String(token)
            try devices[index].publish()
        }
    }
    let setup = (ContinuousClock.now - setupStarted).milliseconds / 1000
    let signedInBytes = hub.residentBytes
    let signedInRollup = hub.memoryRollup
    let signedInStatus = String(decoding: try hubClient.call("admin.status"), as: UTF8.self)
    let signedInHashing = signedInStatus.firstMatch(of: /"password_hashing_bytes":([0-9]+)/).flatMap { Double($0.output.1) } ?? .nan

    /// Sends `total` events, at most `window` in flight, round-robin over the accounts from
    /// `first` on: device A (2k) of account k sends, and the send counts as delivered when device
    /// B (2k + 1) reads it. Returns each send's latency (ms), the time to the last delivery at a
    /// B, and every `link.sync_event` of these sends read at any device (the hub pushes to the
    /// sender's machine too) once the rest have arrived or 2 s have passed.
    /// `encrypted`: A seals each event to A and B and signs it, and the device that reads it
    /// checks the signature and decrypts it first, as their authd would.
    func sends(_ total: Int, window: Int, first: Int, encrypted: Bool) throws -> (latencies: [Double], elapsed: Duration, deliveries: Int) {
        var pending: [Int: (started: ContinuousClock.Instant, receiver: Int)] = [:]
        var latencies: [Double] = []
        var sent = 0, deliveries = 0
        func send() throws {
            let number = first + sent
            let account = number % accounts
            pending[number] = (ContinuousClock.now, 2 * account + 1)
            let body = #"{"bench_send":\#(number)}"#
            if encrypted {
                let (a, b) = (devices[2 * account], devices[2 * account + 1])
                let inner = #"{"kind":"message","conversation":"bench","idempotency_key":"bench-\#(number)","body":\#(body)}"#
                let jwe = try JWE.encrypt(Array(inner.utf8), to: [JWE.Recipient(kid: a.id, key: try a.agreement.publicKey()),
                                                                  JWE.Recipient(kid: b.id, key: try b.agreement.publicKey())])
                let sealed = try SignedEnvelope.sign(jwe: jwe, kid: a.id, key: a.key)
                try a.forward("sync.send", #"{"session":"\#(tokens[2 * account])","kind":"message","conversation":"bench","idempotency_key":"bench-\#(number)","body":null,"sealed":"\#(sealed)"}"#)
            } else {
                try devices[2 * account].forward("sync.send", #"{"session":"\#(tokens[2 * account])","kind":"message","conversation":"bench","body":\#(body)}"#)
            }
            sent += 1
        }
        /// The event's body as the device reads it: opened first when it is sealed.
        func readable(_ index: Int, _ line: [UInt8]) throws -> [UInt8] {
            guard encrypted, let start = line.firstRange(of: sealedKey)?.upperBound, let end = line[start...].firstIndex(of: UInt8(ascii: "\"")) else { return line }
            let sender = devices[index & ~1]
            let jwe = try SignedEnvelope.open(String(decoding: line[start..<end], as: UTF8.self), signerKey: try sender.key.publicKey())
            return try JWE.decrypt(jwe, kid: devices[index].id, key: devices[index].agreement)
        }
        func handle(_ index: Int, _ line: [UInt8]) throws {
            guard line.firstRange(of: syncEventMethod) != nil, let number = benchSend(in: try readable(index, line)) else {
                // Not an event: the answer to a send, which matters only when it is an error.
                if line.firstRange(of: Array(#""error":"#.utf8)) != nil { throw BenchError(description: "sync.send: " + String(decoding: line, as: UTF8.self) + said(to: index)) }
                return
            }
            guard number >= first, number < first + total else { return }
            deliveries += 1
            if let waiting = pending[number], waiting.receiver == index {
                latencies.append((ContinuousClock.now - waiting.started).milliseconds)
                pending[number] = nil
                if sent < total { try send() }
            }
        }
        let started = ContinuousClock.now
        let deadline = started + .seconds(60)
        while sent < min(window, total) { try send() }
        while !pending.isEmpty {
            guard ContinuousClock.now < deadline else { throw BenchError(description: "\(pending.count) of \(total) events not delivered in 60 s") }
            try poller.poll(devices, milliseconds: 100, handle: handle)
        }
        let elapsed = ContinuousClock.now - started
        let drainDeadline = ContinuousClock.now + .seconds(2)
        while deliveries < 2 * total, ContinuousClock.now < drainDeadline { try poller.poll(devices, milliseconds: 100, handle: handle) }
        return (latencies.sorted(), elapsed, deliveries)
    }

    // Encrypted (as every new account), then with every account's encryption turned off.
    var first = 0
    for encrypted in [true, false] {
        if !encrypted {
            for phone in phones { try hubClient.call("admin.accounts.e2ee", #"{"account":"\#(phone)","e2ee":"off"}"#) }
        }
        let mode = encrypted ? "end-to-end encrypted" : "not encrypted"
        // One send in flight: the hub commits ~150–200 events a second here, so even four in
        // flight would queue at the hub and time the queue, not commit → delivery.
        _ = try sends(accounts, window: 1, first: first, encrypted: encrypted)  // warm-up: every account once
        let (latencyTotal, flowTotal) = (4 * accounts, 6 * accounts)  // 2,000 and 3,000 at 500 accounts
        let latency = try sends(latencyTotal, window: 1, first: first + accounts, encrypted: encrypted)
        row("\(label): sent on A → at B", String(format: "p50 %.2f ms, p99 %.2f ms, %@ (target p99 ≤ 50 ms; %@ sends over %d accounts, 1 in flight)",
                                                              percentile(latency.latencies, 0.5), percentile(latency.latencies, 0.99), mode, grouped(latencyTotal), accounts))
        // The CPU both sides used says whose limit the rate is (the two share this machine's cores).
        let (hubBefore, benchBefore, flowStarted) = (cpuSeconds(of: hub.process.processIdentifier), cpuSeconds(of: getpid()), ContinuousClock.now)
        let flow = try sends(flowTotal, window: 64, first: first + accounts + latencyTotal, encrypted: encrypted)
        let flowSeconds = (ContinuousClock.now - flowStarted).milliseconds / 1000
        let (hubCPU, benchCPU) = ((cpuSeconds(of: hub.process.processIdentifier) - hubBefore) / flowSeconds, (cpuSeconds(of: getpid()) - benchBefore) / flowSeconds)
        row("\(label): events/s" + (receivers == nil ? " through one hub" : ""), String(format: "%.0f/s, %@ (%d events, 64 in flight; %d of %d deliveries incl. the senders' machines; "
                                                                       + "CPU: hub %.0f%%, bench %.0f%% of a core)",
                                                                       Double(flowTotal) / flow.elapsed.milliseconds * 1000, mode, flowTotal, flow.deliveries, 2 * flowTotal,
                                                                       hubCPU * 100, benchCPU * 100))
        first += accounts + latencyTotal + flowTotal
    }
    let status = String(decoding: try hubClient.call("hub.status"), as: UTF8.self)
    let connected = status.firstMatch(of: /"devices_connected":([0-9]+)/).flatMap { Int($0.output.1) } ?? 0
    row(receivers == nil ? "hub RSS with \(grouped(2 * accounts)) signed-in light devices" : "\(label): first replica's RSS", String(format: "%.1f MB, %.1f MB after the sends (%d device connections)",
                                                             Double(signedInBytes) / 1e6, Double(hub.residentBytes) / 1e6, connected))
    if receivers == nil, let rss = signedInRollup["Rss"], let anonymous = signedInRollup["Anonymous"] {
        // Where the first figure's memory is: the daemon's own (of it, the Argon2id workers'
        // 19 MiB each), and pages of its binary and shared libraries.
        row("  of the first: anonymous, file-backed", String(format: "%.1f MB (password hashing %.1f MB), %.1f MB (target ≤ 100 MB in all)",
                                                             Double(anonymous) / 1e6, signedInHashing / 1e6, Double(rss - anonymous) / 1e6))
    }
    row("  (setup: \(accounts) accounts, \(grouped(2 * accounts)) sign-ins; in all)", String(format: "%.0f s; %.0f s", setup, (ContinuousClock.now - setupStarted).milliseconds / 1000))
}

/// Runs `body` with every thread of `pids` on `cores` (a list taskset(1) reads: `0`, `0-1`;
/// threads started meanwhile inherit their starter's), then gives each process back the cores
/// it had. Each step is checked thread by thread: no later figure runs pinned without saying so.
func pinned<T>(_ pids: [Int32], to cores: String, _ body: () throws -> T) throws -> T {
    let had = try pids.map { pid in
        guard let cores = allowedCores(pid, thread: pid) else { throw BenchError(description: "no process \(pid) to pin") }
        return (pid, cores)
    }
    for pid in pids { try pin(pid, to: cores) }
    let result = Result { try body() }
    for (pid, cores) in had { try pin(pid, to: cores) }
    return try result.get()
}

/// taskset stops at a thread that ends while it works: so every thread is checked afterwards,
/// and taskset runs again (at most five times) while one is not on `cores`.
private func pin(_ pid: Int32, to cores: String) throws {
    for _ in 0..<5 {
        let taskset = Process()
        taskset.executableURL = URL(fileURLWithPath: "/usr/bin/taskset")
        taskset.arguments = ["--all-tasks", "--cpu-list", "--pid", cores, String(pid)]
        taskset.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        taskset.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try taskset.run()
        taskset.waitUntilExit()
        let threads = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []).compactMap { Int32($0) }
        // A thread that ended meanwhile has no status to read, and needs no cores.
        if threads.allSatisfy({ allowedCores(pid, thread: $0).map { $0 == cores } ?? true }) { return }
    }
    throw BenchError(description: "taskset could not put every thread of process \(pid) on cores \(cores)")
}

/// The cores a thread may run on, as /proc lists them (`0-1`); nil once it has ended.
private func allowedCores(_ pid: Int32, thread: Int32) -> String? {
    statusField("Cpus_allowed_list", of: "/proc/\(pid)/task/\(thread)").map(String.init)
}
