import FoundationEssentials

/// The bytes waiting to be written to a line peer: appended a line at a time, written as far
/// as the socket takes, and the buffer given back once a large burst is out. One for every line
/// peer — a client's answers in `ConnectionMachine`, a device's calls on its hub link — so that
/// what is held, and when it is let go, is decided once.
struct LineOutbox {
    private var bytes: [UInt8] = []
    private var offset = 0

    /// Bytes appended and not yet written.
    var pendingCount: Int { bytes.count - offset }

    mutating func append(_ line: some ContiguousBytes) {
        line.withUnsafeBytes { bytes.append(contentsOf: $0) }
    }

    /// What waits to be written.
    func withPending<T>(_ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        try bytes.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[offset...])) }
    }

    /// The transport wrote `count` bytes of what was pending; true when nothing is left.
    mutating func wrote(_ count: Int) -> Bool {
        offset = min(bytes.count, offset + count)
        guard offset == bytes.count else { return false }
        // Keep a small buffer for the next lines; give a large one back.
        bytes.removeAll(keepingCapacity: bytes.capacity <= 1 << 20)
        offset = 0
        return true
    }

    /// Drops what is pending (the peer is gone) and its buffer.
    mutating func discard() {
        bytes = []
        offset = 0
    }
}
