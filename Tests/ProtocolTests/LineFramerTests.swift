import Protocol
import Testing

@Suite("Line framing")
struct LineFramerTests {
    private func lines(_ chunks: [String], limit: Int = 16) throws -> [String] {
        var framer = LineFramer(maxLineLength: limit)
        var out: [String] = []
        for chunk in chunks {
            framer.append(Array(chunk.utf8))
            while let line = try framer.nextLine() { out.append(String(decoding: line, as: UTF8.self)) }
        }
        return out
    }

    @Test("lines split across and within chunks", arguments: [
        (["a\nb\n"], ["a", "b"]),
        (["a", "b", "\nc"], ["ab"]),
        (["abc\r\n", "\r\n", "\n", "d\n"], ["abc", "d"]),
        (["\r\n"], []),
        (["x\ry\n"], ["x\ry"]),
        (["1234567890123456\n"], ["1234567890123456"]),
    ])
    func splitting(chunks: [String], expected: [String]) throws {
        #expect(try lines(chunks) == expected)
    }

    @Test("a line over the limit throws, with or without its newline, and keeps throwing")
    func overLimit() throws {
        #expect(throws: LineFramer.LineTooLong.self) { try lines(["12345678901234567\n"]) }
        #expect(throws: LineFramer.LineTooLong.self) { try lines(["1234567890", "1234567"]) }
        var framer = LineFramer(maxLineLength: 4)
        framer.append(Array("123456\nok\n".utf8))
        #expect(throws: LineFramer.LineTooLong.self) { try framer.nextLine() }
        #expect(throws: LineFramer.LineTooLong.self) { try framer.nextLine() }
    }

    @Test("a partial line waits for more bytes and is not lost by compaction")
    func compaction() throws {
        var framer = LineFramer(maxLineLength: 1 << 20)
        var received: [String] = []
        for index in 0..<1000 {
            framer.append(Array("line-\(index)\nparti".utf8))
            while let line = try framer.nextLine() { received.append(String(decoding: line, as: UTF8.self)) }
            framer.append(Array("al-\(index)\n".utf8))
            while let line = try framer.nextLine() { received.append(String(decoding: line, as: UTF8.self)) }
        }
        #expect(received.count == 2000)
        #expect(received[1] == "partial-0")
        #expect(received.last == "partial-999")
        #expect(framer.bufferedByteCount == 0)
    }

    /// The newline is looked for eight bytes at a time: every line length from 1 to 40, one
    /// after another in one buffer (so each newline falls at every offset of a word), with
    /// bytes beside it that differ from it in one bit.
    @Test("a newline is found wherever it falls in an eight-byte word")
    func newlineAtEveryOffset() throws {
        let lines = (1...40).map { length in String((0..<length).map { Character(UnicodeScalar([0x0B, 0x0E, 0x2A, 0x8A][$0 % 4] as UInt8)) }) }
        var framer = LineFramer(maxLineLength: 64)
        framer.append(Array(lines.joined(separator: "\n").utf8) + [UInt8(ascii: "\n")])
        var read: [[UInt8]] = []
        while let line = try framer.nextLine() { read.append(line) }
        #expect(read == lines.map { Array($0.utf8) })
    }
}
