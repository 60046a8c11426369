import Protocol

/// Where a machine's presence goes: the accounts it reads where it is for, and its reports.
/// On a standalone authd or a hub, its own book (for the accounts its local users signed in to
/// here); on a device, the hub over the link (for the accounts the machine holds).
protocol PresenceHome: Sendable {
    func accounts() async throws -> LinkPresenceAccounts.Result
    func report(_ params: LinkPresenceReport.Params) async throws -> Int
}

extension PresenceBook {
    /// What a machine holding `held` (accounts and the local users there who signed in) matches
    /// and reports for.
    func machineAccounts(_ held: [(account: String, users: [UInt32])]) async throws -> LinkPresenceAccounts.Result {
        var accounts: [LinkPresenceAccounts.Account] = []
        for (account, users) in held {
            accounts.append(.init(account: account, users: users, settings: try await settings(of: account), hotspots: try await hotspots(of: account)))
        }
        // Three reports within the expiry: one lost report does not make a person vanish.
        return LinkPresenceAccounts.Result(accounts: accounts, refresh: max(config.current.presenceExpirySeconds / 3, 20))
    }
}

/// This machine's own accounts, in its own book.
struct LocalPresenceHome: PresenceHome {
    let book: PresenceBook
    let directory: any LinkedMachines

    func accounts() async throws -> LinkPresenceAccounts.Result {
        try await book.machineAccounts(directory.accounts(heldBy: nil))
    }

    func report(_ params: LinkPresenceReport.Params) async throws -> Int {
        try await book.report(params.account, hotspot: params.hotspot, entered: params.entered, group: params.group, pinned: params.pinned)
    }
}

/// A device's accounts, at its hub.
struct HubPresenceHome: PresenceHome {
    let link: HubLink

    func accounts() async throws -> LinkPresenceAccounts.Result {
        try await link.call(LinkPresenceAccounts.self, NoParams())
    }

    func report(_ params: LinkPresenceReport.Params) async throws -> Int {
        try await link.call(LinkPresenceReport.self, params).told
    }
}
