import FoundationEssentials

/// The parsers authd runs on input from outside, one fuzz target each. `make fuzz` links each
/// target into a libFuzzer binary (Fuzz/build.sh); `make test` replays every committed corpus
/// file through the same `run` (Fuzz/CorpusTests.swift), so a fixed crash stays fixed.
///
/// A target returns normally for any input, accepted or refused; it traps (precondition) only
/// where two parsers disagree or a parser breaks its own contract.
enum FuzzTarget: String, CaseIterable, Sendable {
    /// Socket lines: the JSON-lines framer, the JSON-RPC envelope and every method's params.
    case wire
    /// The strict JSON checker alone, and against Foundation's decoder.
    case strictJSON = "strict-json"
    /// authd.conf.
    case config
    /// A card's answers: BER-TLV, APDUs, EF.CardAccess and secure-messaging responses.
    case smartcard
    /// CBOR, authenticator data, COSE keys, client data and the passkey ceremonies' checks.
    case webauthn
    /// Compact JWS (authd's tokens and providers' ID tokens) and JWKS documents.
    case jose
    /// Phone numbers as a person types them.
    case phone

    func run(_ input: [UInt8]) {
        switch self {
        case .wire: WireFuzz.run(input)
        case .strictJSON: StrictJSONFuzz.run(input)
        case .config: ConfigFuzz.run(input)
        case .smartcard: SmartCardFuzz.run(input)
        case .webauthn: WebAuthnFuzz.run(input)
        case .jose: JOSEFuzz.run(input)
        case .phone: PhoneFuzz.run(input)
        }
    }
}

extension Array where Element == UInt8 {
    /// The input split at the first `separator`: most targets take two texts (a token and its
    /// keys, a number and its region), so the fuzzer can change either.
    func splitOnce(at separator: UInt8) -> (head: [UInt8], tail: [UInt8]) {
        guard let index = firstIndex(of: separator) else { return (self, []) }
        return (Array(self[..<index]), Array(self[(index + 1)...]))
    }
}
