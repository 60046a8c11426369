import Foundation
import Glibc
import Testing

/// A person's desktop for one test: a private session bus (dbus-daemon, as FprintdRig starts it)
/// with python-dbusmock's `notification_daemon` template as org.freedesktop.Notifications,
/// which logs every call it gets (`Notify` with its title and text, `CloseNotification`).
/// Any uid may connect to it: it stands in for the session bus of a user the test runs
/// `authd --desktop` as.
final class NotificationDesktop {
    let bus: FprintdRig
    private let mock: pid_t
    var address: String { bus.address }
    var logPath: String { bus.directory + "/notifications.log" }
    /// Every call the notification daemon got so far.
    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    init() throws {
        bus = try FprintdRig(startMock: false)
        chmod(bus.directory, 0o755)  // another uid's agent reaches the bus socket in it
        mock = try ChildProcess.spawn(["/usr/bin/python3", "-m", "dbusmock", "--template", "notification_daemon", "-l", bus.directory + "/notifications.log"],
                                      environment: ["DBUS_SESSION_BUS_ADDRESS=\(bus.address)", "PATH=/usr/bin:/bin", "PYTHONUNBUFFERED=1"],
                                      stdout: .file(bus.directory + "/mock.out"))
        let ready = Date().addingTimeInterval(20)
        while try !owned() && Date() < ready { usleep(50_000) }
        guard try owned() else {
            ChildProcess.reap(mock)
            throw HarnessError("the notification daemon mock did not come up within 20 s")
        }
    }

    deinit { ChildProcess.reap(mock) }

    private func owned() throws -> Bool {
        try bus.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameHasOwner", ["s", "org.freedesktop.Notifications"],
                     returning: Bool.self)
    }

    /// Whether `text` is in the log within `seconds`.
    func shows(_ text: String, within seconds: Double = 10) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if log.contains(text) { return true }
            usleep(20_000)
        }
        return log.contains(text)
    }
}
