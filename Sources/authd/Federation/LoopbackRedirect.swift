import FoundationEssentials
import OpenSSLCrypto

/// The one-shot redirect receiver of RFC 8252 §7.3: a TCP listener on 127.0.0.1 at a port the
/// kernel picks, alive for one sign-in. It reads HTTP request heads (bounded in size, number and
/// time), answers each with a small page, and returns the first `GET /callback` whose `state`
/// matches. Requests with another state, path or shape get 400 and change nothing, so a local
/// process guessing at the port cannot end or steer the sign-in.
///
/// An actor on its own `BlockingExecutor`: the listener is its own for the length of the
/// sign-in, and the poll loop that serves it blocks that queue, never the cooperative pool.
actor LoopbackRedirect {
    enum Outcome: Sendable, Equatable {
        /// The provider sent the user back with an authorization code.
        case code(String)
        /// The provider sent the user back with an OAuth error (`access_denied`, …).
        case error(String)
        case timedOut
        case cancelled
    }

    private let executor = BlockingExecutor(label: "authd.federation.redirect")
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    private let listener: Int32
    let redirectURI: String
    /// Set from any thread; the serving loop looks at it at least every 100 ms.
    private let cancelled = CancelFlag()

    private static let maxConnections = 8
    private static let maxHeadBytes = 8192
    private static let connectionSeconds = 2.0

    init() throws {
        let (fd, port) = try Syscalls.listenTCP(host: "127.0.0.1", port: 0, backlog: 16)
        listener = fd
        redirectURI = "http://127.0.0.1:\(port)/callback"
    }

    deinit { Syscalls.close(listener) }

    /// Stops a `wait` in progress (the request was cancelled).
    nonisolated func cancel() { cancelled.set() }

    /// Waits for the redirect carrying `state`, blocking this actor's queue.
    func wait(state: String, until deadline: ContinuousClock.Instant) async -> Outcome {
        await withTaskCancellationHandler {
            serve(state: state, deadline: deadline)
        } onCancel: {
            cancel()
        }
    }

    private struct Client {
        let fd: Int32
        var head: [UInt8] = []
        let since: ContinuousClock.Instant
    }

    private func serve(state: String, deadline: ContinuousClock.Instant) -> Outcome {
        var clients: [Client] = []
        defer { clients.forEach { Syscalls.close($0.fd) } }
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            if cancelled.isSet { return .cancelled }
            let now = ContinuousClock.now
            if now >= deadline { return .timedOut }
            // Connections that never finish their request head are dropped.
            clients.removeAll { client in
                guard now - client.since > .seconds(Self.connectionSeconds) else { return false }
                Syscalls.close(client.fd)
                return true
            }
            guard let ready = try? Syscalls.waitUntilReadable([listener] + clients.map(\.fd), timeoutMilliseconds: 100),
                  ready.contains(true) else { continue }
            var finished: [Int32] = []
            for (position, entry) in clients.enumerated() where ready[position + 1] {
                let result = buffer.withUnsafeMutableBytes { try? Syscalls.read(entry.fd, into: $0) }
                guard case .bytes(let count)? = result else {
                    if result != .wouldBlock { finished.append(entry.fd) }
                    continue
                }
                clients[position].head += buffer[..<count]
                let head = clients[position].head
                guard let end = Self.endOfHead(head) else {
                    if head.count > Self.maxHeadBytes { Self.respond(entry.fd, status: "431 Request Header Fields Too Large", page: "Request too large."); finished.append(entry.fd) }
                    continue
                }
                finished.append(entry.fd)
                let outcome = Self.outcome(ofHead: Array(head[..<end]), state: state)
                switch outcome {
                case .code?:
                    Self.respond(entry.fd, status: "200 OK", page: "Signed in. You can close this window and return to your application.")
                    return outcome!
                case .error(let code)?:
                    Self.respond(entry.fd, status: "200 OK", page: "The sign-in was not completed (\(Self.htmlEscape(code))). You can close this window.")
                    return outcome!
                default:
                    Self.respond(entry.fd, status: "400 Bad Request", page: "This address only receives the sign-in redirect of one authd sign-in.")
                }
            }
            clients.removeAll { client in
                guard finished.contains(client.fd) else { return false }
                Syscalls.close(client.fd)
                return true
            }
            // Always accept, so a waiting connection never makes poll spin; when full, the
            // oldest connection gives way, so idle connections cannot keep the browser out.
            if ready[0], let fd = try? Syscalls.accept(listener) {
                if clients.count >= Self.maxConnections { Syscalls.close(clients.removeFirst().fd) }
                clients.append(Client(fd: fd, since: now))
            }
        }
    }

    private static func endOfHead(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4) where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index
        }
        return nil
    }

    /// The redirect's meaning, from the request line `GET /callback?… HTTP/1.x`; nil for
    /// anything else or another sign-in's state.
    static func outcome(ofHead head: [UInt8], state: String) -> Outcome? {
        guard let text = String(validating: head, as: UTF8.self),
              let requestLine = text.split(separator: "\r\n", maxSplits: 1, omittingEmptySubsequences: false).first
        else { return nil }
        let parts = requestLine.split(separator: " ")
        guard parts.count == 3, parts[0] == "GET", parts[2].hasPrefix("HTTP/1.") else { return nil }
        let target = parts[1]
        guard let question = target.firstIndex(of: "?"), target[..<question] == "/callback",
              let fields = FormEncoding.decode(target[target.index(after: question)...]),
              let received = fields["state"], OpenSSL.constantTimeEquals(Array(received.utf8), Array(state.utf8))
        else { return nil }
        if let code = fields["code"], !code.isEmpty, code.utf8.count <= 4096 { return .code(code) }
        if let error = fields["error"], !error.isEmpty { return .error(OAuthErrorCode.sanitized(error)) }
        return nil
    }

    private static func respond(_ fd: Int32, status: String, page: String) {
        let body = "<!doctype html><html><head><meta charset=\"utf-8\"><title>authd</title></head><body><p>\(page)</p></body></html>"
        let response = "HTTP/1.1 \(status)\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: \(body.utf8.count)\r\n"
            + "Cache-Control: no-store\r\nReferrer-Policy: no-referrer\r\nConnection: close\r\n\r\n" + body
        // Best effort on a non-blocking socket: the page is small and the browser is waiting.
        _ = Array(response.utf8).withUnsafeBytes { try? Syscalls.send(fd, $0) }
    }

    private static func htmlEscape(_ text: String) -> String {
        text.replacing("&", with: "&amp;").replacing("<", with: "&lt;").replacing(">", with: "&gt;")
    }
}
