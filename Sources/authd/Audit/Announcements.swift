import FoundationEssentials

/// What committed changes announce, as a value: the sessions they ended (a hub tells the
/// machines those were bound to) and what the accounts' event logs record of them. A call's
/// announcements come from its `AuditScope`; work outside any call (the hourly maintenance)
/// collects its own with `AuditScope.collecting`, and both hand them to `Services.announce`,
/// the one place that pushes them.
struct Announcements: Sendable, Equatable {
    var endedSessions: [EndedSession] = []
    var notices: [AccountNotice] = []

    var isEmpty: Bool { endedSessions.isEmpty && notices.isEmpty }
}
