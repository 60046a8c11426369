import FoundationEssentials
@testable import authd
import Protocol
import Testing

/// `make fuzz` runs the targets in Fuzz/Harnesses under libFuzzer; here the same code replays
/// every committed corpus input (seeds, and each input that once crashed a target), so a
/// parser change that brings a crash back fails `make test` in seconds.
@Suite("Fuzz corpora replayed through their targets")
struct CorpusTests {
    static func corpus(_ target: FuzzTarget) throws -> [(name: String, bytes: [UInt8])] {
        let directory = URL(filePath: #filePath).deletingLastPathComponent().appending(path: "corpus/\(target.rawValue)")
        return try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted().map { name in
            (name, Array(try Data(contentsOf: directory.appending(path: name))))
        }
    }

    @Test("every corpus input runs through its target without a trap", arguments: FuzzTarget.allCases)
    func replay(_ target: FuzzTarget) throws {
        let inputs = try Self.corpus(target)
        #expect(inputs.count >= 3, "the \(target.rawValue) corpus is missing")
        for input in inputs { target.run(input.bytes) }
    }

    /// The seeds are valid ceremonies and tokens: if a target's fixed expectation drifted from
    /// them, the fuzzer would only ever see refusals at the first check.
    @Test("the WebAuthn and ID-token seeds pass every check of their target")
    func seedsAreValid() throws {
        let webauthn = Dictionary(uniqueKeysWithValues: try Self.corpus(.webauthn))
        let registration = WebAuthnFuzz.fields(Array(try #require(webauthn["registration"]).dropFirst()), count: 3)
        #expect(throws: Never.self) {
            try RelyingPartyVerifier.verifyRegistration(
                clientDataJSON: registration[0], attestationObject: registration[1], credentialID: registration[2],
                expected: RelyingPartyExpectation(rpID: WebAuthnFuzz.rpID, origins: WebAuthnFuzz.origins,
                                                  challenge: WebAuthnFuzz.registrationChallenge, requireUserVerification: false))
        }
        let assertion = WebAuthnFuzz.fields(Array(try #require(webauthn["assertion"]).dropFirst()), count: 3)
        #expect(throws: Never.self) {
            try RelyingPartyVerifier.verifyAssertion(
                clientDataJSON: assertion[0], authenticatorData: assertion[1], signature: assertion[2],
                stored: .init(publicKey: WebAuthnFuzz.storedKey, signCount: 0, backupEligible: true),
                expected: RelyingPartyExpectation(rpID: WebAuthnFuzz.rpID, origins: WebAuthnFuzz.origins,
                                                  challenge: WebAuthnFuzz.assertionChallenge, requireUserVerification: false))
        }
        let jose = Dictionary(uniqueKeysWithValues: try Self.corpus(.jose))
        for name in ["es256", "rs256"] {
            let (token, jwks) = try #require(jose[name]).splitOnce(at: UInt8(ascii: "\n"))
            let keys = IDTokenValidator.KeySet.parse(try WireCodec.decode(JSONValue.self, from: Data(jwks)))
            let claims = try IDTokenValidator.validate(String(decoding: token, as: UTF8.self), keys: keys,
                                                       expecting: JOSEFuzz.expectation, now: JOSEFuzz.now)
            #expect(claims.subject == "248289761001", "\(name)")
        }
    }

    @Test("the wire target knows every method once")
    func methodTable() {
        #expect(WireFuzz.byName.count == WireFuzz.methods.count)
        #expect(WireFuzz.methods.count >= 74)
    }
}
