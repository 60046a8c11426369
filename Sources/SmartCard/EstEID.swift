/// The Estonian ID card (IDEMIA 2018 "Cosmo" generation): application and file identifiers,
/// PIN references and padding, key references and the commands built from them, as used by
/// web-eid/libelectronic-id (`EIDIDEMIA.cpp`, `pcsc-common.hpp`) and the card's
/// documentation. The daemon's reader code and the virtual card both speak from this table.
public enum EstEID {
    /// The main application (holds the personal data file and the certificate files).
    public static let mainAID: [UInt8] = [0xA0, 0x00, 0x00, 0x00, 0x77, 0x01, 0x08, 0x00, 0x07, 0x00, 0x00, 0xFE, 0x00, 0x00, 0x01, 0x00]
    /// The authentication application ("AWP").
    public static let authAID: [UInt8] = [0xE8, 0x28, 0xBD, 0x08, 0x0F, 0xF2, 0x50, 0x4F, 0x54, 0x20, 0x41, 0x57, 0x50]
    /// The qualified signature application ("QSCD Application").
    public static let signAID: [UInt8] = Array("QSCD Application".utf8)

    /// Certificate files, selected by path from the main application (P1 = 09).
    public static let authCertificatePath: [UInt8] = [0xAD, 0xF1, 0x34, 0x01]
    public static let signCertificatePath: [UInt8] = [0xAD, 0xF2, 0x34, 0x1F]
    /// The personal data DF and its records 5001…500F.
    public static let personalDataDF: [UInt8] = [0x50, 0x00]
    /// EF.CardAccess (PACE parameters), readable before PACE.
    public static let cardAccessFID: [UInt8] = [0x01, 0x1C]

    public static let pinPadding: UInt8 = 0xFF
    public static let pinBlockLength = 12

    /// The card's contact ATR (libelectronic-id `ESTEID_IDEMIA_V1_ATR`).
    public static let contactATR: [UInt8] = [0x3B, 0xDB, 0x96, 0x00, 0x80, 0xB1, 0xFE, 0x45, 0x1F, 0x83, 0x00, 0x12, 0x23, 0x3F, 0x53, 0x65, 0x49, 0x44, 0x0F, 0x90, 0x00, 0xF1]
    /// Contact ATRs of the IDEMIA generation (2018 and its 2021 "v2" update).
    public static let contactATRs: [[UInt8]] = [
        contactATR,
        [0x3B, 0xDC, 0x96, 0x00, 0x80, 0xB1, 0xFE, 0x45, 0x1F, 0x83, 0x00, 0x12, 0x23, 0x3F, 0x54, 0x65, 0x49, 0x44, 0x32, 0x0F, 0x90, 0x00, 0xC3],
    ]

    /// Read the certificate in blocks of this size (libelectronic-id's reader workaround).
    public static let readBlock = 0xC0

    public enum PIN: Sendable, CaseIterable {
        case pin1, pin2
        public var reference: UInt8 { self == .pin1 ? 0x01 : 0x85 }
        public var lengths: ClosedRange<Int> { self == .pin1 ? 4...12 : 5...12 }
        public var application: [UInt8] { self == .pin1 ? EstEID.authAID : EstEID.signAID }
    }

    /// Personal data records, by file number (50xx).
    public enum Field: UInt8, Sendable, CaseIterable {
        case surname = 0x01, givenNames = 0x02, sex = 0x03, citizenship = 0x04, birth = 0x05
        case personalCode = 0x06, documentNumber = 0x07, expiry = 0x08
    }

    // MARK: Commands

    public static func selectApplication(_ aid: [UInt8]) -> CommandAPDU {
        CommandAPDU(ins: 0xA4, p1: 0x04, p2: 0x0C, data: aid)
    }

    /// SELECT by path from the current DF, asking for the FCP (size in tag 80/81).
    public static func selectPath(_ path: [UInt8]) -> CommandAPDU {
        CommandAPDU(ins: 0xA4, p1: 0x09, p2: 0x04, data: path, le: 256)
    }

    public static func selectDF(_ fid: [UInt8]) -> CommandAPDU {
        CommandAPDU(ins: 0xA4, p1: 0x01, p2: 0x0C, data: fid)
    }

    /// SELECT an EF under the current DF, asking for the FCP.
    public static func selectEF(_ fid: [UInt8]) -> CommandAPDU {
        CommandAPDU(ins: 0xA4, p1: 0x02, p2: 0x04, data: fid, le: 256)
    }

    public static func readBinary(offset: Int, length: Int) -> CommandAPDU {
        CommandAPDU(ins: 0xB0, p1: UInt8((offset >> 8) & 0x7F), p2: UInt8(offset & 0xFF), le: length)
    }

    /// VERIFY with the PIN padded with FF to 12 bytes. The caller wipes the returned data.
    public static func verify(_ pin: PIN, digits: [UInt8]) -> CommandAPDU {
        var block = digits
        block += [UInt8](repeating: pinPadding, count: max(0, pinBlockLength - digits.count))
        return CommandAPDU(ins: 0x20, p1: 0x00, p2: pin.reference, data: block)
    }

    /// GET DATA (odd INS) for a PIN's retry counter; the answer is 70/BF81xx/A0 {9A max, 9B left}.
    public static func retryCounter(_ pin: PIN) -> CommandAPDU {
        let reference = pin.reference & 0x0F
        return CommandAPDU(ins: 0xCB, p1: 0x3F, p2: 0xFF, data: [0x4D, 0x08, 0x70, 0x06, 0xBF, 0x81, reference, 0x02, 0xA0, 0x80], le: 256)
    }

    /// MSE:SET for INTERNAL AUTHENTICATE (ECDSA, key 81).
    public static let setAuthenticationEnvironment = CommandAPDU(ins: 0x22, p1: 0x41, p2: 0xA4, data: [0x80, 0x01, 0x04, 0x84, 0x01, 0x81])
    /// MSE:SET for PSO: COMPUTE DIGITAL SIGNATURE (ECDSA, key 9F).
    public static let setSigningEnvironment = CommandAPDU(ins: 0x22, p1: 0x41, p2: 0xB6, data: [0x80, 0x01, 0x54, 0x84, 0x01, 0x9F])

    public static func internalAuthenticate(_ digest: [UInt8]) -> CommandAPDU {
        CommandAPDU(ins: 0x88, p1: 0x00, p2: 0x00, data: digest, le: 256)
    }

    public static func computeSignature(_ digest: [UInt8]) -> CommandAPDU {
        CommandAPDU(ins: 0x2A, p1: 0x9E, p2: 0x9A, data: digest, le: 256)
    }

    /// MSE:Set AT for PACE with the CAN (password reference 02).
    public static func setPACE(protocolOID: [UInt8]) -> CommandAPDU {
        CommandAPDU(ins: 0x22, p1: 0xC1, p2: 0xA4, data: TLV.encode(0x80, protocolOID) + [0x83, 0x01, 0x02])
    }

    /// GENERAL AUTHENTICATE with dynamic authentication data (tag 7C); chained except the last.
    public static func generalAuthenticate(_ objects: [UInt8], last: Bool) -> CommandAPDU {
        CommandAPDU(cla: last ? 0x00 : 0x10, ins: 0x86, p1: 0x00, p2: 0x00, data: TLV.encode(0x7C, objects), le: 256)
    }

    /// The card's ECDSA signatures are raw r‖s over P-384.
    public static let signatureLength = 96
    /// ECDSA over P-384 takes at most 48 bytes of digest (FIPS 186-5 §6.4): longer digests are
    /// truncated, shorter ones left-padded with zeros, as libelectronic-id does.
    public static func digestInput(_ digest: [UInt8]) -> [UInt8] {
        if digest.count >= 48 { return Array(digest.prefix(48)) }
        return [UInt8](repeating: 0, count: 48 - digest.count) + digest
    }
}
