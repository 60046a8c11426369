import Protocol

/// One answer's worth of events being filled (`sync.events`, `sync.history`,
/// `link.sync.resume`): at most `count` events and `bytes` of them, encoded, so that the answer
/// is a line every device takes (``SyncLimits/pageBytes``). The first event of an answer always
/// goes on, whatever its size, so that a reader always moves on; a page that stops early says
/// `more` and the reader goes on from its last position.
struct SyncPage: Sendable, Equatable {
    let count: Int
    let bytes: Int
    /// Whether this page must take its first event whatever its size: false for a later
    /// account's page of one `link.sync.resume` answer, which an earlier one already moved on.
    let takesOne: Bool
    private(set) var taken = 0
    private(set) var used = 0

    init(count: Int, bytes: Int = SyncLimits.pageBytes, takesOne: Bool = true) {
        self.count = count
        self.bytes = bytes
        self.takesOne = takesOne
    }

    /// Whether an event of `size` encoded bytes goes on the page; counted when it does.
    mutating func admit(_ size: Int) -> Bool {
        // Each event after the first adds a comma between it and the one before.
        let cost = size + (taken > 0 ? 1 : 0)
        guard taken < count, used + cost <= bytes || (taken == 0 && takesOne) else { return false }
        taken += 1
        used += cost
        return true
    }
}
