import CLinux
import Glibc
import Protocol

// The only file of the client library that calls libc.

/// A connected Unix stream socket that sends bytes and receives `\n`-terminated lines: the
/// lower layer of the client, with no JSON in it.
///
/// ``RPCClient`` speaks JSON-RPC over it; tests of the daemon's framing use it directly to send
/// bytes that are not requests at all. Blocking, for one thread at a time (not Sendable), like
/// the programs that use it (authctl, a PAM module). The socket is closed by ``close()`` or when
/// the connection is released.
public final class LineConnection {
    /// The socket; -1 once closed.
    private var fd: Int32
    private var framer: LineFramer
    /// How long one `readLine` may wait for its line; nil: for ever.
    private var receiveTimeout: Duration?
    /// One buffer for every read, so receiving allocates only the lines it returns.
    private var readBuffer = [UInt8](repeating: 0, count: 65536)

    /// Connects to the daemon's socket at `socketPath`.
    ///
    /// - Parameters:
    ///   - maxLineLength: the longest line accepted from the daemon (newline excluded); a longer
    ///     one fails with ``AuthdClientError/Code/lineTooLong``.
    ///   - receiveTimeout: how long one ``readLine()`` may wait for its line before
    ///     ``AuthdClientError/Code/timedOut`` (a daemon sending it a byte at a time does not
    ///     stretch it); nil waits forever.
    ///   - sendTimeout: how long sending into a full socket buffer may wait, and connecting while
    ///     the daemon's listen queue is full (a daemon that accepts nothing).
    /// The corresponding C functions are `socket`, `setsockopt` and `connect`.
    public convenience init(socketPath: String, maxLineLength: Int = LineFramer.defaultMaxLineLength,
                            receiveTimeout: Duration? = nil, sendTimeout: Duration? = nil) throws(AuthdClientError) {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .connectFailed(path: socketPath, errno: Glibc.errno) }
        // Before connecting: the send timeout is what bounds a connect into a full queue.
        if let code = Self.setSendTimeout(fd, sendTimeout) {
            Glibc.close(fd)
            throw .connectFailed(path: socketPath, errno: code)
        }
        guard authd_connect_unix_socket(fd, socketPath) == 0 else {
            let code = Glibc.errno
            Glibc.close(fd)
            throw .connectFailed(path: socketPath, errno: code)
        }
        self.init(owning: fd, maxLineLength: maxLineLength, receiveTimeout: receiveTimeout)
    }

    /// Connects to authd where ``DaemonSocket`` says it listens when no socket is named: the
    /// user's own daemon, else the system daemon. Returns the connection and the socket it
    /// reached; when none answers, ``AuthdClientError/Code/connectFailed`` lists every socket
    /// tried (``AuthdClientError/attempts``).
    ///
    /// A socket below `/tmp/authd-UID` is tried only when that directory is this user's own with
    /// mode 0700, the condition the daemon places its socket there under: any user can create
    /// the directory first and listen in it, to collect the PINs and passwords sent to authd.
    /// The corresponding C functions are `geteuid`, `lstat` and those of ``init(socketPath:maxLineLength:receiveTimeout:sendTimeout:)``.
    public static func connectToDaemon(environment: [String: String]) throws(AuthdClientError) -> (LineConnection, String) {
        let userID = geteuid()
        let shared = DaemonSocket.fallbackDirectory(userID: userID)
        var attempts: [SocketAttempt] = []
        for path in DaemonSocket.candidates(environment: environment, userID: userID) {
            if path.hasPrefix(shared + "/") {
                var info = stat()
                let problem: String? =
                    if lstat(shared, &info) != 0 { String(cString: strerror(Glibc.errno)) }
                    else if info.st_mode & S_IFMT != S_IFDIR || info.st_uid != userID || info.st_mode & 0o7777 != 0o700 {
                        "not used: \(shared) is not a directory of uid \(userID) with mode 0700, so another user may have made it"
                    } else { nil }
                if let problem {
                    attempts.append(SocketAttempt(path: path, problem: problem))
                    continue
                }
            }
            do {
                return (try LineConnection(socketPath: path), path)
            } catch {
                attempts.append(SocketAttempt(path: path, problem: String(cString: strerror(error.errno ?? 0))))
            }
        }
        throw .connectFailed(attempts: attempts)
    }

    /// Takes over `fd`, a connected stream socket (in tests, one end of a `socketpair`); it is
    /// closed with the connection, or at once if setting the send timeout fails.
    public convenience init(adopting fd: Int32, maxLineLength: Int = LineFramer.defaultMaxLineLength,
                            receiveTimeout: Duration? = nil, sendTimeout: Duration? = nil) throws(AuthdClientError) {
        if let code = Self.setSendTimeout(fd, sendTimeout) {
            Glibc.close(fd)
            throw .connectFailed(path: nil, errno: code)
        }
        self.init(owning: fd, maxLineLength: maxLineLength, receiveTimeout: receiveTimeout)
    }

    private init(owning fd: Int32, maxLineLength: Int, receiveTimeout: Duration?) {
        self.fd = fd
        framer = LineFramer(maxLineLength: maxLineLength)
        self.receiveTimeout = receiveTimeout
    }

    /// Sets SO_SNDTIMEO; the errno when that fails.
    private static func setSendTimeout(_ fd: Int32, _ timeout: Duration?) -> Int32? {
        guard let timeout else { return nil }
        var value = Self.socketTimeout(timeout)
        guard setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &value, socklen_t(MemoryLayout<timeval>.size)) == 0 else { return Glibc.errno }
        return nil
    }

    deinit { if fd >= 0 { Glibc.close(fd) } }

    /// Sends all of `bytes`: a whole line with its `\n`, or, for tests of the daemon's framing,
    /// any bytes at all. Retries after signals and partial writes; a daemon that went away fails
    /// the send (``AuthdClientError/Code/sendFailed``) instead of raising SIGPIPE.
    /// The corresponding C function is `send` with `MSG_NOSIGNAL`.
    public func send(_ bytes: some Collection<UInt8>) throws(AuthdClientError) {
        let failure = bytes.withContiguousStorageIfAvailable { sendAll(UnsafeRawBufferPointer($0)) }
            ?? Array(bytes).withUnsafeBytes { sendAll($0) }
        if let failure { throw failure }
    }

    private func sendAll(_ bytes: UnsafeRawBufferPointer) -> AuthdClientError? {
        var offset = 0
        while offset < bytes.count {
            let written = Glibc.send(fd, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            if written > 0 {
                offset += written
                continue
            }
            guard written < 0 else { return .sendFailed(errno: nil) }
            switch Glibc.errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return .timedOut
            case let code: return .sendFailed(errno: code)
            }
        }
        return nil
    }

    /// The next line without its terminator (a trailing `\r` dropped, blank lines skipped), or
    /// nil when the daemon closed the connection. Bytes of a line not yet complete stay buffered
    /// across calls, also when a call times out. The receive timeout bounds the whole call: each
    /// wait may last only for what is left of it.
    /// The corresponding C functions are `poll` and `read`.
    public func readLine() throws(AuthdClientError) -> [UInt8]? {
        // A timeout past any wait worth keeping (68 years) is none: the sum would overflow.
        let deadline = receiveTimeout.flatMap { $0 < .seconds(Int64(Int32.max)) ? ContinuousClock.now + $0 : nil }
        while true {
            do {
                if let line = try framer.nextLine() { return line }
            } catch {
                throw .lineTooLong
            }
            if let failure = awaitInput(until: deadline) { throw failure }
            let count = readBuffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count > 0 {
                framer.append(readBuffer[0..<count])
                continue
            }
            if count == 0 { return nil }
            switch Glibc.errno {
            case EINTR: continue
            case ECONNRESET: return nil
            case let code: throw .receiveFailed(errno: code)
            }
        }
    }

    /// Waits until the socket has something to read (bytes, its end, an error), or until
    /// `deadline` (`.timedOut`); nil: for ever.
    ///
    /// In `poll`, not in a blocking `read`: when the daemon reads a request, the kernel frees the
    /// request's buffer and wakes every thread asleep on the sending socket, one asleep in `read`
    /// included, which finds nothing and sleeps again. A thread in `poll` is woken only for input.
    /// With 16 callers asking for tokens at once that was half of all wake-ups on the machine.
    private func awaitInput(until deadline: ContinuousClock.Instant?) -> AuthdClientError? {
        // poll skips a negative descriptor, and would wait for nothing.
        guard fd >= 0 else { return .receiveFailed(errno: EBADF) }
        while true {
            var milliseconds: Int32 = -1
            if let deadline {
                let remaining = deadline - ContinuousClock.now
                guard remaining > .zero else { return .timedOut }
                // Rounded up: a wait that ends early only comes round again.
                let (seconds, attoseconds) = remaining.components
                milliseconds = Int32(clamping: seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
            }
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&entry, 1, milliseconds)
            if ready > 0 { return nil }
            if ready < 0 && Glibc.errno != EINTR { return .receiveFailed(errno: Glibc.errno) }
        }
    }

    /// The uid of the process at the other end, as the kernel recorded it when the socket was
    /// made (for a socket-activated daemon, the service manager's); nil when it cannot be read.
    /// The corresponding C function is `getsockopt(SO_PEERCRED)`.
    public func peerUserID() -> UInt32? {
        var pid: Int32 = 0, uid: UInt32 = 0, gid: UInt32 = 0
        guard fd >= 0, authd_peer_credentials(fd, &pid, &uid, &gid) == 0 else { return nil }
        return uid
    }

    /// Changes how long one ``readLine()`` may wait (nil: forever), e.g. a short bound for the
    /// first answer and a long one once the daemon is known to be there.
    public func setReceiveTimeout(_ timeout: Duration?) {
        receiveTimeout = timeout
    }

    /// A socket timeout of `duration`: a zero timeval would mean "wait forever", so the shortest
    /// is one microsecond.
    private static func socketTimeout(_ duration: Duration) -> timeval {
        let (seconds, attoseconds) = duration.components
        var value = timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
        if value.tv_sec == 0 && value.tv_usec == 0 { value.tv_usec = 1 }
        return value
    }

    /// Overwrites `bytes` with zeros in a way the compiler may not drop: for lines that carried
    /// a secret, once sent. The corresponding C function is `explicit_bzero`.
    public static func wipe(_ bytes: UnsafeMutableRawBufferPointer) {
        guard let base = bytes.baseAddress else { return }
        explicit_bzero(base, bytes.count)
    }

    /// Stops sending (half-close): the daemon sees the end of the stream and still answers
    /// what it has received. The corresponding C function is `shutdown(SHUT_WR)`.
    public func finishWriting() {
        if fd >= 0 { shutdown(fd, Int32(SHUT_WR)) }
    }

    /// Stops both directions at once, from any thread: a read blocked in another thread returns
    /// the end of the stream, and the daemon sees the client leave (it cancels what was asked).
    /// The corresponding C function is `shutdown(SHUT_RDWR)`.
    public func shutDown() {
        if fd >= 0 { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    /// Closes the socket now; the daemon sees the client leave. Later sends and reads fail.
    public func close() {
        guard fd >= 0 else { return }
        Glibc.close(fd)
        fd = -1
    }
}
