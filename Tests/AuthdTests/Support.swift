import Foundation
import Glibc
import OpenSSLCrypto
import Protocol
import Synchronization
@testable import authd

/// A private directory removed when the value goes away.
final class TemporaryDirectory {
    let path: String

    init() {
        var template = Array("/tmp/authd-unit-XXXXXX".utf8CString)
        path = String(cString: mkdtemp(&template)!)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// A clock tests move by hand.
final class TestClock: Sendable {
    /// Where a clock starts unless told otherwise.
    static let start = Date(timeIntervalSince1970: 1_800_000_000)
    private let current: Mutex<Date>
    init(_ start: Date = TestClock.start) { current = Mutex(start) }
    var now: Date { current.withLock { $0 } }
    func advance(_ seconds: TimeInterval) { current.withLock { $0 = $0.addingTimeInterval(seconds) } }
    var closure: @Sendable () -> Date { { self.now } }
}

/// Store, sealer and key ring in a temporary directory.
struct TestKeys {
    let directory = TemporaryDirectory()
    let store: Store
    let sealer: Sealer
    let keys: KeyRing
    let clock = TestClock()

    init() async throws {
        store = try Store(path: directory.path + "/authd.db")
        sealer = try Sealer(masterKey: MasterKey(secret: try OpenSSL.randomSecret(32), source: .keyFile(path: directory.path + "/master.key")))
        keys = try await KeyRing.open(store: store, sealer: sealer, now: clock.now)
    }
}

/// Bytes from a hex string (test vectors).
func hex(_ text: String) -> [UInt8] {
    var bytes: [UInt8] = []
    var index = text.startIndex
    while index < text.endIndex {
        let next = text.index(index, offsetBy: 2)
        bytes.append(UInt8(text[index..<next], radix: 16)!)
        index = next
    }
    return bytes
}

/// The wire error the dispatcher sends for `error`: tests assert reasons as clients see them.
func wireError(_ error: any Error) -> RPCError {
    if let error = error as? RPCError { return error }
    if let error = error as? any WireErrorConvertible { return error.rpcError }
    return .internalError
}

/// Runs `body`, turning a capability's error into its wire form as the dispatcher does.
func onTheWire<T>(_ body: () throws -> T) throws(RPCError) -> T {
    do { return try body() } catch { throw wireError(error) }
}

/// Runs `body`, turning a capability's error into its wire form as the dispatcher does.
func onTheWire<T>(_ body: () async throws -> T) async throws(RPCError) -> T {
    do { return try await body() } catch { throw wireError(error) }
}

/// An account directory on a private store with a clock tests move by hand.
struct TestDirectory {
    let folder = TemporaryDirectory()
    let store: Store
    let clock = TestClock()
    let config: ConfigHolder
    let directory: SQLAccountDirectory

    init(_ config: Config = Config()) throws {
        store = try Store(path: folder.path + "/authd.db")
        self.config = ConfigHolder(config)
        directory = SQLAccountDirectory(store: store, config: self.config, logger: Logger(sink: MemorySink()), now: clock.closure)
    }

    var now: Int64 { Int64(clock.now.timeIntervalSince1970) }

    /// Registers `phone` the way `account.register.*` does (a code by SMS, here its MAC known
    /// to the test) and signs it in on `device`.
    func register(_ phone: String = "+37251234567", device: String = "laptop", email: String? = nil) async throws -> SignedIn {
        let flow = "flow_test_\(phone.filter(\.isNumber))"
        let mac = Array("code of \(flow)".utf8)
        let challenge = OTPChallenge.start(id: flow, purpose: .registration, phone: phone, codeMAC: mac, now: now, policy: .init())
        let owner = FlowOwner(machine: nil, user: nil)
        try await directory.openCodeChallenge(challenge, owner: owner, policy: .init())
        return try await directory.register(flow: flow, codeMAC: mac, email: email, passwordHash: nil, device: DeviceIdentity(key: device, name: device),
                                            owner: owner)
    }

    /// Sets the password of the account `signedIn` is a session of (a cheap hash: tests are
    /// about what a password stands for, not hashing) and returns its credential stamp.
    @discardableResult
    func setPassword(_ password: String, of signedIn: SignedIn) async throws -> [UInt8] {
        let hash = try Argon2id(memoryKiB: 8, iterations: 1, parallelism: 1).hash(SecretBytes(Array(password.utf8)))
        _ = try await directory.updateProfile(.local(signedIn.session.token), email: nil, passwordHash: hash)
        guard let stamp = try await directory.credentialStamp(account: signedIn.account.id) else { throw FixtureError(description: "no stamp after a password was set") }
        return stamp
    }
}

struct FixtureError: Error, CustomStringConvertible {
    let description: String
}

/// Waits without a fixed sleep, up to `seconds`, until `condition` holds; whether it did.
///
/// Tests run on the cooperative pool: two threads on a two-core machine, shared by every test
/// running at the time and by the code under test (an agent's handler task, a pinentry client).
/// A test that waits for something outside (a child process, a bus, a file) waits here, between
/// short sleeps, never blocked in `usleep` or `waitUntilExit`: a blocked thread would stall every
/// test and the very work it waits for.
func eventually(seconds: Double = 30, _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while !condition() {
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return true
}

/// A program a test runs beside it: its output goes to files in `directory` (never a full
/// pipe), and it is waited for with `eventually`, never blocked on. Its standard input is
/// `input` when given, else a pipe that `say` writes to.
final class ChildProcess {
    struct Run {
        let pid: Int32
        /// Whether it ended by itself within the time given; else it was killed.
        let ended: Bool
        let status: Int32
        let bytes: [UInt8]
        let errors: String

        var output: String { String(decoding: bytes, as: UTF8.self) }
    }

    let process = Process()
    private let outputPath: String
    private let errorPath: String

    init(_ path: String, _ arguments: [String], environment: [String: String] = [:], input: [UInt8]? = nil, directory: String) throws {
        // As in authd: a child that exits before reading what `say` writes fails its test, not
        // the whole test process with SIGPIPE.
        Syscalls.ignoreBrokenPipes()
        let name = UUID().uuidString
        outputPath = directory + "/" + name + ".out"
        errorPath = directory + "/" + name + ".err"
        _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
        _ = FileManager.default.createFile(atPath: errorPath, contents: nil)
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.environment = environment.merging(["PATH": "/usr/bin:/bin"]) { given, _ in given }
        if let input {
            let inputPath = directory + "/" + name + ".in"
            guard FileManager.default.createFile(atPath: inputPath, contents: Data(input)) else { throw CocoaError(.fileWriteUnknown) }
            process.standardInput = try FileHandle(forReadingFrom: URL(fileURLWithPath: inputPath))
        } else {
            process.standardInput = Pipe()
        }
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errorPath))
        try process.run()
    }

    /// What it wrote to its standard output so far.
    var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }

    func say(_ line: String) {
        try? (process.standardInput as? Pipe)?.fileHandleForWriting.write(contentsOf: Data((line + "\n").utf8))
    }

    func kill() async {
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
        _ = await eventually(seconds: 10) { !process.isRunning }
    }

    /// Waits `seconds` at most for it to end, then kills it if it has not.
    func finish(within seconds: Double) async -> Run {
        let ended = await eventually(seconds: seconds) { !process.isRunning }
        await kill()
        return Run(pid: process.processIdentifier, ended: ended, status: process.terminationStatus,
                   bytes: Array((try? Data(contentsOf: URL(fileURLWithPath: outputPath))) ?? Data()),
                   errors: (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? "")
    }
}
