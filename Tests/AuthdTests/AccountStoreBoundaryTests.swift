import Foundation
import Testing

/// The account store is the only code with a statement on an account-owned table (DESIGN §2, §8):
/// a capability that names one has gone around the store's interfaces, and the next engine or the
/// next change of the table would miss it.
@Suite("Account store boundary")
struct AccountStoreBoundaryTests {
    /// What the account owns, table by table (DESIGN §8): the rest is the machine's.
    static let accountTables = [
        "accounts", "sessions", "devices", "login_flows", "otp_flows", "sms_sends", "passkey_flows", "account_passkeys",
        "federated_identities", "used_id_tokens", "device_e2ee_keys", "sync_heads", "sync_events", "sync_read_markers", "sync_cursors",
        "presence_friends", "presence_blocks", "presence_groups", "presence_members", "presence_hotspots", "presence_settings",
        "presence_places", "presence_shares",
    ]
    /// Where statements on them may be: the store, and the schema's migrations on each engine.
    static let allowed = ["AccountStore/", "Store/Migrations.swift", "Store/PostgreSQLSchema.swift"]

    static let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sources/authd")

    /// Every statement naming an account table, by file (relative to Sources/authd) and table.
    static func statements() throws -> [(file: String, table: String)] {
        let pattern = try Regex("\\b(FROM|INTO|UPDATE|JOIN|TABLE)\\s+(" + accountTables.joined(separator: "|") + ")\\b")
        let files = try #require(FileManager.default.enumerator(atPath: sources.path)).compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }
        return try files.sorted().flatMap { file in
            let text = try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8)
            return text.matches(of: pattern).map { (file, String(text[$0.range].split(whereSeparator: \.isWhitespace).last ?? "")) }
        }
    }

    @Test("no statement outside the account store names an account-owned table, and the store's own statements are found")
    func onlyTheStoreNamesAccountTables() throws {
        let found = try Self.statements()
        let outside = found.filter { statement in !Self.allowed.contains { statement.file.hasPrefix($0) } }
        #expect(outside.isEmpty, "statements on account tables outside the account store: \(outside.map { "\($0.file): \($0.table)" })")
        // The scan sees what it looks for: every account table is named inside the store.
        let inside = Set(found.filter { $0.file.hasPrefix("AccountStore/") }.map(\.table))
        #expect(inside == Set(Self.accountTables), "tables the scan missed in AccountStore/: \(Set(Self.accountTables).subtracting(inside).sorted())")
    }
}
