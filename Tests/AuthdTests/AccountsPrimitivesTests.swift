import CArgon2
import OpenSSLCrypto
import Protocol
import Testing
@testable import authd

@Suite("Phone numbers (libphonenumber)")
struct PhoneNumberTests {
    @Test("real-world numbers normalize to E.164", arguments: [
        ("+372 5123 4567", nil, "+37251234567", "EE"),
        ("5123 4567", "EE", "+37251234567", "EE"),
        ("+49 151 23456789", nil, "+4915123456789", "DE"),
        ("0151 23456789", "de", "+4915123456789", "DE"),
        ("+1 (201) 555-0123", nil, "+12015550123", "US"),
        ("(201) 555-0123", "US", "+12015550123", "US"),
        ("+44 7400 123456", nil, "+447400123456", "GB"),
        ("07400 123456", "GB", "+447400123456", "GB"),
        ("00372 5123 4567", "FI", "+37251234567", "EE"),
        ("+33 6 12 34 56 78", nil, "+33612345678", "FR"),
    ] as [(String, String?, String, String)])
    func valid(input: String, region: String?, e164: String, country: String) throws {
        let number = try PhoneNumber.parse(input, region: region)
        #expect(number.e164 == e164)
        #expect(number.region == country)
        #expect(!number.redacted.contains(String(e164.dropFirst(4).dropLast(2))))
    }

    @Test("invalid, incomplete and foreign numbers are phone.invalid", arguments: [
        ("5123", "EE"),                  // too short
        ("+372 5123 4567 8901 2345", nil), // too long
        ("5123 4567", nil),              // national form without a region
        ("+999 1234 5678", nil),         // no such country code
        ("hello", "EE"),
        ("", "EE"),
        ("+1 555 0100", nil),            // incomplete
        ("0151 23456789", "EE"),         // a German national number read as Estonian
    ] as [(String, String?)])
    func invalid(input: String, region: String?) {
        #expect(throws: RPCError.failure(.phoneInvalid, "")) { try onTheWire { try PhoneNumber.parse(input, region: region) } }
    }

    @Test("a national number without a country says how to give one: --region EE")
    func noCountryNamesTheOption() {
        do {
            _ = try onTheWire { try PhoneNumber.parse("5123 4567", region: nil) }
            Issue.record("accepted")
        } catch {
            #expect(error.message.contains("--region EE"), "\(error.message)")
            #expect(!error.message.contains("'region'"))
        }
    }

    @Test("a declined prompt is named as a person says it, not by its wire name")
    func declinedPromptWording() {
        #expect(PromptFailure.cancelled(kind: .pin2).rpcError.message == "The PIN2 prompt was cancelled.")
        #expect(PromptFailure.cancelled(kind: .pin).rpcError.message == "The account PIN prompt was cancelled.")
        #expect(PromptFailure.cancelled(kind: .deviceCode).rpcError.message == "The device sign-in prompt was cancelled.")
    }

    @Test("a fixed-line number cannot receive the code")
    func fixedLine() {
        #expect(throws: RPCError.failure(.phoneNotMobile, "")) { try onTheWire { try PhoneNumber.parse("+372 640 0000", region: nil) } }
    }

    @Test("a malformed region is a params error naming the field")
    func badRegion() {
        #expect(throws: RPCError.invalidParams("", field: "region")) { try onTheWire { try PhoneNumber.parse("51234567", region: "EST") } }
    }
}

@Suite("Passwords")
struct PasswordTests {
    @Test("Argon2id with OWASP parameters: verify, mismatch, PHC format")
    func argon2() throws {
        let hash = try Argon2id.owasp.hash(SecretBytes(Array("correct horse battery".utf8)))
        #expect(hash.hasPrefix("$argon2id$v=19$m=19456,t=2,p=1$"))
        #expect(try Argon2id.verify(SecretBytes(Array("correct horse battery".utf8)), against: hash))
        #expect(try !Argon2id.verify(SecretBytes(Array("correct horse batterz".utf8)), against: hash))
        #expect(try Argon2id.owasp.hash(SecretBytes(Array("x".utf8))) != Argon2id.owasp.hash(SecretBytes(Array("x".utf8))), "fresh salt")
        #expect(throws: Argon2id.Failure.self) { try Argon2id.verify(SecretBytes(Array("x".utf8)), against: "$argon2id$garbage") }
        #expect(!Argon2id.owasp.isStronger(than: hash))
        #expect(Argon2id(memoryKiB: 65536, iterations: 3, parallelism: 1).isStronger(than: hash))
    }

    /// The NUL-terminated text libargon2 wrote into `buffer`.
    static func text(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The PHC string is written here (libargon2 exports no encoder beside its malloc-based
    /// calls): it must be libargon2's own, and each side must read the other's.
    @Test("Argon2id's PHC string is libargon2's, byte for byte, and each side verifies the other's", arguments: [
        (Argon2id(memoryKiB: 1024, iterations: 1, parallelism: 1), 16),
        (Argon2id(memoryKiB: 2048, iterations: 3, parallelism: 2), 17),  // base64 with a remainder
        (Argon2id(memoryKiB: 512, iterations: 2, parallelism: 4), 8),
    ])
    func argon2MatchesLibargon2(_ parameters: Argon2id, saltLength: Int) throws {
        let secret = "correct horse battery"
        let salt = (0..<saltLength).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        let ours = try parameters.hash(SecretBytes(Array(secret.utf8)), salt: salt)
        var encoded = [CChar](repeating: 0, count: 256)
        #expect(argon2id_hash_encoded(parameters.iterations, parameters.memoryKiB, parameters.parallelism, secret, secret.utf8.count,
                                      salt, salt.count, 32, &encoded, encoded.count) == ARGON2_OK.rawValue)
        let theirs = Self.text(encoded)
        #expect(ours == theirs)
        #expect(try Argon2id.verify(SecretBytes(Array(secret.utf8)), against: theirs))
        #expect(try !Argon2id.verify(SecretBytes(Array("correct horse batterz".utf8)), against: theirs))
        #expect(argon2id_verify(ours, secret, secret.utf8.count) == ARGON2_OK.rawValue)
    }

    @Test("a PHC form not written here (version 1.0: v=16) is left to libargon2, which still verifies it")
    func argon2OtherForms() throws {
        let secret = "correct horse battery"
        let salt = [UInt8](repeating: 7, count: 16)
        var encoded = [CChar](repeating: 0, count: 256)
        var raw = [UInt8](repeating: 0, count: 32)
        #expect(argon2_hash(1, 1024, 1, secret, secret.utf8.count, salt, salt.count, &raw, raw.count, &encoded, encoded.count,
                            Argon2_id, ARGON2_VERSION_10.rawValue) == ARGON2_OK.rawValue)
        let old = Self.text(encoded)
        #expect(old.hasPrefix("$argon2id$v=16$m=1024,t=1,p=1$"))
        #expect(PHCString(old) == nil)
        #expect(try Argon2id.verify(SecretBytes(Array(secret.utf8)), against: old))
        #expect(try !Argon2id.verify(SecretBytes(Array("wrong".utf8)), against: old))
        // Not canonical (a leading zero), so not read here either; libargon2 decides.
        let canonical = try Argon2id(memoryKiB: 1024, iterations: 1, parallelism: 1).hash(SecretBytes(Array(secret.utf8)), salt: salt)
        #expect(PHCString(canonical) != nil)
        #expect(PHCString(canonical.replacingOccurrences(of: "m=1024", with: "m=01024")) == nil)
    }

    @Test("Argon2id's working memory: a block given back is reused, then unmapped once idle")
    func argon2MemoryPool() async throws {
        let pool = Argon2Memory(idleRelease: .milliseconds(100))
        let first = try #require(pool.take(1 << 20))
        #expect(pool.mappedBytes == 1 << 20)
        pool.give(first, bytes: 1 << 20)
        let again = try #require(pool.take(1 << 20))
        #expect(again == first, "the idle block is taken again, not a new one mapped")
        let other = try #require(pool.take(2 << 20))
        #expect(pool.mappedBytes == 3 << 20)
        pool.give(again, bytes: 1 << 20)
        pool.give(other, bytes: 2 << 20)
        let deadline = ContinuousClock.now + .seconds(10)
        while pool.mappedBytes > 0 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(pool.mappedBytes == 0)
    }

    @Test("policy", arguments: [
        ("short1", true, "too_short"),
        ("eight ok", true, nil),
        ("fourteen chars", false, "too_short"),
        ("fifteen chars!!", false, nil),
        ("Password123", true, "common"),
        ("aaaaaaaaaaaaaaaa", false, "common"),
        ("51234567", true, "identifier"),
        (String(repeating: "x", count: 250) + "abcdefg", true, "too_long"),
        ("tab\there ok", true, "control"),
    ] as [(String, Bool, String?)])
    func policy(password: String, secondFactor: Bool, rule: String?) {
        do {
            try PasswordPolicy.check(password, hasSecondFactor: secondFactor, identifiers: ["+37251234567"])
            #expect(rule == nil, "accepted \(password)")
        } catch {
            let error = wireError(error)
            #expect(error.reason == .passwordWeak)
            #expect(error.details["rule"] == rule.map { .string($0) }, "\(password): \(error.message)")
        }
    }
}

@Suite("The lockout rule")
struct LockoutRuleTests {
    @Test("a check is counted before it runs; the fifth locks at once; a held lock refuses without counting")
    func reservations() {
        let lockout = Lockout()
        #expect(lockout.reserve(failures: 0, lockedUntil: nil, now: 1000) == .granted(failures: 1, locksUntil: nil))
        #expect(lockout.reserve(failures: 4, lockedUntil: nil, now: 1000) == .granted(failures: 5, locksUntil: 1060))
        #expect(lockout.reserve(failures: 5, lockedUntil: 1060, now: 1001) == .refused(lockedUntil: 1060))
        // After the lock, the next check locks again at once, twice as long, while it runs.
        #expect(lockout.reserve(failures: 5, lockedUntil: 1060, now: 1060) == .granted(failures: 6, locksUntil: 1180))
        #expect(lockout.reserve(failures: 40, lockedUntil: nil, now: 0) == .granted(failures: 41, locksUntil: 3600))
    }

    @Test("forty checks one after another in the same second count five: the rest find the lock")
    func burstCountsLikeSequence() {
        let lockout = Lockout()
        var failures = 0
        var lockedUntil: Int64?
        var granted = 0
        for _ in 0..<40 {
            if case .granted(let counted, let locks) = lockout.reserve(failures: failures, lockedUntil: lockedUntil, now: 500) {
                granted += 1
                failures = counted
                lockedUntil = locks ?? lockedUntil
            }
        }
        #expect(granted == lockout.threshold)
        #expect(lockedUntil == 560)
    }

    @Test("a lock that a check still in progress set refuses as busy, not locked, and counts nothing")
    func lockSetInFlightIsBusy() {
        let lockout = Lockout()
        #expect(lockout.reserve(failures: 5, lockedUntil: 1060, lockSetInFlight: true, now: 1001) == .busy(lockedUntil: 1060))
        #expect(lockout.reserve(failures: 5, lockedUntil: 1060, lockSetInFlight: false, now: 1001) == .refused(lockedUntil: 1060))
        // A lapsed lock refuses nothing, whoever set it.
        #expect(lockout.reserve(failures: 5, lockedUntil: 1060, lockSetInFlight: true, now: 1060) == .granted(failures: 6, locksUntil: 1180))
    }

    @Test("a lock is in flight from its record to the end of its check, for its account and factor only")
    func locksInFlight() {
        enum Factor: Hashable, Sendable { case password, pin }
        let locks = LocksInFlight<Factor>()
        let first = locks.begin(), second = locks.begin()
        #expect(first != second)
        #expect(!locks.isSetInFlight(account: "a", factor: .password, until: 1060))
        locks.record(first, account: "a", factor: .password, until: 1060)
        #expect(locks.isSetInFlight(account: "a", factor: .password, until: 1060))
        #expect(!locks.isSetInFlight(account: "a", factor: .pin, until: 1060))
        #expect(!locks.isSetInFlight(account: "b", factor: .password, until: 1060))
        #expect(!locks.isSetInFlight(account: "a", factor: .password, until: 1061))
        locks.end(second)
        #expect(locks.isSetInFlight(account: "a", factor: .password, until: 1060))
        locks.end(first)
        #expect(!locks.isSetInFlight(account: "a", factor: .password, until: 1060))
    }
}
