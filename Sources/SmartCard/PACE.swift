import CEAC
import OpenSSLCrypto
import Synchronization

/// The one wrapper over OpenPACE (libeac): PACE key agreement (BSI TR-03110 part 2 §4.2,
/// ICAO 9303 part 11 §4.4) for either role, and ISO 7816-4 secure messaging with the keys it
/// derives. Every cryptographic step is libeac's; this file only moves bytes in and out of
/// `BUF_MEM` and builds the secure-messaging data objects around them. `BUF_MEM` and OpenSSL's
/// error queue are part of libeac's interface (its functions take and return `BUF_MEM` and
/// report failures on the queue), so they are reached through CEAC, not the OpenSSLCrypto
/// module, whose API carries no C types.
///
/// Not thread-safe: one PACE session belongs to one card operation.
public final class PACESession {
    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// EF.CardAccess names no PACE protocol libeac supports.
        case unsupportedCardAccess
        /// A step of the key agreement failed: with the CAN, this is how a wrong CAN shows.
        case keyAgreement(String)
        /// A secure-messaging response whose MAC or structure does not verify.
        case secureMessaging(String)

        public var description: String {
            switch self {
            case .unsupportedCardAccess: "EF.CardAccess names no supported PACE protocol"
            case .keyAgreement(let step): "PACE failed at \(step)"
            case .secureMessaging(let what): "secure messaging: \(what)"
            }
        }
    }

    private let context: UnsafeMutablePointer<EAC_CTX>
    private var secret: UnsafeMutablePointer<PACE_SEC>?
    public private(set) var secureMessagingActive = false

    private static let initialised: Void = { EAC_init() }()

    /// A session for the protocol and domain parameters EF.CardAccess announces.
    public init(cardAccess: [UInt8]) throws(Failure) {
        _ = Self.initialised
        guard let context = EAC_CTX_new() else { throw .keyAgreement("context") }
        let ok = cardAccess.withUnsafeBufferPointer { EAC_CTX_init_ef_cardaccess($0.baseAddress, $0.count, context) }
        guard ok == 1, authd_eac_pace_parameter_id(context) >= 0 else {
            EAC_CTX_clear_free(context)
            ERR_clear_error()
            throw .unsupportedCardAccess
        }
        self.context = context
    }

    deinit {
        if let secret { PACE_SEC_clear_free(secret) }
        EAC_CTX_clear_free(context)
    }

    /// The protocol OID's content bytes, for MSE:Set AT tag 80.
    public var protocolOID: [UInt8] {
        var buffer = [UInt8](repeating: 0, count: 32)
        let length = authd_eac_pace_oid(context, &buffer, Int32(buffer.count))
        return length > 0 ? Array(buffer[0..<Int(length)]) : []
    }

    /// The CAN as the PACE password (copied into libeac, which wipes it on free).
    public func usePassword(can: [UInt8]) throws(Failure) {
        let made = can.withUnsafeBufferPointer { buffer in
            buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buffer.count) {
                PACE_SEC_new($0, buffer.count, PACE_CAN)
            }
        }
        guard let made else { throw .keyAgreement("password") }
        if let secret { PACE_SEC_clear_free(secret) }
        secret = made
    }

    // MARK: Key agreement steps (the same calls serve the terminal and the card)

    /// Card: a fresh nonce, encrypted under the password.
    public func encryptedNonce() throws(Failure) -> [UInt8] {
        try take("nonce") { PACE_STEP1_enc_nonce(context, secret) }
    }

    /// Terminal: recovers the card's nonce; with a wrong CAN this yields a wrong nonce, and the
    /// mismatch shows at the authentication-token step.
    public func decryptNonce(_ encrypted: [UInt8]) throws(Failure) {
        // libeac turns an empty cryptogram into an empty nonce, which no password went into:
        // a card that does not know the CAN could then complete PACE.
        guard !encrypted.isEmpty else { throw .keyAgreement("nonce decryption") }
        try withBuffer(encrypted) { buffer throws(Failure) in
            guard PACE_STEP2_dec_nonce(context, secret, buffer) == 1 else { throw .keyAgreement("nonce decryption") }
        }
    }

    public func mappingData() throws(Failure) -> [UInt8] {
        try take("mapping data") { PACE_STEP3A_generate_mapping_data(context) }
    }

    public func mapGenerator(peerMappingData: [UInt8]) throws(Failure) {
        try withBuffer(peerMappingData) { buffer throws(Failure) in
            guard PACE_STEP3A_map_generator(context, buffer) == 1 else { throw .keyAgreement("generator mapping") }
        }
    }

    public func ephemeralPublicKey() throws(Failure) -> [UInt8] {
        try take("ephemeral key") { PACE_STEP3B_generate_ephemeral_key(context) }
    }

    /// Computes the shared secret and derives the session keys.
    public func agree(peerEphemeralKey: [UInt8]) throws(Failure) {
        try withBuffer(peerEphemeralKey) { buffer throws(Failure) in
            guard PACE_STEP3B_compute_shared_secret(context, buffer) == 1 else { throw .keyAgreement("shared secret") }
        }
        guard PACE_STEP3C_derive_keys(context) == 1 else { throw .keyAgreement("key derivation") }
    }

    public func authenticationToken(peerEphemeralKey: [UInt8]) throws(Failure) -> [UInt8] {
        try withBuffer(peerEphemeralKey) { buffer throws(Failure) in
            try take("authentication token") { PACE_STEP3D_compute_authentication_token(context, buffer) }
        }
    }

    public func verify(peerToken: [UInt8]) throws(Failure) {
        try withBuffer(peerToken) { buffer throws(Failure) in
            guard PACE_STEP3D_verify_authentication_token(context, buffer) == 1 else { throw .keyAgreement("authentication token") }
        }
    }

    /// Switches to the derived keys with the send sequence counter at zero.
    public func startSecureMessaging() throws(Failure) {
        guard EAC_CTX_set_encryption_ctx(context, EAC_ID_PACE) == 1, EAC_reset_ssc(context) == 1 else {
            throw .keyAgreement("secure messaging keys")
        }
        if let secret { PACE_SEC_clear_free(secret); self.secret = nil }
        secureMessagingActive = true
    }

    // MARK: Secure messaging (ISO 7816-4 §10, BSI TR-03110 part 3 §F)

    /// Terminal: protects a command.
    public func protect(_ command: CommandAPDU) throws(Failure) -> CommandAPDU {
        try step()
        let cla = command.cla | 0x0C
        var objects: [UInt8] = []
        if !command.data.isEmpty {
            let cryptogram = try encrypt(command.data)
            objects += command.ins & 1 == 1 ? TLV.encode(0x85, cryptogram) : TLV.encode(0x87, [0x01] + cryptogram)
        }
        if let le = command.le {
            objects += TLV.encode(0x97, le > 256 ? [UInt8((le % 65536) >> 8), UInt8(le & 0xFF)] : [UInt8(le & 0xFF)])
        }
        let header = try pad([cla, command.ins, command.p1, command.p2])
        let mac = try authenticate(header + objects)
        let data = objects + TLV.encode(0x8E, mac)
        return CommandAPDU(cla: cla, ins: command.ins, p1: command.p1, p2: command.p2, data: data,
                           le: data.count > 255 || (command.le ?? 0) > 256 ? 65536 : 256)
    }

    /// Terminal: checks and opens the card's protected response.
    public func unprotect(_ response: ResponseAPDU) throws(Failure) -> ResponseAPDU {
        try step()
        // A card refusing the protected command may answer with a plain status word (6987,
        // 6988, 6982): no data to trust, only the refusal, which is passed on.
        if !response.isSuccess && response.data.isEmpty { return response }
        let objects: [TLV]
        do { objects = try TLV.parse(response.data) } catch { throw .secureMessaging("bad response objects") }
        guard let macObject = objects.last, macObject.tag == 0x8E,
              let status = objects.first(where: { $0.tag == 0x99 }), status.value.count == 2 else {
            throw .secureMessaging("response without status or MAC")
        }
        let covered = objects.dropLast().flatMap { $0.encoded() }
        try verifyMAC(covered, macObject.value)
        var data: [UInt8] = []
        if let encrypted = objects.first(where: { $0.tag == 0x87 || $0.tag == 0x85 }) {
            var cryptogram = encrypted.value
            if encrypted.tag == 0x87 {
                guard cryptogram.first == 0x01 else { throw .secureMessaging("unknown padding indicator") }
                cryptogram.removeFirst()
            }
            data = try decrypt(cryptogram)
        }
        return ResponseAPDU(data: data, sw: UInt16(status.value[0]) << 8 | UInt16(status.value[1]))
    }

    /// Card: checks and opens a protected command.
    public func unprotect(_ command: CommandAPDU) throws(Failure) -> CommandAPDU {
        try step()
        guard command.cla & 0x0C == 0x0C else { throw .secureMessaging("plain command during secure messaging") }
        let objects: [TLV]
        do { objects = try TLV.parse(command.data) } catch { throw .secureMessaging("bad command objects") }
        guard let macObject = objects.last, macObject.tag == 0x8E else { throw .secureMessaging("command without MAC") }
        let header = try pad([command.cla, command.ins, command.p1, command.p2])
        try verifyMAC(header + objects.dropLast().flatMap { $0.encoded() }, macObject.value)
        var plain = CommandAPDU(cla: command.cla & ~0x0C, ins: command.ins, p1: command.p1, p2: command.p2)
        for object in objects.dropLast() {
            switch object.tag {
            case 0x87:
                guard object.value.first == 0x01 else { throw .secureMessaging("unknown padding indicator") }
                plain.data = try decrypt(Array(object.value.dropFirst()))
            case 0x85:
                plain.data = try decrypt(object.value)
            case 0x97:
                let value = object.value.reduce(0) { $0 << 8 | Int($1) }
                plain.le = value == 0 ? (object.value.count > 1 ? 65536 : 256) : value
            default:
                throw .secureMessaging("unexpected object in command")
            }
        }
        return plain
    }

    /// Card: protects a response.
    public func protect(_ response: ResponseAPDU, oddInstruction: Bool = false) throws(Failure) -> ResponseAPDU {
        try step()
        var objects: [UInt8] = []
        if !response.data.isEmpty {
            let cryptogram = try encrypt(response.data)
            objects += oddInstruction ? TLV.encode(0x85, cryptogram) : TLV.encode(0x87, [0x01] + cryptogram)
        }
        objects += TLV.encode(0x99, [response.sw1, response.sw2])
        let mac = try authenticate(objects)
        return ResponseAPDU(data: objects + TLV.encode(0x8E, mac), sw: 0x9000)
    }

    // MARK: libeac plumbing

    private func step() throws(Failure) {
        guard secureMessagingActive else { throw .secureMessaging("no session") }
        guard EAC_increment_ssc(context) == 1 else { throw .secureMessaging("counter") }
    }

    private func pad(_ bytes: [UInt8]) throws(Failure) -> [UInt8] {
        try withBuffer(bytes) { buffer throws(Failure) in try take("padding") { EAC_add_iso_pad(context, buffer) } }
    }

    /// The padded plaintext is wiped: for a VERIFY it is the PIN block.
    private func encrypt(_ plain: [UInt8]) throws(Failure) -> [UInt8] {
        var padded = try pad(plain)
        defer { OpenSSL.wipe(&padded) }
        return try withBuffer(padded) { buffer throws(Failure) in try take("encryption") { EAC_encrypt(context, buffer) } }
    }

    private func decrypt(_ cryptogram: [UInt8]) throws(Failure) -> [UInt8] {
        guard !cryptogram.isEmpty, cryptogram.count % 16 == 0 else { throw .secureMessaging("cryptogram length") }
        let padded = try withBuffer(cryptogram) { buffer throws(Failure) in try take("decryption") { EAC_decrypt(context, buffer) } }
        // ISO/IEC 9797-1 method 2: strip 80 00…; anything else is a forgery or a bug.
        guard let marker = padded.lastIndex(where: { $0 != 0 }), padded[marker] == 0x80 else {
            throw .secureMessaging("bad padding")
        }
        return Array(padded[..<marker])
    }

    private func authenticate(_ bytes: [UInt8]) throws(Failure) -> [UInt8] {
        let padded = try pad(bytes)
        return try withBuffer(padded) { buffer throws(Failure) in try take("MAC") { EAC_authenticate(context, buffer) } }
    }

    private func verifyMAC(_ covered: [UInt8], _ mac: [UInt8]) throws(Failure) {
        let expected = try authenticate(covered)
        // Constant time: the MAC is a secret-dependent value.
        guard OpenSSL.constantTimeEquals(expected, mac) else {
            throw .secureMessaging("MAC does not verify")
        }
    }

    /// Copies `bytes` into a temporary BUF_MEM for one libeac call.
    private func withBuffer<T>(_ bytes: [UInt8], _ body: (UnsafeMutablePointer<BUF_MEM>) throws(Failure) -> T) throws(Failure) -> T {
        guard let buffer = BUF_MEM_new(), BUF_MEM_grow(buffer, bytes.count) != 0 || bytes.isEmpty else {
            throw .keyAgreement("memory")
        }
        defer { BUF_MEM_clear_free(buffer) }
        if !bytes.isEmpty { bytes.withUnsafeBytes { _ = memcpy(buffer.pointee.data, $0.baseAddress!, bytes.count) } }
        buffer.pointee.length = bytes.count
        return try body(buffer)
    }

    /// Takes ownership of a BUF_MEM libeac returned (nil = that step failed).
    private func take(_ step: String, _ call: () -> UnsafeMutablePointer<BUF_MEM>?) throws(Failure) -> [UInt8] {
        guard let buffer = call() else {
            ERR_clear_error()
            throw .keyAgreement(step)
        }
        defer { BUF_MEM_clear_free(buffer) }
        guard buffer.pointee.length > 0, let data = buffer.pointee.data else { return [] }
        return data.withMemoryRebound(to: UInt8.self, capacity: buffer.pointee.length) {
            Array(UnsafeBufferPointer(start: $0, count: buffer.pointee.length))
        }
    }
}
