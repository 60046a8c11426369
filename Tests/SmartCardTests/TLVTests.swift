import SmartCard
import Testing

@Suite("BER-TLV")
struct TLVTests {
    // MARK: Tags and lengths

    @Test("one-, two-, three- and four-byte tags", arguments: [
        (hex("80 02 AA BB"), 0x80, hex("AA BB")),
        (hex("5F 20 01 41"), 0x5F20, hex("41")),
        (hex("7F 49 00"), 0x7F49, []),
        (hex("BF 81 01 03 9A 01 03"), 0xBF8101, hex("9A 01 03")),
        (hex("DF 81 82 03 01 AA"), 0xDF818203, hex("AA")),
    ] as [([UInt8], UInt32, [UInt8])])
    func tags(bytes: [UInt8], tag: UInt32, value: [UInt8]) throws {
        #expect(try TLV.parse(bytes) == [TLV(tag: tag, value: value)])
        #expect(TLV.encode(tag, value) == bytes)
    }

    @Test("short and long-form lengths", arguments: [
        (hex("04 00"), 0),
        (hex("04 7F"), 0x7F),
        (hex("04 81 80"), 0x80),
        (hex("04 81 FF"), 0xFF),
        (hex("04 82 01 00"), 0x100),
        (hex("04 82 01 2C"), 300),
        (hex("04 83 01 00 00"), 0x10000),
    ] as [([UInt8], Int)])
    func lengths(header: [UInt8], length: Int) throws {
        let value = pattern(length)
        let objects = try TLV.parse(header + value)
        #expect(objects == [TLV(tag: 0x04, value: value)])
        // The encoder picks the same, shortest form.
        #expect(Array(TLV.encode(0x04, value).prefix(header.count)) == header)
    }

    @Test("a non-minimal long-form length still parses")
    func nonMinimalLength() throws {
        #expect(try TLV.parse(hex("80 82 00 02 AA BB")) == [TLV(tag: 0x80, value: [0xAA, 0xBB])])
    }

    @Test("constructed tags", arguments: [
        (0x7C, true), (0x70, true), (0xA0, true), (0xBF8101, true), (0x7F49, true),
        (0x80, false), (0x5F20, false), (0x9A, false), (0xDF8101, false),
    ] as [(UInt32, Bool)])
    func constructed(tag: UInt32, constructed: Bool) {
        #expect(TLV(tag: tag, value: []).isConstructed == constructed)
    }

    // MARK: Nesting, lookup, sequences

    /// The shape of the card's retry-counter answer: 70 { BF8101 { A0 { 9A max, 9B left } } }.
    static let retryCounter = hex("70 0C BF 81 01 08 A0 06 9A 01 03 9B 01 02")

    @Test("nested constructed objects parse and `child` walks them")
    func nested() throws {
        let outer = try #require(TLV.parse(Self.retryCounter).first)
        #expect(outer.tag == 0x70)
        #expect(outer.isConstructed)
        let counters = try outer.child(0xBF8101).child(0xA0)
        #expect(try counters.child(0x9A).value == [0x03])
        #expect(try counters.child(0x9B).value == [0x02])
        #expect(try TLV.parse(counters.value).map(\.tag) == [0x9A, 0x9B])
    }

    @Test("`child` throws for a missing tag and for a value that is not TLV")
    func missingChild() throws {
        let outer = try #require(TLV.parse(Self.retryCounter).first)
        #expect(throws: CardDataError.self) { try outer.child(0x9A) }
        #expect(throws: CardDataError.self) { try TLV(tag: 0x7C, value: [0x80, 0x05, 0x01]).child(0x80) }
    }

    @Test("`find` returns the first object with the tag, or nil")
    func find() throws {
        let bytes = hex("80 01 01 81 01 02 80 01 03")
        #expect(try TLV.find(0x80, in: bytes)?.value == [0x01])
        #expect(try TLV.find(0x81, in: bytes)?.value == [0x02])
        #expect(try TLV.find(0x82, in: bytes) == nil)
        #expect(try TLV.find(0x80, in: []) == nil)
        // An ArraySlice is a Collection too; only the slice is searched.
        #expect(try TLV.find(0x80, in: bytes[3...])?.value == [0x03])
        #expect(throws: CardDataError.self) { try TLV.find(0x80, in: hex("80 01 01 81 05 02")) }
    }

    @Test("a sequence of objects with 00 and FF padding between them")
    func padding() throws {
        let objects = try TLV.parse(hex("00 80 01 AA FF FF 81 00 00"))
        #expect(objects == [TLV(tag: 0x80, value: [0xAA]), TLV(tag: 0x81, value: [])])
    }

    @Test("encode then parse gives the object back", arguments: [0x80, 0x5F20, 0xBF8101, 0x7C] as [UInt32], [0, 1, 127, 128, 255, 256, 300, 0xFFFF, 0x10000])
    func roundTrip(tag: UInt32, length: Int) throws {
        let object = TLV(tag: tag, value: pattern(length, from: 0x30))
        let encoded = object.encoded()
        #expect(try TLV.parse(encoded) == [object])
        // Tag, length and value and nothing else.
        let tagBytes = tag > 0xFFFF ? 3 : tag > 0xFF ? 2 : 1
        let lengthBytes = length < 0x80 ? 1 : length < 0x100 ? 2 : length < 0x10000 ? 3 : 4
        #expect(encoded.count == tagBytes + lengthBytes + length)
    }

    @Test("a 300-byte value nested in a constructed object round-trips")
    func nestedRoundTrip() throws {
        let inner = TLV(tag: 0x87, value: pattern(300))
        let outer = TLV(tag: 0x7C, value: inner.encoded() + TLV.encode(0x8E, pattern(8)))
        let parsed = try #require(TLV.parse(outer.encoded()).first)
        #expect(parsed == outer)
        #expect(try parsed.child(0x87).value == pattern(300))
        #expect(try parsed.child(0x8E).value == pattern(8))
    }

    // MARK: Hostile input

    static let hostile: [[UInt8]] = [
        // Length beyond the buffer.
        hex("80 05 01 02"),
        hex("80 81 80") + pattern(0x7F),
        hex("80 82 01 2C") + pattern(299),
        hex("80 83 FF FF FF 00"),
        // A good object, then one that runs past the end.
        hex("80 01 AA 81 02 BB"),
        // Indefinite length (80) and more length bytes than allowed.
        hex("7C 80 80 01 AA 00 00"),
        hex("80 85 00 00 00 00 01 AA"),
        hex("80 88 00 00 00 00 00 00 00 01 AA"),
        hex("80 FF"),
        // Truncated tags, and tags longer than the four bytes a UInt32 holds.
        hex("5F"),
        hex("BF 81"),
        hex("BF 81 81"),
        hex("DF 81 81 81 01 01 AA"),
        hex("DF 81 81 81 81 01 00"),
        // Truncated lengths: missing, or fewer length bytes than announced.
        hex("80"),
        hex("5F 20"),
        hex("80 81"),
        hex("80 82 01"),
        hex("80 83 00 01"),
    ]

    @Test("hostile input throws CardDataError", arguments: hostile)
    func hostileInput(bytes: [UInt8]) {
        #expect(throws: CardDataError.self) { try TLV.parse(bytes) }
    }

    @Test("a declared length of 4 GiB throws at once, allocating nothing")
    func hugeLength() {
        // If the parser trusted the length it would try to copy 4 GiB out of five bytes: a trap
        // or an allocation failure, either of which ends this test process.
        #expect(throws: CardDataError.self) { try TLV.parse(hex("80 84 FF FF FF FF")) }
        #expect(throws: CardDataError.self) { try TLV.parse(hex("80 84 FF FF FF FF") + pattern(64)) }
        #expect(throws: CardDataError.self) { try TLV.parse(hex("7C 06 80 84 FF FF FF FF")).first?.child(0x80) }
    }

    @Test("random and mutated input parses within its bounds or throws, never traps")
    func fuzz() {
        var random = SeededGenerator(seed: 0x8825_0001)
        let seeds = [Self.retryCounter, hex("7C 0A 80 08") + pattern(8), TLV.encode(0x87, pattern(300)), hex("5F 20 01 41 9A 01 03")]
        var accepted = 0
        var rejected = 0
        for round in 0..<20_000 {
            var bytes: [UInt8]
            if round % 2 == 0 {
                bytes = seeds[round / 2 % seeds.count]
                for _ in 0..<Int.random(in: 1...3, using: &random) {
                    bytes[Int.random(in: 0..<min(bytes.count, 16), using: &random)] = UInt8.random(in: 0...255, using: &random)
                }
                if Bool.random(using: &random) { bytes = Array(bytes.prefix(Int.random(in: 0...bytes.count, using: &random))) }
            } else {
                bytes = random.bytes(Int.random(in: 0...24, using: &random))
            }
            guard let objects = try? TLV.parse(bytes) else {
                rejected += 1
                continue
            }
            accepted += 1
            // Every value is a slice of the input: together, re-encoded minimally, they fit in it.
            #expect(objects.reduce(0) { $0 + $1.encoded().count } <= bytes.count)
            for object in objects {
                #expect((try? TLV.parse(object.encoded())) == [object])
            }
        }
        #expect(accepted > 1000)
        #expect(rejected > 1000)
    }
}
