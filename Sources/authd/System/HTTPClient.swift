import Dispatch
import FoundationEssentials
import Glibc
import OpenSSLCrypto
import Protocol
import Synchronization

/// An HTTP answer as `authd-http` reported it. Header names are lower case.
struct HTTPResponse: Sendable {
    let status: Int
    let headers: [String: String]
    let body: [UInt8]
}

/// The request did not get an HTTP answer (unreachable, timed out, too large, refused URL).
/// Never carries the request's headers or body: they hold tokens.
struct HTTPFailure: Error, CustomStringConvertible {
    let description: String
}

/// HTTP for the federation code and the SMS gateway, through the `authd-http` helper installed
/// next to authd: one process for the daemon's life (`HTTPHelper`), URLSession and TLS in it,
/// each request (with its bearer token or client secret) a line on its stdin, never in its
/// arguments or environment. The daemon itself links no networking stack. Redirects come back
/// as answers; the helper never follows.
struct HTTPClient: Sendable {
    /// What the helper runs with: a fixed PATH and locale, and the sanitizers' options when authd
    /// itself runs under one (a sanitized test build), so its reports land where authd's do.
    static let helperEnvironment: [String: String] = ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"].merging(
        ProcessInfo.processInfo.environment.filter { ["ASAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS", "UBSAN_OPTIONS"].contains($0.key) }
    ) { own, _ in own }

    let helper: HTTPHelper
    var helperPath: String { helper.path }

    init(helperPath: String) { helper = HTTPHelper(path: helperPath, environment: Self.helperEnvironment) }

    /// `authd-http` beside the running authd binary (`AUTHD_HTTP` overrides).
    static func beside(environment: [String: String]) -> HTTPClient {
        if let explicit = environment["AUTHD_HTTP"], explicit.hasPrefix("/") { return HTTPClient(helperPath: explicit) }
        let own = Syscalls.executablePath(pid: Syscalls.processID()) ?? "/usr/bin/authd"
        return HTTPClient(helperPath: Syscalls.directoryName(own) + "/authd-http")
    }

    func send(_ method: String, _ url: String, headers: [String: String] = [:], body: [UInt8]? = nil,
              timeoutSeconds: Int, maxResponseBytes: Int = 1 << 20) async throws(HTTPFailure) -> HTTPResponse {
        let answer = try await helper.exchange(timeoutSeconds: timeoutSeconds) { id in
            AuthdHTTP.Request(id: id, method: method, url: url, headers: headers, bodyBase64: body.map { Data($0).base64EncodedString() },
                              timeout: Double(timeoutSeconds), maxResponseBytes: maxResponseBytes)
        }
        if let error = answer.error { throw HTTPFailure(description: error) }
        guard let status = answer.status, let bodyText = answer.bodyBase64, let bytes = Data(base64Encoded: bodyText) else {
            throw HTTPFailure(description: "the HTTP helper gave an incomplete answer")
        }
        return HTTPResponse(status: status, headers: answer.headers ?? [:], body: Array(bytes))
    }

    /// A credential kept in a file (`[sms] token_file`, `client_secret_file`), read at each use:
    /// its text without whitespace, or nil when the file is unreadable or holds nothing.
    static func credential(fromFile path: String) -> String? {
        guard let bytes = try? Syscalls.readFile(path, limit: 4096), let text = String(validating: bytes, as: UTF8.self) else { return nil }
        let credential = String(text.filter { !$0.isWhitespace })
        return credential.isEmpty ? nil : credential
    }

    /// A POST of `application/x-www-form-urlencoded` fields (OAuth token and device endpoints).
    func postForm(_ url: String, fields: [(String, String)], headers: [String: String] = [:], timeoutSeconds: Int) async throws(HTTPFailure) -> HTTPResponse {
        var body = Array(FormEncoding.encode(fields).utf8)
        defer { OpenSSL.wipe(&body) }
        var all = headers
        all["Content-Type"] = "application/x-www-form-urlencoded"
        all["Accept"] = "application/json"
        return try await send("POST", url, headers: all, body: body, timeoutSeconds: timeoutSeconds)
    }
}

/// `application/x-www-form-urlencoded` and URL query encoding (RFC 3986 unreserved characters
/// stay, everything else is percent-encoded as UTF-8).
enum FormEncoding {
    static func encode(_ fields: [(String, String)]) -> String {
        fields.map { escape($0.0) + "=" + escape($0.1) }.joined(separator: "&")
    }

    static func escape(_ text: String) -> String {
        var result = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                result.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                result += "%" + String(byte >> 4, radix: 16, uppercase: true) + String(byte & 0xF, radix: 16, uppercase: true)
            }
        }
        return result
    }

    /// The fields of a query string (`a=1&b=2`), percent-decoded; `+` is a space. nil when malformed.
    static func decode(_ query: some StringProtocol) -> [String: String]? {
        var fields: [String: String] = [:]
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = unescape(parts[0]), let value = unescape(parts.count > 1 ? parts[1] : "") else { return nil }
            fields[name] = value
        }
        return fields
    }

    private static func unescape(_ text: some StringProtocol) -> String? {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = iterator.next(), let low = iterator.next(),
                      let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16) else { return nil }
                bytes.append(value)
            } else {
                bytes.append(byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }
}

/// An OAuth `error` code from a remote answer, safe to log and show: printable ASCII without
/// quotes or backslashes, at most 64 characters (RFC 6749 §5.2 allows no more).
enum OAuthErrorCode {
    static func sanitized(_ raw: String?) -> String {
        let kept = (raw ?? "").unicodeScalars.filter { $0.value > 0x20 && $0.value < 0x7f && $0 != "\"" && $0 != "\\" }.prefix(64)
        return kept.isEmpty ? "unknown_error" : String(String.UnicodeScalarView(kept))
    }
}

/// The daemon's one `authd-http`: started at the first request and again at the first after it
/// ended, its requests in flight told apart by id. A helper that ends (killed, crashed) fails
/// every request in flight at once, saying so; none waits past its own timeout.
final class HTTPHelper: Sendable {
    let path: String
    private let environment: [String: String]

    /// More requests at once than this, or than `mostPerRequester` for one requester
    /// (`WorkRequester.key`: a local user, a machine), are refused, not queued: callers cannot
    /// make authd hold without bound, nor one caller take every place.
    static let mostInFlight = 256
    static let mostPerRequester = 32
    /// An answer line longer than this ends the helper (no answer it may give is this large).
    static let longestLine = 8 << 20

    private struct Running {
        let pid: pid_t
        let input: Int32
        let generation: Int
    }

    private struct Waiting {
        let generation: Int
        let requester: String
        let continuation: CheckedContinuation<AuthdHTTP.Response, any Error>
    }

    private struct State {
        var running: Running?
        var generations = 0
        var nextID = 1
        var waiting: [Int: Waiting] = [:]
    }

    private let state = Mutex(State())
    /// Every write to the helper's stdin, and its close, one after another: a descriptor is
    /// never closed under a write, nor written after it was closed (and its number reused).
    private let writes = DispatchQueue(label: "authd.http.write")

    init(path: String, environment: [String: String]) {
        self.path = path
        self.environment = environment
    }

    /// Sends the request `make` builds with its id and waits for its answer: the helper's own
    /// timeout (`timeoutSeconds`, in the request) and a margin for the pipes.
    func exchange(timeoutSeconds: Int, _ make: (Int) -> AuthdHTTP.Request) async throws(HTTPFailure) -> AuthdHTTP.Response {
        let requester = WorkRequester.key
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        let request = make(id)
        do {
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<AuthdHTTP.Response, any Error>) in
                    let started: Result<Running, HTTPFailure> = state.withLock { state in
                        guard state.waiting.count < Self.mostInFlight,
                              state.waiting.values.lazy.filter({ $0.requester == requester }).count < Self.mostPerRequester else {
                            return .failure(HTTPFailure(description: "too many HTTP requests in flight; try again when some have been answered"))
                        }
                        if state.running == nil {
                            state.generations += 1
                            do throws(HTTPFailure) { state.running = try start(generation: state.generations) } catch { return .failure(error) }
                        }
                        state.waiting[id] = Waiting(generation: state.running!.generation, requester: requester, continuation: continuation)
                        return .success(state.running!)
                    }
                    switch started {
                    case .failure(let error):
                        continuation.resume(throwing: error)
                    case .success(let running):
                        // Encoded here, so that the one copy of the line, with its token or
                        // secret, is the one wiped once written.
                        writes.async {
                            guard var line = try? Array(JSONEncoder().encode(request)) else {
                                return self.fail(id, HTTPFailure(description: "cannot encode the request"))
                            }
                            line.append(UInt8(ascii: "\n"))
                            defer { OpenSSL.wipe(&line) }
                            do {
                                try line.withUnsafeBytes { try Syscalls.writeAll(running.input, $0, name: "authd-http") }
                            } catch {
                                self.fail(id, HTTPFailure(description: "the HTTP helper stopped taking requests: \(error)"))
                            }
                        }
                        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(timeoutSeconds + 2)) {
                            self.fail(id, HTTPFailure(description: "no answer within \(timeoutSeconds) s (timed out, or the HTTP helper is stuck)"))
                        }
                    }
                }
            } onCancel: {
                fail(id, HTTPFailure(description: "the request was cancelled"))
            }
        } catch let error as HTTPFailure {
            throw error
        } catch {
            throw HTTPFailure(description: "\(error)")
        }
    }

    /// Answers request `id` with `failure`, if it still waits.
    private func fail(_ id: Int, _ failure: HTTPFailure) {
        state.withLock { $0.waiting.removeValue(forKey: id) }?.continuation.resume(throwing: failure)
    }

    /// Starts the helper and its reader (under the state's lock).
    private func start(generation: Int) throws(HTTPFailure) -> Running {
        let child: Syscalls.Conversation
        do {
            child = try Syscalls.spawnConversation(path, environment: environment)
        } catch {
            throw HTTPFailure(description: "cannot run \(path): \(error)")
        }
        DispatchQueue(label: "authd.http.read").async { self.read(child, generation: generation) }
        return Running(pid: child.pid, input: child.input, generation: generation)
    }

    /// The reader of one helper, until it ends: each answer line to its request's waiter.
    private func read(_ child: Syscalls.Conversation, generation: Int) {
        var pending: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        var reason = "it ended"
        reading: while true {
            guard (try? Syscalls.waitUntilReadable([child.output], timeoutMilliseconds: 1000))?.first == true else { continue }
            let result = try? chunk.withUnsafeMutableBytes { try Syscalls.read(child.output, into: $0) }
            switch result {
            case .wouldBlock?: continue
            case .bytes(let count)?: pending += chunk[..<count]
            case .endOfFile?, nil: break reading
            }
            var start = 0
            while let newline = pending[start...].firstIndex(of: UInt8(ascii: "\n")) {
                deliver(pending[start..<newline])
                start = newline + 1
            }
            OpenSSL.wipe(&pending, first: start)
            pending.removeFirst(start)
            if pending.count > Self.longestLine {
                reason = "it sent an answer longer than \(Self.longestLine) bytes"
                break
            }
        }
        OpenSSL.wipe(&pending)
        Syscalls.close(child.output)
        // No new request reaches this one; those in flight fail now.
        let orphans = state.withLock { state -> [Waiting] in
            if state.running?.generation == generation { state.running = nil }
            let orphans = state.waiting.filter { $0.value.generation == generation }
            for id in orphans.keys { state.waiting.removeValue(forKey: id) }
            return Array(orphans.values)
        }
        writes.async { Syscalls.close(child.input) }
        for waiting in orphans {
            waiting.continuation.resume(throwing: HTTPFailure(description: "the HTTP helper stopped before it answered (\(reason)); it starts again at the next request"))
        }
        Syscalls.signalProcessGroup(child.pid, forcibly: true)
        while !Syscalls.reapIfEnded(child.pid) { usleep(10_000) }
    }

    private func deliver(_ line: ArraySlice<UInt8>) {
        guard let answer = try? JSONDecoder().decode(AuthdHTTP.Response.self, from: Data(line)), let id = answer.id else { return }
        state.withLock { $0.waiting.removeValue(forKey: id) }?.continuation.resume(returning: answer)
    }
}
