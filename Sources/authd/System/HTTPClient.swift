import FoundationEssentials
import OpenSSLCrypto
import Protocol

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

/// HTTP for the federation code, through the `authd-http` helper installed next to authd: one
/// short-lived process per request, URLSession and TLS in it, the request (with its bearer
/// token or client secret) on its stdin, never in its arguments or environment. The daemon
/// itself links no networking stack. Redirects come back as answers; the helper never follows.
struct HTTPClient: Sendable {
    /// What the helper runs with: a fixed PATH and locale, and the sanitizers' options when authd
    /// itself runs under one (a sanitized test build), so its reports land where authd's do.
    static let helperEnvironment: [String: String] = ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"].merging(
        ProcessInfo.processInfo.environment.filter { ["ASAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS", "UBSAN_OPTIONS"].contains($0.key) }
    ) { own, _ in own }

    let helperPath: String
    /// Helpers that may run at once (each holds ~30 MB), each exchange on a worker of its own;
    /// more requests wait their turn, so local callers cannot make authd start thousands of
    /// processes.
    private let helpers = BlockingPool(label: "authd.http", count: 16, work: .waiting)

    init(helperPath: String) { self.helperPath = helperPath }

    /// `authd-http` beside the running authd binary (`AUTHD_HTTP` overrides).
    static func beside(environment: [String: String]) -> HTTPClient {
        if let explicit = environment["AUTHD_HTTP"], explicit.hasPrefix("/") { return HTTPClient(helperPath: explicit) }
        let own = Syscalls.executablePath(pid: Syscalls.processID()) ?? "/usr/bin/authd"
        return HTTPClient(helperPath: Syscalls.directoryName(own) + "/authd-http")
    }

    func send(_ method: String, _ url: String, headers: [String: String] = [:], body: [UInt8]? = nil,
              timeoutSeconds: Int, maxResponseBytes: Int = 1 << 20) async throws(HTTPFailure) -> HTTPResponse {
        var input: [UInt8]
        do {
            input = Array(try JSONEncoder().encode(AuthdHTTP.Request(
                method: method, url: url, headers: headers, bodyBase64: body.map { Data($0).base64EncodedString() },
                timeout: Double(timeoutSeconds), maxResponseBytes: maxResponseBytes)))
        } catch {
            throw HTTPFailure(description: "cannot encode the request")
        }
        defer { OpenSSL.wipe(&input) }
        let output: [UInt8]?
        do {
            // Base64 makes the answer a third larger; the rest is the JSON around it.
            output = try await Syscalls.spawnExchange(
                helperPath, environment: Self.helperEnvironment, input: input,
                outputLimit: maxResponseBytes / 3 * 4 + 64 * 1024, timeout: .seconds(timeoutSeconds + 2), on: helpers)
        } catch is CancellationError {
            throw HTTPFailure(description: "the request was cancelled")
        } catch {
            throw HTTPFailure(description: "cannot run \(helperPath): \(error)")
        }
        guard let output, let answer = try? JSONDecoder().decode(AuthdHTTP.Response.self, from: Data(output)) else {
            throw HTTPFailure(description: "no usable answer within \(timeoutSeconds) s (timed out, too large, or the HTTP helper failed)")
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
