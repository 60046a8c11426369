import AuthdClient
import FoundationEssentials
import Glibc
import Protocol

// authd-webeid: the Web eID native messaging host (`eu.webeid`). A browser starts it for one
// action of the Web eID extension: the host writes its version, reads one command, asks authd
// with `prompt: desktop` (authd asks the person for the PIN in its own dialog; our stdin and
// stdout are the browser's), writes one reply and exits. The protocol is the `WebEIDHost`
// value; this file only moves bytes. Nothing secret passes through here: no PIN, no CAN.

/// How long the browser may take to send the command after our version.
let commandWait: Duration = .seconds(60)
/// How long authd may be silent while it works (it sends progress while it waits for a card).
let authdWait: Duration = .seconds(600)

if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "--version" {
    print("authd-webeid \(WebEIDHost.version)")
    exit(0)
}
signal(SIGPIPE, SIG_IGN)

/// Writes all of `bytes` to stdout; false when the browser is gone.
func writeAll(_ bytes: [UInt8]) -> Bool {
    var offset = 0
    while offset < bytes.count {
        let written = bytes[offset...].withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
        if written < 0, errno == EINTR { continue }
        guard written > 0 else { return false }
        offset += written
    }
    return true
}

/// Reads exactly `count` bytes from stdin before `deadline`; nil on end of input, an error or
/// the deadline, so a browser that stalls mid-message cannot hold the host forever.
func readExactly(_ count: Int, before deadline: ContinuousClock.Instant) -> [UInt8]? {
    var bytes = [UInt8](repeating: 0, count: count)
    var offset = 0
    while offset < count {
        let left = deadline - .now
        guard left > .zero else { return nil }
        var poller = pollfd(fd: 0, events: Int16(POLLIN), revents: 0)
        let milliseconds = Int32(min(left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1, 60_000))
        let ready = poll(&poller, 1, milliseconds)
        if ready < 0, errno == EINTR { continue }
        guard ready >= 0 else { return nil }
        if ready == 0 { continue }
        let got = bytes[offset...].withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
        if got < 0, errno == EINTR || errno == EAGAIN { continue }
        guard got > 0 else { return nil }
        offset += got
    }
    return bytes
}

/// Asks authd; its progress notifications (a card to present, a dialog on the desktop) need no answer.
func ask(_ call: AuthdCall) -> AuthdOutcome {
    let client: RPCClient
    do {
        let environment = ProcessInfo.processInfo.environment
        // AUTHD_SOCKET names the daemon, as for authctl; otherwise the user's authd, then the system's.
        let connection = if let socket = environment["AUTHD_SOCKET"], !socket.isEmpty {
            try LineConnection(socketPath: socket)
        } else {
            try LineConnection.connectToDaemon(environment: environment).0
        }
        connection.setReceiveTimeout(authdWait)
        client = RPCClient(connection: connection)
    } catch {
        return .unreachable
    }
    defer { client.connection.close() }
    do {
        switch call {
        case .login(let params):
            guard let token = try client.call(CardLogin.self, params).webEid else { return .refused(reason: "card.error") }
            return .login(token)
        case .certificate(let params):
            return .certificate(base64DER: try client.call(CardCertificate.self, params).certificate)
        case .sign(let params, _):
            return .signature(base64URL: try client.call(CardSign.self, params).signature)
        }
    } catch {
        guard let refusal = error.daemonError else { return .unreachable }
        return .refused(reason: refusal.reason.rawValue)
    }
}

var host = WebEIDHost()
var action = host.start()
let deadline = ContinuousClock.now + commandWait
while true {
    switch action {
    case .sendThenReadHeader(let frame):
        guard writeAll(frame) else { exit(0) }
        guard let header = readExactly(4, before: deadline) else { action = host.inputEnded(); continue }
        action = host.received(header: header)
    case .readBody(let length):
        guard let body = readExactly(length, before: deadline) else { action = host.inputEnded(); continue }
        action = host.received(body: body)
    case .ask(let call):
        action = host.answered(ask(call))
    case .replyAndExit(let frame):
        _ = writeAll(frame)
        exit(0)
    case .exit:
        exit(0)
    }
}
