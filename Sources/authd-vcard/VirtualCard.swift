import OpenSSLCrypto
import Protocol
import SmartCard

/// The card side of the Estonian ID card: the same applications, files, PIN references,
/// padding, retry counters, status words and (contactless) PACE with secure messaging that
/// `EstEID` describes, answered from a profile.
///
/// State that a real card keeps across power cycles (retry counters) lives here for the
/// lifetime of the process; everything else resets on power-off and reset.
final class VirtualCard {
    private var profile: CardProfile
    private let authKey: P384PrivateKey
    private let signKey: P384PrivateKey
    private let files: [[UInt8]: [UInt8]]

    private var retries: [EstEID.PIN: Int]
    private var session = Session()

    private struct Session {
        var application: [UInt8]?
        var inPersonalData = false
        var selectedFile: [UInt8]?
        var verified: Set<EstEID.PIN> = []
        var environment: UInt8?
        /// PACE in progress (before secure messaging) or established.
        var pace: PACESession?
        var paceStep = 0
        var peerEphemeral: [UInt8] = []
    }

    init(profile: CardProfile) throws {
        self.profile = profile
        authKey = try P384PrivateKey(pem: profile.authKey)
        signKey = try P384PrivateKey(pem: profile.signKey)
        retries = [.pin1: profile.pin1Retries, .pin2: profile.pin2Retries]
        guard let authCertificate = Base64.decode(profile.authCertificate),
              let signCertificate = Base64.decode(profile.signCertificate),
              Hex.decode(profile.cardAccess) != nil else {
            throw ProfileError("the profile's certificates or EF.CardAccess do not decode")
        }
        var files: [[UInt8]: [UInt8]] = [EstEID.authCertificatePath: authCertificate, EstEID.signCertificatePath: signCertificate]
        let person = profile.person
        let fields: [(EstEID.Field, String)] = [
            (.surname, person.surname), (.givenNames, person.givenNames), (.sex, person.sex),
            (.citizenship, person.citizenship), (.birth, person.birth), (.personalCode, person.personalCode),
            (.documentNumber, person.documentNumber), (.expiry, person.expiry),
        ]
        for (field, value) in fields { files[[0x50, field.rawValue]] = Array(value.utf8) }
        self.files = files
    }

    var atr: [UInt8] {
        switch profile.mode {
        case .contact: EstEID.contactATR
        // PC/SC part 3 ATR of an ISO 14443-4 card, historical bytes "EstEID".
        case .contactless: [0x3B, 0x86, 0x80, 0x01, 0x45, 0x73, 0x74, 0x45, 0x49, 0x44, 0x7A]
        }
    }

    func powerCycle() {
        session = Session()
    }

    /// One command in, one response out. Never traps: anything unexpected is a status word.
    func respond(to bytes: [UInt8]) -> [UInt8] {
        guard let command = try? CommandAPDU(parsing: bytes) else { return sw(0x6700) }
        if let pace = session.pace, pace.secureMessagingActive {
            guard let plain = try? pace.unprotect(command) else {
                // A broken MAC ends secure messaging, as on the real card.
                session = Session()
                return sw(0x6988)
            }
            let response = process(plain)
            guard let protected = try? pace.protect(response, oddInstruction: plain.ins & 1 == 1) else { return sw(0x6F00) }
            return protected.encoded()
        }
        if profile.mode == .contactless && !isAllowedBeforePACE(command) { return sw(0x6982) }
        return process(command).encoded()
    }

    private func sw(_ value: UInt16) -> [UInt8] { [UInt8(value >> 8), UInt8(value & 0xFF)] }

    private func isAllowedBeforePACE(_ command: CommandAPDU) -> Bool {
        switch command.ins {
        case 0x22, 0x86: return command.cla & 0x0C == 0
        case 0xA4: return command.data == EstEID.cardAccessFID || command.data.isEmpty || command.data == [0x3F, 0x00]
        case 0xB0: return session.selectedFile == EstEID.cardAccessFID
        default: return false
        }
    }

    private func process(_ command: CommandAPDU) -> ResponseAPDU {
        switch (command.cla & 0xEF, command.ins) {
        case (0x00, 0xA4): return select(command)
        case (0x00, 0xB0): return readBinary(command)
        case (0x00, 0x20): return verify(command)
        case (0x00, 0xCB): return retryCounter(command)
        case (0x00, 0x22) where command.p1 == 0xC1: return setPACE(command)
        case (0x00, 0x22): return setEnvironment(command)
        case (0x00, 0x86): return generalAuthenticate(command)
        case (0x00, 0x88): return internalAuthenticate(command)
        case (0x00, 0x2A): return computeSignature(command)
        default: return ResponseAPDU(sw: 0x6D00)
        }
    }

    // MARK: Files

    private func select(_ command: CommandAPDU) -> ResponseAPDU {
        switch command.p1 {
        case 0x04:
            guard [EstEID.mainAID, EstEID.authAID, EstEID.signAID].contains(command.data) else { return ResponseAPDU(sw: 0x6A82) }
            session.application = command.data
            session.inPersonalData = false
            session.selectedFile = nil
            session.verified.remove(.pin2)
            return ResponseAPDU(sw: 0x9000)
        case 0x00 where command.data.isEmpty || command.data == [0x3F, 0x00]:
            session.application = nil
            session.inPersonalData = false
            session.selectedFile = nil
            return ResponseAPDU(sw: 0x9000)
        case 0x01:
            guard session.application == EstEID.mainAID, command.data == EstEID.personalDataDF else { return ResponseAPDU(sw: 0x6A82) }
            session.inPersonalData = true
            return ResponseAPDU(sw: 0x9000)
        case 0x02 where command.data == EstEID.cardAccessFID:
            session.selectedFile = EstEID.cardAccessFID
            return fcp(size: Hex.decode(profile.cardAccess)!.count, wanted: command.p2 != 0x0C)
        case 0x02:
            guard session.inPersonalData, let content = files[command.data] else { return ResponseAPDU(sw: 0x6A82) }
            session.selectedFile = command.data
            return fcp(size: content.count, wanted: command.p2 != 0x0C)
        case 0x09:
            guard session.application == EstEID.mainAID, let content = files[command.data] else { return ResponseAPDU(sw: 0x6A82) }
            session.selectedFile = command.data
            var size = content.count
            if profile.hostile == .truncatedCertificate { size += 700 }
            return fcp(size: size, wanted: command.p2 != 0x0C)
        default:
            return ResponseAPDU(sw: 0x6A86)
        }
    }

    private func fcp(size: Int, wanted: Bool) -> ResponseAPDU {
        guard wanted else { return ResponseAPDU(sw: 0x9000) }
        if profile.hostile == .badTLV {
            return ResponseAPDU(data: [0x62, 0x30, 0x80, 0x02, UInt8(size >> 8), UInt8(size & 0xFF)], sw: 0x9000)
        }
        return ResponseAPDU(data: TLV.encode(0x62, TLV.encode(0x80, [UInt8(size >> 8), UInt8(size & 0xFF)])), sw: 0x9000)
    }

    private func readBinary(_ command: CommandAPDU) -> ResponseAPDU {
        guard let file = session.selectedFile else { return ResponseAPDU(sw: 0x6986) }
        let content = file == EstEID.cardAccessFID ? Hex.decode(profile.cardAccess)! : files[file] ?? []
        if profile.hostile == .oversized {
            return ResponseAPDU(data: [UInt8](repeating: 0x30, count: 65_000), sw: 0x9000)
        }
        let offset = Int(command.p1 & 0x7F) << 8 | Int(command.p2)
        guard offset <= content.count else { return ResponseAPDU(sw: 0x6B00) }
        if offset == content.count { return ResponseAPDU(sw: 0x6282) }
        let length = min(command.le ?? 256, content.count - offset)
        return ResponseAPDU(data: Array(content[offset..<(offset + length)]), sw: 0x9000)
    }

    // MARK: PINs

    private func pin(reference: UInt8) -> EstEID.PIN? {
        EstEID.PIN.allCases.first { $0.reference == reference || $0.reference & 0x0F == reference }
    }

    private func verify(_ command: CommandAPDU) -> ResponseAPDU {
        guard command.p1 == 0x00, let pin = pin(reference: command.p2), pin.reference == command.p2 else { return ResponseAPDU(sw: 0x6A86) }
        let left = retries[pin] ?? 0
        guard left > 0 else { return ResponseAPDU(sw: 0x6983) }
        guard command.data.count == EstEID.pinBlockLength else { return ResponseAPDU(sw: 0x6700) }
        let expected = EstEID.verify(pin, digits: Array((pin == .pin1 ? profile.pin1 : profile.pin2).utf8)).data
        if expected == command.data {
            retries[pin] = 3
            session.verified.insert(pin)
            return ResponseAPDU(sw: 0x9000)
        }
        retries[pin] = left - 1
        session.verified.remove(pin)
        return ResponseAPDU(sw: left - 1 == 0 ? 0x63C0 : 0x63C0 | UInt16(left - 1))
    }

    private func retryCounter(_ command: CommandAPDU) -> ResponseAPDU {
        guard command.p1 == 0x3F, command.p2 == 0xFF, command.data.count == 10, command.data[0] == 0x4D,
              let pin = pin(reference: command.data[6]) else { return ResponseAPDU(sw: 0x6A88) }
        let info = TLV.encode(0xA0, [0x9A, 0x01, 0x03, 0x9B, 0x01, UInt8(retries[pin] ?? 0)])
        let body = TLV.encode(0x70, TLV.encode(0xBF8100 | UInt32(pin.reference & 0x0F), info))
        return ResponseAPDU(data: body, sw: 0x9000)
    }

    // MARK: Keys

    private func setEnvironment(_ command: CommandAPDU) -> ResponseAPDU {
        switch (command.p2, command.data) {
        case (0xA4, EstEID.setAuthenticationEnvironment.data) where session.application == EstEID.authAID:
            session.environment = 0xA4
        case (0xB6, EstEID.setSigningEnvironment.data) where session.application == EstEID.signAID:
            session.environment = 0xB6
        default:
            return ResponseAPDU(sw: 0x6A80)
        }
        return ResponseAPDU(sw: 0x9000)
    }

    private func internalAuthenticate(_ command: CommandAPDU) -> ResponseAPDU {
        guard session.environment == 0xA4 else { return ResponseAPDU(sw: 0x6985) }
        guard session.verified.contains(.pin1) else { return ResponseAPDU(sw: 0x6982) }
        if profile.hostile == .unexpectedStatus { return ResponseAPDU(sw: 0x6F00) }
        guard (20...64).contains(command.data.count), let signature = try? authKey.sign(digest: EstEID.digestInput(command.data)) else {
            return ResponseAPDU(sw: 0x6700)
        }
        return ResponseAPDU(data: signature, sw: 0x9000)
    }

    private func computeSignature(_ command: CommandAPDU) -> ResponseAPDU {
        guard command.p1 == 0x9E, command.p2 == 0x9A, session.environment == 0xB6 else { return ResponseAPDU(sw: 0x6985) }
        guard session.verified.contains(.pin2) else { return ResponseAPDU(sw: 0x6982) }
        // PIN2 authorises one signature.
        session.verified.remove(.pin2)
        if profile.hostile == .unexpectedStatus { return ResponseAPDU(sw: 0x6F00) }
        guard command.data.count == 48, let signature = try? signKey.sign(digest: command.data) else { return ResponseAPDU(sw: 0x6700) }
        return ResponseAPDU(data: signature, sw: 0x9000)
    }

    // MARK: PACE (card side)

    private func setPACE(_ command: CommandAPDU) -> ResponseAPDU {
        guard profile.mode == .contactless, command.p2 == 0xA4,
              let objects = try? TLV.parse(command.data),
              let oid = objects.first(where: { $0.tag == 0x80 }),
              objects.first(where: { $0.tag == 0x83 })?.value == [0x02],
              let pace = try? PACESession(cardAccess: Hex.decode(profile.cardAccess)!),
              pace.protocolOID == oid.value else { return ResponseAPDU(sw: 0x6A80) }
        do {
            try pace.usePassword(can: Array(profile.can.utf8))
        } catch {
            return ResponseAPDU(sw: 0x6F00)
        }
        session = Session()
        session.pace = pace
        return ResponseAPDU(sw: 0x9000)
    }

    private func generalAuthenticate(_ command: CommandAPDU) -> ResponseAPDU {
        guard let pace = session.pace, !pace.secureMessagingActive,
              let outer = try? TLV.find(0x7C, in: command.data),
              let inner = try? TLV.parse(outer.value) else { return ResponseAPDU(sw: 0x6985) }
        func fail() -> ResponseAPDU {
            session = Session()
            return ResponseAPDU(sw: 0x6300)
        }
        do {
            switch (session.paceStep, inner.first?.tag) {
            case (0, nil):
                let nonce = try pace.encryptedNonce()
                session.paceStep = 1
                return ResponseAPDU(data: TLV.encode(0x7C, TLV.encode(0x80, nonce)), sw: 0x9000)
            case (1, 0x81):
                let mine = try pace.mappingData()
                try pace.mapGenerator(peerMappingData: inner[0].value)
                session.paceStep = 2
                return ResponseAPDU(data: TLV.encode(0x7C, TLV.encode(0x82, mine)), sw: 0x9000)
            case (2, 0x83):
                let mine = try pace.ephemeralPublicKey()
                try pace.agree(peerEphemeralKey: inner[0].value)
                session.paceStep = 3
                session.peerEphemeral = inner[0].value
                return ResponseAPDU(data: TLV.encode(0x7C, TLV.encode(0x84, mine)), sw: 0x9000)
            case (3, 0x85):
                // A wrong CAN on the terminal's side shows here: its token does not verify.
                try pace.verify(peerToken: inner[0].value)
                let token = try pace.authenticationToken(peerEphemeralKey: session.peerEphemeral)
                try pace.startSecureMessaging()
                session.paceStep = 4
                return ResponseAPDU(data: TLV.encode(0x7C, TLV.encode(0x86, token)), sw: 0x9000)
            default:
                return fail()
            }
        } catch {
            return fail()
        }
    }
}

struct ProfileError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
