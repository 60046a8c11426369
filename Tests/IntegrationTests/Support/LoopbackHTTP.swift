import CLinux
import Foundation
import Glibc
import Protocol

/// One HTTP/1.1 response as `LoopbackHTTP` read it.
struct HTTPResponse {
    let status: Int
    /// In the order received; names as the server spelled them.
    let headers: [(name: String, value: String)]
    let body: [UInt8]

    /// The first header of that name (case-insensitive).
    func header(_ name: String) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    var text: String { String(decoding: body, as: UTF8.self) }

    func json() throws -> JSONValue {
        do {
            return try WireCodec.decode(JSONValue.self, from: Data(body))
        } catch {
            throw HarnessError("HTTP \(status): the body is not JSON: \(text.prefix(500).debugDescription)")
        }
    }
}

/// A minimal blocking HTTP/1.1 client for test rigs talking to servers on the loopback
/// interface (the OIDC provider, authd's redirect listener). Plain sockets rather than
/// URLSession: no FoundationNetworking in the test binary, nothing running on Swift's
/// cooperative pool, redirects never followed, and every call bounded by a deadline.
enum LoopbackHTTP {
    /// Sends one request (`Connection: close`) and reads the whole response. `url` must be
    /// http:// on 127.0.0.1 or localhost. Throws on a connection failure, a malformed
    /// response, or when `timeoutSeconds` pass first.
    static func request(_ method: String, _ url: String, headers: [(String, String)] = [], body: [UInt8]? = nil,
                        timeoutSeconds: Double = 10) throws -> HTTPResponse {
        guard let components = URLComponents(string: url), components.scheme == "http", let host = components.host else {
            throw HarnessError("LoopbackHTTP: not an http URL: \(url)")
        }
        guard host == "127.0.0.1" || host == "localhost" else { throw HarnessError("LoopbackHTTP: not a loopback host: \(url)") }
        let port = components.port ?? 80
        var target = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        if let query = components.percentEncodedQuery { target += "?" + query }
        let deadline = Date().addingTimeInterval(timeoutSeconds)

        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket: \(String(cString: strerror(errno)))") }
        defer { Glibc.close(fd) }
        var timeout = timeval(tv_sec: Int(timeoutSeconds.rounded(.up)), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw HarnessError("connect 127.0.0.1:\(port): \(String(cString: strerror(errno)))") }

        var head = "\(method) \(target) HTTP/1.1\r\nHost: \(host):\(port)\r\nConnection: close\r\nUser-Agent: authd-integration-tests\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if body != nil || ["POST", "PUT", "PATCH"].contains(method) { head += "Content-Length: \(body?.count ?? 0)\r\n" }
        head += "\r\n"
        try sendAll(fd, Array(head.utf8) + (body ?? []))

        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            if let response = try parse(received, complete: false) { return response }
            let remaining = deadline.timeIntervalSinceNow
            guard remaining > 0 else { throw HarnessError("LoopbackHTTP: no complete answer from \(url) within \(timeoutSeconds) s") }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, Int32(min(remaining, 1) * 1000) + 1)
            if ready < 0, errno == EINTR { continue }
            guard ready >= 0 else { throw HarnessError("poll: \(String(cString: strerror(errno)))") }
            if ready == 0 { continue }
            let count = read(fd, &buffer, buffer.count)
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else { throw HarnessError("read from \(url): \(String(cString: strerror(errno)))") }
            if count == 0 {
                guard let response = try parse(received, complete: true) else {
                    throw HarnessError("LoopbackHTTP: \(url) closed the connection mid-response (\(received.count) bytes)")
                }
                return response
            }
            received += buffer[0..<count]
        }
    }

    static func get(_ url: String, headers: [(String, String)] = []) throws -> HTTPResponse {
        try request("GET", url, headers: headers)
    }

    /// POSTs `value` as JSON.
    static func postJSON(_ url: String, _ value: JSONValue) throws -> HTTPResponse {
        try request("POST", url, headers: [("Content-Type", "application/json")], body: Array(try WireCodec.encodeJSON(value)))
    }

    /// POSTs an application/x-www-form-urlencoded body.
    static func postForm(_ url: String, _ fields: [(String, String)], headers: [(String, String)] = []) throws -> HTTPResponse {
        let body = fields.map { formEncode($0.0) + "=" + formEncode($0.1) }.joined(separator: "&")
        return try request("POST", url, headers: [("Content-Type", "application/x-www-form-urlencoded")] + headers, body: Array(body.utf8))
    }

    static func formEncode(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }

    private static func sendAll(_ fd: Int32, _ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL)) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { throw HarnessError("send: \(String(cString: strerror(errno)))") }
            offset += written
        }
    }

    /// The response in `bytes`, or nil when more is needed. `complete`: the server closed the
    /// connection, so a body without a length ends here.
    private static func parse(_ bytes: [UInt8], complete: Bool) throws -> HTTPResponse? {
        let separator: [UInt8] = [13, 10, 13, 10]
        guard let headEnd = bytes.firstRange(of: separator) else {
            if complete { throw HarnessError("LoopbackHTTP: the connection closed before the response headers ended") }
            return nil
        }
        let lines = String(decoding: bytes[..<headEnd.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ", maxSplits: 2)
        guard statusParts.count >= 2, statusParts[0].hasPrefix("HTTP/1."), let status = Int(statusParts[1]) else {
            throw HarnessError("LoopbackHTTP: bad status line \(lines[0].debugDescription)")
        }
        var headers: [(name: String, value: String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { throw HarnessError("LoopbackHTTP: bad header line \(line.debugDescription)") }
            headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        let response = { (body: [UInt8]) in HTTPResponse(status: status, headers: headers, body: body) }
        let rest = Array(bytes[headEnd.upperBound...])
        let header = { (name: String) in headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value }
        if status == 204 || status == 304 || (100..<200).contains(status) { return response([]) }
        if header("Transfer-Encoding")?.lowercased().contains("chunked") == true {
            if let body = try dechunk(rest) { return response(body) }
            if complete { throw HarnessError("LoopbackHTTP: the connection closed inside a chunked body") }
            return nil
        }
        if let length = header("Content-Length").flatMap({ Int($0) }) {
            if rest.count >= length { return response(Array(rest.prefix(length))) }
            if complete { throw HarnessError("LoopbackHTTP: body shorter (\(rest.count)) than Content-Length \(length)") }
            return nil
        }
        return complete ? response(rest) : nil
    }

    private static func dechunk(_ bytes: [UInt8]) throws -> [UInt8]? {
        var body: [UInt8] = []
        var index = 0
        while true {
            guard let lineEnd = bytes[index...].firstRange(of: [13, 10]) else { return nil }
            let sizeText = String(decoding: bytes[index..<lineEnd.lowerBound], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else {
                throw HarnessError("LoopbackHTTP: bad chunk size \(String(sizeText).debugDescription)")
            }
            index = lineEnd.upperBound
            if size == 0 { return bytes[index...].firstRange(of: [13, 10]) == nil ? nil : body }
            guard bytes.count >= index + size + 2 else { return nil }
            body += bytes[index..<index + size]
            index += size + 2
        }
    }
}
