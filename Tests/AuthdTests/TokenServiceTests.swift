import Foundation
import OpenSSLCrypto
import Protocol
import Testing
@testable import authd

@Suite("Token service")
struct TokenServiceTests {
    let caller = CallerIdentity(uid: 1000, gid: 1000, pid: 42, exe: "/usr/bin/app", username: "alice", groups: [])

    @Test("issued tokens verify until exp, with the configured lifetime and issuer")
    func lifetime() async throws {
        let fixture = try await TestKeys()
        var config = Config()
        config.tokenLifetimeSeconds = 60
        config.tokenIssuer = "authd-test"
        let service = TokenService(keys: fixture.keys, config: ConfigHolder(config), now: fixture.clock.closure)
        let issued = try service.issueLocal(for: caller, params: .init(aud: "app", nonce: "n"))
        let claims = try service.verify(.init(token: issued.token, aud: "app")).claims
        #expect(claims["sub"] == "unix:1000")
        #expect(claims["preferred_username"] == "alice")
        #expect(claims["azp"] == "/usr/bin/app")
        #expect(claims["iss"] == "authd-test")
        #expect(claims["jti"] == .string(issued.jti))
        #expect(claims["exp"]?.integerValue == Int64(fixture.clock.now.timeIntervalSince1970) + 60)
        fixture.clock.advance(59)
        #expect(throws: Never.self) { try service.verify(.init(token: issued.token)) }
        fixture.clock.advance(1)
        #expect(throws: RPCError.failure(.tokenExpired, "")) { try onTheWire { try service.verify(.init(token: issued.token)) } }
    }

    @Test("jti values are 128 bits, and none repeats across the draws of random bytes they come from")
    func uniqueIdentifiers() throws {
        let identifiers = RandomIdentifiers()
        // Three draws and a bit: 256 identifiers come from each.
        let count = 3 * RandomIdentifiers.drawn / RandomIdentifiers.size + 5
        let drawn = try (0..<count).map { _ in try identifiers.next() }
        #expect(drawn.allSatisfy { $0.count == 16 })
        #expect(Set(drawn).count == count)
    }

    @Test("a token whose signature is replaced by its high-S twin is refused")
    func highSTwin() async throws {
        let fixture = try await TestKeys()
        let service = TokenService(keys: fixture.keys, config: ConfigHolder(Config()), now: fixture.clock.closure)
        let issued = try service.issueLocal(for: caller, params: .init(aud: "app"))
        let parts = issued.token.split(separator: ".").map(String.init)
        let twin = try ECDSASignature.P256.twin(try #require(Base64URL.decode(parts[2])))
        let forged = parts[0] + "." + parts[1] + "." + Base64URL.encode(twin)
        #expect(throws: Never.self) { try service.verify(.init(token: issued.token)) }
        #expect(throws: RPCError.failure(.tokenBadSignature, "")) { try onTheWire { try service.verify(.init(token: forged)) } }
    }

    @Test("a token from the future is refused beyond the leeway")
    func notYetValid() async throws {
        let fixture = try await TestKeys()
        let service = TokenService(keys: fixture.keys, config: ConfigHolder(Config()), now: fixture.clock.closure)
        let issued = try service.issueLocal(for: caller, params: .init(aud: "app"))
        let past = TokenService(keys: fixture.keys, config: ConfigHolder(Config()), now: { [clock = fixture.clock] in clock.now.addingTimeInterval(-61) })
        #expect(throws: RPCError.failure(.tokenNotYetValid, "")) { try onTheWire { try past.verify(.init(token: issued.token)) } }
        let slightlyPast = TokenService(keys: fixture.keys, config: ConfigHolder(Config()), now: { [clock = fixture.clock] in clock.now.addingTimeInterval(-59) })
        #expect(throws: Never.self) { try slightlyPast.verify(.init(token: issued.token)) }
    }

    @Test("after the issuer changes, old tokens are not this daemon's any more")
    func issuerChange() async throws {
        let fixture = try await TestKeys()
        let holder = ConfigHolder(Config())
        let service = TokenService(keys: fixture.keys, config: holder, now: fixture.clock.closure)
        let issued = try service.issueLocal(for: caller, params: .init(aud: "app"))
        var changed = Config()
        changed.tokenIssuer = "other"
        holder.current = changed
        #expect(throws: RPCError.failure(.tokenWrongIssuer, "")) { try onTheWire { try service.verify(.init(token: issued.token)) } }
    }

    @Test("audience can be a string or an array")
    func audienceArray() async throws {
        let fixture = try await TestKeys()
        let service = TokenService(keys: fixture.keys, config: ConfigHolder(Config()), now: fixture.clock.closure)
        let now = Int64(fixture.clock.now.timeIntervalSince1970)
        let token = try JWS.sign(claims: ["iss": "authd", "aud": ["a", "b"], "exp": .integer(now + 10)] as [String: JSONValue], kid: fixture.keys.current.kid, key: fixture.keys.current.key)
        #expect(throws: Never.self) { try service.verify(.init(token: token, aud: "b")) }
        #expect(throws: RPCError.failure(.tokenWrongAudience, "")) { try onTheWire { try service.verify(.init(token: token, aud: "c")) } }
        let noExpiry = try JWS.sign(claims: ["iss": "authd"] as [String: JSONValue], kid: fixture.keys.current.kid, key: fixture.keys.current.key)
        #expect(throws: RPCError.failure(.tokenMalformed, "")) { try onTheWire { try service.verify(.init(token: noExpiry)) } }
    }

    @Test("rotated keys leave the JWKS once their overlap has passed, and never sign again")
    func rotationOverlap() async throws {
        let fixture = try await TestKeys()
        let service = TokenService(keys: fixture.keys, config: ConfigHolder(Config()), now: fixture.clock.closure)
        let old = try service.issueLocal(for: caller, params: .init(aud: "app"))
        let rotation = try await fixture.keys.rotate(now: fixture.clock.now)
        #expect(rotation.previousKid == old.kid)
        #expect(fixture.keys.current.kid == rotation.kid)
        #expect(fixture.keys.jwks(now: fixture.clock.now).keys.count == 2)
        // The retired private key is gone from the store.
        let privateKeys = try await fixture.store.read { try $0.query("SELECT kid FROM signing_keys WHERE private_sealed IS NOT NULL") { $0.text(0) } }
        #expect(privateKeys == [rotation.kid])
        fixture.clock.advance(TimeInterval(KeyRing.retiredKeyOverlapSeconds))
        #expect(fixture.keys.jwks(now: fixture.clock.now).keys.map(\.kid) == [rotation.kid])
        #expect(throws: RPCError.failure(.tokenUnknownKey, "")) { try onTheWire { try service.verify(.init(token: old.token)) } }
        // A second rotation deletes the expired row.
        _ = try await fixture.keys.rotate(now: fixture.clock.now)
        let rows = try await fixture.store.read { try $0.query("SELECT kid FROM signing_keys") { $0.text(0) } }
        #expect(rows.count == 2 && !rows.contains(old.kid))
    }

    @Test("the key ring reloads from the store and refuses a different master key")
    func reopen() async throws {
        let fixture = try await TestKeys()
        let again = try await KeyRing.open(store: fixture.store, sealer: fixture.sealer, now: fixture.clock.now)
        #expect(again.current.kid == fixture.keys.current.kid)
        let stranger = try Sealer(masterKey: MasterKey(secret: try OpenSSL.randomSecret(32), source: .keyFile(path: "/x")))
        await #expect(throws: MasterKeyError.self) { try await KeyRing.open(store: fixture.store, sealer: stranger, now: fixture.clock.now) }
    }

    @Test("audience and nonce are validated before anything is signed",
          arguments: ["", String(repeating: "a", count: 257), "a\u{0}b", "line\nbreak", "del\u{7F}", "c1\u{85}next", "c1\u{9F}"])
    func badAudience(audience: String) async throws {
        let fixture = try await TestKeys()
        let service = TokenService(keys: fixture.keys, config: ConfigHolder(Config()), now: fixture.clock.closure)
        #expect(throws: RPCError.invalidParams("", field: "aud")) { try onTheWire { try service.issueLocal(for: caller, params: .init(aud: audience)) } }
        #expect(throws: RPCError.invalidParams("", field: "nonce")) { try onTheWire { try service.issueLocal(for: caller, params: .init(aud: "ok", nonce: audience)) } }
    }
}
