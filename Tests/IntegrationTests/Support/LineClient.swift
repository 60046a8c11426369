import AuthdClient
import Foundation
import Glibc
import Protocol

struct HarnessError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The tests' client, on the client library: JSON-RPC calls that return the daemon's response
/// object, and the line layer underneath for bytes that are not valid requests. A receive timeout
/// makes a broken daemon fail the test instead of hanging it.
final class LineClient {
    let rpc: RPCClient
    var connection: LineConnection { rpc.connection }

    init(socketPath: String, receiveTimeoutSeconds: Int = 15) throws {
        rpc = RPCClient(connection: try LineConnection(socketPath: socketPath, maxLineLength: 8 << 20, receiveTimeout: .seconds(receiveTimeoutSeconds)))
    }

    func close() { connection.close() }

    /// Stops sending (half-close); the daemon should still answer.
    func finishWriting() { connection.finishWriting() }

    func send(_ bytes: some Collection<UInt8>) throws { try connection.send(bytes) }

    func send(_ text: String) throws { try connection.send(text.utf8) }

    /// The next line as JSON, or nil when the daemon closed the connection.
    func readJSON() throws -> JSONValue? {
        guard let line = try readLine() else { return nil }
        return try WireCodec.decode(JSONValue.self, from: Data(line))
    }

    func readLine() throws -> [UInt8]? { try connection.readLine() }

    /// Sends a request and returns its response object; notifications that arrive before it go
    /// to `onNotification` (skipped by default).
    @discardableResult
    func call(_ method: String, _ params: JSONValue? = nil, onNotification: RPCClient.NotificationHandler = { _, _ in }) throws -> JSONValue {
        JSONValue(response: try rpc.request(method: method, params: params ?? [:], onNotification: onNotification))
    }

    /// The daemon's open descriptors once it is down to `limit` with this client its only
    /// connection (closing is asynchronous in the daemon), or what it has after 5 s.
    func openDescriptorsOnceAlone(atMost limit: Int64) throws -> Int64 {
        var open = Int64.max
        for _ in 0..<100 {
            let status = try result("admin.status")
            open = status["open_fds"]?.integerValue ?? .max
            if open <= limit && status["connections"] == 1 { break }
            usleep(50_000)
        }
        return open
    }

    /// The `result` of a successful call; fails the test with the error otherwise.
    func result(_ method: String, _ params: JSONValue? = nil) throws -> JSONValue {
        let response = try call(method, params)
        guard let result = response["result"] else { throw HarnessError("\(method) failed: \(response)") }
        return result
    }
}

extension LineClient {
    /// Answers a prompt with `answer`, or declines it when nil: a notification, which the
    /// daemon does not answer.
    func replyToPrompt(_ promptID: JSONValue, answer: String?) throws {
        if let answer {
            try rpc.notify(method: "prompt.answer", params: ["prompt_id": promptID, "value": .string(answer)] as JSONValue)
        } else {
            try rpc.notify(method: "prompt.cancel", params: ["prompt_id": promptID] as JSONValue)
        }
    }

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
    /// The response object the outcome was read from (without its id). An error comes back whole:
    /// `RPCError` keeps code, message and every member of `data`.
    init(response outcome: Incoming.Outcome) {
        switch outcome {
        case .result(let result):
            self = ["jsonrpc": "2.0", "result": result]
        case .error(let error):
            // swiftlint:disable:next force_try — an RPCError holds only strings, integers and JSONValues.
            self = ["jsonrpc": "2.0", "error": try! WireCodec.decode(JSONValue.self, from: WireCodec.encodeJSON(error))]
        }
    }

    /// `error.data.reason` of a response.
    var errorReason: String? { self["error"]?["data"]?["reason"]?.stringValue }
    var errorCode: Int64? { self["error"]?["code"]?.integerValue }
}
