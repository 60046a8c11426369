import Foundation
import Glibc
import Testing

/// `make run`'s checks before it starts anything. The real target runs, with the build replaced
/// by `true` and no package check, so the test takes a second and touches nothing of a
/// `make run` the person may have going: every path and the port are the test's own.
@Suite("make run")
struct MakeRunTests {
    static let root = PackagingTests.root

    /// `make run` with the build skipped, the built binaries, and the given paths.
    static func makeRun(socket: String, runtime: String, vcardDirectory: String, port: Int) throws -> DaemonHarness.CommandResult {
        try DaemonHarness.run(["/usr/bin/make", "-s", "-C", root, "run", "SWIFT=true", "DEBIAN_PACKAGES=", "RUN_BIN=\(DaemonHarness.buildDirectory)",
                               "RUN_SOCKET=\(socket)", "RUN_RUNTIME_DIR=\(runtime)", "VCARD_DIR=\(vcardDirectory)", "VCARD_PORT=\(port)", "RUN_WAIT=5"],
                              environment: ["PATH": "/usr/bin:/bin", "HOME": runtime])
    }

    /// A card directory as a running instance has it, with a file to notice its removal by.
    static func runningCardDirectory(in directory: String) -> String {
        let cards = directory + "/authd-vcard"
        try? FileManager.default.createDirectory(atPath: cards, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: cards + "/profile.json", contents: Data("the running card".utf8))
        return cards
    }

    /// A TCP port on the loopback that nothing listens on right now.
    static func freePort() throws -> (Int32, Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw HarnessError("cannot bind a TCP port") }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    @Test("a second make run finds the daemon answering on its socket and changes nothing")
    func daemonAlreadyRunning() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let cards = Self.runningCardDirectory(in: daemon.directory)
        let (fd, port) = try Self.freePort()
        close(fd)
        let result = try Self.makeRun(socket: daemon.socketPath, runtime: daemon.directory, vcardDirectory: cards, port: port)
        #expect(result.status != 0)
        #expect(result.stderr.contains("make: authd is already running on \(daemon.socketPath); nothing was changed."), "\(result.stdout)\(result.stderr)")
        #expect(FileManager.default.contents(atPath: cards + "/profile.json") == Data("the running card".utf8))
        #expect(try daemon.connect().result("hello")["protocol_version"] != nil, "the first daemon still answers")
    }

    @Test("a second make run finds the virtual card's port taken and changes nothing")
    func cardPortTaken() throws {
        let scratch = try DaemonHarness()  // not started: a private directory, removed with it
        let cards = Self.runningCardDirectory(in: scratch.directory)
        let (fd, port) = try Self.freePort()
        defer { close(fd) }
        #expect(listen(fd, 1) == 0)
        let result = try Self.makeRun(socket: scratch.directory + "/authd/authd.sock", runtime: scratch.directory, vcardDirectory: cards, port: port)
        #expect(result.status != 0)
        #expect(result.stderr.contains("make: TCP port \(port), the virtual card's reader, is in use"), "\(result.stdout)\(result.stderr)")
        #expect(FileManager.default.contents(atPath: cards + "/profile.json") == Data("the running card".utf8))
        #expect(!FileManager.default.fileExists(atPath: scratch.directory + "/authd"), "no socket directory was made")
    }
}
