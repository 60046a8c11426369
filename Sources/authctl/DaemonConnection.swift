import CLinux
import Foundation
import Glibc
import Protocol

/// A blocking connection to authd: one request at a time, notifications handed to a callback
/// while waiting for the response. The callback may `post` requests of its own (answers to
/// prompts); their responses arrive while the first request is still waiting.
final class DaemonConnection {
    private let fd: Int32
    private var framer = LineFramer()
    private var nextID: Int64 = 1
    /// Requests sent with `post` whose responses have not arrived yet.
    private var posted: Set<Int64> = []
    let socketPath: String

    init(socketPath: String) throws(CLIError) {
        self.socketPath = socketPath
        let fd = authd_connect_unix(socketPath)
        guard fd >= 0 else {
            let reason = String(cString: strerror(errno))
            throw CLIError(message: "cannot connect to authd at \(socketPath): \(reason); is the daemon running?", reason: "daemon.unavailable", exitCode: .unavailable)
        }
        self.fd = fd
    }

    deinit { close(fd) }

    /// Calls a typed method.
    func call<M: RPCMethod>(_: M.Type, _ params: M.Params, onNotification: (String, JSONValue?) throws(CLIError) -> Void = { _, _ in }) throws(CLIError) -> M.Result {
        let result = try callRaw(M.name, params: params, onNotification: onNotification)
        do {
            return try WireCodec.decode(M.Result.self, from: result)
        } catch {
            throw CLIError(message: "the daemon's answer to \(M.name) cannot be read (\(error))", reason: "client.bad_response", exitCode: .failure)
        }
    }

    /// Calls any method with any params; returns the raw result.
    func callRaw(_ method: String, params: some Encodable, onNotification: (String, JSONValue?) throws(CLIError) -> Void = { _, _ in }) throws(CLIError) -> JSONValue {
        let id = try send(method, params: params)
        while true {
            switch try readMessage() {
            case .notification(let name, let params):
                try onNotification(name, params)
            case .response(.integer(let responseID), let outcome) where posted.contains(responseID):
                // The answer to a posted request: only a refusal is worth telling the user.
                posted.remove(responseID)
                if case .error(let error) = outcome { Output.error(CLIError(error).line) }
            case .response(let responseID, let outcome) where responseID == .integer(id):
                switch outcome {
                case .result(let value): return value
                case .error(let error): throw CLIError(error)
                }
            case .response(.null, .error(let error)):
                // Connection-level errors (line too long, server busy) carry a null id.
                throw CLIError(error)
            case .response:
                continue
            }
        }
    }

    /// Sends a request without waiting for its response (from inside a notification callback).
    func post<M: RPCMethod>(_: M.Type, _ params: M.Params) throws(CLIError) {
        posted.insert(try send(M.name, params: params))
    }

    private func send(_ method: String, params: some Encodable) throws(CLIError) -> Int64 {
        let id = nextID
        nextID += 1
        let line: Data
        do {
            line = try WireCodec.requestLine(id: .integer(id), method: method, params: params)
        } catch {
            throw CLIError(message: "cannot encode the request: \(error)", reason: "client.bad_request", exitCode: .usage)
        }
        try write(line)
        return id
    }

    /// Waits for the next notification (for followed streams); nil when the daemon closes.
    func nextNotification() throws(CLIError) -> (String, JSONValue?)? {
        while true {
            let message: Incoming
            do {
                message = try readMessage()
            } catch where error.reason == "daemon.closed" {
                return nil
            }
            if case .notification(let name, let params) = message { return (name, params) }
        }
    }

    private func write(_ data: Data) throws(CLIError) {
        var offset = 0
        while offset < data.count {
            let written = data.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, data.count - offset, Int32(MSG_NOSIGNAL)) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else {
                // The daemon may have refused us with an error line before closing: report that.
                if case .response(_, .error(let error))? = try? readMessage() { throw CLIError(error) }
                throw CLIError(message: "lost the connection to authd while sending", reason: "daemon.unavailable", exitCode: .unavailable)
            }
            offset += written
        }
    }

    private func readMessage() throws(CLIError) -> Incoming {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let line: [UInt8]?
            do {
                line = try framer.nextLine()
            } catch {
                throw CLIError(message: "the daemon sent an over-long line", reason: "client.bad_response", exitCode: .failure)
            }
            if let line {
                do {
                    return try WireCodec.decodeIncoming(line)
                } catch {
                    throw CLIError(message: error.message, reason: "client.bad_response", exitCode: .failure)
                }
            }
            let count = read(fd, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else {
                throw CLIError(message: "authd closed the connection", reason: "daemon.closed", exitCode: .unavailable)
            }
            framer.append(buffer[0..<count])
        }
    }
}
