import CLinux
import Foundation
import Glibc
import Synchronization

/// A private PostgreSQL cluster from Debian's `postgresql` package, never the machine's own:
/// `initdb` into a temporary directory and a server that listens on a Unix socket in it only
/// (`listen_addresses=''`). PostgreSQL refuses to run as root, and CI runs as root: then the
/// cluster runs as `nobody` (setpriv). One cluster per test process, started at its first use;
/// each test takes a fresh database in it (`createDatabase`).
///
/// The server is stopped and its directory removed when the test process ends, however it
/// ends: its supervising shell waits for the end of a pipe only this process holds open, then
/// stops the server at once and deletes the cluster (a test pass leaves gigabytes of WAL).
final class PostgreSQLCluster: @unchecked Sendable {
    let directory: String
    /// The directory of the Unix socket (`host=` in a connection string).
    var socketDirectory: String { directory }
    static let user = "authd"
    private let keepAlive: Int32
    private let supervisor: pid_t
    private let counter = NSLock()
    private var databases = 0

    /// The suite's cluster; the error says why there is none (PostgreSQL not installed…).
    static let shared: Result<PostgreSQLCluster, any Error> = Result { try PostgreSQLCluster() }

    /// A cluster of the caller's own, for a test that stops and starts it.
    static func makePrivate() throws -> PostgreSQLCluster { try PostgreSQLCluster() }

    /// Whether the integration tests run their account tests on PostgreSQL
    /// (`AUTHD_TEST_ACCOUNT_STORE=postgresql`, which `make test` sets for its second pass).
    static var isSelected: Bool { ProcessInfo.processInfo.environment["AUTHD_TEST_ACCOUNT_STORE"] == "postgresql" }

    /// Debian's server binaries (`/usr/lib/postgresql/VERSION/bin`), the newest installed.
    static func binaries() throws -> String {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted()
        guard let newest = versions.last else { throw HarnessError("PostgreSQL is not installed (no \(root)/VERSION): apt-get install postgresql") }
        return "\(root)/\(newest)/bin"
    }

    private init() throws {
        let bin = try Self.binaries()
        var template = Array("/tmp/authd-pg-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw HarnessError("mkdtemp failed") }
        directory = String(cString: made)
        let asRoot = geteuid() == 0
        let runAs: [String] = asRoot ? ["/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] : []
        if asRoot { chown(directory, 65534, 65534) }
        chmod(directory, 0o755)
        let data = directory + "/data"
        let initdb = try Self.run(runAs + ["\(bin)/initdb", "-D", data, "-U", Self.user, "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C.UTF-8"],
                                  in: directory)
        guard initdb.status == 0 else { throw HarnessError("initdb failed: \(initdb.stderr)") }
        var pipeFDs: [Int32] = [0, 0]
        guard authd_pipe_cloexec(&pipeFDs) == 0 else { throw HarnessError("pipe2 failed") }
        keepAlive = pipeFDs[1]
        let options = Self.serverOptions(directory)
        let script = """
            "$1/pg_ctl" -D "$2/data" -l "$2/server.log" -o "$3" -w -t 30 start >/dev/null || exit 1
            cat >/dev/null
            "$1/pg_ctl" -D "$2/data" -m immediate stop >/dev/null 2>&1
            rm -rf "$2"
            """
        supervisor = try ChildProcess.spawn(runAs + ["/bin/sh", "-c", script, "sh", bin, directory, options],
                                            environment: ["PATH=/usr/bin:/bin", "LC_ALL=C.UTF-8"], stdin: pipeFDs[0], stdout: .file(directory + "/supervisor.log"))
        Glibc.close(pipeFDs[0])
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            let ready = try Self.run(["\(bin)/pg_isready", "-q", "-h", directory, "-U", Self.user, "-d", "postgres"], in: directory)
            if ready.status == 0 { break }
            if ChildProcess.waitForExit(supervisor, within: .zero) != nil || ContinuousClock.now > deadline {
                let log = (try? String(contentsOfFile: directory + "/server.log", encoding: .utf8)) ?? ""
                throw HarnessError("the test PostgreSQL cluster did not start: \(log.suffix(2000))")
            }
            usleep(50_000)
        }
    }

    /// Runs SQL on database `database` with psql; the rows, columns joined by '|'.
    @discardableResult
    func psql(_ sql: String, database: String = "postgres") throws -> [String] {
        let bin = try Self.binaries()
        let result = try Self.run(["\(bin)/psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", directory, "-U", Self.user, "-d", database, "-c", sql],
                                  in: directory)
        guard result.status == 0 else { throw HarnessError("psql: \(result.stderr)") }
        return result.stdout.split(separator: "\n").map(String.init)
    }

    /// Runs a PostgreSQL program (posix_spawn, not Foundation's Process: one fewer user of
    /// Foundation's process launching beside the suite's other threads), its output through
    /// files in `directory`, for at most 60 s.
    private static let runs = Mutex(0)
    private static func run(_ command: [String], in directory: String) throws -> (status: Int32, stdout: String, stderr: String) {
        let number = runs.withLock { $0 += 1; return $0 }
        let (out, err) = (directory + "/run-\(getpid())-\(number).out", directory + "/run-\(getpid())-\(number).err")
        defer { unlink(out); unlink(err) }
        let pid = try ChildProcess.spawn(command, environment: ["PATH=/usr/bin:/bin", "LC_ALL=C.UTF-8"], stdout: .file(out), stderr: err)
        guard let status = ChildProcess.waitForExit(pid, within: .seconds(60)) else {
            ChildProcess.reap(pid)
            throw HarnessError("\(command.first ?? "") did not finish within 60 s")
        }
        return (status, (try? String(contentsOfFile: out, encoding: .utf8)) ?? "", (try? String(contentsOfFile: err, encoding: .utf8)) ?? "")
    }

    /// A new, empty database; its libpq connection string.
    func createDatabase() throws -> (name: String, connection: String) {
        let number = counter.withLock { databases += 1; return databases }
        let name = "authd_\(getpid())_\(number)"
        try psql("CREATE DATABASE \(name)")
        return (name, connectionString(database: name))
    }

    func connectionString(database: String) -> String {
        "host=\(directory) user=\(Self.user) dbname=\(database)"
    }

    /// Stops the server: `fast` rolls back what runs and disconnects everyone, `immediate` is
    /// as if it crashed.
    func stop(mode: String = "fast") throws {
        try pgctl(["-D", directory + "/data", "-m", mode, "-w", "stop"])
    }

    /// Starts the server again.
    func start() throws {
        try pgctl(["-D", directory + "/data", "-l", directory + "/server.log", "-o", Self.serverOptions(directory), "-w", "-t", "30", "start"])
    }

    /// pg_ctl, spawned with no descriptor of ours (the server it starts would hold a pipe open
    /// for as long as it runs), its output in the cluster's directory; at most 60 s.
    private func pgctl(_ arguments: [String]) throws {
        let pid = try ChildProcess.spawn(runAs + ["\(try Self.binaries())/pg_ctl"] + arguments, environment: ["PATH=/usr/bin:/bin", "LC_ALL=C.UTF-8"],
                                         stdout: .file(directory + "/pg_ctl.log"))
        guard let status = ChildProcess.waitForExit(pid, within: .seconds(60)) else {
            ChildProcess.reap(pid)
            throw HarnessError("pg_ctl \(arguments.last ?? "") did not finish within 60 s")
        }
        guard status == 0 else {
            throw HarnessError("pg_ctl \(arguments.last ?? "") failed: \((try? String(contentsOfFile: directory + "/pg_ctl.log", encoding: .utf8)) ?? "")")
        }
    }

    /// A Unix socket in `directory` only. fsync off: a test cluster lives as long as its test process.
    private static func serverOptions(_ directory: String) -> String {
        "-c listen_addresses= -k \(directory) -c fsync=off -c full_page_writes=off -c max_connections=200"
    }

    private var runAs: [String] { geteuid() == 0 ? ["/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] : [] }
}
