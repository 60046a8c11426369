import Protocol
import Synchronization

/// What this machine is called in an account's device list (and in a hub's, for a device): its
/// host name until a person names it (`device.name`), which is kept in the machine's store. One
/// value for the process, like the host name it stands in for; read at each use, so a new name
/// counts from the next sign-in.
enum MachineName {
    private static let value = Mutex<String>(Syscalls.hostName() ?? "this computer")

    static var current: String { value.withLock { $0 } }

    /// Takes the name the store holds (nil: keep the host name).
    static func load(_ stored: String?) {
        if let stored { value.withLock { $0 = stored } }
    }

    /// A name a person gave: 1–64 printable characters, no surrounding spaces.
    static func validate(_ name: String) throws(InvalidParameter) -> String {
        let trimmed = String(name.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
        guard (1...64).contains(trimmed.count), !trimmed.containsControlCharacter else {
            throw InvalidParameter("Parameter 'name' must be 1–64 printable characters.", field: "name")
        }
        return trimmed
    }

    /// Names the machine: stored first, then used.
    static func set(_ name: String, store: Store) async throws -> String {
        let name = try validate(name)
        try await store.transaction { database in
            try database.execute("UPDATE device_identity SET name = ? WHERE singleton = 1", [.text(name)])
        }
        value.withLock { $0 = name }
        return name
    }
}
