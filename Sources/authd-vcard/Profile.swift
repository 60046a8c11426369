import Foundation

/// Everything a virtual card is: its mode, secrets, retry counters, personal data, keys and
/// certificates. Written by `authd-vcard generate`, read by `authd-vcard run`.
struct CardProfile: Codable {
    enum Mode: String, Codable { case contact, contactless }

    /// Misbehaviour for robustness tests; nil for a well-behaved card.
    enum Hostility: String, Codable, CaseIterable {
        /// File control parameters whose TLV length runs past the data.
        case badTLV = "bad_tlv"
        /// The certificate file is shorter than its announced size.
        case truncatedCertificate = "truncated_certificate"
        /// Status words no command expects (6F00) for authentication and signing.
        case unexpectedStatus = "unexpected_status"
        /// Responses far larger than asked for.
        case oversized
    }

    struct Person: Codable {
        var surname: String
        var givenNames: String
        var sex: String
        var citizenship: String
        /// "DD MM YYYY" as the card stores it, followed by the place ("EST").
        var birth: String
        var personalCode: String
        var documentNumber: String
        /// "DD MM YYYY".
        var expiry: String

        enum CodingKeys: String, CodingKey {
            case surname, sex, citizenship, birth, expiry
            case givenNames = "given_names", personalCode = "personal_code", documentNumber = "document_number"
        }
    }

    var mode: Mode
    var can: String
    var pin1: String
    var pin2: String
    var pin1Retries: Int
    var pin2Retries: Int
    var person: Person
    /// PEM private keys (P-384) and base64 DER certificates.
    var authKey: String
    var authCertificate: String
    var signKey: String
    var signCertificate: String
    /// EF.CardAccess, hex (PACE protocol and domain parameters).
    var cardAccess: String
    var hostile: Hostility?

    enum CodingKeys: String, CodingKey {
        case mode, can, pin1, pin2, person, hostile
        case pin1Retries = "pin1_retries", pin2Retries = "pin2_retries"
        case authKey = "auth_key", authCertificate = "auth_certificate", signKey = "sign_key", signCertificate = "sign_certificate"
        case cardAccess = "card_access"
    }

    static func load(_ path: String) throws -> CardProfile {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        return try JSONDecoder().decode(CardProfile.self, from: data)
    }

    func write(_ path: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(self).write(to: URL(fileURLWithPath: path), options: .atomic)
        chmod(path, 0o600)
    }
}
