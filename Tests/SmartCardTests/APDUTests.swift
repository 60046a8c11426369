import SmartCard
import Testing

@Suite("Command and response APDUs")
struct APDUTests {
    // MARK: Encoding

    /// ISO 7816-4 §5.1: the four short cases, byte for byte.
    static let shortCases: [(CommandAPDU, [UInt8])] = [
        // Case 1: header only.
        (CommandAPDU(ins: 0xA4, p1: 0x04, p2: 0x0C), hex("00 A4 04 0C")),
        // Case 2: Le only; 256 is written as 00.
        (CommandAPDU(ins: 0xB0, p1: 0x12, p2: 0x34, le: 0xC0), hex("00 B0 12 34 C0")),
        (CommandAPDU(ins: 0xB0, p1: 0x00, p2: 0x00, le: 1), hex("00 B0 00 00 01")),
        (CommandAPDU(ins: 0xB0, p1: 0x00, p2: 0x00, le: 256), hex("00 B0 00 00 00")),
        // Case 3: Lc and data.
        (CommandAPDU(cla: 0x80, ins: 0xA4, p1: 0x04, p2: 0x0C, data: [0x01, 0x02, 0x03]), hex("80 A4 04 0C 03 01 02 03")),
        // Case 4: Lc, data and Le.
        (CommandAPDU(ins: 0x88, p1: 0x00, p2: 0x00, data: [0xAA, 0xBB], le: 0x10), hex("00 88 00 00 02 AA BB 10")),
        (CommandAPDU(ins: 0x88, p1: 0x00, p2: 0x00, data: [0xAA], le: 256), hex("00 88 00 00 01 AA 00")),
        // The largest short command: 255 bytes of data and Le 256.
        (CommandAPDU(ins: 0xD6, p1: 0x00, p2: 0x00, data: pattern(255), le: 256), hex("00 D6 00 00 FF") + pattern(255) + [0x00]),
    ]

    @Test("short cases 1–4 encode byte for byte", arguments: shortCases)
    func shortEncoding(command: CommandAPDU, expected: [UInt8]) {
        #expect(!command.isExtended)
        #expect(command.encoded() == expected)
    }

    /// ISO 7816-4 §5.1: extended Lc is 00 + two bytes; extended Le is two bytes after Lc's data,
    /// or 00 + two bytes without data; Le 65536 is written as 00 00.
    static let extendedCases: [(CommandAPDU, [UInt8])] = [
        (CommandAPDU(ins: 0xB0, p1: 0x00, p2: 0x00, le: 65536), hex("00 B0 00 00 00 00 00")),
        (CommandAPDU(ins: 0xB0, p1: 0x00, p2: 0x00, le: 257), hex("00 B0 00 00 00 01 01")),
        (CommandAPDU(ins: 0xB0, p1: 0x00, p2: 0x00, le: 0xFFFF), hex("00 B0 00 00 00 FF FF")),
        (CommandAPDU(ins: 0xD6, p1: 0x00, p2: 0x00, data: pattern(256)), hex("00 D6 00 00 00 01 00") + pattern(256)),
        (CommandAPDU(ins: 0x2A, p1: 0x9E, p2: 0x9A, data: pattern(300), le: 65536), hex("00 2A 9E 9A 00 01 2C") + pattern(300) + [0x00, 0x00]),
        (CommandAPDU(ins: 0x2A, p1: 0x9E, p2: 0x9A, data: pattern(300), le: 256), hex("00 2A 9E 9A 00 01 2C") + pattern(300) + [0x01, 0x00]),
        // Short data, but an Le only the extended form can carry: Lc goes extended too.
        (CommandAPDU(ins: 0x88, p1: 0x00, p2: 0x00, data: [0x01, 0x02, 0x03], le: 65536), hex("00 88 00 00 00 00 03 01 02 03 00 00")),
    ]

    @Test("extended Lc and Le encode byte for byte", arguments: extendedCases)
    func extendedEncoding(command: CommandAPDU, expected: [UInt8]) {
        #expect(command.isExtended)
        #expect(command.encoded() == expected)
    }

    @Test("parsing an encoded command gives the same command", arguments: shortCases.map(\.0) + extendedCases.map(\.0) + [
        CommandAPDU(cla: 0x0C, ins: 0xB0, p1: 0x7F, p2: 0xFF, le: 255),
        CommandAPDU(ins: 0xDA, p1: 0x01, p2: 0x02, data: pattern(0xFFFF), le: 65536),
        CommandAPDU(ins: 0xDA, p1: 0x01, p2: 0x02, data: pattern(1000), le: 1000),
    ])
    func roundTrip(command: CommandAPDU) throws {
        #expect(try CommandAPDU(parsing: command.encoded()) == command)
    }

    // MARK: Hostile commands

    static let malformedCommands: [[UInt8]] = [
        [],
        [0x00],
        hex("00 A4 04"),
        // Lc larger than the data.
        hex("00 A4 04 0C 05 01 02"),
        hex("00 A4 04 0C FF 01"),
        // Trailing bytes after data and Le.
        hex("00 A4 04 0C 02 01 02 00 FF"),
        hex("00 A4 04 0C 01 01 00 00"),
        // Extended: length cut short, zero Lc, Lc larger than the data, one-byte or three-byte Le.
        hex("00 B0 00 00 00 01"),
        hex("00 D6 00 00 00 00 00 01 02"),
        hex("00 D6 00 00 00 01 00") + pattern(255),
        hex("00 D6 00 00 00 01 00") + pattern(256) + [0x00],
        hex("00 88 00 00 00 00 03 01 02 03 00"),
        hex("00 88 00 00 00 00 03 01 02 03 00 00 00"),
        hex("00 88 00 00 00 FF FF 01 02 03"),
    ]

    @Test("malformed commands throw CardDataError", arguments: malformedCommands)
    func malformed(bytes: [UInt8]) {
        #expect(throws: CardDataError.self) { try CommandAPDU(parsing: bytes) }
    }

    @Test("mutated and random commands parse consistently or throw, never trap")
    func fuzz() {
        var random = SeededGenerator(seed: 0x7816_0004)
        let seeds = Self.shortCases.map { $0.0.encoded() } + Self.extendedCases.map { $0.0.encoded() }
        var accepted = 0
        var rejected = 0
        for round in 0..<20_000 {
            var bytes = seeds[round % seeds.count]
            switch Int.random(in: 0..<4, using: &random) {
            case 0: bytes = Array(bytes.prefix(Int.random(in: 0...bytes.count, using: &random)))
            case 1: bytes += random.bytes(Int.random(in: 1...3, using: &random))
            case 2: bytes[Int.random(in: 0..<min(bytes.count, 8), using: &random)] = UInt8.random(in: 0...255, using: &random)
            default: bytes = random.bytes(Int.random(in: 0...12, using: &random))
            }
            guard let command = try? CommandAPDU(parsing: bytes) else {
                rejected += 1
                continue
            }
            accepted += 1
            // What parsed came from the input: its header, and data that is a slice of it.
            #expect([command.cla, command.ins, command.p1, command.p2] == Array(bytes.prefix(4)))
            if !command.data.isEmpty {
                // Short Lc at byte 4, extended Lc as 00 + two bytes.
                let offset = bytes[4] == 0 ? 7 : 5
                #expect(bytes.count >= offset + command.data.count)
                #expect(Array(bytes.dropFirst(offset).prefix(command.data.count)) == command.data)
            }
            // Re-encoding a parsed command is stable, even where the input was not minimal.
            #expect((try? CommandAPDU(parsing: command.encoded())) == command)
        }
        // Both paths were exercised, or the fuzz proves nothing.
        #expect(accepted > 1000)
        #expect(rejected > 1000)
    }

    // MARK: Responses

    @Test("a response shorter than a status word throws", arguments: [[], [0x90]] as [[UInt8]])
    func shortResponse(raw: [UInt8]) {
        #expect(throws: CardDataError.self) { try ResponseAPDU(raw: raw) }
    }

    @Test("a response splits into data and status word")
    func response() throws {
        let ok = try ResponseAPDU(raw: [0x90, 0x00])
        #expect(ok.data.isEmpty)
        #expect(ok.sw == 0x9000)
        #expect(ok.isSuccess)

        let refused = try ResponseAPDU(raw: [0x01, 0x02, 0x03, 0x6A, 0x82])
        #expect(refused.data == [0x01, 0x02, 0x03])
        #expect(refused.sw == 0x6A82)
        #expect(refused.sw1 == 0x6A)
        #expect(refused.sw2 == 0x82)
        #expect(!refused.isSuccess)
        #expect(refused.encoded() == [0x01, 0x02, 0x03, 0x6A, 0x82])

        let retries = ResponseAPDU(sw: 0x63C2)
        #expect(retries.sw1 == 0x63)
        #expect(retries.sw2 == 0xC2)
        #expect(retries.encoded() == [0x63, 0xC2])
    }

    @Test("a response round-trips through its bytes", arguments: [0, 1, 254, 256, 4096])
    func responseRoundTrip(length: Int) throws {
        let response = ResponseAPDU(data: pattern(length, from: 0x90), sw: 0x6282)
        #expect(try ResponseAPDU(raw: response.encoded()) == response)
    }
}

@Suite("EstEID command table")
struct EstEIDCommandTests {
    @Test("VERIFY pads the PIN with FF to twelve bytes, in a case 3 command")
    func verifyBlock() {
        let command = EstEID.verify(.pin1, digits: Array("1234".utf8))
        #expect(command.encoded() == hex("00 20 00 01 0C 31 32 33 34 FF FF FF FF FF FF FF FF"))
        #expect(EstEID.verify(.pin2, digits: Array("12345".utf8)).p2 == 0x85)
    }

    @Test("READ BINARY carries the offset in P1–P2")
    func readBinary() {
        let command = EstEID.readBinary(offset: 0x1234, length: EstEID.readBlock)
        #expect(command.encoded() == hex("00 B0 12 34 C0"))
    }

    @Test("GENERAL AUTHENTICATE chains every step but the last")
    func generalAuthenticate() {
        #expect(EstEID.generalAuthenticate([], last: false).encoded() == hex("10 86 00 00 02 7C 00 00"))
        #expect(EstEID.generalAuthenticate([0x85, 0x01, 0xAA], last: true).encoded() == hex("00 86 00 00 05 7C 03 85 01 AA 00"))
    }

    @Test("the digest fed to ECDSA over P-384 is 48 bytes", arguments: [20, 32, 48, 64])
    func digestInput(length: Int) {
        let digest = pattern(length, from: 1)
        let input = EstEID.digestInput(digest)
        #expect(input.count == 48)
        if length >= 48 {
            #expect(input == Array(digest.prefix(48)))
        } else {
            #expect(Array(input.suffix(length)) == digest)
            #expect(input.prefix(48 - length).allSatisfy { $0 == 0 })
        }
    }
}
