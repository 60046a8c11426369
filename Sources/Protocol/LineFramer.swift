/// Splits a byte stream into `\n`-terminated lines, enforcing a maximum line length.
///
/// A pure value type: feed it bytes with ``append(_:)``, take complete lines with
/// ``nextLine()``. A trailing `\r` is dropped (so `socat CRLF` clients work) and empty lines are
/// skipped. Once a line over the limit is seen the framer throws on every call: the caller must
/// report the error and close, because it cannot know where the next request starts.
public struct LineFramer: Sendable {
    /// The protocol's limit: 1 MiB per line, newline excluded.
    public static let defaultMaxLineLength = 1 << 20

    /// May be raised while lines are buffered (never lowered: a line taken stays taken).
    public var maxLineLength: Int
    /// The most an empty framer keeps allocated for the next lines.
    static let retainedCapacity = 64 << 10
    private var buffer: [UInt8] = []
    private var start = 0
    private var scanned = 0
    private var overflowed = false

    public init(maxLineLength: Int = LineFramer.defaultMaxLineLength) {
        precondition(maxLineLength > 0)
        self.maxLineLength = maxLineLength
    }

    public struct LineTooLong: Error, Equatable, Sendable {}

    /// Bytes received but not yet returned as a line.
    public var bufferedByteCount: Int { buffer.count - start }

    public mutating func append(_ bytes: some Collection<UInt8>) {
        if start > 0 && start >= buffer.count / 2 {
            buffer.removeFirst(start)
            scanned -= start
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next complete line without its terminator, or `nil` when more bytes are needed.
    public mutating func nextLine() throws(LineTooLong) -> [UInt8]? {
        while true {
            if overflowed { throw LineTooLong() }
            guard let newline = Self.newline(in: buffer, from: scanned) else {
                if start == buffer.count {
                    // Everything was returned: keep a small buffer, give a large one (a long
                    // line's) back rather than holding it for the connection's lifetime.
                    buffer.removeAll(keepingCapacity: buffer.capacity <= Self.retainedCapacity)
                    start = 0
                    scanned = 0
                    return nil
                }
                scanned = buffer.count
                if buffer.count - start > maxLineLength {
                    overflowed = true
                    throw LineTooLong()
                }
                return nil
            }
            var end = newline
            if end > start && buffer[end - 1] == UInt8(ascii: "\r") { end -= 1 }
            let lineStart = start
            start = newline + 1
            scanned = start
            if end - lineStart > maxLineLength {
                overflowed = true
                throw LineTooLong()
            }
            if end == lineStart { continue }  // blank line
            return Array(buffer[lineStart..<end])
        }
    }

    /// Where the first `\n` at or after `start` is, looking at eight bytes at a time (with a
    /// byte loop, framing a 724-byte `hello` answer took 8,200 instructions).
    private static func newline(in buffer: [UInt8], from start: Int) -> Int? {
        buffer.withUnsafeBufferPointer { bytes in
            var index = start
            while index + 8 <= bytes.count {
                let found = ByteWords.equal(to: UInt8(ascii: "\n"), in: ByteWords.load(bytes, at: index))
                if found != 0 { return index + found.trailingZeroBitCount / 8 }
                index += 8
            }
            return bytes[index...].firstIndex(of: UInt8(ascii: "\n"))
        }
    }
}
