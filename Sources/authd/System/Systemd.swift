import CSystemd
import Glibc

// The only file that calls libsystemd for readiness notification (sd_notify), socket activation
// (sd_listen_fds, sd_is_socket_unix) and journald (sd_journal_sendv). sd-bus, also libsystemd,
// is SDBus.swift's.

enum Systemd {
    /// Sends a state string to the service manager (`sd_notify`); a no-op outside systemd.
    static func notify(_ state: String) {
        _ = sd_notify(0, state)
    }

    /// Sockets passed by socket activation (`sd_listen_fds`), each checked to be an AF_UNIX
    /// stream socket in listening state. Unsets `LISTEN_*` so children do not inherit them.
    static func listenedSockets() throws -> [Int32] {
        let count = sd_listen_fds(1)
        guard count > 0 else {
            if count < 0 { throw SystemError(call: "sd_listen_fds", errno: -count) }
            return []
        }
        let descriptors = (0..<count).map { SD_LISTEN_FDS_START + $0 }
        for fd in descriptors where sd_is_socket_unix(fd, 1 /* SOCK_STREAM */, 1, nil, 0) <= 0 {
            throw SystemError(call: "socket activation: fd \(fd) is not a listening AF_UNIX stream socket", errno: EINVAL)
        }
        return descriptors
    }

    /// True when stderr is connected to journald (systemd sets `JOURNAL_STREAM=dev:ino`).
    static var stderrIsJournal: Bool {
        guard let value = Syscalls.environmentVariable("JOURNAL_STREAM") else { return false }
        let parts = value.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        guard let status = try? Syscalls.fileStatus(STDERR_FILENO, name: "stderr") else { return false }
        return status.device == device && status.inode == inode
    }

    /// Sends one structured entry (`FIELD=value` pairs) to the journal (`sd_journal_sendv`).
    @discardableResult
    static func journalSend(_ fields: [(String, String)]) -> Bool {
        let entries = fields.map { Array("\($0.0)=\($0.1)".utf8) }
        var storage = entries
        return storage.withUnsafeMutableBufferPointer { buffers -> Bool in
            var vectors = buffers.indices.map { index in
                buffers[index].withUnsafeMutableBytes { iovec(iov_base: $0.baseAddress, iov_len: $0.count) }
            }
            return sd_journal_sendv(&vectors, Int32(vectors.count)) == 0
        }
    }
}
