import Foundation
import Testing

/// The files shipped beside the binaries: systemd units, man pages, the example config.
@Suite("Packaging")
struct PackagingTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    @Test("systemd units verify cleanly and authd.service rates 2.0 or lower in systemd-analyze security")
    func systemdUnits() throws {
        let result = try DaemonHarness.run(["/bin/bash", Self.root + "/systemd/check-units.sh", DaemonHarness.authdPath])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("exposure"), "\(result.stdout)")
    }

    @Test("every man page renders without groff warnings")
    func manPages() throws {
        let pages = try FileManager.default.contentsOfDirectory(atPath: Self.root + "/man").filter { $0.range(of: #"\.[1-8]$"#, options: .regularExpression) != nil }
        #expect(Set(pages) == ["authd.8", "authctl.1", "authd-webeid.1", "authd.conf.5", "authd-protocol.7", "pam_authd.8"])
        let result = try DaemonHarness.run(["/bin/bash", Self.root + "/man/check-man.sh"])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        // man -l renders each page (the form the README and authd(8) tell people to use).
        for page in pages {
            let rendered = try DaemonHarness.run(["/usr/bin/man", "-l", Self.root + "/man/" + page], environment: ["MANWIDTH": "80", "PATH": "/usr/bin:/bin", "MANPAGER": "cat", "PAGER": "cat"])
            #expect(rendered.status == 0, "\(page): \(rendered.stderr)")
            #expect(rendered.stdout.count > 1000, "\(page) rendered to almost nothing")
        }
    }

    @Test("the example configuration is valid, and so is each of its settings uncommented")
    func exampleConfig() throws {
        let example = Self.root + "/systemd/authd.conf.example"
        let check = try DaemonHarness.run([DaemonHarness.authdPath, "--check-config", "--config", example])
        #expect(check.status == 0, "\(check.stderr)")
        // Uncommenting every default must still be a valid file with the same meaning.
        let text = try String(contentsOfFile: example, encoding: .utf8)
        let uncommented = text.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            line.hasPrefix("#") && line.contains(" = ") && !line.hasPrefix("# ") ? String(line.dropFirst()) : String(line)
        }.joined(separator: "\n")
        let daemon = try DaemonHarness(config: uncommented)
        let strict = try DaemonHarness.run([DaemonHarness.authdPath, "--check-config", "--config", daemon.configPath])
        #expect(strict.status == 0, "\(strict.stderr)")
        #expect(uncommented.contains("\nmax_connections = 4096"))
    }
}
