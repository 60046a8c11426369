import Foundation
import Glibc
import Testing

/// Where a user-mode daemon puts its socket without `XDG_RUNTIME_DIR`, and how authctl finds it.
///
/// That place, `/tmp/authd-UID`, is fixed per user: a test that used the uid it runs as would
/// share it with a `make run` of the same person, or with another test. So each test here runs
/// authd and authctl (through setpriv, as root) as a uid of its own that no account has, and
/// removes that uid's directory at the end. No override of the path exists for tests, so what is
/// tested is what runs.
@Suite("Socket discovery without XDG_RUNTIME_DIR")
struct SocketDiscoveryTests {
    /// A uid with no account and no `/tmp/authd-UID` yet, with a private home directory.
    final class Stranger {
        let uid: UInt32
        let home: String
        var runtimeDirectory: String { "/tmp/authd-\(uid)" }
        var socketPath: String { runtimeDirectory + "/authd/authd.sock" }
        private var daemon: pid_t?

        init() throws {
            var uid: UInt32
            repeat {
                uid = UInt32.random(in: 2_000_000_000..<2_100_000_000)
            } while getpwuid(uid) != nil || access("/tmp/authd-\(uid)", F_OK) == 0
            self.uid = uid
            var template = Array("/tmp/authd-test-XXXXXX".utf8CString)
            guard let made = mkdtemp(&template) else { throw HarnessError("mkdtemp failed") }
            home = String(cString: made)
            chown(home, uid, uid)
        }

        deinit {
            if let daemon { ChildProcess.reap(daemon) }
            try? FileManager.default.removeItem(atPath: runtimeDirectory)
            try? FileManager.default.removeItem(atPath: home)
        }

        /// `command` as this uid, with no XDG_RUNTIME_DIR and no AUTHD_SOCKET.
        private func asStranger(_ command: [String]) -> [String] {
            ["/usr/bin/setpriv", "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups"] + command
        }

        private var environment: [String: String] { ["PATH": "/usr/bin:/bin", "HOME": home] }

        func authctl(_ arguments: [String]) throws -> DaemonHarness.CommandResult {
            // timeout: a client that connected to something that never answers must not hang the test.
            try DaemonHarness.run(["/usr/bin/timeout", "20"] + asStranger([DaemonHarness.authctlPath] + arguments), environment: environment)
        }

        var log: String { (try? String(contentsOfFile: home + "/authd.log", encoding: .utf8)) ?? "" }

        /// Starts `authd --user`; returns once authctl, looking for it, gets an answer, or nil if
        /// authd exited first (its exit status).
        func startDaemon() throws -> Int32? {
            let pid = try ChildProcess.spawn(asStranger([DaemonHarness.authdPath, "--user"]),
                                             environment: environment.map { "\($0)=\($1)" }, stdout: .file(home + "/authd.log"))
            daemon = pid
            let deadline = Date().addingTimeInterval(30)
            while Date() < deadline {
                var status: Int32 = 0
                if waitpid(pid, &status, WNOHANG) == pid {
                    daemon = nil
                    return (status >> 8) & 0xff
                }
                if access(socketPath, F_OK) == 0, try authctl(["status"]).status == 0 { return nil }
                usleep(50_000)
            }
            throw HarnessError("authd did not answer within 30 s:\n\(log)")
        }

        /// SIGTERM, and its exit status (bounded).
        func stopDaemon() throws -> Int32 {
            guard let pid = daemon else { throw HarnessError("not running") }
            kill(pid, SIGTERM)
            let deadline = Date().addingTimeInterval(15)
            var status: Int32 = 0
            while waitpid(pid, &status, WNOHANG) != pid {
                guard Date() < deadline else { throw HarnessError("authd did not stop within 15 s") }
                usleep(10_000)
            }
            daemon = nil
            return (status >> 8) & 0xff
        }
    }

    @Test("authd puts its socket in a new 0700 /tmp/authd-UID, and authctl finds it there with nothing exported")
    func fallbackSocket() throws {
        try #require(getuid() == 0, "needs root to run authd as a user of its own")
        let stranger = try Stranger()
        #expect(try stranger.startDaemon() == nil, "authd refused to start:\n\(stranger.log)")
        var info = stat()
        #expect(lstat(stranger.runtimeDirectory, &info) == 0)
        #expect(info.st_uid == stranger.uid)
        #expect(info.st_mode & 0o7777 == 0o700)
        let status = try stranger.authctl(["status"])
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.stdout.contains("user mode, at \(stranger.socketPath)"), "\(status.stdout)")
        #expect(try stranger.stopDaemon() == 0)
    }

    @Test("a /tmp/authd-UID another user made: authd refuses it, and authctl sends nothing there")
    func foreignDirectory() throws {
        try #require(getuid() == 0, "needs root to make a directory another user owns")
        let stranger = try Stranger()
        // Root plays the other user: a directory the stranger can enter, with a socket that listens.
        #expect(mkdir(stranger.runtimeDirectory, 0o755) == 0 && chmod(stranger.runtimeDirectory, 0o755) == 0)
        #expect(mkdir(stranger.runtimeDirectory + "/authd", 0o755) == 0 && chmod(stranger.runtimeDirectory + "/authd", 0o755) == 0)
        let listener = try LoopbackUnixListener(path: stranger.socketPath)
        defer { withExtendedLifetime(listener) {} }
        chmod(stranger.socketPath, 0o666)

        let client = try stranger.authctl(["status"])
        #expect(client.status == 69, "\(client.stdout)\(client.stderr)")
        #expect(client.stderr.contains("\(stranger.socketPath) (not used: \(stranger.runtimeDirectory) is not a directory of uid \(stranger.uid) with mode 0700"),
                "\(client.stderr)")

        let exit = try stranger.startDaemon()
        #expect(exit == 1)
        #expect(stranger.log.contains("\(stranger.runtimeDirectory) is owned by uid 0, not \(stranger.uid): refusing to use it"), "\(stranger.log)")
    }

    @Test("no daemon anywhere: authctl names every socket it tried and how to start one")
    func connectFailureMessage() throws {
        try #require(getuid() == 0, "needs root to run authctl as a user of its own")
        try #require(access("/run/authd/authd.sock", F_OK) != 0, "a system daemon runs on this machine")
        let stranger = try Stranger()
        let result = try stranger.authctl(["status"])
        #expect(result.status == 69)
        #expect(result.stderr == "authctl: cannot connect to authd: tried \(stranger.socketPath) (No such file or directory), "
                + "/run/authd/authd.sock (No such file or directory). To start one: 'make run' (or 'make run-hub', a hub and its devices) in the source tree, "
                + "'systemctl --user start authd.socket', or 'authd --user' (daemon.unavailable)\n")
    }
}

/// A Unix socket that listens and never answers: a stand-in for a daemon another user runs.
final class LoopbackUnixListener {
    private let fd: Int32

    init(path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, listen(fd, 8) == 0 else { throw HarnessError("cannot listen on \(path)") }
    }

    deinit { Glibc.close(fd) }
}
