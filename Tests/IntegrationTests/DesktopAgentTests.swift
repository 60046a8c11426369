import Foundation
import Glibc
import Protocol
import Testing

/// Desktop notifications from a system authd: it hands each local user the `notification` and
/// `dismiss` events of the accounts they hold a live session of on this machine, and that
/// user's `authd --desktop`, running as them, shows them on their own session bus. Each user
/// here is a real other uid (setpriv), with a desktop of their own (NotificationDesktop).
@Suite("Desktop notifications from a system authd")
struct DesktopAgentTests {
    static let password = "a long enough passphrase"

    /// `authd --desktop` as `user` on `desktop`, following the authd at `socket`; returns once
    /// it follows (it says so in its log).
    final class Agent {
        let pid: pid_t
        let logPath: String
        var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

        init(user: String, group: String, desktop: NotificationDesktop, socket: String) throws {
            logPath = desktop.bus.directory + "/agent.log"
            pid = try ChildProcess.spawn(["/usr/bin/setpriv", "--reuid=\(user)", "--regid=\(group)", "--clear-groups",
                                          DaemonHarness.authdPath, "--desktop", "--socket", socket],
                                         environment: ["DBUS_SESSION_BUS_ADDRESS=\(desktop.address)", "PATH=/usr/bin:/bin"]
                                             + DaemonHarness.sanitizerOptions.map { "\($0)=\($1)" },
                                         stdout: .file(logPath), stderr: logPath)
            let deadline = Date().addingTimeInterval(15)
            while !log.contains("showing authd's notifications") {
                guard Date() < deadline else {
                    ChildProcess.reap(pid)
                    throw HarnessError("authd --desktop as \(user) did not follow authd within 15 s:\n\(log)")
                }
                usleep(20_000)
            }
        }

        deinit { ChildProcess.reap(pid) }
    }

    /// Signs `login` in as the local `user` (authctl through setpriv); the session token.
    static func signIn(_ daemon: DaemonHarness, _ login: String, as user: String) throws -> String {
        let result = try daemon.authctl(["--json", "call", "auth.login", #"{"login":"\#(login)","password":"\#(password)"}"#], user: user)
        guard result.status == 0, let token = try WireCodec.decode(JSONValue.self, from: Data(result.stdout.utf8))["session"]?["token"]?.stringValue else {
            throw HarnessError("sign-in as \(user) failed: \(result.stdout) \(result.stderr)")
        }
        return token
    }

    @Test("standalone system authd: each user's desktop shows only the notifications of the accounts that user is signed in to here, a dismissal closes it there, and after signing out nothing more")
    func standalone() throws {
        let daemon = try DaemonHarness(config: "[sync]\ndesktop_notifications = yes\n")
        try daemon.start(arguments: ["--system"])
        let client = try daemon.connect()
        // Two accounts, registered by root (whose sessions send below); nobody signs in to the
        // first, daemon (uid 1) to the second.
        let first = try #require(try LoginTests.register(daemon, client, phone: "+37251234567", password: Self.password)["session"]?["token"])
        let second = try #require(try LoginTests.register(daemon, client, phone: "+37251234568", password: Self.password, device: "device-2",
                                                               email: "second@example.org")["session"]?["token"])
        let nobodys = try Self.signIn(daemon, "+37251234567", as: "nobody")
        _ = try Self.signIn(daemon, "+37251234568", as: "daemon")
        let nobodyDesktop = try NotificationDesktop(), daemonDesktop = try NotificationDesktop()
        let nobody = try Agent(user: "nobody", group: "nogroup", desktop: nobodyDesktop, socket: daemon.socketPath)
        let other = try Agent(user: "daemon", group: "daemon", desktop: daemonDesktop, socket: daemon.socketPath)

        let door = try client.result("sync.send", ["session": first, "kind": "notification", "body": ["title": "Door", "text": "someone at the door"]])
        _ = try client.result("sync.send", ["session": second, "kind": "notification", "body": ["title": "Parcel"]])
        #expect(nobodyDesktop.shows("Door") && nobodyDesktop.log.contains("someone at the door"), "nobody's desktop: \(nobodyDesktop.log)\n\(nobody.log)")
        #expect(daemonDesktop.shows("Parcel"), "daemon's desktop: \(daemonDesktop.log)\n\(other.log)")
        #expect(!nobodyDesktop.log.contains("Parcel") && !daemonDesktop.log.contains("Door"), "each sees only their own account's")

        _ = try client.result("sync.dismiss", ["session": first, "position": door["position"]!])
        #expect(nobodyDesktop.shows("CloseNotification"), "dismissed, closed: \(nobodyDesktop.log)")

        // nobody signs out of the first account and in to the second: the first account's next
        // notification is not theirs any more; the second's, sent after it, is (the same
        // stream, in order: its arrival proves the first was not delivered).
        _ = try daemon.authctl(["call", "auth.logout", #"{"session":"\#(nobodys)"}"#], user: "nobody")
        _ = try Self.signIn(daemon, "+37251234568", as: "nobody")
        _ = try client.result("sync.send", ["session": first, "kind": "notification", "body": ["title": "After signing out"]])
        _ = try client.result("sync.send", ["session": second, "kind": "notification", "body": ["title": "Second account"]])
        #expect(nobodyDesktop.shows("Second account"), "\(nobodyDesktop.log)")
        #expect(!nobodyDesktop.log.contains("After signing out"), "\(nobodyDesktop.log)")
        #expect(!daemon.log.contains("someone at the door"), "no notification text in authd's log")
        withExtendedLifetime((nobody, other)) {}
    }

    @Test("device in system mode: the hub names the machine's users who are signed in, and only their desktops show what another machine sends, and close what it dismisses")
    func device() throws {
        let rig = try HubRig()
        let a = try rig.startDevice(extra: "[sync]\ndesktop_notifications = yes", arguments: ["--system"])
        let b = try rig.startDevice()
        _ = try rig.register(on: b)
        let onB = try #require(try b.connect().result("auth.login", ["login": "+37251234567", "password": .string(Self.password)])["session"]?["token"])
        _ = try Self.signIn(a, "+37251234567", as: "nobody")
        let nobodyDesktop = try NotificationDesktop(), daemonDesktop = try NotificationDesktop()
        let nobody = try Agent(user: "nobody", group: "nogroup", desktop: nobodyDesktop, socket: a.socketPath)
        let other = try Agent(user: "daemon", group: "daemon", desktop: daemonDesktop, socket: a.socketPath)

        let sent = try b.connect().result("sync.send", ["session": onB, "kind": "notification", "body": ["title": "From B", "text": "hello"]])
        #expect(nobodyDesktop.shows("From B"), "\(nobodyDesktop.log)\n\(nobody.log)\n\(a.log)")
        _ = try b.connect().result("sync.dismiss", ["session": onB, "position": sent["position"]!])
        #expect(nobodyDesktop.shows("CloseNotification"), "\(nobodyDesktop.log)")
        #expect(!daemonDesktop.log.contains("From B"), "a user of A who is not signed in sees nothing: \(daemonDesktop.log)")
        withExtendedLifetime((rig, nobody, other)) {}
    }
}
