import CLinux
import Foundation
import Glibc

// The yardstick of the round-trip figures: OpenSSH's ssh-agent, a C daemon with a binary
// protocol, asked for its identities (SSH_AGENTC_REQUEST_IDENTITIES) by a client of the same
// style as the bench's authd client: one blocking socket, buffered reads, one request in flight.

/// A private `ssh-agent -D -a SOCKET`, stopped with `stop()`.
final class SSHAgent {
    let directory: String
    let process = Process()
    var socket: String { directory + "/agent.sock" }

    init() throws {
        var template = Array("/tmp/authd-bench-agent-XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template)!)
        process.executableURL = URL(fileURLWithPath: "/usr/bin/ssh-agent")
        process.arguments = ["-D", "-a", directory + "/agent.sock"]
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        // The socket exists once bound, a moment before ssh-agent listens on it.
        for _ in 0..<500 where (try? SSHAgentClient(socket)) == nil { usleep(10_000) }
        guard (try? SSHAgentClient(socket)) != nil else {
            stop()
            throw BenchError(description: "ssh-agent never listened on its socket")
        }
    }

    func stop() {
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// One connection to an ssh-agent; `requestIdentities` is one round trip.
final class SSHAgentClient {
    private let fd: Int32
    private var buffer = [UInt8](repeating: 0, count: 64 * 1024)
    private var start = 0, end = 0

    init(_ path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            throw BenchError(description: "cannot connect to ssh-agent: errno \(errno)")
        }
    }

    deinit { close(fd) }

    /// Sends REQUEST_IDENTITIES (type 11) and reads the IDENTITIES_ANSWER (type 12) frame.
    func requestIdentities() throws {
        let request: [UInt8] = [0, 0, 0, 1, 11]
        guard send(fd, request, request.count, 0) == request.count else { throw BenchError(description: "ssh-agent: send failed") }
        let header = try take(4)
        let length = header.reduce(0) { $0 << 8 | Int($1) }
        guard length > 0, try take(length).first == 12 else { throw BenchError(description: "ssh-agent: not an identities answer") }
    }

    private func take(_ count: Int) throws -> ArraySlice<UInt8> {
        while end - start < count {
            if start > 0 {
                buffer.replaceSubrange(0..<(end - start), with: buffer[start..<end])
                end -= start
                start = 0
            }
            let received = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + end, $0.count - end, 0) }
            guard received > 0 else { throw BenchError(description: "ssh-agent closed the connection") }
            end += received
        }
        defer { start += count }
        return buffer[start..<(start + count)]
    }
}
