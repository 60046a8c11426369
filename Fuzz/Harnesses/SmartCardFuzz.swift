import SmartCard

/// What a card (or anything posing as one on the reader) answers, by the first byte: BER-TLV,
/// response and command APDUs (each re-encoded and read again to the same value), EF.CardAccess,
/// and secure-messaging responses and commands opened by an established PACE session. A last
/// mode protects the input as a card would and opens it as the terminal does, which must give
/// back exactly the input.
enum SmartCardFuzz {
    static func run(_ input: [UInt8]) {
        guard let selector = input.first else { return }
        let body = Array(input.dropFirst())
        switch selector % 7 {
        case 0:
            guard let objects = try? TLV.parse(body) else { return }
            for object in objects {
                precondition((try? TLV.parse(object.encoded())) == [object], "a TLV does not read back as itself")
                _ = try? TLV.parse(object.value)  // constructed values are read as nested TLV
            }
        case 1:
            guard let response = try? ResponseAPDU(raw: body) else { return }
            precondition(response.encoded() == body, "a response APDU does not encode back to its bytes")
        case 2:
            guard let command = try? CommandAPDU(parsing: body) else { return }
            precondition((try? CommandAPDU(parsing: command.encoded())) == command, "a command APDU does not read back as itself")
        case 3:
            _ = (try? PACESession(cardAccess: body))?.protocolOID
        case 4:
            guard let response = try? ResponseAPDU(raw: body) else { return }
            _ = try? Sessions.hostile.terminal.unprotect(response)
        case 5:
            guard let command = try? CommandAPDU(parsing: body) else { return }
            _ = try? Sessions.hostile.card.unprotect(command)
        default:
            guard body.count >= 2 else { return }
            let response = ResponseAPDU(data: Array(body.dropFirst(2)), sw: UInt16(body[0]) << 8 | UInt16(body[1]))
            do {
                let protected = try Sessions.lockstep.card.protect(response)
                let opened = try Sessions.lockstep.terminal.unprotect(protected)
                precondition(opened == response, "secure messaging changed a response")
            } catch {
                // A failed step leaves the two counters apart: start over with a new pair.
                Sessions.lockstep = Sessions.established()
            }
        }
    }

    /// PACE sessions made once: key agreement costs milliseconds, a secure-messaging step
    /// microseconds. The fuzzer calls in from one thread; the corpus test from one test.
    enum Sessions {
        /// Given hostile bytes only: their send sequence counters drift apart, which is fine.
        nonisolated(unsafe) static var hostile = established()
        /// Kept in step: each protect on one side is opened on the other.
        nonisolated(unsafe) static var lockstep = established()

        /// EF.CardAccess of `authd-vcard generate --pace p256`.
        static let cardAccess: [UInt8] = [0x31, 0x14, 0x30, 0x12, 0x06, 0x0A, 0x04, 0x00, 0x7F, 0x00, 0x07, 0x02, 0x02, 0x04, 0x02, 0x02,
                                          0x02, 0x01, 0x02, 0x02, 0x01, 0x0C]

        /// Both roles of PACE in one process, in the order the reader drives them.
        static func established() -> (terminal: PACESession, card: PACESession) {
            do {
                let terminal = try PACESession(cardAccess: cardAccess)
                let card = try PACESession(cardAccess: cardAccess)
                try terminal.usePassword(can: Array("123456".utf8))
                try card.usePassword(can: Array("123456".utf8))
                try terminal.decryptNonce(card.encryptedNonce())
                let terminalMapping = try terminal.mappingData()
                let cardMapping = try card.mappingData()
                try card.mapGenerator(peerMappingData: terminalMapping)
                try terminal.mapGenerator(peerMappingData: cardMapping)
                let terminalEphemeral = try terminal.ephemeralPublicKey()
                let cardEphemeral = try card.ephemeralPublicKey()
                try card.agree(peerEphemeralKey: terminalEphemeral)
                try terminal.agree(peerEphemeralKey: cardEphemeral)
                let terminalToken = try terminal.authenticationToken(peerEphemeralKey: cardEphemeral)
                try card.verify(peerToken: terminalToken)
                let cardToken = try card.authenticationToken(peerEphemeralKey: terminalEphemeral)
                try card.startSecureMessaging()
                try terminal.verify(peerToken: cardToken)
                try terminal.startSecureMessaging()
                return (terminal, card)
            } catch {
                preconditionFailure("PACE with the fixed parameters failed: \(error)")
            }
        }
    }
}
