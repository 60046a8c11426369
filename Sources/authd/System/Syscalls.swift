import CLinux
import Glibc

// The only file that calls libc (and its Linux extras in CLinux) for sockets, files, pipes,
// processes, clocks and process state. Every call that can be interrupted retries on EINTR;
// failures become `SystemError` carrying errno and the call's name.
//
// Every other C library has exactly one Swift file that calls it; the only libc calls outside
// this file are the ones such a wrapper's C API needs:
//
//   libsqlite3           Store/SQLite.swift
//   libcrypto            Crypto/OpenSSL.swift
//   libargon2            Crypto/Argon2.swift
//   pcsc-lite            Card/PCSC.swift        (+ strdup/free for SCARD_READERSTATE's names)
//   libcbor              Passkeys/CBOR.swift    (+ free for the buffers libcbor allocates)
//   libphonenumber       Accounts/PhoneNumber.swift, through the CPhoneNumber shim (opened with dlopen)
//   libpq                Store/PostgreSQL.swift, through the table CPostgreSQL's shim fills (opened with dlopen)
//   libsystemd sd-bus    System/SDBus.swift
//   libsystemd (sd_notify, sd_listen_fds, sd_is_socket_unix, sd_journal)   System/Systemd.swift
//
// Blocking calls made here (`poll`, `waitpid`, `usleep`, blocking reads) belong on an actor of
// the `BlockingExecutor` shape, never on the cooperative pool.

/// A file that exists but is not what was expected (a directory, a FIFO, too large).
struct FileError: Error, CustomStringConvertible {
    let description: String
}

struct SystemError: Error, CustomStringConvertible, Equatable {
    let call: String
    let errno: Int32
    var description: String { "\(call): \(reason)" }
    /// What errno means, in words (`strerror`).
    var reason: String { Syscalls.errorDescription(errno) }
    /// The call failed because the file exists (`EEXIST`).
    var fileExists: Bool { errno == EEXIST }
    /// A descriptor that does not block could take nothing now (`EAGAIN`).
    var wouldBlock: Bool { errno == EAGAIN || errno == EWOULDBLOCK }
}

/// Runs `body` until it does not fail with EINTR. The corresponding C idiom is `while (r == -1 && errno == EINTR)`.
@inline(__always)
func retryingEINTR<T: BinaryInteger>(_ call: String, _ body: () -> T) throws(SystemError) -> T {
    while true {
        let result = body()
        if result != -1 { return result }
        let code = Glibc.errno
        if code != EINTR { throw SystemError(call: call, errno: code) }
    }
}

enum Syscalls {
    /// A listening, non-blocking, close-on-exec AF_UNIX stream socket bound at `path`.
    /// The corresponding C functions are `socket`, `bind`, `listen`.
    static func listenUnix(path: String, mode: mode_t, backlog: Int32 = 1024) throws -> Int32 {
        let fd = try retryingEINTR("socket") { socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0) }
        do {
            var address = try unixAddress(path)
            // Bind with a restrictive umask so the socket is never briefly wider than `mode`.
            let previous = umask(0o177)
            defer { umask(previous) }
            _ = try retryingEINTR("bind(\(path))") {
                withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
                }
            }
            _ = try retryingEINTR("chmod(\(path))") { chmod(path, mode) }
            _ = try retryingEINTR("listen") { listen(fd, backlog) }
            return fd
        } catch {
            Glibc.close(fd)
            throw error
        }
    }

    /// The addresses `host` names (a numeric address, or a name resolved by `getaddrinfo`, which
    /// may block on DNS), for a stream socket on `port`.
    private static func addresses(_ host: String, port: UInt16, passive: Bool) throws(SystemError) -> [(family: Int32, address: [UInt8])] {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let list else {
            throw SystemError(call: "getaddrinfo(\(host)): \(String(cString: gai_strerror(status)))", errno: status == EAI_SYSTEM ? errno : EINVAL)
        }
        defer { freeaddrinfo(list) }
        var found: [(Int32, [UInt8])] = []
        var entry: UnsafeMutablePointer<addrinfo>? = list
        while let current = entry {
            if let address = current.pointee.ai_addr {
                found.append((current.pointee.ai_family, Array(UnsafeRawBufferPointer(start: address, count: Int(current.pointee.ai_addrlen)))))
            }
            entry = current.pointee.ai_next
        }
        return found
    }

    /// A listening, non-blocking, close-on-exec TCP socket on `host:port` (port 0: the kernel
    /// picks one), and the port it got. The corresponding C functions are `getaddrinfo`, `socket`,
    /// `setsockopt(SO_REUSEADDR)`, `bind`, `listen`, `getsockname`.
    static func listenTCP(host: String, port: UInt16, backlog: Int32 = 1024) throws(SystemError) -> (fd: Int32, port: UInt16) {
        var failure = SystemError(call: "bind(\(host))", errno: EADDRNOTAVAIL)
        for (family, address) in try addresses(host, port: port, passive: true) {
            let fd = try retryingEINTR("socket") { socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0) }
            var one: Int32 = 1
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            var bound = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let ok = address.withUnsafeBytes { raw in
                withUnsafeMutablePointer(to: &bound) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { boundPointer in
                        bind(fd, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count)) == 0
                            && listen(fd, backlog) == 0 && getsockname(fd, boundPointer, &length) == 0
                    }
                }
            }
            if ok { return (fd, boundPort(bound)) }
            failure = SystemError(call: "bind(\(host):\(port))", errno: errno)
            Glibc.close(fd)
        }
        throw failure
    }

    /// A non-blocking, close-on-exec TCP socket connected to `host:port` within `timeoutMilliseconds`
    /// (over the addresses the name has, in order). The corresponding C functions are
    /// `getaddrinfo`, `socket`, `connect`, `poll`, `getsockopt(SO_ERROR)`.
    static func connectTCP(host: String, port: UInt16, timeoutMilliseconds: Int32) throws(SystemError) -> Int32 {
        var failure = SystemError(call: "connect(\(host):\(port))", errno: EHOSTUNREACH)
        for (family, address) in try addresses(host, port: port, passive: false) {
            let fd = try retryingEINTR("socket") { socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0) }
            let started = address.withUnsafeBytes { raw in
                Glibc.connect(fd, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
            }
            var code = started == 0 ? 0 : errno
            if code == EINPROGRESS {
                var descriptor = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                let ready = Glibc.poll(&descriptor, 1, timeoutMilliseconds)
                if ready == 1 {
                    var error: Int32 = 0
                    var length = socklen_t(MemoryLayout<Int32>.size)
                    getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
                    code = error
                } else {
                    code = ready == 0 ? ETIMEDOUT : errno
                }
            }
            if code == 0 {
                sendPromptly(fd)
                return fd
            }
            failure = SystemError(call: "connect(\(host):\(port))", errno: code)
            Glibc.close(fd)
        }
        throw failure
    }

    /// Turns Nagle's algorithm off (`TCP_NODELAY`): a line follows another without waiting for
    /// the peer's acknowledgement, which its delayed ACK holds back for 40 ms.
    static func sendPromptly(_ fd: Int32) {
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    private static func boundPort(_ address: sockaddr_storage) -> UInt16 {
        var copy = address
        return withUnsafePointer(to: &copy) { pointer in
            switch Int32(address.ss_family) {
            case AF_INET: pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
            case AF_INET6: pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
            default: 0
            }
        }
    }

    /// The numeric address of a connected TCP socket's peer (without the port), for limits per
    /// address and for logs. The corresponding C functions are `getpeername`, `getnameinfo`.
    static func peerAddress(_ fd: Int32) -> String {
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                getpeername(fd, pointer, &length) == 0
                    && getnameinfo(pointer, length, &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST) == 0
            }
        }
        return ok ? String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "unknown"
    }

    /// A connected, blocking AF_UNIX stream socket. The corresponding C function is `connect`.
    static func connectUnix(path: String) throws(SystemError) -> Int32 {
        let fd = authd_connect_unix(path)
        guard fd >= 0 else { throw SystemError(call: "connect(\(path))", errno: errno) }
        return fd
    }

    static func unixAddress(_ path: String) throws(SystemError) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path), !bytes.contains(0) else {
            throw SystemError(call: "socket path too long", errno: ENAMETOOLONG)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        return address
    }

    /// Accepts one pending connection as non-blocking and close-on-exec; `nil` when none is pending.
    static func accept(_ listener: Int32) throws(SystemError) -> Int32? {
        while true {
            let fd = authd_accept4(listener, Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue))
            if fd >= 0 { return fd }
            switch errno {
            case EINTR, ECONNABORTED: continue
            case EAGAIN, EWOULDBLOCK: return nil
            case let code: throw SystemError(call: "accept4", errno: code)
            }
        }
    }

    enum IOResult: Equatable {
        case bytes(Int)
        case wouldBlock
        case endOfFile
    }

    /// Reads into `buffer`; end of file and EAGAIN are results, not errors.
    static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> IOResult {
        while true {
            let count = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if count > 0 { return .bytes(count) }
            if count == 0 { return .endOfFile }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return .wouldBlock
            case let code: throw SystemError(call: "read", errno: code)
            }
        }
    }

    /// Sends without raising SIGPIPE; EAGAIN is a result.
    static func send(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(SystemError) -> IOResult {
        while true {
            let count = Glibc.send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
            if count >= 0 { return .bytes(count) }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return .wouldBlock
            case let code: throw SystemError(call: "send", errno: code)
            }
        }
    }

    /// Whether the peer closed `fd` (or reset it) and nothing is left to read before the end: a
    /// peek that neither waits nor takes anything. The corresponding C function is `recv` with
    /// `MSG_PEEK | MSG_DONTWAIT`.
    static func atEndOfFile(_ fd: Int32) -> Bool {
        var byte: UInt8 = 0
        let count = Glibc.recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return count == 0 || (count < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
    }

    /// After reading end-of-file: true when the peer closed the socket entirely (POLLHUP), false
    /// when it only shut down its writing side and still reads.
    static func peerHasClosed(_ fd: Int32) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        guard Glibc.poll(&entry, 1, 0) >= 0 else { return true }
        return entry.revents & Int16(POLLHUP | POLLERR) != 0
    }

    struct PeerCredentials {
        var pid: Int32
        var uid: UInt32
        var gid: UInt32
        var groups: [UInt32]
    }

    /// The peer's credentials at connect time (`SO_PEERCRED`) and its supplementary groups
    /// (`SO_PEERGROUPS`, Linux ≥ 4.13).
    static func peerCredentials(_ fd: Int32) throws(SystemError) -> PeerCredentials {
        var pid: Int32 = 0
        var uid: UInt32 = 0
        var gid: UInt32 = 0
        _ = try retryingEINTR("getsockopt(SO_PEERCRED)") { authd_peer_credentials(fd, &pid, &uid, &gid) }
        var groups = [gid_t](repeating: 0, count: 64)
        var groupBytes = socklen_t(groups.count * MemoryLayout<gid_t>.size)
        var status = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, &groups, &groupBytes)
        if status == -1 && errno == ERANGE {
            groups = [gid_t](repeating: 0, count: Int(groupBytes) / MemoryLayout<gid_t>.size)
            status = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, &groups, &groupBytes)
        }
        let peerGroups = status == 0 ? Array(groups.prefix(Int(groupBytes) / MemoryLayout<gid_t>.size)) : []
        return PeerCredentials(pid: pid, uid: uid, gid: gid, groups: peerGroups)
    }

    /// The target of `/proc/PID/exe`, or nil when it cannot be read.
    static func executablePath(pid: Int32) -> String? {
        readLink("/proc/\(pid)/exe", in: AT_FDCWD)
    }

    /// The terminal a pinentry of this process may draw on: `GPG_TTY` (as gpg-agent takes it),
    /// else standard input's terminal; with `TERM` as its type. Nil for none.
    static func terminal(environment: [String: String]) -> (name: String, type: String)? {
        let type = environment["TERM"].flatMap { $0.isEmpty ? nil : $0 } ?? "dumb"
        if let named = environment["GPG_TTY"], named.hasPrefix("/dev/") { return (named, type) }
        guard isatty(0) == 1, let name = ttyname(0) else { return nil }
        return (String(cString: name), type)
    }

    /// Opens the shared library at `path` for the rest of the process's life and finds `symbol`
    /// in it; on failure, the dynamic linker's words. The corresponding C functions are `dlopen`
    /// (`RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE`: all of it bound now, none of it shared with
    /// other libraries, never unloaded) and `dlsym`.
    static func loadSymbol(_ symbol: String, fromLibraryAt path: String) -> Result<UnsafeMutableRawPointer, FileError> {
        guard let library = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE) else {
            return .failure(FileError(description: dlerror().map { String(cString: $0) } ?? "cannot open \(path)"))
        }
        guard let address = dlsym(library, symbol) else {
            return .failure(FileError(description: "\(path) has no \(symbol)"))
        }
        return .success(address)
    }

    static func userName(uid: UInt32) -> String? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, result != nil, let name = entry.pw_name else { return nil }
        return String(cString: name)
    }

    /// The uid of the user `name`, or nil when the user database has none.
    static func userID(named name: String) -> UInt32? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwnam_r(name, &entry, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
        return entry.pw_uid
    }

    static func groupID(named name: String) -> UInt32? {
        var entry = group()
        var result: UnsafeMutablePointer<group>?
        var buffer = [CChar](repeating: 0, count: 16384)
        guard getgrnam_r(name, &entry, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
        return entry.gr_gid
    }

    /// Creates `path` (and missing parents) with `mode`; an existing directory must be owned by
    /// us and not group/world-writable (or, with `exactMode`, have exactly `mode`).
    static func ensureDirectory(_ path: String, mode: mode_t, exactMode: Bool) throws {
        var components: [String] = []
        var created: Set<String> = []
        for part in path.split(separator: "/") {
            components.append(String(part))
            let prefix = "/" + components.joined(separator: "/")
            if mkdir(prefix, prefix == path ? mode : 0o755) == 0 {
                created.insert(prefix)
            } else if errno != EEXIST {
                throw SystemError(call: "mkdir(\(prefix))", errno: errno)
            }
        }
        var info = stat()
        _ = try retryingEINTR("stat(\(path))") { lstat(path, &info) }
        // mkdir applied our umask (077): directories we made get exactly the intended mode
        // (0755 for parents, so that e.g. a system socket below them stays reachable).
        for directory in created {
            _ = try retryingEINTR("chmod(\(directory))") { chmod(directory, directory == path ? mode : 0o755) }
        }
        _ = try retryingEINTR("stat(\(path))") { lstat(path, &info) }
        guard info.st_mode & S_IFMT == S_IFDIR else { throw SystemError(call: "\(path) is not a directory", errno: ENOTDIR) }
        guard info.st_uid == geteuid() else { throw SystemError(call: "\(path) is owned by uid \(info.st_uid), not us", errno: EPERM) }
        if exactMode, info.st_mode & 0o7777 != mode {
            _ = try retryingEINTR("chmod(\(path))") { chmod(path, mode) }
        } else if info.st_mode & 0o022 != 0 {
            throw SystemError(call: "\(path) is writable by group or others", errno: EPERM)
        }
    }

    /// Creates `path` as a directory with mode 0700, or accepts it only if it already is one of
    /// ours with exactly that mode (not a symbolic link). For a directory whose fixed name lies
    /// in a directory every user can write to (`/tmp/authd-UID`): another user may have made it
    /// first, to read or replace what is put in it. The corresponding C functions are `mkdir`
    /// and `lstat`.
    static func ensurePrivateDirectory(_ path: String) throws {
        if mkdir(path, 0o700) == 0 {
            // The umask may have taken bits away; a directory we just made gets exactly 0700.
            _ = try retryingEINTR("chmod(\(path))") { chmod(path, 0o700) }
        } else if errno != EEXIST {
            throw SystemError(call: "mkdir(\(path))", errno: errno)
        }
        var info = stat()
        _ = try retryingEINTR("stat(\(path))") { lstat(path, &info) }
        let problem: String? =
            if info.st_mode & S_IFMT != S_IFDIR { "is not a directory" }
            else if info.st_uid != geteuid() { "is owned by uid \(info.st_uid), not \(geteuid())" }
            else if info.st_mode & 0o7777 != 0o700 { "has mode \(String(info.st_mode & 0o7777, radix: 8)), not 700" }
            else { nil }
        if let problem {
            throw FileError(description: "\(path) \(problem): refusing to use it, since another user could have made it to catch "
                            + "what is put in it. Remove it, or set XDG_RUNTIME_DIR or --socket")
        }
    }

    /// Removes a stale socket file left by an earlier run, but nothing that is not a socket.
    static func removeStaleSocket(_ path: String) throws {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        guard info.st_mode & S_IFMT == S_IFSOCK else {
            throw SystemError(call: "\(path) exists and is not a socket", errno: EEXIST)
        }
        // A live daemon answers connect(); refuse to steal its socket.
        if let fd = try? connectUnix(path: path) {
            Glibc.close(fd)
            throw SystemError(call: "another authd is already listening on \(path)", errno: EADDRINUSE)
        }
        unlink(path)
    }

    /// The whole file, or nil when it does not exist. Refuses directories and files over `limit`.
    static func readFile(_ path: String, limit: Int) throws -> [UInt8]? {
        // O_NONBLOCK: a FIFO must not block the daemon before the regular-file check refuses it.
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        if fd < 0 && errno == ENOENT { return nil }
        guard fd >= 0 else { throw SystemError(call: "open(\(path))", errno: errno) }
        defer { Glibc.close(fd) }
        return try readRegularFile(fd, name: path, limit: limit)
    }

    /// The rest of the regular file open as `fd`, at most `limit` bytes. procfs files say size
    /// 0, so the size is what reading finds.
    private static func readRegularFile(_ fd: Int32, name: String, limit: Int) throws -> [UInt8] {
        let status = try fileStatus(fd, name: name)
        guard status.kind == .regular else { throw FileError(description: "\(name) is not a regular file") }
        guard status.size <= limit else { throw FileError(description: "\(name) is larger than \(limit) bytes") }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Int(status.size) + 1)
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count <= limit {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw SystemError(call: "read(\(name))", errno: errno) }
            if count == 0 { return bytes }
            bytes += chunk.prefix(count)
        }
        throw FileError(description: "\(name) is larger than \(limit) bytes")
    }

    /// Starts a helper program: `stdin` and `stdout` (or /dev/null) as given, stderr to /dev/null
    /// (a helper's output may echo what it was given, which can be a secret), no other descriptor
    /// of ours, and its own process group, so a timeout kills it and everything it started.
    /// `newSession`: its own session too (so also its own group), for a program that may use
    /// our terminal by name — pinentry-tty: in our session but not our terminal's foreground
    /// group, changing the terminal's modes would stop it (SIGTTOU).
    private static func spawnHelper(_ path: String, arguments: [String], environment: [String: String], stdin: Int32, stdout: Int32?,
                                    newSession: Bool = false) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, stdin, STDIN_FILENO)
        if let stdout {
            posix_spawn_file_actions_adddup2(&actions, stdout, STDOUT_FILENO)
        } else {
            posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0)
        }
        posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0)
        authd_spawn_close_from(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // No signal blocked and every one at its default action, as a shell starts a program:
        // the thread that spawns blocks nearly all of them, and authd ignores SIGTERM, SIGINT and
        // SIGHUP for its own dispatch sources; inherited, pinentry would ignore the SIGTERM that
        // lets it put the terminal back before it ends.
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        // POSIX_SPAWN_SETSID is glibc's 0x80, not imported into Swift.
        posix_spawnattr_setflags(&attributes, (newSession ? 0x80 : Int16(POSIX_SPAWN_SETPGROUP)) | Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        posix_spawnattr_setpgroup(&attributes, 0)
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, path, &actions, &attributes, argv, envp)
        guard status == 0 else { throw SystemError(call: "posix_spawn(\(path))", errno: status) }
        return pid
    }

    /// Runs `path` with `arguments` and exactly `environment`, writes `input` to its stdin, and
    /// waits up to `timeout` for it to exit (then kills it). Its stdout and stderr go to
    /// /dev/null: a helper's output may echo what it was given, which can be a secret.
    /// Returns the exit status, or nil when it was killed or did not exit normally.
    /// The corresponding C functions are `posix_spawn` and `waitpid`.
    static func spawnAndWait(_ path: String, arguments: [String], environment: [String: String],
                             input: [UInt8], timeout: Duration) async throws -> Int32? {
        ignoreBrokenPipes()
        var pipeFDs: [Int32] = [-1, -1]
        // Close-on-exec from creation: only the dup2'd stdin reaches the child.
        guard authd_pipe_cloexec(&pipeFDs) == 0 else { throw SystemError(call: "pipe2", errno: errno) }
        let pid: pid_t
        do {
            pid = try spawnHelper(path, arguments: arguments, environment: environment, stdin: pipeFDs[0], stdout: nil)
            Glibc.close(pipeFDs[0])
        } catch {
            pipeFDs.forEach { Glibc.close($0) }
            throw error
        }
        // Small messages fit the pipe buffer. If the helper exits without reading, this write
        // fails with EPIPE (SIGPIPE is ignored), which is harmless.
        _ = input.withUnsafeBytes { Glibc.write(pipeFDs[1], $0.baseAddress, $0.count) }
        Glibc.close(pipeFDs[1])
        let deadline = ContinuousClock.now + timeout
        var exitStatus: Int32 = 0
        while true {
            let result = waitpid(pid, &exitStatus, WNOHANG)
            if result == pid { break }
            if result < 0 && errno != EINTR { throw SystemError(call: "waitpid", errno: errno) }
            if ContinuousClock.now >= deadline {
                kill(-pid, SIGKILL)
                _ = waitpid(pid, &exitStatus, 0)
                return nil
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
        // WIFEXITED / WEXITSTATUS, which are macros.
        return exitStatus & 0x7f == 0 ? (exitStatus >> 8) & 0xff : nil
    }

    /// The directory part of an absolute path (`/a/b/c` → `/a/b`, `/a` → `/`).
    static func directoryName(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let directory = String(path[..<slash])
        return directory.isEmpty ? "/" : directory
    }

    /// Writes a whole message to stderr with one write(2).
    static func writeStderr(_ text: String) {
        var bytes = Array(text.utf8)
        bytes.withUnsafeMutableBytes { _ = Glibc.write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }

    static func openFileDescriptorCount() -> Int {
        guard let directory = opendir("/proc/self/fd") else { return -1 }
        defer { closedir(directory) }
        var count = 0
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { count += 1 }
        }
        return count - 1  // the directory stream's own descriptor
    }

    /// `bytes` of private anonymous memory, given back only by `unmap` (never kept by malloc).
    /// The corresponding C function is `mmap` with `MAP_PRIVATE | MAP_ANONYMOUS`.
    static func mapAnonymous(_ bytes: Int) -> UnsafeMutableRawPointer? {
        let address = mmap(nil, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        return address == MAP_FAILED ? nil : address
    }

    /// Returns memory from `mapAnonymous` to the system. The corresponding C function is `munmap`.
    static func unmap(_ address: UnsafeMutableRawPointer, bytes: Int) {
        _ = munmap(address, bytes)
    }

    /// Makes malloc map every block of at least `bytes` on its own and unmap it when it is
    /// freed. glibc's own threshold rises to the largest mapped block freed (up to 32 MiB), after
    /// which a flood's line buffers come from the heap and stay there once the connections are
    /// gone. The corresponding C function is `mallopt` with `M_MMAP_THRESHOLD`.
    @discardableResult
    static func mapLargeAllocations(from bytes: Int) -> Bool {
        authd_malloc_map_from(bytes) == 1
    }

    /// Makes each malloc arena keep up to `bytes` of free memory at its top rather than give it
    /// back as soon as it passes 128 KiB, glibc's default once the mapping threshold is fixed.
    /// The corresponding C function is `mallopt` with `M_TRIM_THRESHOLD`.
    @discardableResult
    static func keepFreeTop(upTo bytes: Int) -> Bool {
        authd_malloc_keep_free_top(bytes) == 1
    }

    /// Returns the free memory of every malloc arena to the system; true when some was.
    /// The corresponding C function is `malloc_trim` (with no padding kept).
    @discardableResult
    static func returnFreeMemory() -> Bool {
        authd_malloc_trim() == 1
    }

    /// Resident set size from /proc/self/statm.
    static func residentMemoryBytes() -> Int64 {
        guard let file = fopen("/proc/self/statm", "r") else { return -1 }
        defer { fclose(file) }
        var size: Int64 = 0
        var resident: Int64 = 0
        guard withUnsafeMutablePointer(to: &size, { s in withUnsafeMutablePointer(to: &resident) { r in
            withVaList([s, r]) { vfscanf(file, "%lld %lld", $0) }
        } }) == 2 else { return -1 }
        return resident * Int64(sysconf(Int32(_SC_PAGESIZE)))
    }
}

// MARK: epoll

extension Syscalls {
    /// A close-on-exec epoll instance. The corresponding C function is `epoll_create1`.
    static func epollCreate() throws(SystemError) -> Int32 {
        let fd = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard fd >= 0 else { throw SystemError(call: "epoll_create1", errno: errno) }
        return fd
    }

    /// Adds (`add`), changes or removes (`events` nil) what `epoll` watches on `fd`; the event
    /// carries `fd` back. The corresponding C function is `epoll_ctl`.
    static func epollControl(_ epoll: Int32, _ fd: Int32, events: UInt32?, add: Bool = false) throws(SystemError) {
        var event = epoll_event()
        event.events = events ?? 0
        event.data.fd = fd
        let operation = events == nil ? EPOLL_CTL_DEL : add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD
        guard epoll_ctl(epoll, operation, fd, &event) == 0 else { throw SystemError(call: "epoll_ctl", errno: errno) }
    }

    /// Waits until a watched descriptor is ready (-1: without limit); returns how many events
    /// were written to `events` (0 when a signal interrupted the wait). The corresponding C
    /// function is `epoll_wait`.
    static func epollWait(_ epoll: Int32, _ events: UnsafeMutableBufferPointer<epoll_event>, timeoutMilliseconds: Int32) -> Int {
        let count = epoll_wait(epoll, events.baseAddress, Int32(events.count), timeoutMilliseconds)
        return max(0, Int(count))
    }

    /// A non-blocking, close-on-exec eventfd for waking a thread out of `epollWait`.
    /// The corresponding C function is `eventfd`.
    static func makeEventFD() throws(SystemError) -> Int32 {
        let fd = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        guard fd >= 0 else { throw SystemError(call: "eventfd", errno: errno) }
        return fd
    }

    /// Adds one to an eventfd's counter (wakes whoever waits on it).
    static func signalEventFD(_ fd: Int32) {
        var one: UInt64 = 1
        _ = Glibc.write(fd, &one, 8)
    }

    /// Resets an eventfd's counter.
    static func drainEventFD(_ fd: Int32) {
        var value: UInt64 = 0
        _ = Glibc.read(fd, &value, 8)
    }

    /// The calling thread's identity. The corresponding C function is `pthread_self`.
    static func currentThread() -> UInt { UInt(pthread_self()) }

    /// A value that each thread has or not, none until the thread marks itself with one
    /// (`pthread_key_create`, `pthread_setspecific`).
    struct ThreadMark: Sendable {
        private let key: pthread_key_t

        init() {
            var key = pthread_key_t()
            pthread_key_create(&key, nil)
            self.key = key
        }

        /// Marks the calling thread with `value` (not nil).
        func set(_ value: UnsafeRawPointer) { pthread_setspecific(key, value) }

        /// What the calling thread was marked with; nil when it was not.
        var value: UnsafeRawPointer? { pthread_getspecific(key).map { UnsafeRawPointer($0) } }
    }
}

// MARK: Descriptors, pipes, waiting

extension Syscalls {
    /// Closes `fd`; errors are ignored (the descriptor is gone either way on Linux).
    /// The corresponding C function is `close`.
    static func close(_ fd: Int32) {
        _ = Glibc.close(fd)
    }

    /// A pipe whose two ends are close-on-exec from creation: (read end, write end).
    /// The corresponding C function is `pipe2` with `O_CLOEXEC`.
    static func makePipe() throws(SystemError) -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        guard authd_pipe_cloexec(&fds) == 0 else { throw SystemError(call: "pipe2", errno: errno) }
        return (fds[0], fds[1])
    }

    /// Writes one byte, to make the other end of a wake-up pipe readable. Best effort: a full
    /// pipe is readable already. The corresponding C function is `write`.
    static func writeOneByte(_ fd: Int32) {
        var byte: UInt8 = 1
        _ = Glibc.write(fd, &byte, 1)
    }

    /// A pipe whose ends never block: one thread wakes another's `poll` with `writeOneByte`
    /// (a full pipe is already a wake-up) and the woken one `drain`s it.
    static func makeWakePipe() throws(SystemError) -> (read: Int32, write: Int32) {
        let pipe = try makePipe()
        _ = fcntl(pipe.read, F_SETFL, O_NONBLOCK)
        _ = fcntl(pipe.write, F_SETFL, O_NONBLOCK)
        return pipe
    }

    /// Reads a non-blocking descriptor until it has nothing more.
    static func drain(_ fd: Int32) {
        var buffer = [UInt8](repeating: 0, count: 64)
        while Glibc.read(fd, &buffer, buffer.count) > 0 {}
    }

    /// Waits up to `timeoutMilliseconds` (-1: without limit) until one of `fds` is ready and
    /// returns how many are. An interrupted wait (EINTR) is a wait with nothing ready: callers
    /// loop and recompute their timeout anyway. The corresponding C function is `poll`.
    @discardableResult
    static func poll(_ fds: inout [pollfd], timeoutMilliseconds: Int32) throws(SystemError) -> Int {
        let ready = Glibc.poll(&fds, nfds_t(fds.count), timeoutMilliseconds)
        if ready >= 0 { return Int(ready) }
        let code = errno
        if code == EINTR { return 0 }
        throw SystemError(call: "poll", errno: code)
    }

    /// Waits up to `timeoutMilliseconds` until one of `fds` can be read (or has reached its end
    /// or failed: reading then says so) and returns, for each, whether it is ready. The
    /// corresponding C function is `poll` with `POLLIN`.
    static func waitUntilReadable(_ fds: [Int32], timeoutMilliseconds: Int32) throws(SystemError) -> [Bool] {
        var entries = fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        try poll(&entries, timeoutMilliseconds: timeoutMilliseconds)
        return entries.map { $0.revents != 0 }
    }

    /// Blocks the calling thread. Only for blocking work on an actor of the `BlockingExecutor`
    /// shape (a pause between retries). The corresponding C function is `usleep`.
    static func sleep(milliseconds: Int) {
        _ = usleep(useconds_t(max(0, milliseconds)) * 1000)
    }

    /// CLOCK_MONOTONIC in microseconds, the clock sd-bus states its timeouts in.
    /// The corresponding C function is `clock_gettime`.
    static func monotonicMicroseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
    }

    /// What an errno value means, in words. The corresponding C function is `strerror`.
    static func errorDescription(_ code: Int32) -> String {
        String(cString: strerror(code))
    }
}

// MARK: Files

extension Syscalls {
    /// What `stat` says about a file, in the terms authd checks.
    struct FileStatus: Equatable {
        enum Kind: Equatable { case regular, directory, socket, symbolicLink, other }
        let kind: Kind
        let ownerUID: UInt32
        /// The permission bits (`st_mode & 07777`).
        let permissions: mode_t
        let size: Int64
        /// The last modification, in seconds since the epoch.
        let modifiedSeconds: Int64
        let device: UInt64
        let inode: UInt64

        fileprivate init(_ info: stat) {
            switch info.st_mode & S_IFMT {
            case S_IFREG: kind = .regular
            case S_IFDIR: kind = .directory
            case S_IFSOCK: kind = .socket
            case S_IFLNK: kind = .symbolicLink
            default: kind = .other
            }
            ownerUID = info.st_uid
            permissions = info.st_mode & 0o7777
            size = Int64(info.st_size)
            modifiedSeconds = Int64(info.st_mtim.tv_sec)
            device = UInt64(info.st_dev)
            inode = UInt64(info.st_ino)
        }
    }

    /// The status of the open file `fd`; `name` is for the error. The corresponding C function is `fstat`.
    static func fileStatus(_ fd: Int32, name: String) throws(SystemError) -> FileStatus {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw SystemError(call: "fstat(\(name))", errno: errno) }
        return FileStatus(info)
    }

    /// The status of `path`, or nil when it cannot be read (it does not exist, …). With
    /// `followingLinks: false`, a symbolic link's own. The corresponding C functions are `stat`, `lstat`.
    static func fileStatus(atPath path: String, followingLinks: Bool) -> FileStatus? {
        var info = stat()
        guard (followingLinks ? stat(path, &info) : lstat(path, &info)) == 0 else { return nil }
        return FileStatus(info)
    }

    /// Whether `path` exists (a dangling symbolic link does not). The corresponding C function is `access`.
    static func fileExists(_ path: String) -> Bool {
        access(path, F_OK) == 0
    }

    /// A new file at `path`, open for writing, created with `mode`: never an existing file
    /// (`EEXIST`, see `SystemError.fileExists`) and never through a symbolic link. The
    /// corresponding C function is `open` with `O_CREAT | O_EXCL | O_NOFOLLOW`.
    static func createNewFile(_ path: String, mode: mode_t) throws(SystemError) -> Int32 {
        try retryingEINTR("open(\(path))") { open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode) }
    }

    /// `path` open for reading, refusing a symbolic link. The corresponding C function is
    /// `open` with `O_NOFOLLOW`.
    static func openForReading(_ path: String) throws(SystemError) -> Int32 {
        try retryingEINTR("open(\(path))") { open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) }
    }

    /// Writes all of `bytes`, however many calls it takes; `name` is for the error.
    /// The corresponding C function is `write`.
    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, name: String) throws(SystemError) {
        var offset = 0
        while offset < bytes.count {
            let count = try retryingEINTR("write(\(name))") { Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset) }
            offset += count
        }
    }

    /// Fills `buffer` from `fd`; the file ending first is an error. `name` is for the error.
    /// The corresponding C function is `read`.
    static func readExactly(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, name: String) throws(SystemError) {
        var offset = 0
        while offset < buffer.count {
            let count = Glibc.read(fd, buffer.baseAddress! + offset, buffer.count - offset)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw SystemError(call: "read(\(name))", errno: count == 0 ? EIO : errno) }
            offset += count
        }
    }

    /// Pushes what was written to `fd` to the disk; `name` is for the error.
    /// The corresponding C function is `fsync`.
    static func synchronize(_ fd: Int32, name: String) throws(SystemError) {
        _ = try retryingEINTR("fsync(\(name))") { fsync(fd) }
    }

    /// Makes the entries of `directory` (a file just linked or renamed into it) durable. Best
    /// effort. The corresponding C functions are `open` with `O_DIRECTORY` and `fsync`.
    static func synchronizeDirectory(_ directory: String) {
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = fsync(fd)
        _ = Glibc.close(fd)
    }

    /// A second name, `path`, for the file at `existing`; fails with `EEXIST` when `path`
    /// exists. The corresponding C function is `link`.
    static func hardLink(_ existing: String, to path: String) throws(SystemError) {
        _ = try retryingEINTR("link(\(path))") { link(existing, path) }
    }

    /// Removes the name `path`; false when it could not be removed. The corresponding C
    /// function is `unlink`.
    @discardableResult
    static func remove(_ path: String) -> Bool {
        unlink(path) == 0
    }
}

// MARK: Process state

extension Syscalls {
    /// Whether `path` names a file this process may execute. The corresponding C function is
    /// `access` with `X_OK`.
    static func isExecutable(_ path: String) -> Bool {
        access(path, X_OK) == 0
    }

    /// Lets `signal` no longer end the process: it is ignored, so a dispatch source can receive
    /// it instead. The corresponding C function is `signal` with `SIG_IGN`.
    static func ignoreSignal(_ number: Int32) {
        _ = Glibc.signal(number, SIG_IGN)
    }

    /// Makes a descriptor passed by socket activation close-on-exec and non-blocking, as the
    /// daemon's own are. The corresponding C function is `fcntl`.
    static func adoptInheritedDescriptor(_ fd: Int32) {
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    /// This process's id. The corresponding C function is `getpid`.
    static func processID() -> Int32 {
        getpid()
    }

    /// The user this process acts as. The corresponding C function is `geteuid`.
    static func effectiveUserID() -> UInt32 {
        geteuid()
    }

    /// The machine's host name, or nil when it has none. The corresponding C function is `gethostname`.
    static func hostName() -> String? {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return nil }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? nil : name
    }

    /// The home directory of the user this process acts as. The corresponding C function is `getpwuid_r`.
    static func homeDirectory() -> String? {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(geteuid(), &entry, &buffer, buffer.count, &result) == 0, result != nil, let dir = entry.pw_dir else { return nil }
        return String(cString: dir)
    }

    /// The value of the environment variable `name`. The corresponding C function is `getenv`.
    static func environmentVariable(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }

    /// Ends the process with `status`. The corresponding C function is `exit`.
    static func exitProcess(_ status: Int32) -> Never {
        exit(status)
    }

    /// No core dumps (`RLIMIT_CORE` 0). The corresponding C function is `setrlimit`.
    static func disableCoreDumps() throws(SystemError) {
        guard authd_set_rlimit_core_zero() == 0 else { throw SystemError(call: "setrlimit(RLIMIT_CORE)", errno: errno) }
    }

    /// Not dumpable: no core dumps, /proc/self owned by root, no ptrace attach by same-uid
    /// processes. The corresponding C function is `prctl(PR_SET_DUMPABLE, 0)`.
    static func disableDumping() throws(SystemError) {
        guard authd_disable_dumping() == 0 else { throw SystemError(call: "prctl(PR_SET_DUMPABLE)", errno: errno) }
    }

    /// Sets the mask that new files' modes pass through. The corresponding C function is `umask`.
    static func setFileCreationMask(_ mask: mode_t) {
        umask(mask)
    }

    /// Writes to a closed socket or pipe then fail with EPIPE instead of killing the process.
    /// The daemon does this at its start (`Hardening`); the helpers that write to a child's
    /// pipe do it again, so that a program embedding them (the tests) is not ended by a child
    /// that exits before reading. The corresponding C function is `signal(SIGPIPE, SIG_IGN)`.
    static func ignoreBrokenPipes() {
        signal(SIGPIPE, SIG_IGN)
    }

    /// Raises the soft limit on open descriptors to the hard limit. The corresponding C
    /// function is `setrlimit(RLIMIT_NOFILE)`.
    static func raiseDescriptorLimit() throws(SystemError) {
        guard authd_raise_nofile_limit() >= 0 else { throw SystemError(call: "setrlimit(RLIMIT_NOFILE)", errno: errno) }
    }
}

// MARK: Conversing helpers (pinentry), and reading another process's /proc entries

extension Syscalls {
    /// A helper started by `spawnConversation`: the leader of a session (and so a process
    /// group) of its own, the
    /// write end of its stdin and the (non-blocking) read end of its stdout.
    struct Conversation {
        let pid: pid_t
        let input: Int32
        let output: Int32
    }

    /// Starts `path` with exactly `environment`, talking to us over two pipes (its stdin and
    /// stdout); stderr goes to /dev/null and nothing else of ours reaches it, as with every
    /// helper. The caller closes both descriptors and reaps the process. `nonBlockingInput`:
    /// our end of its stdin does not block either (a write the child does not read fails with
    /// `EAGAIN` rather than waiting for it).
    /// The corresponding C functions are `pipe2` and `posix_spawn`.
    static func spawnConversation(_ path: String, environment: [String: String], nonBlockingInput: Bool = false) throws -> Conversation {
        ignoreBrokenPipes()
        let toChild = try makePipe()
        let fromChild: (read: Int32, write: Int32)
        do { fromChild = try makePipe() } catch {
            close(toChild.read)
            close(toChild.write)
            throw error
        }
        let pid: pid_t
        do {
            pid = try spawnHelper(path, arguments: [], environment: environment, stdin: toChild.read, stdout: fromChild.write, newSession: true)
        } catch {
            [toChild.read, toChild.write, fromChild.read, fromChild.write].forEach { close($0) }
            throw error
        }
        close(toChild.read)
        close(fromChild.write)
        // Only our ends: the child's stdin and stdout stay blocking, as programs expect.
        _ = fcntl(fromChild.read, F_SETFL, O_NONBLOCK)
        if nonBlockingInput { _ = fcntl(toChild.write, F_SETFL, O_NONBLOCK) }
        return Conversation(pid: pid, input: toChild.write, output: fromChild.read)
    }

    /// Asks the process group `leader` leads to end (SIGTERM), or `forcibly` ends it (SIGKILL).
    /// Only while the leader is not yet reaped: after that its number may lead another group.
    /// The corresponding C function is `kill` with a negative pid.
    static func signalProcessGroup(_ leader: pid_t, forcibly: Bool) {
        _ = kill(-leader, forcibly ? SIGKILL : SIGTERM)
    }

    /// Collects our child `pid` if it has ended, without waiting; true when it has (or is no
    /// child of ours any more). The corresponding C function is `waitpid` with `WNOHANG`.
    static func reapIfEnded(_ pid: pid_t) -> Bool {
        var status: Int32 = 0
        while true {
            let result = waitpid(pid, &status, WNOHANG)
            if result == pid { return true }
            if result == 0 { return false }
            if errno != EINTR { return true }
        }
    }

    /// A directory opened to read beneath it with the `in directory:` calls below. `/proc/PID`
    /// opened once pins the process it names: if it ends and its number is reused, reads through
    /// the descriptor fail rather than describe the newcomer. The corresponding C function is
    /// `open` with `O_DIRECTORY`.
    static func openDirectory(_ path: String) throws(SystemError) -> Int32 {
        try retryingEINTR("open(\(path))") { open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY) }
    }

    /// The directory `name` beneath `directory`, following a symbolic link (`/proc/PID/root` is
    /// one, to the root the process sees). The corresponding C function is `openat` with `O_DIRECTORY`.
    static func openDirectory(_ name: String, in directory: Int32) throws(SystemError) -> Int32 {
        try retryingEINTR("openat(\(name))") { openat(directory, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY) }
    }

    /// The target of the symbolic link `name` beneath `directory` (`exe` in `/proc/PID`; an
    /// absolute `name` with `AT_FDCWD`), or nil.
    /// The corresponding C function is `readlinkat`.
    static func readLink(_ name: String, in directory: Int32) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlinkat(directory, name, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The regular file `name` beneath `directory`, read to its end: nil when there is none
    /// (`ENOENT`). Never through a symbolic link (an absolute one would be resolved from *our*
    /// root), never a FIFO or device, never more than `limit` bytes (procfs files say size 0,
    /// so the size is what reading finds). The corresponding C functions are `openat` with
    /// `O_NOFOLLOW | O_NONBLOCK`, `fstat` and `read`.
    static func readRegularFile(_ name: String, in directory: Int32, limit: Int) throws -> [UInt8]? {
        let fd = openat(directory, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY)
        if fd < 0 && errno == ENOENT { return nil }
        guard fd >= 0 else { throw SystemError(call: "openat(\(name))", errno: errno) }
        defer { close(fd) }
        return try readRegularFile(fd, name: name, limit: limit)
    }
}
