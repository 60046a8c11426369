import Dispatch
import Synchronization

/// When a flood of connections has ebbed, as a pure rule: once at least `minimumGone` fewer
/// connections are open than the most since memory was last given back, and at most half of
/// that most are left, the memory they held is given back; and once more when the last
/// connection of such a flood has closed. Connections that come and go a few at a time never
/// trigger it; a flood triggers it a few times as it drains (at half, a quarter, …), which
/// bounds what stays to what `minimumGone` connections held.
struct FloodEbb: Sendable, Equatable {
    var minimumGone = 32
    /// The most connections open since memory was last given back.
    private(set) var peak = 0
    /// Memory went back while connections of the flood were still open.
    private(set) var draining = false

    /// A connection closed and `remaining` are open: whether to give memory back now.
    mutating func closed(remaining: Int) -> Bool {
        peak = max(peak, remaining + 1)
        if peak - remaining >= minimumGone && remaining <= peak / 2 {
            peak = remaining
            draining = remaining > 0
            return true
        }
        if remaining == 0 && draining {
            draining = false
            peak = 0
            return true
        }
        return false
    }
}

/// Gives the memory of closed connections back to the system. Their buffers are freed when
/// they close, but glibc keeps freed memory in its arenas (one per thread that allocated, up
/// to eight per core) for the next allocation, so after a flood the daemon's resident memory
/// stayed at the flood's peak. Large blocks are mapped on their own from the start
/// (`Syscalls.mapLargeAllocations`), and when a flood ebbs (`FloodEbb`) the arenas are
/// trimmed, off the event loops and at most one trim at a time.
final class MemoryReturn: Sendable {
    static let shared = MemoryReturn()
    /// The size from which malloc maps a block on its own: above a connection's usual line
    /// (a few KiB), below the 1 MiB a line may reach.
    static let mappedFrom = 128 << 10

    private let ebb = Mutex(FloodEbb())
    private let trimming = Atomic<Bool>(false)
    /// How long a trim waits after it is asked for, so that one trim serves a flood's closes.
    private let delay: DispatchTimeInterval

    init(delay: DispatchTimeInterval = .milliseconds(500)) {
        self.delay = delay
    }

    /// How much free memory an arena keeps at its top before it gives the rest back. At glibc's
    /// 128 KiB, SQLite's statement journal (a 64 KiB block, taken and freed by each write
    /// statement of a transaction) took a hub's arena over and back under it at every event: an
    /// `madvise` each time, whose TLB flush interrupts every core, and page faults to fill the
    /// pages again — 6% of a hub's CPU under sync load.
    static let keptFreeTop = 1 << 20

    /// At start, before connections come: large blocks are mapped on their own, and an arena
    /// keeps a little free memory at its top.
    static func configureAllocator() {
        Syscalls.mapLargeAllocations(from: mappedFrom)
        Syscalls.keepFreeTop(upTo: keptFreeTop)
    }

    /// A connection closed and `remaining` are open.
    func connectionClosed(remaining: Int) {
        guard ebb.withLock({ $0.closed(remaining: remaining) }) else { return }
        guard trimming.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + delay) { [self] in
            Syscalls.returnFreeMemory()
            trimming.store(false, ordering: .releasing)
        }
    }
}
