import FoundationEssentials
import Protocol

/// What committed changes announce, as a value: the sessions they ended (a hub tells the
/// machines those were bound to) and what the accounts' event logs record of them. A call's
/// announcements come from its `AuditScope`; work outside any call (the hourly maintenance)
/// collects its own with `AuditScope.collecting`, and both hand them to `Services.announce`,
/// the one place that pushes them.
struct Announcements: Sendable, Equatable {
    var endedSessions: [EndedSession] = []
    /// Events the changes' own transactions appended to the accounts' logs: committed with
    /// them, to be handed on.
    var events: [AccountEvent] = []
    /// Notices of changes made where the logs are not (another database): appended after.
    var notices: [AccountNotice] = []

    var isEmpty: Bool { endedSessions.isEmpty && events.isEmpty && notices.isEmpty }
}

/// An event appended to an account's log.
struct AccountEvent: Sendable, Equatable {
    let account: String
    let event: SyncEvent
}
