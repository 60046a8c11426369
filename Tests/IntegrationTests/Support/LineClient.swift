import CLinux
import Foundation
import Glibc
import Protocol

struct HarnessError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A raw protocol client for tests: bytes in, lines out, with a receive timeout so a broken
/// daemon fails the test instead of hanging it.
final class LineClient {
    let fd: Int32
    private var framer = LineFramer(maxLineLength: 8 << 20)
    private var nextID: Int64 = 1

    init(socketPath: String, receiveTimeoutSeconds: Int = 15) throws {
        let fd = authd_connect_unix(socketPath)
        guard fd >= 0 else { throw HarnessError("connect(\(socketPath)): \(String(cString: strerror(errno)))") }
        var timeout = timeval(tv_sec: receiveTimeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        self.fd = fd
    }

    deinit { Glibc.close(fd) }

    func close() { shutdown(fd, Int32(SHUT_RDWR)) }

    /// Stops sending (half-close); the daemon should still answer.
    func finishWriting() { shutdown(fd, Int32(SHUT_WR)) }

    func send(_ bytes: some Collection<UInt8>) throws {
        let data = Array(bytes)
        var offset = 0
        while offset < data.count {
            let written = data.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, data.count - offset, Int32(MSG_NOSIGNAL)) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { throw HarnessError("send: \(String(cString: strerror(errno)))") }
            offset += written
        }
    }

    func send(_ text: String) throws { try send(Array(text.utf8)) }

    /// The next line as JSON, or nil when the daemon closed the connection.
    func readJSON() throws -> JSONValue? {
        guard let line = try readLine() else { return nil }
        return try WireCodec.decode(JSONValue.self, from: Data(line))
    }

    func readLine() throws -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            if let line = try framer.nextLine() { return line }
            let count = read(fd, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { throw HarnessError("timed out waiting for the daemon") }
            if count < 0 && errno == ECONNRESET { return nil }
            guard count >= 0 else { throw HarnessError("read: \(String(cString: strerror(errno)))") }
            if count == 0 { return nil }
            framer.append(buffer[0..<count])
        }
    }

    /// Sends a request and returns the response object with the same id, skipping notifications.
    @discardableResult
    func call(_ method: String, _ params: JSONValue? = nil) throws -> JSONValue {
        let id = nextID
        nextID += 1
        var request: [String: JSONValue] = ["jsonrpc": "2.0", "id": .integer(id), "method": .string(method)]
        if let params { request["params"] = params }
        try send(Array(try WireCodec.encodeJSON(JSONValue.object(request))) + [0x0a])
        while true {
            guard let message = try readJSON() else { throw HarnessError("the daemon closed the connection") }
            if message["id"] == .integer(id) { return message }
        }
    }

    /// The `result` of a successful call; fails the test with the error otherwise.
    func result(_ method: String, _ params: JSONValue? = nil) throws -> JSONValue {
        let response = try call(method, params)
        guard let result = response["result"] else { throw HarnessError("\(method) failed: \(response)") }
        return result
    }
}

extension LineClient {
    /// Polls `admin.status` until the daemon counts `expected` connections (closing is
    /// asynchronous in the daemon), for at most 5 s; returns the last count seen.
    func waitForConnectionCount(_ expected: Int64) throws -> Int64 {
        var count: Int64 = -1
        for _ in 0..<250 {
            count = try result("admin.status")["connections"]?.integerValue ?? -1
            if count == expected { break }
            usleep(20_000)
        }
        return count
    }
}

extension JSONValue {
    /// `error.data.reason` of a response.
    var errorReason: String? { self["error"]?["data"]?["reason"]?.stringValue }
    var errorCode: Int64? { self["error"]?["code"]?.integerValue }
}
