import FoundationEssentials
import OpenSSLCrypto
import Protocol
import SmartCard

/// Card-signed tokens (DESIGN §6): the JWT signing input authd builds from the card's
/// certificate and the request, and the results once the card has signed. Pure functions.
enum CardTokens {
    enum Format: Sendable {
        case jwt
        case webEID(origin: String, nonce: String)

        init(_ params: CardLogin.Params) throws(InvalidParameter) {
            try TokenStamp.checkText(params.aud, field: "aud")
            if let nonce = params.nonce, nonce.isEmpty || nonce.count > 512 {
                throw InvalidParameter("nonce must be 1–512 characters", field: "nonce")
            }
            switch params.format ?? "jwt" {
            case "jwt":
                self = .jwt
            case "web-eid":
                // web-eid:1.0: the origin is https:// or wss:// host[:port] with nothing after
                // it, and the challenge nonce is 44–128 characters (base64 of at least 256 random bits).
                guard let url = URL(string: params.aud), let scheme = url.scheme, scheme == "https" || scheme == "wss",
                      let host = url.host, !host.isEmpty, url.path.isEmpty, url.query == nil, url.fragment == nil, url.user == nil,
                      "\(scheme)://\(host)\(url.port.map { ":\($0)" } ?? "")" == params.aud else {
                    throw InvalidParameter("for web-eid, aud must be an https or wss origin such as https://example.com", field: "aud")
                }
                guard let nonce = params.nonce, (44...128).contains(nonce.count) else {
                    throw InvalidParameter("for web-eid, nonce must be 44–128 characters", field: "nonce")
                }
                self = .webEID(origin: params.aud, nonce: nonce)
            default:
                throw InvalidParameter("format must be jwt or web-eid", field: "format")
            }
        }

        /// Whether a saved PIN1 may sign this login. Never a website's (`web-eid`), whichever
        /// route asks: typing PIN1 is how the person hands their name and personal code to the
        /// site, as web-eid-app asks it every time; a saved one would sign them in without a word.
        var usesSavedPIN1: Bool {
            switch self {
            case .jwt: true
            case .webEID: false
            }
        }
    }

    /// What the card signs: a JWT signing input (and its SHA-384), or the Web eID digest.
    struct Input: Sendable {
        let signingInput: String?
        let digest: [UInt8]
    }

    struct Signed: Sendable {
        let certificate: [UInt8]
        let input: Input
        let signature: [UInt8]
    }

    /// The document to sign, from `hash` + `hash_alg` or from `data`.
    struct DocumentHash: Sendable {
        let digest: [UInt8]
        let algorithm: Digest

        init(_ params: CardSign.Params) throws(InvalidParameter) {
            try TokenStamp.checkText(params.aud, field: "aud")
            guard (1...1000).contains(params.description.count) else {
                throw InvalidParameter("description must say in 1–1000 characters what is signed", field: "description")
            }
            switch (params.hash, params.data) {
            case (let hash?, nil):
                guard let name = params.hashAlg, let algorithm = Digest(rawValue: name) else {
                    throw InvalidParameter("hash_alg must be SHA-256, SHA-384 or SHA-512", field: "hash_alg")
                }
                guard let digest = Base64URL.decode(hash), digest.count == algorithm.length else {
                    throw InvalidParameter("hash must be the base64url \(algorithm.rawValue) digest (\(algorithm.length) bytes)", field: "hash")
                }
                self.digest = digest
                self.algorithm = algorithm
            case (nil, let data?):
                guard let bytes = Base64URL.decode(data) else { throw InvalidParameter("data must be base64url", field: "data") }
                let algorithm = params.hashAlg.flatMap(Digest.init(rawValue:)) ?? .sha384
                if let name = params.hashAlg, Digest(rawValue: name) == nil {
                    throw InvalidParameter("hash_alg must be SHA-256, SHA-384 or SHA-512", field: "hash_alg")
                }
                self.digest = algorithm.hash(bytes)
                self.algorithm = algorithm
            default:
                throw InvalidParameter("give either hash (with hash_alg) or data", field: "hash")
            }
        }
    }

    struct Subject {
        let personalCode: String
        let serialNumber: String
        let givenName: String?
        let familyName: String?
    }

    /// The subject of a card certificate; the certificate must carry a P-384 key.
    static func subject(_ certificate: [UInt8]) throws(CardFailure) -> (X509Certificate, Subject) {
        guard let parsed = try? X509Certificate(der: certificate) else { throw .cardError("the certificate does not parse") }
        guard parsed.hasP384Key else { throw .unsupported }
        guard let serial = parsed.subjectAttribute(.serialNumber) else { throw .cardError("the certificate has no serialNumber") }
        // ETSI EN 319 412-1 semantics identifier: "PNO" + country + "-" + personal code.
        let code = serial.hasPrefix("PNO") && serial.count > 6 && serial.dropFirst(5).first == "-" ? String(serial.dropFirst(6)) : serial
        return (parsed, Subject(personalCode: code, serialNumber: serial,
                                givenName: parsed.subjectAttribute(.givenName), familyName: parsed.subjectAttribute(.surname)))
    }

    /// The claims of the card's tokens: the subject from the certificate, then for a login the
    /// caller's `nonce` and `amr`, for a signature what is signed (`hash`, `hash_alg`,
    /// `description`). The claims a token lacks are left out.
    struct Claims: Encodable {
        let sub: String
        let serialNumber: String
        let givenName: String?
        let familyName: String?
        let aud: String
        var nonce: String?
        let iat: Int64
        let exp: Int64
        let jti: String
        let azp: String?
        var amr: [String]?
        var hash: String?
        var hashAlg: String?
        var description: String?

        init(_ subject: Subject, aud: String, stamp: TokenStamp) {
            sub = subject.personalCode
            serialNumber = subject.serialNumber
            givenName = subject.givenName
            familyName = subject.familyName
            self.aud = aud
            iat = stamp.issuedAt
            exp = stamp.expires
            jti = stamp.jti
            azp = stamp.azp
        }

        enum CodingKeys: String, CodingKey {
            case sub, aud, nonce, iat, exp, jti, azp, amr, hash, description
            case serialNumber = "serial_number", givenName = "given_name", familyName = "family_name", hashAlg = "hash_alg"
        }
    }

    static func loginInput(format: Format, certificate: [UInt8], params: CardLogin.Params, stamp: TokenStamp) throws(CardFailure) -> Input {
        let (_, subject) = try subject(certificate)
        switch format {
        case .webEID(let origin, let nonce):
            // web-eid:1.0 signs hash(hash(origin) ‖ hash(nonce)) with the key's hash (SHA-384).
            return Input(signingInput: nil, digest: Digest.sha384.hash(Digest.sha384.hash(Array(origin.utf8)) + Digest.sha384.hash(Array(nonce.utf8))))
        case .jwt:
            var claims = Claims(subject, aud: params.aud, stamp: stamp)
            claims.nonce = params.nonce
            claims.amr = ["sc", "pin"]
            guard let input = try? JWS.certificateSigningInput(certificate: certificate, claims: claims) else { throw .cardError("claims") }
            return Input(signingInput: input, digest: Digest.sha384.hash(Array(input.utf8)))
        }
    }

    static func signatureInput(certificate: [UInt8], document: DocumentHash, params: CardSign.Params, stamp: TokenStamp) throws(CardFailure) -> Input {
        let (_, subject) = try subject(certificate)
        var claims = Claims(subject, aud: params.aud, stamp: stamp)
        claims.hash = Base64URL.encode(document.digest)
        claims.hashAlg = document.algorithm.rawValue
        claims.description = params.description
        guard let input = try? JWS.certificateSigningInput(certificate: certificate, claims: claims) else { throw .cardError("claims") }
        return Input(signingInput: input, digest: Digest.sha384.hash(Array(input.utf8)))
    }

    /// The card's signature must verify with its own certificate before anything is handed out.
    private static func checked(_ signed: Signed, digest: [UInt8]? = nil) throws(CardFailure) -> X509Certificate {
        let (certificate, _) = try subject(signed.certificate)
        guard certificate.verifies(rawSignature: signed.signature, digest: EstEID.digestInput(digest ?? signed.input.digest)) else {
            throw .cardError("the card's signature does not verify with its certificate")
        }
        return certificate
    }

    static func loginResult(format: Format, _ signed: Signed) throws(CardFailure) -> CardLogin.Result {
        _ = try checked(signed)
        switch format {
        case .jwt:
            return CardLogin.Result(format: "jwt", token: signed.input.signingInput! + "." + Base64URL.encode(signed.signature), webEid: nil)
        case .webEID:
            let token = WebEIDToken(unverifiedCertificate: Data(signed.certificate).base64EncodedString(), algorithm: "ES384",
                                    signature: Data(signed.signature).base64EncodedString(), format: "web-eid:1.0",
                                    appVersion: "https://github.com/authd/authd/releases/\(DaemonVersion.string)")
            return CardLogin.Result(format: "web-eid", token: nil, webEid: token)
        }
    }

    static func signResult(_ signed: Signed, documentSignature: [UInt8], document: DocumentHash) throws(CardFailure) -> CardSign.Result {
        let certificate = try checked(signed)
        guard certificate.verifies(rawSignature: documentSignature, digest: EstEID.digestInput(document.digest)) else {
            throw .cardError("the card's document signature does not verify with its certificate")
        }
        return CardSign.Result(token: signed.input.signingInput! + "." + Base64URL.encode(signed.signature),
                               signature: Base64URL.encode(documentSignature), certificate: Data(signed.certificate).base64EncodedString(),
                               hash: Base64URL.encode(document.digest), hashAlg: document.algorithm.rawValue)
    }
}

/// The personal data file's texts as the protocol's result, dates in ISO 8601.
enum PersonalData {
    /// "DD MM YYYY" (optionally followed by a place) → ("YYYY-MM-DD", place).
    static func date(_ text: String?) -> (String?, String?) {
        guard let text else { return (nil, nil) }
        let parts = text.split(separator: " ")
        guard parts.count >= 3, let day = Int(parts[0]), let month = Int(parts[1]), let year = Int(parts[2]),
              (1...31).contains(day), (1...12).contains(month), (1900...2200).contains(year) else { return (nil, nil) }
        let iso = "\(year)-\(month < 10 ? "0" : "")\(month)-\(day < 10 ? "0" : "")\(day)"
        let place = parts.count > 3 ? parts[3...].joined(separator: " ") : nil
        return (iso, place)
    }

    static func result(_ fields: [EstEID.Field: String]) -> CardRead.Result {
        let (birth, place) = date(fields[.birth])
        return CardRead.Result(
            surname: fields[.surname] ?? "", givenNames: fields[.givenNames] ?? "", sex: fields[.sex] ?? "",
            citizenship: fields[.citizenship] ?? "", dateOfBirth: birth, placeOfBirth: place,
            personalCode: fields[.personalCode] ?? "", documentNumber: fields[.documentNumber] ?? "", expiry: date(fields[.expiry]).0)
    }
}
