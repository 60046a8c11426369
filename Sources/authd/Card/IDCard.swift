import FoundationEssentials
import OpenSSLCrypto
import SmartCard

/// The Estonian ID card's operations over a connected card (blocking; card queue only).
/// Every answer is untrusted: lengths, TLVs and status words are checked, and anything
/// unexpected becomes `card.error` (or `card.removed` when the card went away).
final class IDCard {
    enum Interface { case contact, contactless }

    private let card: PCSC.Card
    private var pace: PACESession?
    let interface: Interface

    /// Largest file authd reads from a card (certificates are about 1–2 KiB).
    static let maxFileSize = 8192

    /// Which interface an ATR means; nil for a card that is not the ID card.
    static func interface(forATR atr: [UInt8]) -> Interface? {
        if EstEID.contactATRs.contains(atr) { return .contact }
        // PC/SC part 3: an ISO 14443-4 card behind a contactless reader (3B 8n 80 01 …).
        if atr.count >= 4, atr[0] == 0x3B, atr[1] & 0xF0 == 0x80, atr[2] == 0x80, atr[3] == 0x01 { return .contactless }
        return nil
    }

    init(card: PCSC.Card, interface: Interface) {
        self.card = card
        self.interface = interface
    }

    // MARK: Transport

    func send(_ command: CommandAPDU) throws(CardFailure) -> ResponseAPDU {
        if let pace {
            let protected: CommandAPDU
            do { protected = try pace.protect(command) } catch { throw .cardError("\(error)") }
            let raw = try exchange(protected)
            do { return try pace.unprotect(raw) } catch { throw .cardError("\(error)") }
        }
        return try exchange(command)
    }

    /// One exchange, following T=0's 61xx (GET RESPONSE) and 6Cxx (resend with Le).
    private func exchange(_ command: CommandAPDU) throws(CardFailure) -> ResponseAPDU {
        var response = try transmit(command)
        if response.sw1 == 0x6C {
            var again = command
            again.le = response.sw2 == 0 ? 256 : Int(response.sw2)
            response = try transmit(again)
        }
        var data = response.data
        var rounds = 0
        while response.sw1 == 0x61 {
            rounds += 1
            guard rounds <= 64, data.count <= 65_536 else { throw .cardError("endless GET RESPONSE") }
            let more = CommandAPDU(ins: 0xC0, p1: 0, p2: 0, le: response.sw2 == 0 ? 256 : Int(response.sw2))
            response = try transmit(more)
            data += response.data
        }
        return ResponseAPDU(data: data, sw: response.sw)
    }

    /// Sends `command`, and wipes the bytes sent after: on a contact card a VERIFY carries its
    /// PIN block in the clear.
    private func transmit(_ command: CommandAPDU) throws(CardFailure) -> ResponseAPDU {
        var bytes = command.encoded()
        defer { OpenSSL.wipe(&bytes) }
        return try parse(card.transmit(bytes))
    }

    private func parse(_ raw: [UInt8]) throws(CardFailure) -> ResponseAPDU {
        do { return try ResponseAPDU(raw: raw) } catch { throw .cardError("\(error)") }
    }

    private func expectSuccess(_ response: ResponseAPDU, _ what: String) throws(CardFailure) {
        guard response.isSuccess else { throw .cardError("\(what): status \(String(response.sw, radix: 16))") }
    }

    // MARK: PACE

    /// PACE with the CAN (contactless): EF.CardAccess, MSE:Set AT, four GENERAL AUTHENTICATE
    /// steps, then secure messaging for everything after. A wrong CAN fails the token check.
    func establishPACE(can: [UInt8]) throws(CardFailure) {
        let select = try exchange(CommandAPDU(ins: 0xA4, p1: 0x02, p2: 0x0C, data: EstEID.cardAccessFID))
        guard select.isSuccess else { throw .unsupported }
        let cardAccess = try readBinary(length: nil)
        let session: PACESession
        do { session = try PACESession(cardAccess: cardAccess) } catch { throw .unsupported }
        do {
            try session.usePassword(can: can)
        } catch {
            throw .cardError("\(error)")
        }
        try expectSuccess(exchange(EstEID.setPACE(protocolOID: session.protocolOID)), "MSE:Set AT")
        do {
            let nonce = try dynamicData(exchange(EstEID.generalAuthenticate([], last: false)), tag: 0x80)
            try session.decryptNonce(nonce)
            let mapping = try session.mappingData()
            let cardMapping = try dynamicData(exchange(EstEID.generalAuthenticate(TLV.encode(0x81, mapping), last: false)), tag: 0x82)
            try session.mapGenerator(peerMappingData: cardMapping)
            let ephemeral = try session.ephemeralPublicKey()
            let cardEphemeral = try dynamicData(exchange(EstEID.generalAuthenticate(TLV.encode(0x83, ephemeral), last: false)), tag: 0x84)
            try session.agree(peerEphemeralKey: cardEphemeral)
            let token = try session.authenticationToken(peerEphemeralKey: cardEphemeral)
            let answer = try exchange(EstEID.generalAuthenticate(TLV.encode(0x85, token), last: true))
            // The card refuses our token (63xx, 6300) when the CAN differs.
            guard answer.isSuccess else { throw CardFailure.canMismatch(savedDeleted: false) }
            let cardToken = try dynamicData(answer, tag: 0x86)
            try session.verify(peerToken: cardToken)
            try session.startSecureMessaging()
        } catch let failure as CardFailure {
            throw failure
        } catch is PACESession.Failure {
            throw .canMismatch(savedDeleted: false)
        } catch {
            throw .cardError("\(error)")
        }
        pace = session
    }

    private func dynamicData(_ response: ResponseAPDU, tag: UInt32) throws(CardFailure) -> [UInt8] {
        guard response.isSuccess else {
            // Before secure messaging, a failing step means the key agreement went wrong.
            throw .canMismatch(savedDeleted: false)
        }
        let inner = try Self.parsed("GENERAL AUTHENTICATE tag \(String(tag, radix: 16))") { () throws(CardDataError) in
            try TLV.find(0x7C, in: response.data).flatMap { outer throws(CardDataError) in try TLV.find(tag, in: outer.value) }
        }
        guard !inner.value.isEmpty else { throw .cardError("GENERAL AUTHENTICATE with an empty tag \(String(tag, radix: 16))") }
        return inner.value
    }

    /// Runs a TLV lookup on card data: malformed or missing objects are `card.error`.
    private static func parsed<T>(_ what: String, _ lookup: () throws(CardDataError) -> T?) throws(CardFailure) -> T {
        let found: T?
        do { found = try lookup() } catch { throw .cardError("\(what): \(error)") }
        guard let found else { throw .cardError("\(what): missing") }
        return found
    }

    // MARK: Files

    private func select(_ command: CommandAPDU, _ what: String) throws(CardFailure) -> ResponseAPDU {
        let response = try send(command)
        if response.sw == 0x6A82 || response.sw == 0x6A86 || response.sw == 0x6D00 { throw .unsupported }
        try expectSuccess(response, what)
        return response
    }

    func selectMain() throws(CardFailure) { _ = try select(EstEID.selectApplication(EstEID.mainAID), "SELECT main") }

    /// Selects an EF and reads it whole; its size comes from the FCP (tag 80 or 81).
    private func readFile(_ command: CommandAPDU, _ what: String) throws(CardFailure) -> [UInt8] {
        let response = try select(command, what)
        let sizeObject = try Self.parsed("\(what): file size") { () throws(CardDataError) -> TLV? in
            guard let fcp = try TLV.find(0x62, in: response.data) else { return nil }
            if let size = try TLV.find(0x80, in: fcp.value) { return size }
            return try TLV.find(0x81, in: fcp.value)
        }
        guard sizeObject.value.count == 2 else { throw .cardError("\(what): no file size") }
        let size = Int(sizeObject.value[0]) << 8 | Int(sizeObject.value[1])
        guard size > 0, size <= Self.maxFileSize else { throw .cardError("\(what): file size \(size)") }
        return try readBinary(length: size)
    }

    /// READ BINARY in blocks; with a known length, every block must be exactly as long as asked.
    private func readBinary(length: Int?) throws(CardFailure) -> [UInt8] {
        var content: [UInt8] = []
        let total = length ?? Self.maxFileSize
        while content.count < total {
            let chunk = min(EstEID.readBlock, total - content.count)
            let response = try send(EstEID.readBinary(offset: content.count, length: chunk))
            if length == nil && (response.sw == 0x6282 || response.sw == 0x6B00) { break }
            try expectSuccess(response, "READ BINARY")
            guard !response.data.isEmpty, response.data.count <= chunk, length == nil || response.data.count == chunk else {
                throw .cardError("READ BINARY returned \(response.data.count) bytes for \(chunk)")
            }
            content += response.data
            if length == nil && response.data.count < chunk { break }
        }
        return content
    }

    func certificate(authentication: Bool) throws(CardFailure) -> [UInt8] {
        try selectMain()
        return try readFile(EstEID.selectPath(authentication ? EstEID.authCertificatePath : EstEID.signCertificatePath),
                            authentication ? "authentication certificate" : "signing certificate")
    }

    func personalData() throws(CardFailure) -> [EstEID.Field: String] {
        try selectMain()
        _ = try select(EstEID.selectDF(EstEID.personalDataDF), "SELECT personal data")
        var fields: [EstEID.Field: String] = [:]
        for field in EstEID.Field.allCases {
            let bytes = try readFile(EstEID.selectEF([0x50, field.rawValue]), "personal data \(field)")
            guard let text = String(validating: bytes, as: UTF8.self) else { throw .cardError("personal data \(field) is not UTF-8") }
            fields[field] = String(String(text.drop(while: \.isWhitespace).reversed()).drop(while: \.isWhitespace).reversed())
        }
        return fields
    }

    // MARK: PINs and keys

    /// Tries left for `pin` (GET DATA: 70 / BF810x / A0 / 9B).
    func retriesLeft(_ pin: EstEID.PIN) throws(CardFailure) -> Int {
        let response = try send(EstEID.retryCounter(pin))
        try expectSuccess(response, "GET DATA retries")
        let tries = try Self.parsed("retry counter") { () throws(CardDataError) -> TLV? in
            try TLV.find(0x70, in: response.data)?.child(0xBF8100 | UInt32(pin.reference & 0x0F)).child(0xA0).child(0x9B)
        }
        guard tries.value.count == 1 else { throw .cardError("retry counter: bad 9B") }
        return Int(tries.value[0])
    }

    /// VERIFY; the PIN block is wiped after sending.
    func verify(_ pin: EstEID.PIN, digits: [UInt8]) throws(CardFailure) {
        var command = EstEID.verify(pin, digits: digits)
        defer { for index in command.data.indices { command.data[index] = 0 } }
        let response = try send(command)
        switch response.sw {
        case 0x9000: return
        case 0x63C0, 0x6983, 0x6984: throw .pinBlocked
        case 0x63C1...0x63CF: throw .pinWrong(retriesLeft: Int(response.sw2 & 0x0F), savedDeleted: false)
        default: throw .cardError("VERIFY: status \(String(response.sw, radix: 16))")
        }
    }

    func selectApplication(for pin: EstEID.PIN) throws(CardFailure) {
        _ = try select(EstEID.selectApplication(pin.application), "SELECT application")
    }

    /// INTERNAL AUTHENTICATE with the authentication key (PIN1 verified): raw r‖s.
    func authenticate(digest: [UInt8]) throws(CardFailure) -> [UInt8] {
        try expectSuccess(send(EstEID.setAuthenticationEnvironment), "MSE:SET authentication")
        let response = try send(EstEID.internalAuthenticate(digest))
        try expectSuccess(response, "INTERNAL AUTHENTICATE")
        guard response.data.count == EstEID.signatureLength else { throw .cardError("signature of \(response.data.count) bytes") }
        return response.data
    }

    /// PSO: COMPUTE DIGITAL SIGNATURE with the signing key (PIN2 verified): raw r‖s.
    func sign(digest: [UInt8]) throws(CardFailure) -> [UInt8] {
        let response = try send(EstEID.computeSignature(EstEID.digestInput(digest)))
        try expectSuccess(response, "COMPUTE DIGITAL SIGNATURE")
        guard response.data.count == EstEID.signatureLength else { throw .cardError("signature of \(response.data.count) bytes") }
        return response.data
    }

    func setSigningEnvironment() throws(CardFailure) {
        try expectSuccess(send(EstEID.setSigningEnvironment), "MSE:SET signing")
    }
}
