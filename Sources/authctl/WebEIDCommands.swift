import Foundation
import Protocol

// authctl webeid …: the native messaging manifests that let browsers start authd-webeid for the
// Web eID extension (host name eu.webeid). Chromium and Chrome prefer a user's manifest to the
// system's, so a user's install stands beside an installed web-eid-app.

/// The Web eID extension's ids and the places browsers look for the `eu.webeid` manifest.
enum WebEIDManifests {
    static let hostName = "eu.webeid"
    /// Chrome Web Store and Edge Add-ons builds of the Web eID extension.
    static let chromeOrigins = ["chrome-extension://ncibgoaomkmdpilpocfeponihegamlic/", "chrome-extension://gnmckgbandlkacikdndelhfghdejfido/"]
    static let firefoxExtensions = ["{e68418bc-f2b0-4459-a9ea-3e72b6751b07}"]

    enum Flavour: Sendable { case chrome, firefox }

    struct Browser: Sendable {
        let name: String
        let flavour: Flavour
        /// The user's directory, relative to the config home (`~/.config`) or home.
        let userDirectory: @Sendable (_ home: String, _ configHome: String) -> String
        let systemDirectory: String
    }

    static let browsers = [
        Browser(name: "Chromium", flavour: .chrome, userDirectory: { _, config in config + "/chromium/NativeMessagingHosts" },
                systemDirectory: "/etc/chromium/native-messaging-hosts"),
        Browser(name: "Google Chrome", flavour: .chrome, userDirectory: { _, config in config + "/google-chrome/NativeMessagingHosts" },
                systemDirectory: "/etc/opt/chrome/native-messaging-hosts"),
        Browser(name: "Firefox", flavour: .firefox, userDirectory: { home, _ in home + "/.mozilla/native-messaging-hosts" },
                systemDirectory: "/usr/lib/mozilla/native-messaging-hosts"),
    ]

    /// The manifest for `flavour`: the host's absolute path, stdio, the Web eID extension's ids
    /// (and `extraOrigins`, e.g. a development build of an extension).
    static func manifest(_ flavour: Flavour, hostPath: String, extraOrigins: [String] = []) -> JSONValue {
        var manifest: [String: JSONValue] = [
            "name": .string(hostName), "description": "authd: sign in to websites with your ID card (Web eID)",
            "path": .string(hostPath), "type": "stdio",
        ]
        switch flavour {
        case .chrome: manifest["allowed_origins"] = .array((chromeOrigins + extraOrigins).map { .string($0) })
        case .firefox: manifest["allowed_extensions"] = .array(firefoxExtensions.map { .string($0) })
        }
        return .object(manifest)
    }

    /// Where a manifest names authd-webeid: the files authctl may replace or remove.
    static func isOurs(_ manifest: JSONValue?) -> Bool {
        manifest?["path"]?.stringValue.map { ($0 as NSString).lastPathComponent == "authd-webeid" } ?? false
    }

    static func read(_ path: String) -> JSONValue? {
        guard let data = FileManager.default.contents(atPath: path), data.count < 65536 else { return nil }
        return try? WireCodec.decode(JSONValue.self, from: data)
    }

    /// authd-webeid beside this authctl, as `make install` puts them.
    static func defaultHostPath() -> String {
        let own = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? "/usr/bin/authctl"
        return ((own as NSString).deletingLastPathComponent as NSString).appendingPathComponent("authd-webeid")
    }

    static func homes() -> (home: String, configHome: String) {
        let environment = ProcessInfo.processInfo.environment
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        let config = environment["XDG_CONFIG_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? home + "/.config"
        return (home, config)
    }
}

extension Command {
    static let webeidInstall = Command(
        path: ["webeid", "install"], synopsis: "[--user] [--remove] [--host PATH] [--extension ID]…",
        abstract: """
            Write the eu.webeid native messaging manifests that let Chromium, Google Chrome and
            Firefox start authd-webeid for the Web eID extension: the system's (as root, what make
            install writes) or, with --user, your own, which Chromium and Chrome prefer to the
            system's. --remove takes authd's manifests away and leaves any other host's alone.
            """,
        options: [
            OptionSpec(name: "user", value: nil, help: "your own manifests, under ~/.config and ~/.mozilla"),
            OptionSpec(name: "remove", value: nil, help: "remove authd's manifests instead"),
            OptionSpec(name: "host", value: "PATH", help: "the host to name (default: authd-webeid beside authctl)"),
            OptionSpec(name: "extension", value: "ID", help: "also let this Chromium extension id start the host (a development build)"),
        ]
    ) { invocation throws(CLIError) in
        let (home, configHome) = WebEIDManifests.homes()
        let user = invocation.flag("user")
        let host = invocation.value("host") ?? WebEIDManifests.defaultHostPath()
        guard host.hasPrefix("/") else { throw .usage("--host must be an absolute path") }
        let extra = try invocation.values("extension").map { id throws(CLIError) -> String in
            guard id.count == 32, id.allSatisfy({ ("a"..."p").contains($0) }) else { throw .usage("--extension takes a Chromium extension id (32 letters a–p)") }
            return "chrome-extension://\(id)/"
        }
        for browser in WebEIDManifests.browsers {
            let directory = user ? browser.userDirectory(home, configHome) : browser.systemDirectory
            let path = directory + "/\(WebEIDManifests.hostName).json"
            let existing = WebEIDManifests.read(path)
            if invocation.flag("remove") {
                guard FileManager.default.fileExists(atPath: path) else { continue }
                guard WebEIDManifests.isOurs(existing) else { Output.line("\(browser.name): \(path) names another host; left alone"); continue }
                do { try FileManager.default.removeItem(atPath: path) } catch {
                    throw CLIError(message: "cannot remove \(path): \(error.localizedDescription)", reason: nil, exitCode: .failure)
                }
                Output.line("\(browser.name): removed \(path)")
                continue
            }
            if FileManager.default.fileExists(atPath: path), !WebEIDManifests.isOurs(existing), !user {
                Output.line("\(browser.name): \(path) names another host (web-eid-app?); left alone — use --user to override it for yourself")
                continue
            }
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                let manifest = WebEIDManifests.manifest(browser.flavour, hostPath: host, extraOrigins: browser.flavour == .chrome ? extra : [])
                try (WireCodec.encodeJSON(manifest) + Data("\n".utf8)).write(to: URL(fileURLWithPath: path), options: .atomic)
            } catch {
                throw CLIError(message: "cannot write \(path): \(error.localizedDescription)", reason: nil, exitCode: .failure)
            }
            Output.line("\(browser.name): \(path) → \(host)")
        }
        if !FileManager.default.isExecutableFile(atPath: host) { Output.line("note: \(host) is not an executable file") }
        return .ok
    }

    static let webeidStatus = Command(
        path: ["webeid", "status"], synopsis: "",
        abstract: "Say which eu.webeid host each browser will start for the Web eID extension (yours before the system's), and whether it is authd's."
    ) { invocation throws(CLIError) in
        let (home, configHome) = WebEIDManifests.homes()
        var rows: [JSONValue] = []
        for browser in WebEIDManifests.browsers {
            let candidates = [browser.userDirectory(home, configHome), browser.systemDirectory].map { $0 + "/\(WebEIDManifests.hostName).json" }
            guard let path = candidates.first(where: { FileManager.default.fileExists(atPath: $0) }) else {
                rows.append(["browser": .string(browser.name), "manifest": nil, "host": nil, "authd": false])
                if !invocation.global.json { Output.line("\(browser.name): no eu.webeid host") }
                continue
            }
            let manifest = WebEIDManifests.read(path)
            let host = manifest?["path"]?.stringValue
            rows.append(["browser": .string(browser.name), "manifest": .string(path), "host": host.map { .string($0) } ?? nil,
                         "authd": .bool(WebEIDManifests.isOurs(manifest))])
            guard !invocation.global.json else { continue }
            let runnable = host.map { FileManager.default.isExecutableFile(atPath: $0) } ?? false
            Output.line("\(browser.name): \(host ?? "(unreadable manifest)")\(WebEIDManifests.isOurs(manifest) ? " (authd)" : "")"
                        + "\(runnable ? "" : " — not executable") from \(path)")
        }
        if invocation.global.json { Output.json(JSONValue.array(rows)) }
        return .ok
    }
}
