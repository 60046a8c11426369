import Foundation
import Glibc
import Testing
@testable import authd

@Suite("Program identity: what is read")
struct ProgramIdentityParsingTests {
    @Test(arguments: [
        ("[Application]\nname=org.example.App\n", "org.example.App"),
        ("# written by flatpak\n\n  [Application]\n  name = org.example.App  \nruntime=runtime/org.gnome.Platform/x86_64/45\n", "org.example.App"),
        ("[Application]\r\nname=org.example.App\r\n", "org.example.App"),
        ("[Instance]\nname=org.evil.App\n[Application]\nname=org.example.App\n[Context]\nname=org.evil.Other\n", "org.example.App"),
        ("[Application]\nname[de]=org.evil.App\nname=org.example.App\n", "org.example.App"),
        ("[Application]\nname=org.example.First\nname=org.example.App\n", "org.example.App"),
        ("[Application]\nname=org.example.App\n[Runtime]\nname=org.freedesktop.Sdk\n", "org.freedesktop.Sdk"),
        ("[Application]\nname=com.github.tchx84.Flat-seal\n", "com.github.tchx84.Flat-seal"),
    ])
    func findsTheApplication(file: String, id: String) {
        #expect(ProgramIdentity.flatpakApplicationID(keyFile: Array(file.utf8)) == id)
    }

    @Test(arguments: [
        "[Context]\nname=org.example.App\n",
        "name=org.example.App\n[Application]\nname=org.example.App\n",
        "[Application]\nthis line is no key\nname=org.example.App\n",
        "[Application]\nname=org.example\n",
        "[Application]\nname=org.example.1App\n",
        "[Application]\nname=org.ex-ample.App\n",
        "[Application]\nname=org.example.App;touch x\n",
        "[Application]\nname=org..App\n",
        "[Application]\nname=\n",
        "",
    ])
    func refusesWhatNamesNoApplication(file: String) {
        #expect(ProgramIdentity.flatpakApplicationID(keyFile: Array(file.utf8)) == nil)
    }

    @Test func refusesAFileThatIsNotUTF8() {
        #expect(ProgramIdentity.flatpakApplicationID(keyFile: Array("[Application]\nname=org.example.App\n".utf8) + [0xFF]) == nil)
    }

    /// A directory holding `.flatpak-info` as `make` leaves it, opened as a process's root is.
    func readInfo(_ make: (String) throws -> Void) throws -> ProgramIdentity.FlatpakInfo {
        let directory = TemporaryDirectory()
        try make(directory.path + "/.flatpak-info")
        let root = try Syscalls.openDirectory(directory.path)
        defer { Syscalls.close(root) }
        return ProgramIdentity.readFlatpakInfo(root: root)
    }

    @Test func readsOnlyABoundedRegularFile() throws {
        let valid = "[Application]\nname=org.example.App\n"
        #expect(try readInfo { _ in } == .absent)
        #expect(try readInfo { try valid.write(toFile: $0, atomically: false, encoding: .utf8) } == .application("org.example.App"))
        let oversized = valid + "#" + String(repeating: "x", count: ProgramIdentity.fileLimit) + "\n"
        guard case .unreadable = try readInfo({ try oversized.write(toFile: $0, atomically: false, encoding: .utf8) }) else {
            Issue.record("an oversized .flatpak-info was read")
            return
        }
        let host = TemporaryDirectory()
        try valid.write(toFile: host.path + "/info", atomically: false, encoding: .utf8)
        for make: (String) throws -> Void in [
            { try FileManager.default.createSymbolicLink(atPath: $0, withDestinationPath: host.path + "/info") },
            { try FileManager.default.createDirectory(atPath: $0, withIntermediateDirectories: false) },
            { path in guard mkfifo(path, 0o600) == 0 else { throw PinentryFailure.failed("mkfifo") } },
        ] {
            guard case .unreadable = try readInfo(make) else {
                Issue.record("a .flatpak-info that is no regular file was read")
                continue
            }
        }
    }

    @Test(arguments: [
        ("0::/user.slice/user-1000.slice/user@1000.service/app.slice/snap.firefox.firefox-2f7ac0a1-3e6b-4d9c-9c39-0f0e3cbd2d52.scope\n", "firefox"),
        ("12:freezer:/snap.lxd\n0::/system.slice/snap.lxd.daemon.service\n", "lxd"),
        ("1:name=systemd:/user.slice/snap.code_insiders.code-1234.scope\n", "code_insiders"),
        ("0::/user.slice/snap.gnome-calculator.hook.configure-1.scope\n", "gnome-calculator"),
    ])
    func findsTheSnap(cgroup: String, name: String) {
        #expect(ProgramIdentity.snapName(cgroup: Array(cgroup.utf8)) == name)
    }

    @Test(arguments: [
        "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-firefox-4242.scope\n",
        "5:cpu:/snap.evil.app\n0::/user.slice/session-2.scope\n",
        "0::/user.slice/snap.Firefox.firefox-1.scope\n",
        "0::/user.slice/snap.-x.app.scope\n",
        "0::/user.slice/snap.firefox_toolongkey11.firefox.scope\n",
    ])
    func findsNoSnap(cgroup: String) {
        #expect(ProgramIdentity.snapName(cgroup: Array(cgroup.utf8)) == nil)
    }

    @Test func readsTheEffectiveUID() {
        #expect(ProgramIdentity.effectiveUID(status: Array("Name:\tsleep\nUid:\t1000\t0\t0\t0\nGid:\t1\t1\t1\t1\n".utf8)) == 0)
        #expect(ProgramIdentity.effectiveUID(status: Array("Name:\tsleep\n".utf8)) == nil)
    }

    @Test func namesForKeysAndDialogs() {
        let flatpak = ProgramIdentity(kind: .flatpak, name: "org.mozilla.firefox", executable: "/app/lib/firefox/firefox")
        #expect(flatpak.key == "flatpak:org.mozilla.firefox")
        #expect(flatpak.displayName == "Firefox (flatpak org.mozilla.firefox)")
        let snap = ProgramIdentity(kind: .snap, name: "firefox_beta", executable: nil)
        #expect(snap.key == "snap:firefox_beta")
        #expect(snap.displayName == "Firefox (snap firefox_beta)")
        let program = ProgramIdentity(kind: .executable, name: "/usr/bin/python3.11", executable: "/usr/bin/python3.11")
        #expect(program.key == "exe:/usr/bin/python3.11")
        #expect(program.displayName == "/usr/bin/python3.11")
    }
}

/// A process the test starts in a process group of its own, its stdout and stderr on a pipe;
/// killed with that group and reaped when the value goes away.
final class WatchedProcess {
    let pid: pid_t
    private let output: Int32
    private(set) var text = ""

    init(_ arguments: [String]) throws {
        let pipe = try Syscalls.makePipe()
        let fds = [pipe.read, pipe.write]
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
        posix_spawn_file_actions_adddup2(&actions, fds[1], 2)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP))
        posix_spawnattr_setpgroup(&attributes, 0)
        let argv = arguments.map { strdup($0) } + [nil]
        let environment: [String] = ["PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C"]
        let envp = environment.map { strdup($0) } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, arguments[0], &actions, &attributes, argv, envp)
        close(fds[1])
        guard status == 0 else {
            close(fds[0])
            throw PinentryFailure.failed("posix_spawn \(arguments[0]): \(String(cString: strerror(status)))")
        }
        self.pid = pid
        output = fds[0]
    }

    deinit {
        kill(-pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        close(output)
    }

    /// The first line it writes, within `seconds`; nil when it ended or was silent.
    func firstLine(seconds: Double = 30) -> String? {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            if let newline = text.firstIndex(of: "\n") { return String(text[..<newline]) }
            var poller = pollfd(fd: output, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) >= 0 else { continue }
            guard poller.revents != 0 else { continue }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = read(output, &buffer, buffer.count)
            if count <= 0 { return nil }
            text += String(decoding: buffer.prefix(count), as: UTF8.self)
        }
        return nil
    }
}

@Suite("Program identity of real processes")
struct ProgramIdentityProcessTests {
    @Test func aPlainProcessIsItsExecutable() throws {
        let sleeper = try WatchedProcess(["/bin/sh", "-c", "echo $$; exec /usr/bin/sleep 60"])
        let line = try #require(sleeper.firstLine())
        let pid = try #require(Int32(line))
        // The shell prints before it becomes sleep: wait (bounded) for the exec.
        let deadline = ContinuousClock.now + .seconds(30)
        while ProgramIdentity.read(pid: pid, expectedUID: nil)?.executable != "/usr/bin/sleep" && ContinuousClock.now < deadline { usleep(1000) }
        let identity = try #require(ProgramIdentity.read(pid: pid, expectedUID: geteuid()))
        #expect(identity == ProgramIdentity(kind: .executable, name: "/usr/bin/sleep", executable: "/usr/bin/sleep"))
        #expect(identity.key == "exe:/usr/bin/sleep")
        #expect(ProgramIdentity.read(pid: pid, expectedUID: geteuid() &+ 1) == nil, "another user's process passed for ours")
    }

    @Test func aProcessThatIsGoneHasNoIdentity() throws {
        var pid: pid_t = 0
        let arguments: [String] = ["/bin/true"]
        let argv = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        #expect(posix_spawn(&pid, "/bin/true", nil, nil, argv, nil) == 0)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        #expect(ProgramIdentity.read(pid: pid, expectedUID: nil) == nil)
        #expect(ProgramIdentity.read(pid: -1, expectedUID: nil) == nil)
    }

    /// `sleep` chrooted into a tmpfs in a mount namespace of its own, whose root holds what
    /// `flatpakInfo` (a shell command; $1 is the root, $2 a file of the host's holding a valid
    /// `.flatpak-info` for `org.evil.App`) puts there: what bubblewrap makes of a Flatpak app,
    /// as far as /proc shows it. Needs root (or user namespaces), as the tests have in CI.
    final class Sandbox {
        let root = TemporaryDirectory()
        let host = TemporaryDirectory()
        let process: WatchedProcess
        let pid: pid_t

        init(_ flatpakInfo: String) throws {
            try "[Application]\nname=org.evil.App\n".write(toFile: host.path + "/info", atomically: false, encoding: .utf8)
            let script = """
                set -e
                mount -t tmpfs -o size=1m,mode=0755 authd-test "$1"
                mkdir "$1/usr" && mount --bind /usr "$1/usr"
                for link in bin lib lib64 sbin; do if [ -e "/usr/$link" ]; then ln -s "usr/$link" "$1/$link"; fi; done
                \(flatpakInfo)
                exec chroot "$1" /bin/sh -c 'echo $$; exec sleep 60'
                """
            process = try WatchedProcess(["/usr/bin/unshare", "--mount", "--fork", "/bin/sh", "-c", script, "sandbox", root.path, host.path + "/info"])
            guard let line = process.firstLine(), let pid = Int32(line) else {
                throw PinentryFailure.failed("could not start a process in a private mount namespace (unshare --mount and "
                                             + "mount need root or user namespaces): \(process.text)")
            }
            self.pid = pid
        }

        /// Waits (bounded) until the shell has become `sleep`.
        func waitForSleep() {
            let deadline = ContinuousClock.now + .seconds(30)
            while (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8))?.hasPrefix("sleep") != true && ContinuousClock.now < deadline {
                usleep(1000)
            }
        }
    }

    @Test func aFlatpakIsNamedByItsApplicationID() throws {
        let sandbox = try Sandbox(#"printf '[Application]\nname=org.example.App\n[Instance]\ninstance-id=1\n' > "$1/.flatpak-info""#)
        sandbox.waitForSleep()
        let identity = try #require(ProgramIdentity.read(pid: sandbox.pid, expectedUID: geteuid()))
        #expect(identity.key == "flatpak:org.example.App")
        #expect(identity.kind == .flatpak)
        #expect(identity.executable?.hasSuffix("/sleep") == true)
        #expect(identity.displayName == "App (flatpak org.example.App)")
    }

    /// A `.flatpak-info` that is a symbolic link (which, followed from *our* root, would reach
    /// the host's file naming org.evil.App) or that names nothing valid gives no identity at
    /// all, never the executable inside the sandbox.
    @Test(arguments: [
        #"ln -s "$2" "$1/.flatpak-info""#,
        #"printf '[Application]\nname=not-an-app-id\n' > "$1/.flatpak-info""#,
    ])
    func aSandboxWithoutAValidFlatpakInfoIsNobody(flatpakInfo: String) throws {
        let sandbox = try Sandbox(flatpakInfo)
        #expect(ProgramIdentity.read(pid: sandbox.pid, expectedUID: nil) == nil)
        sandbox.waitForSleep()
        #expect(ProgramIdentity.read(pid: sandbox.pid, expectedUID: nil) == nil)
    }
}
