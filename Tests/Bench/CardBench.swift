import AuthdClient
import CPCSC
import Foundation
import Glibc
import Protocol

// What authd adds to a card login. The virtual card runs behind a private pcscd; a
// traced login gives the exact APDU sequence, which is then replayed straight over PC/SC
// (connect, transaction, the same commands, reset) alternately with card.login through authd.

/// A private pcscd (socket-activated, like the tests' rig) with the virtual card on vpcd.
final class CardStack {
    let directory: String
    var socket: String { directory + "/pcscd.comm" }
    var trace: String { directory + "/trace" }
    private var children: [pid_t] = []

    init(mode: String) throws {
        var template = Array("/tmp/authd-bench-card-XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template)!)
        let port = try freeTCPPortPair()
        try FileManager.default.createDirectory(atPath: directory + "/reader.conf.d", withIntermediateDirectories: true)
        try """
        FRIENDLYNAME "Virtual PCD"
        DEVICENAME   /dev/null:\(port)
        LIBPATH      /usr/lib/pcsc/drivers/serial/libifdvpcd.so
        CHANNELID    \(port)

        """.write(toFile: directory + "/reader.conf.d/vpcd", atomically: true, encoding: .utf8)
        let vcard = binDirectory + "/authd-vcard"
        let profile = directory + "/card.json"
        try Self.wait(try Self.spawn([vcard, "generate", "--out", directory, "--mode", mode], log: directory + "/generate.log"))
        children.append(try Self.spawn(["/usr/bin/systemd-socket-activate", "-l", socket, "-E", "PCSCLITE_CSOCK_NAME=\(socket)",
                                        "/usr/sbin/pcscd", "-f", "-c", directory + "/reader.conf.d"], log: directory + "/pcscd.log"))
        for _ in 0..<200 where access(socket, F_OK) != 0 { usleep(10_000) }
        children.append(try Self.spawn([vcard, "run", profile, "--port", String(port), "--trace", trace], log: directory + "/vcard.log"))
    }

    func stop() {
        for pid in children { kill(pid, SIGKILL); var status: Int32 = 0; waitpid(pid, &status, 0) }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The commands and status words of the last card session in the trace.
    func lastSession() throws -> [(command: [UInt8], sw: UInt16)] {
        let lines = try String(contentsOfFile: trace, encoding: .utf8).split(separator: "\n")
        var session: [(command: [UInt8], sw: UInt16)] = []
        var current: [(command: [UInt8], sw: UInt16)] = []
        var command: [UInt8]?
        for line in lines {
            if line == "P" {
                if !current.isEmpty { session = current }
                current = []
            } else if line.hasPrefix("C "), let bytes = Hex.decode(String(line.dropFirst(2))) {
                command = bytes
            } else if line.hasPrefix("R "), let bytes = Hex.decode(String(line.dropFirst(2))), bytes.count >= 2, let sent = command {
                current.append((sent, UInt16(bytes[bytes.count - 2]) << 8 | UInt16(bytes[bytes.count - 1])))
                command = nil
            }
        }
        if !current.isEmpty { session = current }
        guard !session.isEmpty else { throw BenchError(description: "the trace holds no card session") }
        return session
    }

    static func spawn(_ arguments: [String], log: String, environment: [String] = []) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = (["PATH=/usr/sbin:/usr/bin:/bin"] + environment).map { strdup($0) } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, arguments[0], &actions, nil, argv, envp)
        guard status == 0 else { throw BenchError(description: "posix_spawn \(arguments[0]): \(String(cString: strerror(status)))") }
        return pid
    }

    private static func wait(_ pid: pid_t) throws {
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        guard status == 0 else { throw BenchError(description: "authd-vcard generate failed") }
    }
}

/// The APDUs of one login sent directly through libpcsclite, as authd's transport does it:
/// connect shared, one transaction, transmit, end, disconnect with reset. Every status word
/// must match the traced login's.
final class DirectPCSC {
    private var context: SCARDCONTEXT = 0
    let reader: String

    init(socket: String) throws {
        setenv("PCSCLITE_CSOCK_NAME", socket, 1)
        guard SCardEstablishContext(DWORD(SCARD_SCOPE_SYSTEM), nil, nil, &context) == 0 else { throw BenchError(description: "SCardEstablishContext failed") }
        var length: DWORD = 0
        var names = [CChar](repeating: 0, count: 4096)
        length = DWORD(names.count)
        guard SCardListReaders(context, nil, &names, &length) == 0 else { throw BenchError(description: "SCardListReaders failed") }
        reader = names.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    deinit { SCardReleaseContext(context) }

    func replay(_ session: [(command: [UInt8], sw: UInt16)]) throws {
        var handle: SCARDHANDLE = 0
        var active: DWORD = 0
        guard SCardConnect(context, reader, DWORD(SCARD_SHARE_SHARED), DWORD(SCARD_PROTOCOL_T0 | SCARD_PROTOCOL_T1), &handle, &active) == 0 else {
            throw BenchError(description: "SCardConnect failed")
        }
        defer { SCardDisconnect(handle, DWORD(SCARD_RESET_CARD)) }
        guard SCardBeginTransaction(handle) == 0 else { throw BenchError(description: "SCardBeginTransaction failed") }
        defer { SCardEndTransaction(handle, DWORD(SCARD_LEAVE_CARD)) }
        var response = [UInt8](repeating: 0, count: 65538)
        for (command, expected) in session {
            var length = DWORD(response.count)
            guard SCardTransmit(handle, authd_pcsc_pci(active), command, DWORD(command.count), nil, &response, &length) == 0, length >= 2 else {
                throw BenchError(description: "SCardTransmit failed")
            }
            let sw = UInt16(response[Int(length) - 2]) << 8 | UInt16(response[Int(length) - 1])
            guard sw == expected else { throw BenchError(description: String(format: "replay: status %04X where the login had %04X", sw, expected)) }
        }
    }
}

/// `card.login` with PIN1 answered at once; returns the milliseconds from request to token.
func timedCardLogin(_ client: Client, aud: String) throws -> Double {
    let started = ContinuousClock.now
    let result = try client.callAnswering("card.login", #"{"aud":"\#(aud)"}"#, answers: ["pin1": "1234"])
    let elapsed = (ContinuousClock.now - started).milliseconds
    guard result["token"]?.stringValue != nil else { throw BenchError(description: "card.login failed: \(result)") }
    return elapsed
}

extension Client {
    /// A request whose `prompt` notifications are answered from `answers` (by kind) and the
    /// others declined; returns its result.
    func callAnswering(_ method: String, _ params: String, answers: [String: String]) throws -> JSONValue {
        try rpc.callRaw(method: method, params: try WireCodec.decode(JSONValue.self, from: Data(params.utf8))) { name, prompt in
            guard name == "prompt", let prompt, prompt["expects_answer"] == .bool(true), let id = prompt["prompt_id"],
                  let kind = prompt["kind"]?.stringValue else { return }
            if let answer = answers[kind] {
                try rpc.notify(method: "prompt.answer", params: ["prompt_id": id, "value": .string(answer)] as JSONValue)
            } else {
                try rpc.notify(method: "prompt.cancel", params: ["prompt_id": id] as JSONValue)
            }
        }
    }
}

func cardFigures() throws {
    let rounds = 30
    let stack = try CardStack(mode: "contact")
    defer { stack.stop() }
    let daemon = try Daemon(environment: ["PCSCLITE_CSOCK_NAME": stack.socket])
    defer { daemon.stop() }
    let client = try Client(daemon.socket)
    _ = try timedCardLogin(client, aud: "bench")  // warm-up, and the traced login
    let session = try stack.lastSession()
    let direct = try DirectPCSC(socket: stack.socket)
    var viaAuthd: [Double] = [], replayed: [Double] = []
    for _ in 0..<rounds {
        viaAuthd.append(try timedCardLogin(client, aud: "bench"))
        let started = ContinuousClock.now
        try direct.replay(session)
        replayed.append((ContinuousClock.now - started).milliseconds)
    }
    viaAuthd.sort()
    replayed.sort()
    row("card.login, contact virtual card (n=\(rounds))", String(format: "p50 %.1f ms, p99 %.1f ms", percentile(viaAuthd, 0.5), percentile(viaAuthd, 0.99)))
    row("the same \(session.count) APDUs replayed over PC/SC", String(format: "p50 %.1f ms, p99 %.1f ms", percentile(replayed, 0.5), percentile(replayed, 0.99)))
    row("card.login ÷ direct replay, p50 (target ≤ 1.2)", String(format: "%.2f", percentile(viaAuthd, 0.5) / percentile(replayed, 0.5)))
    // The ratio is against a card that answers in microseconds; what authd adds per login (the
    // PIN prompt's round trip, finding the reader, checking the card's signature against its
    // certificate, the audit record) is this difference, whatever the card.
    row("authd's own time per login (p50 difference)", String(format: "%.1f ms", percentile(viaAuthd, 0.5) - percentile(replayed, 0.5)))

    // Contactless: PACE and secure messaging cannot be replayed (fresh keys each time), so
    // this figure stands alone.
    let contactless = try CardStack(mode: "contactless")
    defer { contactless.stop() }
    let nfc = try Daemon(environment: ["PCSCLITE_CSOCK_NAME": contactless.socket])
    defer { nfc.stop() }
    let nfcClient = try Client(nfc.socket)
    _ = try nfcClient.call("card.can.set", #"{"can":"123456"}"#)
    _ = try timedCardLogin(nfcClient, aud: "bench")
    var pace: [Double] = []
    for _ in 0..<rounds { pace.append(try timedCardLogin(nfcClient, aud: "bench")) }
    pace.sort()
    row("card.login, contactless with PACE P-256 (n=\(rounds))", String(format: "p50 %.1f ms, p99 %.1f ms", percentile(pace, 0.5), percentile(pace, 0.99)))
}
