import CLinux
import Foundation
import Glibc
import Protocol

/// A native messaging host as a browser runs it: stdin and stdout are pipes, each message a
/// native-order 32-bit length and UTF-8 JSON. Every read is bounded; the host is killed when the
/// value goes.
final class NativeHost {
    let pid: pid_t
    /// -1 once closed (`closeInput`), so that it is closed once: a second close could close a
    /// descriptor another thread has opened since under the same number.
    private var input: Int32
    private let output: Int32
    let started = ContinuousClock.now
    private var exitStatus: Int32?

    init(_ executable: String, arguments: [String] = [], environment: [String], stderr: String) throws {
        var toHost: [Int32] = [0, 0], fromHost: [Int32] = [0, 0]
        guard authd_pipe_cloexec(&toHost) == 0 else { throw HarnessError("pipe2 failed") }
        guard authd_pipe_cloexec(&fromHost) == 0 else {
            toHost.forEach { close($0) }
            throw HarnessError("pipe2 failed")
        }
        defer { close(toHost[0]); close(fromHost[1]) }
        pid = try ChildProcess.spawn([executable] + arguments, environment: environment, stdin: toHost[0], stdout: .pipe(fromHost[1]), stderr: stderr)
        input = toHost[1]
        output = fromHost[0]
    }

    deinit {
        if input >= 0 { close(input) }
        close(output)
        if exitStatus == nil { ChildProcess.reap(pid) }
    }

    func sendRaw(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(input, $0.baseAddress, $0.count) }
            guard written > 0 else { throw HarnessError("the host's stdin is closed") }
            offset += written
        }
    }

    func send(_ message: JSONValue) throws {
        let body = Array(try WireCodec.encodeJSON(message))
        try sendRaw(withUnsafeBytes(of: UInt32(body.count)) { Array($0) } + body)
    }

    func closeInput() {
        guard input >= 0 else { return }
        close(input)
        input = -1
    }

    /// Reads `count` bytes within `timeout`; nil at end of output.
    private func read(_ count: Int, within timeout: Duration) throws -> [UInt8]? {
        let deadline = ContinuousClock.now + timeout
        var bytes = [UInt8](repeating: 0, count: count), offset = 0
        while offset < count {
            let left = deadline - .now
            guard left > .zero else { throw HarnessError("the host wrote nothing within \(timeout)") }
            var poller = pollfd(fd: output, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Int32(left.components.seconds * 1000 + 1)) > 0 else { continue }
            let got = bytes[offset...].withUnsafeMutableBytes { Glibc.read(output, $0.baseAddress, $0.count) }
            if got == 0 { if offset == 0 { return nil } else { throw HarnessError("the host's output ended mid-message") } }
            guard got > 0 else { throw HarnessError("reading the host failed") }
            offset += got
        }
        return bytes
    }

    /// The next message, or nil when the host's output ended.
    func receive(within timeout: Duration = .seconds(60)) throws -> JSONValue? {
        guard let header = try read(4, within: timeout) else { return nil }
        let length = Int(header.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) })
        guard length < 1024 * 1024 else { throw HarnessError("a reply of \(length) bytes") }
        guard let body = try read(length, within: timeout) else { throw HarnessError("no body") }
        return try WireCodec.decode(JSONValue.self, from: Data(body))
    }

    /// The exit status, waiting at most `timeout`.
    func waitForExit(within timeout: Duration = .seconds(10)) throws -> Int32 {
        if let exitStatus { return exitStatus }
        guard let status = ChildProcess.waitForExit(pid, within: timeout) else { throw HarnessError("the host did not exit within \(timeout)") }
        exitStatus = status
        return status
    }
}
