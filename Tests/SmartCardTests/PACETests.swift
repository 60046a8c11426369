import SmartCard
import Testing

/// The two EF.CardAccess files `authd-vcard generate --pace …` writes: one PACEInfo, ECDH
/// generic mapping, version 2.
enum PACEParameters: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case p256, brainpoolP384r1

    var cardAccess: [UInt8] {
        switch self {
        // id-PACE-ECDH-GM-AES-CBC-CMAC-128, NIST P-256 (parameter id 12): `--pace p256`, the default.
        case .p256: hex("31143012060A04007F0007020204020202010202010C")
        // id-PACE-ECDH-GM-AES-CBC-CMAC-256, brainpoolP384r1 (parameter id 16): `--pace brainpool384`.
        case .brainpoolP384r1: hex("31143012060A04007F00070202040204020102020110")
        }
    }

    /// The protocol OID's content bytes, as MSE:Set AT sends them in tag 80.
    var protocolOID: [UInt8] {
        switch self {
        case .p256: hex("04007F00070202040202")
        case .brainpoolP384r1: hex("04007F00070202040204")
        }
    }

    var testDescription: String { rawValue }
}

extension PACESession.Failure {
    var isKeyAgreement: Bool { if case .keyAgreement = self { true } else { false } }
    var isSecureMessaging: Bool { if case .secureMessaging = self { true } else { false } }
}

/// PACE between a terminal (PCD) and a card (PICC) in one process, driven in the order
/// `IDCard.establishPACE` and `VirtualCard.generalAuthenticate` drive it over a reader:
/// the state after both tokens are computed and before either is checked.
struct Handshake {
    let terminal: PACESession
    let card: PACESession
    let terminalEphemeral: [UInt8]
    let terminalToken: [UInt8]

    init(_ parameters: PACEParameters, terminalCAN: String = "123456", cardCAN: String = "123456") throws {
        // Terminal: EF.CardAccess and the CAN; card: MSE:Set AT with the same protocol.
        terminal = try PACESession(cardAccess: parameters.cardAccess)
        try terminal.usePassword(can: Array(terminalCAN.utf8))
        card = try PACESession(cardAccess: parameters.cardAccess)
        try card.usePassword(can: Array(cardCAN.utf8))
        // GENERAL AUTHENTICATE 1: the card's encrypted nonce (tag 80).
        try terminal.decryptNonce(card.encryptedNonce())
        // 2: the terminal's mapping data (81); the card answers with its own (82) and maps.
        let terminalMapping = try terminal.mappingData()
        let cardMapping = try card.mappingData()
        try card.mapGenerator(peerMappingData: terminalMapping)
        try terminal.mapGenerator(peerMappingData: cardMapping)
        // 3: ephemeral keys (83, 84); each side agrees as soon as it has the other's.
        terminalEphemeral = try terminal.ephemeralPublicKey()
        let cardEphemeral = try card.ephemeralPublicKey()
        try card.agree(peerEphemeralKey: terminalEphemeral)
        try terminal.agree(peerEphemeralKey: cardEphemeral)
        // 4: the terminal's token (85), over the card's ephemeral key.
        terminalToken = try terminal.authenticationToken(peerEphemeralKey: cardEphemeral)
    }

    /// The rest of step 4: the card checks the terminal's token, answers with its own (86) and
    /// switches to secure messaging; then the terminal checks that token and switches.
    func complete() throws -> (terminal: PACESession, card: PACESession) {
        try card.verify(peerToken: terminalToken)
        let cardToken = try card.authenticationToken(peerEphemeralKey: terminalEphemeral)
        try card.startSecureMessaging()
        try terminal.verify(peerToken: cardToken)
        try terminal.startSecureMessaging()
        return (terminal, card)
    }
}

@Suite("PACE and secure messaging")
struct PACETests {
    static func established(_ parameters: PACEParameters) throws -> (terminal: PACESession, card: PACESession) {
        try Handshake(parameters).complete()
    }

    /// `bytes` with one bit flipped in byte `index` of the first `tag` object's value.
    static func tampered(_ bytes: [UInt8], tag: UInt32, at index: Int) throws -> [UInt8] {
        var flipped = false
        return try TLV.parse(bytes).flatMap { object in
            guard object.tag == tag, !flipped else { return object.encoded() }
            flipped = true
            var value = object.value
            value[index] ^= 0x01
            return TLV.encode(object.tag, value)
        }
    }

    // MARK: Key agreement

    @Test("with the right CAN both tokens verify and secure messaging starts", arguments: PACEParameters.allCases)
    func agreement(parameters: PACEParameters) throws {
        let handshake = try Handshake(parameters)
        #expect(handshake.terminal.protocolOID == parameters.protocolOID)
        #expect(handshake.card.protocolOID == parameters.protocolOID)
        // The token is a CMAC truncated to 8 bytes (BSI TR-03110 part 3 §A.2.4.2).
        #expect(handshake.terminalToken.count == 8)
        #expect(!handshake.terminal.secureMessagingActive)
        #expect(!handshake.card.secureMessagingActive)

        let (terminal, card) = try handshake.complete()
        #expect(terminal.secureMessagingActive)
        #expect(card.secureMessagingActive)
        // Same session keys on both ends: a protected command opens on the card.
        let command = EstEID.selectApplication(EstEID.authAID)
        #expect(try card.unprotect(terminal.protect(command)) == command)
    }

    @Test("a wrong CAN fails the card's check of the terminal's token", arguments: PACEParameters.allCases)
    func wrongCAN(parameters: PACEParameters) throws {
        // Generic mapping cannot tell a wrong CAN before the tokens: every earlier step succeeds.
        let handshake = try Handshake(parameters, terminalCAN: "123456", cardCAN: "123465")
        let refused = #expect(throws: PACESession.Failure.self) { try handshake.card.verify(peerToken: handshake.terminalToken) }
        #expect(refused?.isKeyAgreement == true)

        // The other way round the card's token does not verify on the terminal either.
        let cardToken = try handshake.card.authenticationToken(peerEphemeralKey: handshake.terminalEphemeral)
        let mismatch = #expect(throws: PACESession.Failure.self) { try handshake.terminal.verify(peerToken: cardToken) }
        #expect(mismatch?.isKeyAgreement == true)
        #expect(!handshake.terminal.secureMessagingActive)
        #expect(!handshake.card.secureMessagingActive)
    }

    @Test("an empty encrypted nonce is refused: it would let a card without the CAN through", arguments: PACEParameters.allCases)
    func emptyNonce(parameters: PACEParameters) throws {
        let terminal = try PACESession(cardAccess: parameters.cardAccess)
        try terminal.usePassword(can: Array("123456".utf8))
        let refused = #expect(throws: PACESession.Failure.self) { try terminal.decryptNonce([]) }
        // Without the refusal, a second session with any other CAN "decrypts" the same empty
        // nonce, and mapping, key agreement and both tokens then succeed against this one.
        #expect(refused?.isKeyAgreement == true)
    }

    @Test("EF.CardAccess that names no supported PACE protocol", arguments: [
        [],
        hex("DE AD BE EF"),
        hex("31 14 30 12 06 0A 04 00"),
        // A well-formed SET OF, but TerminalAuthenticationInfo (id-TA, 04007F00070202 02), not PACE.
        hex("31 0F 30 0D 06 08 04 00 7F 00 07 02 02 02 02 01 02"),
        { var random = SeededGenerator(seed: 0xCA); return random.bytes(64) }(),
    ] as [[UInt8]])
    func unsupportedCardAccess(bytes: [UInt8]) {
        let error = #expect(throws: PACESession.Failure.self) { try PACESession(cardAccess: bytes) }
        #expect(error == .unsupportedCardAccess)
    }

    // MARK: Secure messaging

    static let commands: [CommandAPDU] = [
        // Data and Le.
        EstEID.selectPath(EstEID.authCertificatePath),
        EstEID.internalAuthenticate(pattern(48)),
        // Le only, one and two bytes of DO 97.
        EstEID.readBinary(offset: 0x0100, length: EstEID.readBlock),
        EstEID.readBinary(offset: 0, length: 1000),
        // Data only; a full block (16 bytes) gets a whole block of padding.
        EstEID.selectApplication(EstEID.authAID),
        EstEID.selectApplication(Array("QSCD Application".utf8)),
        EstEID.verify(.pin1, digits: Array("1234".utf8)),
        // Neither.
        CommandAPDU(cla: 0x00, ins: 0x44, p1: 0x00, p2: 0x00),
        // Odd INS: the cryptogram goes in DO 85, without a padding-content indicator.
        EstEID.retryCounter(.pin1),
        // Data that ends in what looks like padding must come back whole.
        CommandAPDU(ins: 0xD6, p1: 0x00, p2: 0x00, data: [0x01, 0x80]),
        CommandAPDU(ins: 0xD6, p1: 0x00, p2: 0x00, data: [0x00, 0x00, 0x00]),
        // Extended: the protected command is extended too.
        CommandAPDU(ins: 0x2A, p1: 0x9E, p2: 0x9A, data: pattern(300), le: 65536),
    ]

    @Test("a command protected by the terminal opens on the card as it was sent", arguments: PACEParameters.allCases, commands)
    func command(parameters: PACEParameters, command: CommandAPDU) throws {
        let (terminal, card) = try Self.established(parameters)
        let protected = try terminal.protect(command)
        #expect(protected.cla == command.cla | 0x0C)
        #expect([protected.ins, protected.p1, protected.p2] == [command.ins, command.p1, command.p2])
        #expect(protected.le != nil)
        if command.isExtended { #expect(protected.isExtended) }

        // ISO 7816-4 §10.2: cryptogram, then Le, then an 8-byte MAC, in that order.
        let objects = try TLV.parse(protected.data)
        let cryptogramTag: UInt32 = command.ins & 1 == 1 ? 0x85 : 0x87
        var tags: [UInt32] = command.data.isEmpty ? [] : [cryptogramTag]
        if command.le != nil { tags.append(0x97) }
        #expect(objects.map(\.tag) == tags + [0x8E])
        #expect(objects.last?.value.count == 8)
        if let cryptogram = objects.first(where: { $0.tag == cryptogramTag }) {
            // ISO/IEC 9797-1 method 2 always adds 80: whole AES blocks, one more for a full block.
            let blocks = command.data.count / 16 + 1
            #expect(cryptogram.value.count == blocks * 16 + (cryptogramTag == 0x87 ? 1 : 0))
            #expect(cryptogramTag == 0x85 || cryptogram.value.first == 0x01)
        }

        // The card sees the bytes on the wire, not the struct.
        #expect(try card.unprotect(CommandAPDU(parsing: protected.encoded())) == command)
    }

    static let responses: [ResponseAPDU] = [
        ResponseAPDU(data: pattern(0xC0), sw: 0x9000),
        ResponseAPDU(data: [0x42], sw: 0x9000),
        ResponseAPDU(data: pattern(16), sw: 0x9000),
        ResponseAPDU(data: pattern(1500), sw: 0x9000),
        ResponseAPDU(data: [0x00, 0x00], sw: 0x9000),
        ResponseAPDU(data: [0x12, 0x80], sw: 0x6282),
        // Refusals inside secure messaging: a DO 99 with no data.
        ResponseAPDU(sw: 0x6A82),
        ResponseAPDU(sw: 0x63C2),
        ResponseAPDU(sw: 0x9000),
    ]

    @Test("a response protected by the card opens on the terminal as it was sent", arguments: PACEParameters.allCases, responses)
    func response(parameters: PACEParameters, response: ResponseAPDU) throws {
        let (terminal, card) = try Self.established(parameters)
        for command in [EstEID.readBinary(offset: 0, length: 0xC0), EstEID.retryCounter(.pin2)] {
            _ = try card.unprotect(terminal.protect(command))
            let protected = try card.protect(response, oddInstruction: command.ins & 1 == 1)
            // The real status word travels inside, MAC-covered; the outer one is always 9000.
            #expect(protected.sw == 0x9000)
            let objects = try TLV.parse(protected.data)
            #expect(objects.map(\.tag).suffix(2) == [0x99, 0x8E])
            #expect(objects.count == (response.data.isEmpty ? 2 : 3))
            if !response.data.isEmpty { #expect(objects.first?.tag == (command.ins & 1 == 1 ? 0x85 : 0x87)) }
            #expect(try terminal.unprotect(protected) == response)
        }
    }

    @Test("a flipped bit in a command's MAC, cryptogram, Le or header is rejected", arguments: PACEParameters.allCases)
    func tamperedCommand(parameters: PACEParameters) throws {
        let command = EstEID.selectPath(EstEID.authCertificatePath)
        var forgeries: [(CommandAPDU) throws -> CommandAPDU] = [
            { var c = $0; c.data = try Self.tampered(c.data, tag: 0x8E, at: 7); return c },
            { var c = $0; c.data = try Self.tampered(c.data, tag: 0x87, at: 1); return c },
            { var c = $0; c.data = try Self.tampered(c.data, tag: 0x87, at: 16); return c },
            { var c = $0; c.data = try Self.tampered(c.data, tag: 0x97, at: 0); return c },
            { var c = $0; c.p1 ^= 0x01; return c },
            { var c = $0; c.ins = 0xB0; return c },
        ]
        // Control: untouched, the same command opens.
        forgeries.append { $0 }
        for (index, forge) in forgeries.enumerated() {
            let (terminal, card) = try Self.established(parameters)
            let forged = try forge(terminal.protect(command))
            if index == forgeries.count - 1 {
                #expect(try card.unprotect(forged) == command)
            } else {
                let error = #expect(throws: PACESession.Failure.self, "forgery \(index)") { try card.unprotect(forged) }
                #expect(error?.isSecureMessaging == true, "forgery \(index)")
            }
        }
    }

    @Test("a flipped bit in a response's MAC, cryptogram or status is rejected", arguments: PACEParameters.allCases, [
        (0x8E, 0), (0x8E, 7), (0x87, 0), (0x87, 1), (0x87, 16), (0x99, 0), (0x99, 1),
    ] as [(tag: UInt32, index: Int)])
    func tamperedResponse(parameters: PACEParameters, flip: (tag: UInt32, index: Int)) throws {
        let (terminal, card) = try Self.established(parameters)
        _ = try card.unprotect(terminal.protect(EstEID.readBinary(offset: 0, length: 0xC0)))
        var protected = try card.protect(ResponseAPDU(data: pattern(0xC0), sw: 0x9000))
        protected.data = try Self.tampered(protected.data, tag: flip.tag, at: flip.index)
        let error = #expect(throws: PACESession.Failure.self) { try terminal.unprotect(protected) }
        #expect(error?.isSecureMessaging == true)
    }

    @Test("a replayed response or command fails: the send sequence counter has moved on", arguments: PACEParameters.allCases)
    func replay(parameters: PACEParameters) throws {
        let (terminal, card) = try Self.established(parameters)
        let command = EstEID.readBinary(offset: 0, length: 0xC0)
        let answer = ResponseAPDU(data: pattern(0xC0), sw: 0x9000)

        let firstCommand = try terminal.protect(command)
        #expect(try card.unprotect(firstCommand) == command)
        let firstAnswer = try card.protect(answer)
        #expect(try terminal.unprotect(firstAnswer) == answer)

        // The same plain command, one exchange later, is different on the wire.
        let secondCommand = try terminal.protect(command)
        #expect(secondCommand != firstCommand)
        let replayedCommand = #expect(throws: PACESession.Failure.self) { try card.unprotect(firstCommand) }
        #expect(replayedCommand?.isSecureMessaging == true)

        let (otherTerminal, otherCard) = try Self.established(parameters)
        _ = try otherCard.unprotect(otherTerminal.protect(command))
        let used = try otherCard.protect(answer)
        #expect(try otherTerminal.unprotect(used) == answer)
        _ = try otherCard.unprotect(otherTerminal.protect(command))
        let fresh = try otherCard.protect(answer)
        #expect(fresh != used)
        let replayedAnswer = #expect(throws: PACESession.Failure.self) { try otherTerminal.unprotect(used) }
        #expect(replayedAnswer?.isSecureMessaging == true)
    }

    @Test("a plain refusal (no data, not 9000) passes through the terminal's unprotect", arguments: PACEParameters.allCases, [0x6987, 0x6988, 0x6982] as [UInt16])
    func plainRefusal(parameters: PACEParameters, sw: UInt16) throws {
        let (terminal, card) = try Self.established(parameters)
        _ = try card.unprotect(terminal.protect(EstEID.readBinary(offset: 0, length: 0xC0)))
        #expect(try terminal.unprotect(ResponseAPDU(sw: sw)) == ResponseAPDU(sw: sw))
    }

    @Test("anything else unprotected is rejected: plain 9000, plain data, plain commands", arguments: PACEParameters.allCases)
    func plainRejected(parameters: PACEParameters) throws {
        let (terminal, card) = try Self.established(parameters)
        let read = EstEID.readBinary(offset: 0, length: 0xC0)
        for response in [ResponseAPDU(sw: 0x9000), ResponseAPDU(data: pattern(0xC0), sw: 0x9000), ResponseAPDU(data: [0x01, 0x02], sw: 0x6282)] {
            _ = try card.unprotect(terminal.protect(read))
            _ = try card.protect(ResponseAPDU(sw: 0x9000))
            let error = #expect(throws: PACESession.Failure.self) { try terminal.unprotect(response) }
            #expect(error?.isSecureMessaging == true)
        }
        // A DO 99 without a MAC.
        let unsigned = ResponseAPDU(data: TLV.encode(0x99, [0x90, 0x00]), sw: 0x9000)
        let error = #expect(throws: PACESession.Failure.self) { try terminal.unprotect(unsigned) }
        #expect(error?.isSecureMessaging == true)

        let plain = #expect(throws: PACESession.Failure.self) { try card.unprotect(read) }
        #expect(plain?.isSecureMessaging == true)
    }

    @Test("protect and unprotect refuse before secure messaging has started")
    func noSession() throws {
        let handshake = try Handshake(.p256)
        let read = EstEID.readBinary(offset: 0, length: 0xC0)
        let command = #expect(throws: PACESession.Failure.self) { try handshake.terminal.protect(read) }
        #expect(command?.isSecureMessaging == true)
        let response = #expect(throws: PACESession.Failure.self) { try handshake.card.protect(ResponseAPDU(sw: 0x9000)) }
        #expect(response?.isSecureMessaging == true)
    }
}
