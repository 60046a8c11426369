import Foundation
import Glibc
import Protocol
import Testing

/// The real thing: Debian's Chromium, headless, with an unpacked test extension that does what the
/// Web eID extension's native side does, opens a login page served over HTTPS on loopback; the
/// browser starts authd-webeid through the user manifest `authctl webeid install --user` wrote;
/// the PIN goes into the scripted pinentry authd runs; the page gets a token a relying party accepts.
@Suite("Web eID in a real browser", .serialized)
struct WebEIDBrowserTests {
    static let rigScript = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Python/webeid_browser_rig.py").path
    static let chromium = "/usr/bin/chromium"

    @Test("Chromium starts authd-webeid for the page; the page gets a web-eid:1.0 token for its own origin that a relying party accepts",
          .enabled(if: FileManager.default.isExecutableFile(atPath: chromium), "make test installs chromium"))
    func loginInChromium() throws {
        let rig = try CardRig()
        try rig.insertCard()
        let script = try PinentryPromptTests.Script([["confirm": "ok"], ["pin": "1234"]])
        let daemon = try WebEIDHostProtocolTests.daemon(script, rig: rig)
        let directory = daemon.directory + "/browser"
        let home = directory + "/home"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)

        let certificate = try DaemonHarness.run(["/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                                                 "-keyout", directory + "/key.pem", "-out", directory + "/cert.pem", "-days", "1",
                                                 "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"])
        try #require(certificate.status == 0, "\(certificate.stderr)")
        let nonce = WebEIDHostProtocolTests.nonce()
        let server = try ChildProcess.spawn(["/usr/bin/python3", Self.rigScript, "serve", directory, nonce, directory + "/result.json", directory + "/port"],
                                            environment: ["PATH=/usr/bin:/bin"], stdout: .file(directory + "/server.log"))
        defer { ChildProcess.reap(server) }
        let portDeadline = ContinuousClock.now + .seconds(20)
        while access(directory + "/port", F_OK) != 0, ContinuousClock.now < portDeadline { usleep(20_000) }
        let port = try #require(Int((try? String(contentsOfFile: directory + "/port", encoding: .utf8)) ?? ""), "the page server did not start")
        let page = "https://127.0.0.1:\(port)"

        let written = try DaemonHarness.run(["/usr/bin/python3", Self.rigScript, "extension", directory + "/extension", page + "/"])
        let extensionID = written.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        try #require(written.status == 0 && extensionID.count == 32, "\(written.stderr)")
        let environment = ["PATH": "/usr/bin:/bin", "HOME": home, "AUTHD_SOCKET": daemon.socketPath]
        let installed = try DaemonHarness.run([DaemonHarness.authctlPath, "webeid", "install", "--user", "--extension", extensionID], environment: environment)
        try #require(installed.status == 0, "\(installed.stdout) \(installed.stderr)")
        let status = try DaemonHarness.run([DaemonHarness.authctlPath, "webeid", "status"], environment: environment)
        #expect(status.stdout.contains("Chromium: \(DaemonHarness.buildDirectory)/authd-webeid (authd)"), "\(status.stdout)")

        // In a session of its own, so that the browser and every process it started go at the end;
        // its temporary files (the singleton's socket) in the test's directory, which goes too.
        try FileManager.default.createDirectory(atPath: directory + "/tmp", withIntermediateDirectories: false)
        let browser = try ChildProcess.spawn(["/usr/bin/setsid", Self.chromium, "--headless=new", "--no-sandbox", "--user-data-dir=\(home)/.config/chromium",
                                              "--load-extension=\(directory)/extension", "--disable-extensions-except=\(directory)/extension",
                                              "--ignore-certificate-errors", "--no-first-run", "--no-default-browser-check", "--disable-gpu",
                                              "--disable-dev-shm-usage", "about:blank"],
                                             environment: environment.merging(["TMPDIR": directory + "/tmp"]) { $1 }.map { "\($0)=\($1)" },
                                             stdout: .file(directory + "/chromium.log"))
        defer {
            kill(-browser, SIGKILL)
            ChildProcess.reap(browser)
        }
        let served = ChildProcess.waitForExit(server, within: .seconds(120))
        let log = (try? String(contentsOfFile: directory + "/chromium.log", encoding: .utf8)) ?? ""
        try #require(served == 0, "the page posted no result; chromium said:\n\(log.suffix(3000))\npinentry: \(script.commands)")
        let result = try WireCodec.decode(JSONValue.self, from: try Data(contentsOf: URL(fileURLWithPath: directory + "/result.json")))
        #expect(result["origin"] == .string(page))
        let reply = try #require(result["answer"]?["reply"], "\(result)")
        #expect(reply["format"] == "web-eid:1.0", "\(reply)")
        let token = String(decoding: try WireCodec.encodeJSON(reply), as: UTF8.self)
        let accepted = try WebEIDHostProtocolTests.verify(["auth", token, rig.caPath, page, nonce])
        #expect(accepted.status == 0, "\(accepted.stderr)")
        #expect(try WebEIDHostProtocolTests.verify(["auth", token, rig.caPath, "https://127.0.0.1:\(port + 1)", nonce]).status == 1)
        #expect(script.dialogs.first?["SETDESC"]?.contains(page) == true, "the consent names the page's origin: \(script.dialogs)")
    }
}
