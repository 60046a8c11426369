import Protocol

/// The accounts that take a finger as their second sign-in step on this machine, and whose
/// finger (the local user's fprintd name): a machine fact, kept here rather than in the account,
/// because the finger is only on this machine. An account that is gone leaves a row nothing uses.
struct FingerprintSteps: Sendable {
    let store: Store

    func user(account: String) async throws -> String? {
        try await store.read { database in
            try database.queryOne("SELECT user FROM fingerprint_steps WHERE account_id = ?", [.text(account)]) { $0.text(0) }
        }
    }

    /// The accounts whose second step is a finger on this machine.
    func accounts() async throws -> Set<String> {
        Set(try await store.read { try $0.query("SELECT account_id FROM fingerprint_steps") { $0.text(0) } })
    }

    /// On a device, forwarding `auth.login` to the hub: the accounts whose second step is a
    /// finger here, for the hub's `Login` to decide the second step by.
    func forwarding(_ caller: ForwardedCaller) async throws -> ForwardedCaller {
        var caller = caller
        caller.fingerprintAccounts = try await accounts().sorted()
        return caller
    }

    func set(account: String, user: String) async throws {
        try await store.transaction { database in
            try database.execute("INSERT INTO fingerprint_steps (account_id, user) VALUES (?, ?) ON CONFLICT (account_id) DO UPDATE SET user = excluded.user",
                                 [.text(account), .text(user)])
        }
    }

    func remove(account: String) async throws {
        try await store.transaction { try $0.execute("DELETE FROM fingerprint_steps WHERE account_id = ?", [.text(account)]) }
    }
}
