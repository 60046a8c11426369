import Foundation

/// A command run as bubblewrap runs a Flatpak app, as far as /proc shows it: chrooted into a
/// tmpfs in a mount namespace of its own, whose root holds a `.flatpak-info` naming `appID`,
/// with the host's /usr and one host directory (`binding`, e.g. authd's socket's) bound in.
/// Needs root (or user namespaces), as the tests have in CI; at most 60 s. The tmpfs is
/// mounted on a directory made beside `binding`, which goes when the test's directory does.
enum FlatpakSandbox {
    static func run(appID: String, binding: String, _ command: [String]) throws -> DaemonHarness.CommandResult {
        let script = """
            set -e
            root=$(mktemp -d "$(dirname "$1")/sandbox.XXXXXX")
            mount -t tmpfs -o size=1m,mode=0755 authd-test "$root"
            mkdir "$root/usr" && mount --bind /usr "$root/usr"
            for link in bin lib lib64 sbin; do if [ -e "/usr/$link" ]; then ln -s "usr/$link" "$root/$link"; fi; done
            mkdir -p "$root$1" && mount --bind "$1" "$root$1"
            printf '[Application]\\nname=%s\\n[Instance]\\ninstance-id=1\\n' "$2" > "$root/.flatpak-info"
            shift 2
            exec chroot "$root" "$@"
            """
        let result = try DaemonHarness.run(["/usr/bin/timeout", "60", "/usr/bin/unshare", "--mount", "--fork", "/bin/sh", "-c", script, "sandbox", binding, appID]
                                           + command)
        if result.status != 0 && result.stdout.isEmpty {
            throw HarnessError("could not run \(command[0]) in a private mount namespace (unshare --mount and mount need root): \(result.stderr)")
        }
        return result
    }
}
