import Glibc
import OpenSSLCrypto

/// A TLS connection as a `ByteChannel`: the hub serves a device's lines over it through the same
/// `Connection` as the Unix socket's. Calls come from the connection's queue only.
final class TLSChannel: ByteChannel, @unchecked Sendable {
    // Sendable: `stream` and `ended` are touched only on the owning connection's queue.
    let fd: Int32
    private let stream: TLSStream
    private var ended = false

    init(fd: Int32, stream: TLSStream) {
        self.fd = fd
        self.stream = stream
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Syscalls.IOResult {
        do {
            switch try stream.read(into: buffer) {
            case .done(let count): return .bytes(count)
            // A record that needs the socket writable first (a key update) is retried on the next event.
            case .wantRead, .wantWrite: return .wouldBlock
            case .closed:
                ended = true
                return .endOfFile
            }
        } catch {
            ended = true
            throw SystemError(call: "TLS read: \(error)", errno: EPROTO)
        }
    }

    /// A record may be followed by more, already in the socket or in the TLS library: read on.
    var shortReadDrains: Bool { false }
    var gathersWrites: Bool { true }

    func write(_ bytes: UnsafeRawBufferPointer) throws(SystemError) -> Syscalls.IOResult {
        do {
            switch try stream.write(bytes) {
            case .done(let count): return .bytes(count)
            case .wantRead, .wantWrite: return .wouldBlock
            case .closed: return .endOfFile
            }
        } catch {
            throw SystemError(call: "TLS write: \(error)", errno: EPROTO)
        }
    }

    /// TLS has no half-close that authd uses: the end of the stream is the peer leaving.
    func peerHasClosed() -> Bool { true }

    func close() {
        if !ended { stream.shutdown() }
        Syscalls.close(fd)
    }
}
