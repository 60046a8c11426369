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

    /// systemd chowns a RuntimeDirectory= and everything in it, the socket file authd.socket
    /// made there included, to User= at the first start: pam_authd would then refuse the
    /// socket (not root's), and every PAM line with it.
    @Test("the packaged units leave /run/authd and its socket root's, as pam_authd requires")
    func socketStaysRoots() throws {
        let service = try String(contentsOfFile: Self.root + "/systemd/authd.service", encoding: .utf8)
        let directives = service.split(separator: "\n").filter { !$0.hasPrefix("#") }
        #expect(!directives.contains { $0.hasPrefix("RuntimeDirectory") }, "RuntimeDirectory= would chown the socket to authd")
        #expect(directives.contains("User=authd") && directives.contains("Wants=authd.socket"))
        let socket = try String(contentsOfFile: Self.root + "/systemd/authd.socket", encoding: .utf8)
        let socketDirectives = socket.split(separator: "\n").filter { !$0.hasPrefix("#") }
        #expect(socketDirectives.contains("ListenStream=/run/authd/authd.sock"))
        #expect(!socketDirectives.contains { $0.hasPrefix("SocketUser=") || $0.hasPrefix("DirectoryUser") }, "the socket file is root's")
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

    @Test("the README's hub and device configurations are separate blocks, each valid as pasted (the files it names made real)")
    func readmeHubConfigs() throws {
        let readme = try String(contentsOfFile: Self.root + "/README.md", encoding: .utf8)
        let section = try #require(readme.components(separatedBy: "## Use one account on several machines").dropFirst().first?.components(separatedBy: "\n## ").first)
        let blocks = section.components(separatedBy: "```ini\n").dropFirst().compactMap { $0.components(separatedBy: "```").first }
        #expect(blocks.count == 2, "\(section)")
        #expect(blocks.contains { $0.contains("listen =") && !$0.contains("url =") } && blocks.contains { $0.contains("url =") && !$0.contains("listen =") })
        // The paths it names hold real files: the test rig's CA, certificate and key.
        let rig = try HubRig()
        try FileManager.default.copyItem(atPath: rig.caFile, toPath: rig.directory + "/hub-ca.pem")
        for block in blocks {
            let daemon = try DaemonHarness(config: block.replacingOccurrences(of: "/etc/authd/", with: rig.directory + "/"))
            let check = try DaemonHarness.run([DaemonHarness.authdPath, "--check-config", "--config", daemon.configPath])
            #expect(check.status == 0, "\(block)\n\(check.stderr)")
        }
    }

    @Test("the README's replica configuration is valid as pasted (the files it names made real), and says where the account data goes")
    func readmeReplicaConfig() throws {
        let readme = try String(contentsOfFile: Self.root + "/README.md", encoding: .utf8)
        let section = try #require(readme.components(separatedBy: "## Run several hubs on PostgreSQL").dropFirst().first?.components(separatedBy: "\n## ").first)
        let block = try #require(section.components(separatedBy: "```ini\n").dropFirst().first?.components(separatedBy: "```").first)
        #expect(block.contains("listen =") && block.contains("database = "), "\(block)")
        let rig = try HubRig()
        let daemon = try DaemonHarness(config: block.replacingOccurrences(of: "/etc/authd/", with: rig.directory + "/"))
        let check = try DaemonHarness.run([DaemonHarness.authdPath, "--check-config", "--config", daemon.configPath])
        #expect(check.status == 0, "\(block)\n\(check.stderr)")
    }

    @Test("the README's multi-machine walk-through puts the built authctl on PATH in every terminal, as make run-hub prints it")
    func readmeHubTerminalsHavePath() throws {
        let readme = try String(contentsOfFile: Self.root + "/README.md", encoding: .utf8)
        let section = try #require(readme.components(separatedBy: "## Use one account on several machines").dropFirst().first?.components(separatedBy: "\n## ").first)
        let exports = section.split(separator: "\n").filter { $0.contains("$ export ") }
        #expect(exports.count == 3)
        for line in exports { #expect(line.contains("export PATH=\"$BIN:$PATH\" "), "\(line)") }
        let makefile = try String(contentsOfFile: Self.root + "/Makefile", encoding: .utf8)
        #expect(makefile.contains(#"export PATH=\"$$bin:\$$PATH\" AUTHD_SOCKET=$$dir/device-a/authd.sock"#), "the banner prints the same line")
    }

    @Test("make install with DESTDIR puts everything under it and its closing words name the PAM directory there")
    func installUnderDestdir() throws {
        let scratch = try DaemonHarness()  // not started: a private directory, removed with it
        let destdir = scratch.directory + "/root"
        // The build replaced by `true` and the built (debug) binaries installed: the recipe itself runs.
        let result = try DaemonHarness.run(["/usr/bin/make", "-s", "-C", Self.root, "install", "SWIFT=true", "DEBIAN_PACKAGES=",
                                            "BIN=\(DaemonHarness.buildDirectory)", "DESTDIR=\(destdir)", "PREFIX=/usr/local"],
                                           environment: ["PATH": "/usr/bin:/bin", "HOME": scratch.directory])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(FileManager.default.fileExists(atPath: destdir + "/usr/local/bin/authctl"))
        let hint = try #require(result.stdout.split(separator: "\n").first { $0.contains("pam_authd.so is in") }, "\(result.stdout)")
        #expect(hint.contains("pam_authd.so is in \(destdir)/"), "\(hint)")
        #expect(result.stdout.contains("make: building the release binaries"), "the long build says what it does first")
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
