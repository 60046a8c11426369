import Foundation
import Glibc
import Protocol

/// A private smart-card stack for one test: pcscd socket-activated by `systemd-socket-activate`
/// on a private socket (`PCSCLITE_CSOCK_NAME`), with its own reader.conf.d naming vpcd on a free
/// port, and `authd-vcard` playing the card. The system's pcscd is never touched.
final class CardRig {
    let directory: String
    let port: Int
    var socketPath: String { directory + "/pcscd.comm" }
    var caPath: String { directory + "/ca.pem" }
    private(set) var profilePath: String = ""
    // Spawned with posix_spawn (ChildProcess), never Foundation's Process.
    private var pcscd: pid_t?
    private var card: pid_t?

    static var vcardPath: String { DaemonHarness.buildDirectory + "/authd-vcard" }

    /// Generates a card profile (`generate` options, e.g. ["--mode", "contactless"]) and starts pcscd.
    init(profile options: [String] = []) throws {
        var template = Array("/tmp/authd-card-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw HarnessError("mkdtemp failed") }
        directory = String(cString: made)
        port = try Self.freePortPair()
        try FileManager.default.createDirectory(atPath: directory + "/reader.conf.d", withIntermediateDirectories: true)
        try """
        FRIENDLYNAME "Virtual PCD"
        DEVICENAME   /dev/null:\(port)
        LIBPATH      /usr/lib/pcsc/drivers/serial/libifdvpcd.so
        CHANNELID    \(port)

        """.write(toFile: directory + "/reader.conf.d/vpcd", atomically: true, encoding: .utf8)
        let generated = try DaemonHarness.run([Self.vcardPath, "generate", "--out", directory] + options)
        guard generated.status == 0 else { throw HarnessError("authd-vcard generate failed: \(generated.stderr)") }
        profilePath = generated.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        try startPCSCD()
    }

    deinit {
        stopCard()
        stopPCSCD()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// What authd needs to find this pcscd.
    var environment: [String: String] { ["PCSCLITE_CSOCK_NAME": socketPath] }

    func startPCSCD() throws {
        unlink(socketPath)
        pcscd = try ChildProcess.spawn(["/usr/bin/systemd-socket-activate", "-l", socketPath, "-E", "PCSCLITE_CSOCK_NAME=\(socketPath)",
                                "/usr/sbin/pcscd", "-f", "-c", directory + "/reader.conf.d"],
                               environment: ["PATH=/usr/sbin:/usr/bin:/bin", "PCSCLITE_CSOCK_NAME=\(socketPath)"],
                                       stdout: .file(directory + "/pcscd.log"))
        for _ in 0..<100 where access(socketPath, F_OK) != 0 { usleep(20_000) }
    }

    func stopPCSCD() {
        guard let pid = pcscd else { return }
        ChildProcess.reap(pid)
        pcscd = nil
    }

    /// Puts the card in the reader (another card's `profile` instead, from `generateCard`).
    /// `extra` e.g. ["--remove-on-ins", "2A"].
    func insertCard(_ extra: [String] = [], profile: String? = nil) throws {
        card = try ChildProcess.spawn([Self.vcardPath, "run", profile ?? profilePath, "--port", String(port)] + extra, environment: [],
                                      stdout: .file(directory + "/vcard.log"))
    }

    /// Generates another card's profile (`generate` options, e.g. ["--personal-code", …]); in
    /// `directory` when given (a CA of its own), else beside the first card, issued by the same
    /// test CA. Returns the profile's path.
    func generateCard(_ options: [String], directory: String? = nil) throws -> String {
        let generated = try DaemonHarness.run([Self.vcardPath, "generate", "--out", directory ?? self.directory] + options)
        guard generated.status == 0 else { throw HarnessError("authd-vcard generate failed: \(generated.stderr)") }
        return generated.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func stopCard() {
        guard let pid = card else { return }
        ChildProcess.reap(pid)
        card = nil
    }

    /// A TCP port whose successor is free too (vpcd opens two readers: port and port + 1).
    private static func freePortPair() throws -> Int {
        for _ in 0..<50 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = INADDR_ANY
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let port: Int = withUnsafeMutablePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    guard bind(fd, $0, length) == 0, getsockname(fd, $0, &length) == 0 else { return 0 }
                    return Int(UInt16(bigEndian: pointer.pointee.sin_port))
                }
            }
            close(fd)
            if port > 0, port < 65000, Self.isFree(port + 1) { return port }
        }
        throw HarnessError("no free port pair")
    }

    private static func isFree(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}

extension LineClient {
    /// Calls a card method and answers its prompts from `answers` (by kind: can, pin1, pin2);
    /// a kind missing there is cancelled. Returns the response and the prompts seen.
    func callAnswering(_ method: String, _ params: JSONValue, answers: [String: String]) throws -> (response: JSONValue, prompts: [JSONValue]) {
        var prompts: [JSONValue] = []
        let outcome = try rpc.request(method: method, params: params) { name, prompt in
            guard name == "prompt", let prompt else { return }
            prompts.append(prompt)
            guard prompt["expects_answer"] == .bool(true), let promptID = prompt["prompt_id"], let kind = prompt["kind"]?.stringValue else { return }
            try replyToPrompt(promptID, answer: answers[kind])
        }
        return (JSONValue(response: outcome), prompts)
    }
}
