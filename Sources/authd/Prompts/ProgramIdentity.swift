// Who is asking (DESIGN §12): read from /proc, never a name the client claims.
//
// A sandboxed app is named by its sandbox, not by its executable: inside a Flatpak, /proc/PID/exe
// reads as a path in the app's own tree (`/usr/bin/python3` of its runtime looks like the
// host's), so a process whose root holds a `.flatpak-info` is the Flatpak app it names or
// nobody; it never falls back to its executable.

/// The program behind a local process, as the desktop dialog and consent name it.
struct ProgramIdentity: Sendable, Hashable {
    enum Kind: String, Sendable { case executable, flatpak, snap }

    let kind: Kind
    /// `/usr/bin/foo`, the Flatpak application id (`org.example.App`) or the snap name.
    let name: String
    /// The executable path (always, when readable), as /proc/PID/exe names it to authd: for a
    /// process in a mount namespace of its own, that need not be a path on the host.
    let executable: String?

    /// Stable string form used as the consent key: "exe:/usr/bin/foo", "flatpak:org.example.App", "snap:name".
    var key: String {
        switch kind {
        case .executable: "exe:\(name)"
        case .flatpak: "flatpak:\(name)"
        case .snap: "snap:\(name)"
        }
    }

    /// How a dialog names it, e.g. "Firefox (flatpak org.mozilla.firefox)" or "/usr/bin/python3" —
    /// escaped by the caller (`Pinentry.field`). The short name is the id's last part, so it
    /// is never more than what the id says.
    var displayName: String {
        switch kind {
        case .executable: name
        case .flatpak: "\(Self.capitalised(name.split(separator: ".").last.map(String.init) ?? name)) (flatpak \(name))"
        case .snap: "\(Self.capitalised(String(name.prefix { $0 != "_" }))) (snap \(name))"
        }
    }

    private static func capitalised(_ word: String) -> String {
        word.prefix(1).uppercased() + word.dropFirst()
    }

    /// The most of /proc/PID/status, /proc/PID/cgroup and a `.flatpak-info` read.
    static let fileLimit = 64 * 1024

    /// Reads /proc/PID/exe, then the Flatpak app id from /proc/PID/root/.flatpak-info (as
    /// xdg-desktop-portal does: the root opened as a directory, the file beneath it never
    /// through a symbolic link, a regular file of bounded size, `[Application] name=`, or
    /// `[Runtime] name=` for a runtime run by itself), else the snap name from the process's
    /// cgroup (`snap.NAME.APP….scope`, as xdg-desktop-portal and snapd recognise one), else
    /// the executable. Nil when the process is gone, unreadable, has a `.flatpak-info` that
    /// cannot be read or names no valid application, or (with `expectedUID`) runs with
    /// another effective uid than expected (its number was reused by another user's process).
    static func read(pid: Int32, expectedUID: UInt32?) -> ProgramIdentity? {
        // Everything is read through this one descriptor: a later process given the same
        // number is not the one opened here.
        guard pid > 0, let process = try? Syscalls.openDirectory("/proc/\(pid)") else { return nil }
        defer { Syscalls.close(process) }
        if let expectedUID {
            guard let status = try? Syscalls.readRegularFile("status", in: process, limit: fileLimit),
                  effectiveUID(status: status) == expectedUID else { return nil }
        }
        let executable = Syscalls.readLink("exe", in: process)
        switch readFlatpakInfo(process: process) {
        case .application(let id): return ProgramIdentity(kind: .flatpak, name: id, executable: executable)
        case .unreadable: return nil
        case .absent: break
        }
        if let cgroup = try? Syscalls.readRegularFile("cgroup", in: process, limit: fileLimit), let snap = snapName(cgroup: cgroup) {
            return ProgramIdentity(kind: .snap, name: snap, executable: executable)
        }
        guard let executable else { return nil }
        return ProgramIdentity(kind: .executable, name: executable, executable: executable)
    }

    /// The effective uid on the `Uid:` line of /proc/PID/status (real, effective, saved, fs):
    /// the one `SO_PEERCRED` reports.
    static func effectiveUID(status: [UInt8]) -> UInt32? {
        let text = String(decoding: status, as: UTF8.self)
        for line in text.split(separator: "\n") where line.hasPrefix("Uid:") {
            let fields = line.dropFirst(4).split(whereSeparator: { $0 == "\t" || $0 == " " })
            return fields.count >= 2 ? UInt32(fields[1]) : nil
        }
        return nil
    }

    enum FlatpakInfo: Equatable {
        /// No `.flatpak-info`: not a Flatpak.
        case absent
        case application(String)
        /// There is one, but it cannot be trusted to name anything: no identity.
        case unreadable(String)
    }

    /// The `.flatpak-info` at the root of the process whose /proc directory is `process`.
    static func readFlatpakInfo(process: Int32) -> FlatpakInfo {
        let root: Int32
        do { root = try Syscalls.openDirectory("root", in: process) } catch {
            return .unreadable("cannot open the process's root: \(error)")
        }
        defer { Syscalls.close(root) }
        return readFlatpakInfo(root: root)
    }

    /// The `.flatpak-info` directly beneath the directory `root`.
    static func readFlatpakInfo(root: Int32) -> FlatpakInfo {
        let bytes: [UInt8]?
        do { bytes = try Syscalls.readRegularFile(".flatpak-info", in: root, limit: fileLimit) } catch {
            return .unreadable("\(error)")
        }
        guard let bytes else { return .absent }
        guard let id = flatpakApplicationID(keyFile: bytes) else { return .unreadable(".flatpak-info names no valid application") }
        return .application(id)
    }

    /// `name=` of the `[Runtime]` group when there is one, else of `[Application]`, read the way
    /// GLib's GKeyFile reads it (blank lines and `#` comments skipped, whitespace around the key
    /// and value dropped, a later key replacing an earlier one); nil when the file is not a key
    /// file (not UTF-8, a line that is neither group, key nor comment, a key before any group)
    /// or the name is not a valid Flatpak application id.
    static func flatpakApplicationID(keyFile bytes: [UInt8]) -> String? {
        guard let text = String(validating: bytes, as: UTF8.self) else { return nil }
        var group: Substring?
        var names: [Substring: Substring] = [:]
        // "\r\n" is one Character to Swift.
        for rawLine in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            let line = rawLine.drop { $0 == " " || $0 == "\t" || $0 == "\r" }
            if line.isEmpty || line.first == "#" { continue }
            if line.first == "[" {
                guard let close = line.lastIndex(of: "]") else { return nil }
                group = line[line.index(after: line.startIndex)..<close]
                continue
            }
            guard let equals = line.firstIndex(of: "="), let current = group else { return nil }
            let key = line[..<equals].trimmingSuffix { $0 == " " || $0 == "\t" }
            if key == "name" {
                names[current] = line[line.index(after: equals)...].drop { $0 == " " || $0 == "\t" }.trimmingSuffix { $0 == " " || $0 == "\t" || $0 == "\r" }
            }
        }
        guard let name = names["Runtime"] ?? names["Application"], isValidFlatpakID(name) else { return nil }
        return String(name)
    }

    /// Flatpak's rule for an application id: three or more dot-separated elements of ASCII
    /// letters, digits and `_` (`-` only in the last), none starting with a digit, at most 255
    /// characters.
    static func isValidFlatpakID(_ id: Substring) -> Bool {
        let elements = id.split(separator: ".", omittingEmptySubsequences: false)
        guard id.utf8.count <= 255, elements.count >= 3 else { return false }
        for (index, element) in elements.enumerated() {
            let dash = index == elements.count - 1
            guard let first = element.first, first.isASCII, first.isLetter || first == "_" || (dash && first == "-") else { return false }
            guard element.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || (dash && $0 == "-")) }) else { return false }
        }
        return true
    }

    /// The snap instance name in /proc/PID/cgroup: the innermost `snap.NAME.…` cgroup of the
    /// unified hierarchy (`0::`), systemd's or the freezer, where snapd puts every app
    /// (`snap.firefox.firefox-UUID.scope`, `snap.NAME.APP.service`, `snap.NAME.hook.HOOK-UUID.scope`).
    static func snapName(cgroup bytes: [UInt8]) -> String? {
        let text = String(decoding: bytes, as: UTF8.self)
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3, ["", "name=systemd", "freezer"].contains(fields[1]) else { continue }
            for component in fields[2].split(separator: "/").reversed() where component.hasPrefix("snap.") {
                let name = component.dropFirst("snap.".count).prefix { $0 != "." }
                if isValidSnapInstanceName(name) { return String(name) }
            }
        }
        return nil
    }

    /// snapd's rule: a name of lower-case letters, digits and single inner hyphens, with a
    /// letter, at most 40 characters; an instance adds `_` and a key of 1–10 lower-case
    /// letters and digits.
    static func isValidSnapInstanceName(_ instance: Substring) -> Bool {
        let parts = instance.split(separator: "_", maxSplits: 1, omittingEmptySubsequences: false)
        let name = parts[0]
        let plain: (Character) -> Bool = { $0.isASCII && ($0.isLowercase || $0.isNumber) }
        guard (1...40).contains(name.count), name.contains(where: { $0.isASCII && $0.isLowercase }),
              name.first != "-", name.last != "-", !name.contains("--"),
              name.allSatisfy({ plain($0) || $0 == "-" }) else { return false }
        if parts.count == 2 { return (1...10).contains(parts[1].count) && parts[1].allSatisfy(plain) }
        return true
    }
}

private extension Substring {
    func trimmingSuffix(while predicate: (Character) -> Bool) -> Substring {
        var end = endIndex
        while end > startIndex, predicate(self[index(before: end)]) { end = index(before: end) }
        return self[startIndex..<end]
    }
}
