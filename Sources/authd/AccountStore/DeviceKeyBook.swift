import JOSE

import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// At a hub: every linked machine's key-agreement key as the machine signed it, and each
/// account's setting — the only code with statements on `device_e2ee_keys` and `accounts.e2ee`.
/// The hub keeps these keys but cannot forge them: each machine checks every statement against
/// the device id itself. What the hub decides is only which devices an account has.
struct DeviceKeyBook: Sendable {
    let store: Store
    let now: @Sendable () -> Date

    /// A machine's published key, as it signed it, and whether the machine is still the account's.
    struct Key: Sendable, Equatable {
        let deviceID: String
        let name: String
        let spki: [UInt8]
        let statement: String
        /// Removed from the account: no longer a recipient, still the signer of what it sent before.
        let revoked: Bool
    }

    /// Keeps `machine`'s key when its statement is signed by the key the link authenticated.
    func publish(machine: DeviceID, spki: [UInt8], statement: String) async throws {
        let published = PublishedDeviceKey(deviceID: machine.description, signingKeySPKI: spki, statement: statement)
        _ = try published.verified()
        let now = Int64(now().timeIntervalSince1970)
        try await store.transaction { database in
            try database.execute(
                """
                INSERT INTO device_e2ee_keys (device_id, spki, statement, published_at) VALUES (?, ?, ?, ?)
                ON CONFLICT (device_id) DO UPDATE SET spki = excluded.spki, statement = excluded.statement, published_at = excluded.published_at
                WHERE device_e2ee_keys.statement != excluded.statement
                """, [.text(machine.description), .blob(spki), .text(statement), .integer(now)])
        }
    }

    /// The account's setting and its machines' published keys, removed ones included (they
    /// signed what they sent before).
    func keys(account: String) async throws -> (mode: E2EEMode, keys: [Key]) {
        try await store.read { database in
            let mode = try Self.mode(account: account, in: database)
            let devices = try database.query(
                """
                SELECT k.device_id, d.name, k.spki, k.statement, d.revoked_at IS NOT NULL
                FROM devices d JOIN device_e2ee_keys k ON d.device_key = ? || k.device_id
                WHERE d.account_id = ? ORDER BY d.first_seen, k.device_id
                """, [.text(DeviceIdentity.machineKeyPrefix), .text(account)]) {
                Key(deviceID: $0.text(0), name: $0.text(1), spki: $0.blob(2), statement: $0.text(3), revoked: $0.int(4) != 0)
            }
            return (mode, devices)
        }
    }

    /// What a send to `account` must be: encrypted or not, and to which devices (those not
    /// removed, with a published key); with the key each device signs with.
    func recipients(account: String) async throws -> (mode: E2EEMode, devices: [String: [UInt8]]) {
        try await store.readOnly { database in
            let mode = try Self.mode(account: account, in: database)
            var devices: [String: [UInt8]] = [:]
            for (id, spki) in try database.query(
                """
                SELECT k.device_id, k.spki FROM devices d JOIN device_e2ee_keys k ON d.device_key = ? || k.device_id
                WHERE d.account_id = ? AND d.revoked_at IS NULL
                """, [.text(DeviceIdentity.machineKeyPrefix), .text(account)], row: { ($0.text(0), $0.blob(1)) }) {
                devices[id] = spki
            }
            return (mode, devices)
        }
    }

    private static func mode(account: String, in database: Database) throws -> E2EEMode {
        guard let text = try database.queryOne("SELECT e2ee FROM accounts WHERE id = ?", [.text(account)], row: { $0.text(0) }) else {
            throw SyncFailure.unknownAccount
        }
        return E2EEMode(rawValue: text) ?? .required
    }

    /// Sets the account's setting (an admin's call, in the admin's transaction).
    static func setMode(_ mode: E2EEMode, account: String, in database: Database) throws {
        try database.execute("UPDATE accounts SET e2ee = ? WHERE id = ?", [.text(mode.rawValue), .text(account)])
    }
}
