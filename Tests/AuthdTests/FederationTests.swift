import Foundation
import OpenSSLCrypto
import Protocol
import Testing
@testable import authd

/// RFC 7515 Appendix A.2: an RS256 JWS and the RSA key that signed it.
private enum RFC7515A2 {
    static let jwk: JSONValue = .object([
        "kty": .string("RSA"), "kid": .string("a2"),
        "n": .string("ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-pCgNMsD1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdbBYUsLA9e-KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4FRWyuXpoQ"),
        "e": .string("AQAB"),
    ])
    static let token = "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ."
        + "cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp5jujGbds9uJdbF9CUAr7t1dnZcAcQjbKBYNX4BAynRFdiuB--f_nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBMHlb1L07Qe7K0GarZRmB_eSN9383LcOLn6_dO--xi12jzDwusC-eOkHWEsqtFZESc6BfI7noOPqvhJ1phCnvWh6IeYI2w9QOYEUipUTI8np6LbgGY9Fs98rqVt5AXLIhWkWywlVmtVrBp0igcN_IoypGlUPQGe77Rw"
}

@Suite("Federation: ID token checks, PKCE, device polling")
struct FederationTests {
    @Test("An RSA JWK from RFC 7515 A.2 verifies its example RS256 signature, and not a changed one")
    func rsaKnownAnswer() throws {
        let keys = IDTokenValidator.KeySet.parse(.object(["keys": .array([RFC7515A2.jwk])]))
        let key = try #require(keys.byID["a2"])
        let parsed = try #require(JWS.parse(RFC7515A2.token))
        #expect(key.verify(signature: parsed.signature, message: parsed.signingInput))
        var changed = parsed.signingInput
        changed[changed.count - 1] ^= 1
        #expect(!key.verify(signature: parsed.signature, message: changed))
    }
}

/// ID tokens signed here with a fresh P-256 key, spoiled one claim or header at a time.
private struct TokenMaker {
    let key: P256PrivateKey
    let keys: IDTokenValidator.KeySet
    let now: Int64 = 1_800_000_000
    let expected = IDTokenValidator.Expectation(issuer: "https://id.example", clientID: "authd", nonce: "n-0S6_WzA2Mj", algorithms: ["ES256"])

    init() throws {
        key = try P256PrivateKey.generate()
        let (x, y) = try key.publicKey().coordinates()
        keys = IDTokenValidator.KeySet.parse(.object(["keys": .array([.object([
            "kty": .string("EC"), "crv": .string("P-256"), "kid": .string("k1"), "use": .string("sig"),
            "x": .string(Base64URL.encode(x)), "y": .string(Base64URL.encode(y)),
        ])])]))
    }

    var claims: [String: JSONValue] {
        ["iss": .string("https://id.example"), "sub": .string("248289761001"), "aud": .string("authd"), "nonce": .string("n-0S6_WzA2Mj"),
         "exp": .integer(now + 300), "iat": .integer(now), "email": .string("jane@example.com"), "email_verified": .bool(true)]
    }

    func token(header: [String: JSONValue] = ["alg": .string("ES256"), "kid": .string("k1")], claims: [String: JSONValue]? = nil,
               signature: (([UInt8]) throws -> [UInt8])? = nil) throws -> String {
        let input = Base64URL.encode(try WireCodec.encodeJSON(JSONValue.object(header))) + "." + Base64URL.encode(try WireCodec.encodeJSON(JSONValue.object(claims ?? self.claims)))
        let bytes = Array(input.utf8)
        return input + "." + Base64URL.encode(try signature?(bytes) ?? key.signES256(bytes))
    }

    func check(_ token: String) -> String? {
        do {
            _ = try IDTokenValidator.validate(token, keys: keys, expecting: expected, now: now)
            return nil
        } catch {
            return error.check
        }
    }
}

extension FederationTests {
    @Test("A well-formed ID token passes and yields its subject and email")
    func validToken() throws {
        let maker = try TokenMaker()
        let claims = try IDTokenValidator.validate(try maker.token(), keys: maker.keys, expecting: maker.expected, now: maker.now)
        #expect(claims == IDTokenClaims(subject: "248289761001", email: "jane@example.com", emailVerified: true, name: nil, expiresAt: maker.now + 300))
    }

    @Test("Each spoiled claim or header is refused by the check that names it", arguments: [
        ("iss", "iss", JSONValue.string("https://evil.example")),
        ("aud", "aud", .string("someone-else")),
        ("aud", "azp", .array([.string("authd"), .string("other")])),
        ("exp", "exp", .integer(1_800_000_000 - 61)),
        ("iat", "iat", .integer(1_800_000_000 + 120)),
        ("nonce", "nonce", .string("n-replayed")),
        ("sub", "sub", .string("")),
    ])
    func spoiledClaims(claim: String, check: String, value: JSONValue) throws {
        let maker = try TokenMaker()
        var claims = maker.claims
        claims[claim] = value
        #expect(maker.check(try maker.token(claims: claims)) == check)
    }

    @Test("Missing nonce, expiry within the skew, and no nonce expected (device grant)")
    func nonceAndSkew() throws {
        let maker = try TokenMaker()
        var claims = maker.claims
        claims["nonce"] = nil
        #expect(maker.check(try maker.token(claims: claims)) == "nonce")
        let deviceGrant = IDTokenValidator.Expectation(issuer: "https://id.example", clientID: "authd", nonce: nil, algorithms: ["ES256"])
        #expect(throws: Never.self) { try IDTokenValidator.validate(try maker.token(claims: claims), keys: maker.keys, expecting: deviceGrant, now: maker.now) }
        claims = maker.claims
        claims["exp"] = .integer(maker.now - 30)
        #expect(maker.check(try maker.token(claims: claims)) == nil)
    }

    @Test("alg none, HS256 keyed with anything, an unknown kid, another key, and a flipped signature are refused")
    func signatureAttacks() throws {
        let maker = try TokenMaker()
        #expect(maker.check(try maker.token(header: ["alg": .string("none"), "kid": .string("k1")], signature: { _ in [] })) == "alg")
        #expect(maker.check(try maker.token(header: ["alg": .string("HS256"), "kid": .string("k1")], signature: { input in
            try OpenSSL.hmacSHA256(key: SecretBytes(Array("k1".utf8)), data: input)
        })) == "alg")
        #expect(maker.check(try maker.token(header: ["alg": .string("RS256"), "kid": .string("k1")])) == "alg")
        #expect(maker.check(try maker.token(header: ["alg": .string("ES256"), "kid": .string("k2")])) == "kid")
        let other = try P256PrivateKey.generate()
        #expect(maker.check(try maker.token(signature: { try other.signES256($0) })) == "signature")
        #expect(maker.check(try maker.token(signature: { input in
            var signature = try maker.key.signES256(input)
            signature[10] ^= 0x01
            return signature
        })) == "signature")
        #expect(maker.check("not.a.jws") == "malformed")
        #expect(maker.check(try maker.token(header: ["alg": .string("ES256"), "kid": .string("k1"), "crit": .array([.string("exp")])])) == "crit")
        #expect(IDTokenValidator.namesUnknownKey(try maker.token(header: ["alg": .string("ES256"), "kid": .string("k2")]), in: maker.keys))
    }

    @Test("a JWKS P-256 key whose coordinate lost its leading zero byte (as Authlib writes one key in a hundred) still verifies")
    func shortCoordinate() throws {
        var key = try P256PrivateKey.generate()
        var (x, y) = try key.publicKey().coordinates()
        for _ in 0..<5000 where x.first != 0 && y.first != 0 {
            key = try P256PrivateKey.generate()
            (x, y) = try key.publicKey().coordinates()
        }
        try #require(x.first == 0 || y.first == 0, "no key with a leading zero byte in 5000 tries")
        let minimal = { (bytes: [UInt8]) in Base64URL.encode(Array(bytes.drop { $0 == 0 })) }
        let keys = IDTokenValidator.KeySet.parse(.object(["keys": .array([.object([
            "kty": .string("EC"), "crv": .string("P-256"), "kid": .string("k1"), "x": .string(minimal(x)), "y": .string(minimal(y)),
        ])])]))
        let candidates = keys.candidates(kid: "k1", algorithm: "ES256")
        try #require(candidates.count == 1)
        let message = Array("signed".utf8)
        #expect(candidates[0].verify(signature: try key.signES256(message), message: message))
    }

    @Test("PKCE S256 matches RFC 7636 Appendix B; state, nonce and verifier are fresh 256-bit values")
    func pkce() throws {
        let known = AuthorizationAttempt(state: "s", nonce: "n", verifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
        #expect(known.challenge == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
        let first = try AuthorizationAttempt(), second = try AuthorizationAttempt()
        #expect(first.verifier.count == 43 && first.state != second.state && first.nonce != second.nonce && first.verifier != second.verifier)
        let url = first.authorizationURL(endpoint: "https://id.example/auth?prompt=login", clientID: "authd", redirectURI: "http://127.0.0.1:5/callback",
                                         scopes: ["openid", "email"])
        #expect(url.hasPrefix("https://id.example/auth?prompt=login&response_type=code&client_id=authd&redirect_uri=http%3A%2F%2F127.0.0.1%3A5%2Fcallback&scope=openid%20email&state="))
        #expect(url.contains("&code_challenge=\(first.challenge)&code_challenge_method=S256"))
    }

    @Test("Device polling follows RFC 8628 §3.5: pending waits, slow_down adds 5 s for good, expiry and denial end it")
    func devicePolling() {
        var poll = DevicePoll(interval: 5)
        #expect(poll.next(after: "authorization_pending") == .wait(seconds: 5))
        #expect(poll.next(after: "slow_down") == .wait(seconds: 10))
        #expect(poll.next(after: "authorization_pending") == .wait(seconds: 10))
        #expect(poll.next(after: "expired_token") == .expired)
        #expect(poll.next(after: "access_denied") == .denied("access_denied"))
        #expect(poll.next(after: "invalid_client") == .denied("invalid_client"))
    }

    @Test("The loopback redirect takes only GET /callback with this sign-in's state", arguments: [
        ("GET /callback?code=abc&state=S1 HTTP/1.1\r\nHost: x", LoopbackRedirect.Outcome?.some(.code("abc"))),
        ("GET /callback?state=S1&error=access_denied HTTP/1.1", .some(.error("access_denied"))),
        ("GET /callback?code=abc&state=S2 HTTP/1.1", nil),
        ("GET /callback?code=abc HTTP/1.1", nil),
        ("POST /callback?code=abc&state=S1 HTTP/1.1", nil),
        ("GET /other?code=abc&state=S1 HTTP/1.1", nil),
        ("GET /callback?code=a%2Fb%20c&state=S1 HTTP/1.0", .some(.code("a/b c"))),
        ("GET /callback?code=%zz&state=S1 HTTP/1.1", nil),
        ("GET /callback?state=S1 HTTP/1.1", nil),
    ])
    func redirectParsing(head: String, outcome: LoopbackRedirect.Outcome?) {
        #expect(LoopbackRedirect.outcome(ofHead: Array(head.utf8), state: "S1") == outcome)
    }

    @Test("Origins that may receive a bearer token: https anywhere, http only to loopback", arguments: [
        ("https://api.example.com", "https://api.example.com"), ("https://API.example.com:443/", "https://api.example.com"),
        ("https://api.example.com:8443", "https://api.example.com:8443"), ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("http://localhost", "http://localhost"), ("http://api.example.com", nil), ("http://localhost.evil.example", nil),
        ("http://127.0.0.1.evil.example", nil), ("ftp://api.example.com", nil), ("https://user:pw@api.example.com", nil),
        ("https://api.example.com/v1", nil), ("https://api example.com", nil),
        ("HTTP://127.0.0.1:8080", nil), ("http://127.0.0.01:8080", nil), ("http://[::1]:8080", nil), ("http://127.1", nil),
    ])
    func origins(text: String, serialized: String?) {
        #expect(WebOrigin(text, allowPath: false)?.serialized == serialized)
    }

    @Test("[federation.NAME] sections are parsed and validated with file and line")
    func configSections() throws {
        let config = try Config.parse("""
            [federation]
            default = work
            [federation.work]
            issuer = https://id.example.com/realms/work
            client_id = authd
            client_secret_file = /etc/authd/work.secret
            api = https://api.example.com http://127.0.0.1:9000
            [federation.home]
            issuer = https://accounts.example.org
            client_id = laptop
            scopes = openid email
            """, file: "t.conf")
        #expect(config.federationProviders.map(\.name) == ["work", "home"])
        #expect(config.federationProviders[0].apiOrigins == ["https://api.example.com", "http://127.0.0.1:9000"])
        #expect(config.federationProviders[1].scopes == ["openid", "email"])
        #expect(config.federationDefault == "work")
        let failures: [(String, Int)] = [
            ("[federation.a]\nissuer = http://id.example.com\nclient_id = x", 2),
            ("[federation.a]\nissuer = https://id.example\nclient_id = x\nscopes = email", 4),
            ("[federation.a]\nissuer = https://id.example\nclient_id = x\napi = https://api.example/v1", 4),
            ("[federation.a]\nissuer = https://id.example", 0),
            ("[federation.a b]", 1),
            ("[federation.a]\nissuer = https://id.example\nclient_id = x\n[federation.a]", 4),
            ("[federation]\ndefault = nope", 0),
            ("[federation.a]\ncolor = blue", 2),
        ]
        for (text, line) in failures {
            #expect(throws: ConfigError.self) { try Config.parse(text, file: "t.conf") }
            do { _ = try Config.parse(text, file: "t.conf") } catch { #expect(error.line == line, "\(text)") }
        }
    }
}

@Suite("Federation: the token vault")
struct TokenVaultTests {
    private static let provider = Config.FederationProvider(name: "work", issuer: "https://id.example", clientID: "authd")

    private func signedIn(_ fixture: TestKeys, access: String, refresh: String?) async throws -> (vault: TokenVault, account: String) {
        let directory = SQLAccountDirectory(store: fixture.store, config: ConfigHolder(Config()), logger: Logger(sink: MemorySink()), now: fixture.clock.closure)
        let vault = TokenVault(store: fixture.store, sealer: fixture.sealer, directory: directory)
        let identity = FederatedIdentity(provider: "work", issuer: Self.provider.issuer, subject: "alice", email: nil, name: nil)
        let account = try await directory.signIn(federated: identity, proof: .unused("id-token-1"), device: DeviceIdentity(key: "k", name: "n")).signedIn.account.id
        try await vault.storeSignIn(uid: 1000, provider: Self.provider, account: account, subject: "alice",
                                    tokens: TokenSet(accessToken: access, tokenType: "Bearer", expiresIn: 60, refreshToken: refresh, idToken: nil), now: 100)
        return (vault, account)
    }

    @Test("tokens are sealed per user and provider, and open only there")
    func sealedPerRow() async throws {
        let fixture = try await TestKeys()
        let (vault, _) = try await signedIn(fixture, access: "access-A", refresh: "refresh-A")
        let entry = try #require(try await vault.entry(uid: 1000, provider: "work"))
        #expect(entry.accessToken == "access-A" && entry.refreshToken == "refresh-A" && entry.accessExpiresAt == 160)
        // The same sealed bytes moved to another uid do not open.
        try await fixture.store.transaction { database in
            try database.execute("INSERT INTO remote_tokens SELECT 1001, provider, issuer, account_id, subject, state, access_sealed, refresh_sealed, access_expires_at, updated_at, logged_out_at, logged_out_by FROM remote_tokens")
        }
        await #expect(throws: TokenVault.VaultDamaged.self) { _ = try await vault.entry(uid: 1001, provider: "work") }
    }

    @Test("a 401 for a token the vault no longer holds changes nothing; for the current one it logs out once")
    func logoutOnlyForTheRefusedCredential() async throws {
        let fixture = try await TestKeys()
        let (vault, account) = try await signedIn(fixture, access: "access-A", refresh: "refresh-A")
        guard case .superseded = try await vault.logOut(uid: 1000, provider: "work", source: "api", refused: .accessToken("access-old"), now: 200) else {
            Issue.record("an old access token logged out"); return
        }
        guard case .superseded = try await vault.logOut(uid: 1000, provider: "work", source: "refresh", refused: .refreshToken(sealed: [1, 2, 3]), now: 200) else {
            Issue.record("an old refresh token logged out"); return
        }
        #expect(try await vault.entry(uid: 1000, provider: "work")?.loggedOut == false)
        guard case .loggedOut(let event) = try await vault.logOut(uid: 1000, provider: "work", source: "api", refused: .accessToken("access-A"), now: 200) else {
            Issue.record("the current access token did not log out"); return
        }
        #expect(event.source == "api" && event.account == account)
        let entry = try #require(try await vault.entry(uid: 1000, provider: "work"))
        #expect(entry.loggedOut && entry.accessToken == nil && entry.refreshToken == nil && entry.loggedOutBy == "api")
        guard case .notSignedIn = try await vault.logOut(uid: 1000, provider: "work", source: "reported", refused: .current, now: 201) else {
            Issue.record("a second logout did something"); return
        }
    }

    @Test("a logout ends the provider's sessions made up to it; finishing an interrupted one again spares a later sign-in's session")
    func pendingLogoutIsBounded() async throws {
        let fixture = try await TestKeys()
        let directory = SQLAccountDirectory(store: fixture.store, config: ConfigHolder(Config()), logger: Logger(sink: MemorySink()), now: fixture.clock.closure)
        let vault = TokenVault(store: fixture.store, sealer: fixture.sealer, directory: directory)
        let identity = FederatedIdentity(provider: "work", issuer: Self.provider.issuer, subject: "alice", email: "a@example.test", name: nil)
        let tokens = TokenSet(accessToken: "access-A", tokenType: "Bearer", expiresIn: 60, refreshToken: nil, idToken: nil)
        let first = try await directory.signIn(federated: identity, proof: .unused("id-token-2"), device: DeviceIdentity(key: "k", name: "n")).signedIn
        try await vault.storeSignIn(uid: 1000, provider: Self.provider, account: first.account.id, subject: "alice", tokens: tokens, now: Int64(fixture.clock.now.timeIntervalSince1970))
        fixture.clock.advance(10)
        let loggedOutAt = Int64(fixture.clock.now.timeIntervalSince1970)
        guard case .loggedOut(let event) = try await vault.logOut(uid: 1000, provider: "work", source: "api", refused: .current, now: loggedOutAt) else {
            Issue.record("no logout"); return
        }
        #expect(event.sessionsEnded == 1)
        #expect(try await directory.federatedEmail(account: first.account.id, issuer: Self.provider.issuer, subject: "alice") == nil, "the cached claims are gone")
        await #expect(throws: RPCError.failure(.sessionInvalid, "")) { try await onTheWire { try await directory.authenticate(.local(first.session.token)) } }
        #expect(try await vault.finishPendingLogouts() == 0, "nothing is left to finish")
        // A later sign-in, then the same logout noted again (as a crash before its second step leaves it).
        fixture.clock.advance(10)
        let second = try await directory.signIn(federated: identity, proof: .unused("id-token-3"), device: DeviceIdentity(key: "k", name: "n")).signedIn
        try await fixture.store.transaction { database in
            try database.execute("INSERT INTO pending_logouts (uid, provider, account_id, issuer, subject, logged_out_at) VALUES (1000, 'work', ?, ?, 'alice', ?)",
                                 [.text(first.account.id), .text(Self.provider.issuer), .integer(loggedOutAt)])
        }
        #expect(try await vault.finishPendingLogouts() == 1)
        #expect(try await directory.authenticate(.local(second.session.token)).accountID == first.account.id, "the later sign-in's session lives")
        #expect(try await vault.finishPendingLogouts() == 0)
    }
}
extension FederatedProof {
    /// An ID token no sign-in has used, valid for an hour after the test clock's start.
    static func unused(_ token: String) -> FederatedProof {
        FederatedProof(idToken: token, nonce: nil, expiresAt: Int64(TestClock.start.timeIntervalSince1970) + 3600)
    }
}

@Suite("Federation: an ID token signs in once")
struct IDTokenReplayTests {
    private static let identity = FederatedIdentity(provider: "work", issuer: "https://id.example", subject: "alice", email: nil, name: nil)

    private func usedTokens(_ fixture: TestDirectory) async throws -> Int {
        try await fixture.store.read { try $0.queryOne("SELECT count(*) FROM used_id_tokens") { $0.int(0) } ?? -1 }
    }

    @Test("the same ID token again, from another machine, is refused with check replay and makes no session; a fresh one signs in")
    func replayIsRefused() async throws {
        let fixture = try TestDirectory()
        let proof = FederatedProof.unused("header.claims.signature")
        let first = try await fixture.directory.signIn(federated: Self.identity, proof: proof, device: DeviceIdentity(key: "laptop", name: "laptop")).signedIn
        let sessions = try await fixture.directory.sessions(.local(first.session.token)).count
        await #expect(throws: FederationFailure.idTokenInvalid(provider: "work", IDTokenFailure(check: "replay", description: "the ID token has signed in already; sign in again"))) {
            _ = try await fixture.directory.signIn(federated: Self.identity, proof: proof, device: DeviceIdentity(key: "intruder", name: "intruder"))
        }
        #expect(try await fixture.directory.sessions(.local(first.session.token)).count == sessions, "the replay made no session")
        let second = try await fixture.directory.signIn(federated: Self.identity, proof: .unused("header.claims.other"),
                                                        device: DeviceIdentity(key: "phone", name: "phone")).signedIn
        #expect(second.account.id == first.account.id)
        #expect(try await usedTokens(fixture) == 2)
    }

    @Test("a sign-in that fails does not use its ID token up; the hourly purge forgets a used token a skew after the validator would refuse it")
    func failedSignInKeepsTheTokenAndExpiryForgets() async throws {
        let fixture = try TestDirectory()
        let first = try await fixture.directory.signIn(federated: Self.identity, proof: .unused("token-1"), device: DeviceIdentity(key: "laptop", name: "laptop")).signedIn
        try await fixture.directory.deactivate(account: first.account.id)
        await #expect(throws: FederationFailure.accountDeactivated(provider: "work")) {
            _ = try await fixture.directory.signIn(federated: Self.identity, proof: .unused("token-2"), device: DeviceIdentity(key: "laptop", name: "laptop"))
        }
        #expect(try await usedTokens(fixture) == 1, "the refused sign-in's token is not kept")
        // token-1 expires at start + 3600; the validator takes it for a skew more, and the purge
        // keeps it a skew longer still.
        fixture.clock.advance(3600 + 2 * TimeInterval(IDTokenValidator.skewSeconds))
        #expect(try await fixture.directory.purgeExpired().idTokens == 0)
        fixture.clock.advance(1)
        #expect(try await fixture.directory.purgeExpired().idTokens == 1)
        #expect(try await usedTokens(fixture) == 0)
    }
}
