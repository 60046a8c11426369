// The ID card: readers, personal data, card-signed login and signature tokens, the saved CAN
// and PIN1. The prompts a card operation raises are in Prompts.swift.

/// `card.readers` — the PC/SC readers and whether a card is in each.
public enum CardReaders: RPCMethod {
    public static let name = "card.readers"
    public typealias Params = NoParams
    public struct Reader: Codable, Sendable, Equatable {
        public var name: String
        public var cardPresent: Bool
        /// The card's ATR, hex, when one is present.
        public var atr: String?
        public init(name: String, cardPresent: Bool, atr: String?) {
            self.name = name; self.cardPresent = cardPresent; self.atr = atr
        }
        enum CodingKeys: String, CodingKey { case name, atr, cardPresent = "card_present" }
    }
    public struct Result: Codable, Sendable, Equatable {
        public var readers: [Reader]
        public init(readers: [Reader]) { self.readers = readers }
    }
}

/// `card.read` — the personal data file, after waiting up to `timeout_s` for the card.
public enum CardRead: RPCMethod {
    public static let name = "card.read"
    public struct Params: Codable, Sendable, Equatable {
        public var timeoutS: Int?
        /// Who asks for the CAN: `client` (default) or `desktop` (DESIGN §12).
        public var prompt: PromptRoute?
        public init(timeoutS: Int? = nil, prompt: PromptRoute? = nil) { self.timeoutS = timeoutS; self.prompt = prompt }
        enum CodingKeys: String, CodingKey { case prompt, timeoutS = "timeout_s" }
    }
    public struct Result: Codable, Sendable, Equatable {
        public var surname: String
        public var givenNames: String
        public var sex: String
        public var citizenship: String
        /// ISO 8601 date (YYYY-MM-DD).
        public var dateOfBirth: String?
        public var placeOfBirth: String?
        public var personalCode: String
        public var documentNumber: String
        /// ISO 8601 date (YYYY-MM-DD).
        public var expiry: String?
        public init(surname: String, givenNames: String, sex: String, citizenship: String, dateOfBirth: String?, placeOfBirth: String?,
                    personalCode: String, documentNumber: String, expiry: String?) {
            self.surname = surname; self.givenNames = givenNames; self.sex = sex; self.citizenship = citizenship
            self.dateOfBirth = dateOfBirth; self.placeOfBirth = placeOfBirth; self.personalCode = personalCode
            self.documentNumber = documentNumber; self.expiry = expiry
        }
        enum CodingKeys: String, CodingKey {
            case surname, sex, citizenship, expiry
            case givenNames = "given_names", dateOfBirth = "date_of_birth", placeOfBirth = "place_of_birth"
            case personalCode = "personal_code", documentNumber = "document_number"
        }
    }
}

/// `card.login` — a login token signed by the card's authentication key after PIN1.
public enum CardLogin: RPCMethod {
    public static let name = "card.login"
    public struct Params: Codable, Sendable, Equatable {
        /// The requesting origin (`https://example.com`) or application id.
        public var aud: String
        public var nonce: String?
        public var timeoutS: Int?
        /// `jwt` (default) or `web-eid`.
        public var format: String?
        /// Who asks for the CAN and PIN1: `client` (default) or `desktop` (DESIGN §12).
        public var prompt: PromptRoute?
        public init(aud: String, nonce: String? = nil, timeoutS: Int? = nil, format: String? = nil, prompt: PromptRoute? = nil) {
            self.aud = aud; self.nonce = nonce; self.timeoutS = timeoutS; self.format = format; self.prompt = prompt
        }
        enum CodingKeys: String, CodingKey { case aud, nonce, format, prompt, timeoutS = "timeout_s" }
    }
    public struct Result: Codable, Sendable, Equatable {
        public var format: String
        /// The compact JWS (`format: jwt`).
        public var token: String?
        /// The Web eID `web-eid:1.0` authentication token (`format: web-eid`).
        public var webEid: WebEIDToken?
        public init(format: String, token: String?, webEid: WebEIDToken?) {
            self.format = format; self.token = token; self.webEid = webEid
        }
        enum CodingKeys: String, CodingKey { case format, token, webEid = "web_eid" }
    }
}

/// The Web eID authentication token, field for field as web-eid-app produces it.
public struct WebEIDToken: Codable, Sendable, Equatable {
    public var unverifiedCertificate: String
    public var algorithm: String
    public var signature: String
    public var format: String
    public var appVersion: String
    public init(unverifiedCertificate: String, algorithm: String, signature: String, format: String, appVersion: String) {
        self.unverifiedCertificate = unverifiedCertificate; self.algorithm = algorithm; self.signature = signature
        self.format = format; self.appVersion = appVersion
    }
}

/// `card.sign` — a signature by the card's signing key after PIN2 (always asked).
public enum CardSign: RPCMethod {
    public static let name = "card.sign"
    public struct Params: Codable, Sendable, Equatable {
        public var aud: String
        /// The digest to sign, base64url, with `hash_alg`; or `data` (base64url) for authd to hash.
        public var hash: String?
        public var hashAlg: String?
        public var data: String?
        /// What the user is signing, in words; bound into the token.
        public var description: String
        public var timeoutS: Int?
        /// Who asks for the CAN and PIN2: `client` (default) or `desktop` (DESIGN §12).
        public var prompt: PromptRoute?
        /// The signing certificate (base64 DER) the caller expects: a card with another one
        /// signs nothing (`card.certificate_mismatch`), and PIN2 is not sent to it.
        public var certificate: String?
        public init(aud: String, hash: String? = nil, hashAlg: String? = nil, data: String? = nil, description: String, timeoutS: Int? = nil,
                    prompt: PromptRoute? = nil, certificate: String? = nil) {
            self.aud = aud; self.hash = hash; self.hashAlg = hashAlg; self.data = data; self.description = description; self.timeoutS = timeoutS
            self.prompt = prompt; self.certificate = certificate
        }
        enum CodingKeys: String, CodingKey { case aud, hash, data, description, prompt, certificate, hashAlg = "hash_alg", timeoutS = "timeout_s" }
    }
    public struct Result: Codable, Sendable, Equatable {
        /// Compact JWS (ES384, `x5c` = the signing certificate) binding hash, algorithm, description.
        public var token: String
        /// The card's raw ECDSA signature (r‖s), base64url, over the digest.
        public var signature: String
        /// The signing certificate, base64 DER.
        public var certificate: String
        public var hash: String
        public var hashAlg: String
        public init(token: String, signature: String, certificate: String, hash: String, hashAlg: String) {
            self.token = token; self.signature = signature; self.certificate = certificate; self.hash = hash; self.hashAlg = hashAlg
        }
        enum CodingKeys: String, CodingKey { case token, signature, certificate, hash, hashAlg = "hash_alg" }
    }
}

/// `card.certificate` — one of the card's certificates, with no PIN: the authentication
/// certificate or the signing one. Under `prompt: desktop` the person sees whose certificate it
/// is and for whom, and hands it over or not.
public enum CardCertificate: RPCMethod {
    public static let name = "card.certificate"
    public struct Params: Codable, Sendable, Equatable {
        /// `authentication` or `signing`.
        public var use: String
        /// Who the certificate is for (an origin or application id); shown and, under
        /// `prompt: desktop`, what consent is asked for.
        public var aud: String?
        public var timeoutS: Int?
        /// Who asks for the CAN and the hand-over: `client` (default) or `desktop` (DESIGN §12).
        public var prompt: PromptRoute?
        public init(use: String, aud: String? = nil, timeoutS: Int? = nil, prompt: PromptRoute? = nil) {
            self.use = use; self.aud = aud; self.timeoutS = timeoutS; self.prompt = prompt
        }
        enum CodingKeys: String, CodingKey { case use, aud, prompt, timeoutS = "timeout_s" }
    }
    public struct Result: Codable, Sendable, Equatable {
        /// The certificate, base64 DER.
        public var certificate: String
        public var use: String
        public init(certificate: String, use: String) { self.certificate = certificate; self.use = use }
    }
}

/// `card.can.set` — saves the CAN, sealed.
public enum CardCANSet: RPCMethod {
    public static let name = "card.can.set"
    public struct Params: Codable, Sendable, Equatable {
        public var can: String
        public init(can: String) { self.can = can }
    }
    public typealias Result = Acknowledged
}

/// `card.can.get` — the saved CAN (the settings screen shows it), or none.
public enum CardCANGet: RPCMethod {
    public static let name = "card.can.get"
    public typealias Params = NoParams
    public struct Result: Codable, Sendable, Equatable {
        public var can: String?
        public init(can: String?) { self.can = can }
    }
}

/// `card.can.clear` — forgets the saved CAN.
public enum CardCANClear: RPCMethod {
    public static let name = "card.can.clear"
    public typealias Params = NoParams
    public typealias Result = Acknowledged
}

/// `card.pin1.save` — saves PIN1, sealed (PIN2 is never saved).
public enum CardPIN1Save: RPCMethod {
    public static let name = "card.pin1.save"
    public struct Params: Codable, Sendable, Equatable {
        public var pin: String
        public init(pin: String) { self.pin = pin }
    }
    public typealias Result = Acknowledged
}

/// `card.pin1.clear` — forgets the saved PIN1.
public enum CardPIN1Clear: RPCMethod {
    public static let name = "card.pin1.clear"
    public typealias Params = NoParams
    public typealias Result = Acknowledged
}

/// The result of a method that only confirms it was done.
public struct Acknowledged: Codable, Sendable, Equatable {
    public var ok: Bool
    public init() { ok = true }
}
