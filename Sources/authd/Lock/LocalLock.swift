import FoundationEssentials
import OpenSSLCrypto
import Protocol
import Synchronization

/// The lock of each local user (uid), like a banking app's: while locked, every method that
/// issues a token or releases a secret answers `session.locked`. A user is lockable once an
/// account signed in from it (the remembered account) and that account can open the lock
/// again (`UnlockMethods`: its password, or a code sent to its number); a lock nothing could
/// open is never armed, by `lock` or by idleness. The lock is kept in the store, so neither a
/// restart nor kill -9 opens it; activity is kept in memory and written at most once a minute,
/// so guarded calls cost no disk write.
final class LocalLock: Sendable {
    let store: Store
    let directory: any MachineAccounts
    let config: ConfigHolder
    let now: @Sendable () -> Date

    private struct Entry {
        var account: String?
        var locked: Bool
        var activeAt: Int64
        var persistedActiveAt: Int64
    }
    private let entries = Mutex<[UInt32: Entry]>([:])

    /// Activity is written back when the stored value is older than this.
    static let activityWriteInterval: Int64 = 60

    init(store: Store, directory: any MachineAccounts, config: ConfigHolder, now: @escaping @Sendable () -> Date) {
        self.store = store
        self.directory = directory
        self.config = config
        self.now = now
    }

    private var seconds: Int64 { Int64(now().timeIntervalSince1970) }

    private func entry(_ uid: UInt32) async throws -> Entry {
        if let cached = entries.withLock({ $0[uid] }) { return cached }
        let stored = try await store.read { database in
            try database.queryOne("SELECT account_id, locked, active_at FROM local_users WHERE uid = ?", [.integer(Int64(uid))]) {
                Entry(account: $0.optionalText(0), locked: $0.int(1) != 0, activeAt: $0.int64(2), persistedActiveAt: $0.int64(2))
            }
        } ?? Entry(account: nil, locked: false, activeAt: 0, persistedActiveAt: 0)
        return entries.withLock { entries in
            if let existing = entries[uid] { return existing }
            entries[uid] = stored
            return stored
        }
    }

    /// Whether `entry` has been idle too long.
    private func idleExpired(_ entry: Entry, at now: Int64) -> Bool {
        let idle = Int64(config.current.lockIdleSeconds)
        return idle > 0 && now - entry.activeAt >= idle
    }

    /// Whether `entry` is locked now: locked explicitly, or idle too long while something could
    /// open the lock again (asked only once the idle time is up, so a guarded call costs no
    /// lookup before then).
    private func holds(_ entry: Entry, uid: UInt32, at now: Int64) async throws -> Bool {
        guard let account = entry.account else { return false }
        if entry.locked { return true }
        guard idleExpired(entry, at: now) else { return false }
        return try await unlockMethods(uid, account: account).canOpen
    }

    /// What could open `uid`'s lock for `account` now: the machine's fingerprint gate and the
    /// account's credentials.
    func unlockMethods(_ uid: UInt32, account: String) async throws -> UnlockMethods {
        let gate = try await store.read { database in try BiometricService.settings(in: database, uid).gate }
        return UnlockMethods(gate: gate, credentials: try await directory.lockCredentials(account: account))
    }

    /// Admits a guarded call: throws `session.locked`, or counts the call as activity (also
    /// past the idle time when nothing could open the lock: it does not arm then).
    func admit(_ uid: UInt32) async throws {
        let current = try await entry(uid)
        guard let account = current.account else { return }
        let now = seconds
        if try await holds(current, uid: uid, at: now) {
            if !current.locked { try await setLocked(uid, true) }  // idle: make it stick
            // What opens it, for the message; a device whose hub is away still answers
            // session.locked (without the list), never the hub's failure.
            throw LockFailure.locked(methods: (try? await unlockMethods(uid, account: account).names) ?? [])
        }
        let persist = entries.withLock { entries -> Bool in
            guard var entry = entries[uid] else { return false }
            entry.activeAt = now
            let due = now - entry.persistedActiveAt >= Self.activityWriteInterval
            if due { entry.persistedActiveAt = now }
            entries[uid] = entry
            return due
        }
        if persist {
            try await store.transaction(durability: .relaxed) { database in
                try database.execute("UPDATE local_users SET active_at = ? WHERE uid = ?", [.integer(now), .integer(Int64(uid))])
            }
        }
    }

    func status(_ uid: UInt32) async throws -> LockStatus.Result {
        let current = try await entry(uid)
        var methods: [String] = []
        if let account = current.account { methods = try await unlockMethods(uid, account: account).names }
        return .init(locked: try await holds(current, uid: uid, at: seconds), account: current.account,
                     idleSeconds: config.current.lockIdleSeconds, unlockMethods: methods)
    }

    /// The remembered account, whose password, code or finger unlocks, if any.
    func account(_ uid: UInt32) async throws -> String? { try await entry(uid).account }

    /// Locks now; refused when there is no remembered account, or nothing could open the lock
    /// again.
    func lock(_ uid: UInt32) async throws -> LockState {
        guard let account = try await entry(uid).account else { throw LockFailure.nothingToLockWith }
        guard try await unlockMethods(uid, account: account).canOpen else { throw LockFailure.noUnlockMethod }
        try await setLocked(uid, true)
        return LockState(locked: true, account: account)
    }

    /// Opens the lock after a proof (password, code or finger).
    func unlocked(_ uid: UInt32) async throws {
        try await setLocked(uid, false)
    }

    private func setLocked(_ uid: UInt32, _ locked: Bool) async throws {
        let now = seconds
        try await store.transaction { database in
            try database.execute("UPDATE local_users SET locked = ?, active_at = ? WHERE uid = ?",
                                 [.integer(locked ? 1 : 0), .integer(now), .integer(Int64(uid))])
            try AuditScope.record(in: database, ["uid": .integer(Int64(uid)), "locked": .bool(locked)])
        }
        entries.withLock {
            $0[uid]?.locked = locked
            $0[uid]?.activeAt = now
            $0[uid]?.persistedActiveAt = now
        }
    }

    /// What a sign-in proved about the person at this local user.
    enum Proof: Sendable { case password, fingerprint, code, passkey }

    /// Remembers `account` as the one this local user signed in to last, on `device` (the
    /// session's device id), and opens the lock: the sign-in was a proof. While locked, only the
    /// remembered account's own password or finger counts: a sign-in to another account (or by
    /// SMS code, or by a passkey, whose verification another authenticator may have made)
    /// changes nothing here, or anyone at the keyboard could unlock with an account of their
    /// own. The same holds while fingerprints are cut off: the cut-off lifts with the remembered
    /// account's own password, which a sign-in to it also proves; another account's proves
    /// nothing (anyone at the keyboard could register one, and reset the count of fingers tried
    /// at this user's `sudo` as often as they liked). Unless the remembered account can no
    /// longer prove anything here (deactivated, this machine removed from it, neither a password
    /// nor a number for a code): then the new one is remembered, and its password lifts it.
    func remember(_ uid: UInt32, account: String, device: String, proof: Proof) async throws {
        let current = try await entry(uid)
        if current.account != account || proof == .code || proof == .passkey {
            if try await holds(current, uid: uid, at: seconds) { return }
            if let remembered = current.account, try await store.read({ database in try BiometricService.settings(in: database, uid).gate.cutOff }),
               await canStillProve(remembered) { return }
        }
        let passwordProved = proof == .password && current.account == account
        let now = seconds
        let check: SQLValue = try await directory.credentialStamp(account: account).map(SQLValue.blob) ?? .null
        try await store.transaction { database in
            try database.execute(
                """
                INSERT INTO local_users (uid, account_id, device_id, credential_check, locked, active_at) VALUES (?, ?, ?, ?, 0, ?)
                ON CONFLICT (uid) DO UPDATE SET account_id = excluded.account_id, device_id = excluded.device_id,
                    credential_check = excluded.credential_check, locked = 0, active_at = excluded.active_at
                """, [.integer(Int64(uid)), .text(account), .text(device), check, .integer(now)])
            if passwordProved {
                try database.execute("UPDATE local_users SET biometric_failures = 0 WHERE uid = ?", [.integer(Int64(uid))])
            }
        }
        entries.withLock { $0[uid] = Entry(account: account, locked: false, activeAt: now, persistedActiveAt: now) }
    }

    /// Whether `account` could still lift a fingerprint cut-off: active, with a password or a
    /// number a code could go to (what could open a lock, the finger aside). While that cannot
    /// be known (the hub away), it could.
    private func canStillProve(_ account: String) async -> Bool {
        do {
            guard try await directory.account(id: account).deactivatedAt == nil else { return false }
            return UnlockMethods(gate: BiometricGate(), credentials: try await directory.lockCredentials(account: account)).canOpen
        } catch is HubLinkFailure {
            return true
        } catch {
            return false
        }
    }

    /// The remembered sign-in of `uid`, if its credentials still hold: the account is active and
    /// not locked, its password unchanged since, and the device not removed (the directory
    /// decides; an account that is gone simply does not hold).
    func rememberedSignIn(_ uid: UInt32) async throws -> (account: String, device: String, stamp: [UInt8])? {
        let remembered = try await store.read { database in
            try database.queryOne("SELECT account_id, device_id, credential_check FROM local_users WHERE uid = ?", [.integer(Int64(uid))]) {
                row -> (String, String, [UInt8])? in
                guard let account = row.optionalText(0), let device = row.optionalText(1), let check = row.optionalBlob(2) else { return nil }
                return (account, device, check)
            } ?? nil
        }
        guard let (account, device, check) = remembered,
              try await directory.rememberedSignInHolds(account: account, deviceID: device, stamp: check) else { return nil }
        return (account, device, check)
    }

}
