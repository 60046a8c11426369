import CLinux
import Foundation
import Glibc

/// The vpcd side channel (vsmartcard's `libifdvpcd`): pcscd's driver listens on a TCP port; the
/// card connects to it. Frames are a 2-byte big-endian length and a payload; a 1-byte payload
/// is a control (0 power off, 1 power on, 2 reset, 4 get ATR), anything longer is an APDU.
/// Closing the connection is the card leaving the reader.
struct VPCDLink {
    let host: String
    let port: UInt16

    /// Connects, retrying until the driver listens (pcscd may start after us, or restart).
    func connect() -> Int32 {
        while true {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            inet_pton(AF_INET, host, &address.sin_addr)
            let ok = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            if ok == 0 {
                var one: Int32 = 1
                setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                return fd
            }
            close(fd)
            usleep(100_000)
        }
    }

    /// One frame's payload; nil when the driver closed the connection.
    static func receive(_ fd: Int32) -> [UInt8]? {
        // vpcd writes the length and the payload separately without TCP_NODELAY: Nagle holds
        // the payload until the length is acknowledged, so acknowledge at once rather than after
        // the delayed-ACK timer (40 ms per APDU otherwise). Linux clears the flag; set it each time.
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_QUICKACK, &one, socklen_t(MemoryLayout<Int32>.size))
        guard let header = readExactly(fd, 2) else { return nil }
        let length = Int(header[0]) << 8 | Int(header[1])
        return readExactly(fd, length)
    }

    static func send(_ fd: Int32, _ payload: [UInt8]) -> Bool {
        let length = min(payload.count, 0xFFFF)
        let frame = [UInt8(length >> 8), UInt8(length & 0xFF)] + payload.prefix(length)
        var offset = 0
        while offset < frame.count {
            let written = frame.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, frame.count - offset, Int32(MSG_NOSIGNAL)) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return false }
            offset += written
        }
        return true
    }

    private static func readExactly(_ fd: Int32, _ count: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var offset = 0
        while offset < count {
            let got = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + offset, count - offset) }
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else { return nil }
            offset += got
        }
        return bytes
    }
}
