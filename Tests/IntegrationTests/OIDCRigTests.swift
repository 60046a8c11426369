import CLinux
import Foundation
import Glibc
import Protocol
import Testing

/// The OIDC rig itself: the provider process starts, publishes what a client needs, enforces
/// the rules the daemon's federation code relies on (PKCE for a public client, the loopback
/// redirect rule, bearer checks), and obeys its controls. The full code + PKCE, refresh and
/// device flows are the daemon's to run (FederationTests); these tests build no OIDC client.
@Suite("OIDC rig")
struct OIDCRigTests {
    /// An authorization request URL as a client would build it (a fixed, well-formed S256
    /// challenge: the tests here never redeem the code).
    static func authorizeURL(_ rig: OIDCRig, redirectURI: String, challenge: Bool = true, state: String = "st-42") -> String {
        var components = URLComponents(string: rig.issuer + "/authorize")!
        components.queryItems = [
            URLQueryItem(name: "response_type", value: "code"),
            URLQueryItem(name: "client_id", value: rig.clientID),
            URLQueryItem(name: "redirect_uri", value: redirectURI),
            URLQueryItem(name: "scope", value: "openid profile email offline_access"),
            URLQueryItem(name: "state", value: state),
            URLQueryItem(name: "nonce", value: "nonce-\(UInt32.random(in: 0...UInt32.max))"),
        ]
        if challenge {
            components.queryItems! += [URLQueryItem(name: "code_challenge", value: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"),
                                       URLQueryItem(name: "code_challenge_method", value: "S256")]
        }
        return components.string!
    }

    static func queryItems(_ url: String) -> [String: String] {
        let items = URLComponents(string: url)?.queryItems ?? []
        return Dictionary(items.map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { first, _ in first })
    }

    @Test("discovery names this issuer and its endpoints, public client")
    func discovery() throws {
        let rig = try OIDCRig()
        #expect(rig.issuer.hasPrefix("http://127.0.0.1:") && !rig.issuer.hasSuffix("/"))
        #expect(rig.api.hasPrefix("http://127.0.0.1:") && rig.api != rig.issuer)
        let response = try LoopbackHTTP.get(rig.discoveryURL)
        #expect(response.status == 200)
        let document = try response.json()
        #expect(document["issuer"]?.stringValue == rig.issuer)
        #expect(document["authorization_endpoint"]?.stringValue == rig.issuer + "/authorize")
        #expect(document["token_endpoint"]?.stringValue == rig.issuer + "/token")
        #expect(document["jwks_uri"]?.stringValue == rig.jwksURL)
        #expect(document["device_authorization_endpoint"]?.stringValue == rig.issuer + "/device_authorization")
        #expect(document["revocation_endpoint"]?.stringValue == rig.issuer + "/revoke")
        #expect(document["response_types_supported"] == ["code"])
        #expect(document["code_challenge_methods_supported"] == ["S256"])
        #expect(document["id_token_signing_alg_values_supported"] == ["RS256"])
        #expect(document["token_endpoint_auth_methods_supported"] == ["none"])
        #expect(document["grant_types_supported"] == ["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"])
        #expect(document["scopes_supported"] == ["openid", "profile", "email", "offline_access"])
        #expect(document["subject_types_supported"] == ["public"])
        #expect(rig.configSection() == """
            [federation.test]
            issuer = \(rig.issuer)
            client_id = authd-test
            scopes = openid profile email offline_access
            api = \(rig.api)

            """)
        #expect(rig.configSection(name: "corp", api: false).hasPrefix("[federation.corp]\n"))
        #expect(!rig.configSection(api: false).contains("api ="))
    }

    @Test("the JWKS holds one public signing key of the chosen algorithm", arguments: [("RS256", "RSA"), ("ES256", "EC")])
    func jwks(alg: String, kty: String) throws {
        let rig = try OIDCRig(alg: alg)
        let discovery = try LoopbackHTTP.get(rig.discoveryURL).json()
        #expect(discovery["id_token_signing_alg_values_supported"] == .array([.string(alg)]))
        let keys = try LoopbackHTTP.get(rig.jwksURL).json()["keys"]?.arrayValue ?? []
        try #require(keys.count == 1)
        let key = keys[0]
        #expect(key["kty"]?.stringValue == kty)
        #expect(key["alg"]?.stringValue == alg)
        #expect(key["use"]?.stringValue == "sig")
        #expect(key["kid"]?.stringValue?.isEmpty == false)
        #expect(key["d"] == nil, "the private part must not be published")
        if kty == "EC" { #expect(key["crv"]?.stringValue == "P-256") }
        if kty == "RSA" { #expect((key["n"]?.stringValue?.count ?? 0) >= 342, "a 2048-bit modulus is 342 base64url characters") }
    }

    @Test("an authorization request of the public client without code_challenge gets no code")
    func pkceRequired() throws {
        let rig = try OIDCRig()
        let redirect = "http://127.0.0.1:4711/callback"
        let refused = try LoopbackHTTP.get(Self.authorizeURL(rig, redirectURI: redirect, challenge: false))
        #expect(refused.status == 302)
        let refusal = Self.queryItems(refused.header("Location") ?? "")
        #expect(refusal["code"] == nil)
        #expect(refusal["error"] == "invalid_request")
        #expect(refusal["state"] == "st-42")

        // The same request with a challenge gets a code, at the port it named.
        let granted = try LoopbackHTTP.get(Self.authorizeURL(rig, redirectURI: redirect))
        #expect(granted.status == 302)
        let location = granted.header("Location") ?? ""
        #expect(location.hasPrefix(redirect + "?"))
        #expect(Self.queryItems(location)["code"]?.isEmpty == false)
        #expect(Self.queryItems(location)["state"] == "st-42")
        #expect(try rig.counts()["authorize"] == 2)
    }

    @Test("a redirect URI other than http://127.0.0.1:ANY/callback is refused without a redirect", arguments: [
        "http://localhost:4711/callback", "http://127.0.0.2:4711/callback", "http://127.0.0.1:4711/other",
        "https://127.0.0.1:4711/callback", "http://127.0.0.1:4711/callback?next=x", "http://evil.example/callback",
    ])
    func redirectURIRule(redirect: String) throws {
        let rig = try OIDCRig()
        let answer = try LoopbackHTTP.get(Self.authorizeURL(rig, redirectURI: redirect))
        #expect(answer.status == 400)
        #expect(answer.header("Location") == nil)
        #expect(try answer.json()["error"]?.stringValue == "invalid_request")
        // Any port, or none, on the registered loopback callback is accepted (RFC 8252 §7.3).
        for accepted in ["http://127.0.0.1:1/callback", "http://127.0.0.1:65535/callback", OIDCRig.registeredRedirectURI] {
            #expect(try LoopbackHTTP.get(Self.authorizeURL(rig, redirectURI: accepted)).status == 302, "\(accepted)")
        }
    }

    @Test("followAuthorize delivers the code and state to the loopback listener and returns its page")
    func followAuthorize() throws {
        let rig = try OIDCRig()
        let listener = try OneShotListener(page: "<html>signed in</html>")
        let page = try rig.followAuthorize(Self.authorizeURL(rig, redirectURI: "http://127.0.0.1:\(listener.port)/callback", state: "s-1"))
        #expect(page == "<html>signed in</html>")
        let target = try listener.requestTarget()
        #expect(target.hasPrefix("/callback?"))
        let query = Self.queryItems("http://127.0.0.1" + target)
        #expect(query["state"] == "s-1")
        #expect((query["code"]?.count ?? 0) >= 40)

        // Deny mode: the listener gets access_denied; a refused request makes followAuthorize throw.
        try rig.setSettings(deny: true)
        let denied = try OneShotListener(page: "denied")
        _ = try rig.followAuthorize(Self.authorizeURL(rig, redirectURI: "http://127.0.0.1:\(denied.port)/callback"))
        let deniedQuery = Self.queryItems("http://127.0.0.1" + (try denied.requestTarget()))
        #expect(deniedQuery["error"] == "access_denied")
        #expect(deniedQuery["code"] == nil)
        #expect(throws: HarnessError.self) { try rig.followAuthorize(Self.authorizeURL(rig, redirectURI: "http://127.0.0.1:1/elsewhere")) }
    }

    @Test("the API refuses requests without a valid bearer token with 401 invalid_token")
    func apiWithoutToken() throws {
        let rig = try OIDCRig()
        let before = try rig.counts()
        for headers in [[], [("Authorization", "Bearer not-a-token")], [("Authorization", "Basic YTpi")]] as [[(String, String)]] {
            let answer = try LoopbackHTTP.get(rig.api + "/api/me", headers: headers)
            #expect(answer.status == 401)
            #expect(answer.header("WWW-Authenticate")?.hasPrefix("Bearer ") == true)
            #expect(answer.header("WWW-Authenticate")?.contains("error=\"invalid_token\"") == true)
            #expect(try answer.json()["error"]?.stringValue == "invalid_token")
        }
        let redirect = try LoopbackHTTP.get(rig.api + "/api/redirect")
        #expect(redirect.status == 302)
        #expect(redirect.header("Location") == rig.api + "/api/me")
        try rig.setAPIMode(.serverError)
        #expect(try LoopbackHTTP.get(rig.api + "/api/me").status == 500)
        let after = try rig.counts()
        #expect(after["api"] == (before["api"] ?? 0) + 5)
        #expect(after["api_401"] == (before["api_401"] ?? 0) + 3)
    }

    @Test("device authorization: user codes, approval of known codes only")
    func deviceAuthorization() throws {
        let rig = try OIDCRig()
        try rig.setSettings(deviceInterval: 3, deviceExpiresIn: 120)
        let answer = try LoopbackHTTP.postForm(rig.issuer + "/device_authorization",
                                               [("client_id", rig.clientID), ("scope", "openid profile")])
        #expect(answer.status == 200)
        let body = try answer.json()
        let userCode = try #require(body["user_code"]?.stringValue)
        #expect(userCode.range(of: "^[B-Z]{4}-[B-Z]{4}$", options: .regularExpression) != nil)
        #expect(body["verification_uri"]?.stringValue == rig.issuer + "/device")
        #expect(body["verification_uri_complete"]?.stringValue == rig.issuer + "/device?user_code=" + userCode)
        #expect(body["interval"]?.integerValue == 3)
        #expect(body["expires_in"]?.integerValue == 120)
        #expect((body["device_code"]?.stringValue?.count ?? 0) >= 40)
        #expect(throws: HarnessError.self) { try rig.approveDevice(userCode: "BBBB-CCCC") }
        try rig.approveDevice(userCode: userCode.lowercased())
        #expect(throws: HarnessError.self, "a user code is used once") { try rig.denyDevice(userCode: userCode) }
        #expect(try rig.counts()["device_authorization"] == 1)
    }

    @Test("a confidential client: secret file, client authentication enforced, token request recorded")
    func confidentialClient() throws {
        let rig = try OIDCRig(clientSecret: "s3cret-\(UInt32.random(in: 0...UInt32.max))", alg: "ES256")
        let secretFile = try #require(rig.clientSecretFile)
        #expect(rig.configSection().contains("\nclient_secret_file = \(secretFile)\n"))
        #expect(try String(contentsOfFile: secretFile, encoding: .utf8) == rig.clientSecret)
        var info = stat()
        #expect(stat(secretFile, &info) == 0 && info.st_mode & 0o777 == 0o600)
        let discovery = try LoopbackHTTP.get(rig.discoveryURL).json()
        #expect(discovery["token_endpoint_auth_methods_supported"] == ["client_secret_basic", "client_secret_post"])
        #expect(try rig.lastTokenRequest() == nil)

        let wrong = Data("\(rig.clientID):wrong".utf8).base64EncodedString()
        let answer = try LoopbackHTTP.postForm(rig.issuer + "/token", [("grant_type", "refresh_token"), ("refresh_token", "x")],
                                               headers: [("Authorization", "Basic \(wrong)")])
        #expect(answer.status == 401)
        #expect(try answer.json()["error"]?.stringValue == "invalid_client")
        let unauthenticated = try LoopbackHTTP.postForm(rig.issuer + "/token",
                                                        [("grant_type", "refresh_token"), ("refresh_token", "x"), ("client_id", rig.clientID)])
        #expect(unauthenticated.status == 401)
        let recorded = try #require(try rig.lastTokenRequest())
        #expect(recorded.form == ["grant_type": "refresh_token", "refresh_token": "x", "client_id": rig.clientID])
        #expect(recorded.authorization == nil)
        #expect(try rig.counts()["token_refresh"] == 2)
    }

    @Test("the provider exits at the end of its stdin")
    func stopEndsTheProvider() throws {
        let rig = try OIDCRig()
        try rig.setRefreshMode(.unauthorized)
        try rig.setTamper(.hs256)
        try rig.setUser(sub: "bob", email: "bob@example.test", name: "Bob")
        #expect(try rig.revoke(sub: "bob") == 0)
        #expect(rig.isRunning)
        let started = Date()
        rig.stop()
        #expect(Date().timeIntervalSince(started) < 4, "it should exit at end of stdin, not be killed after 5 s")
        #expect(!rig.isRunning)
        #expect(throws: HarnessError.self) { try LoopbackHTTP.get(rig.discoveryURL) }
    }
}

/// Accepts one connection on an ephemeral port of 127.0.0.1 and answers it with `page`:
/// authd's redirect listener as far as the browser can tell.
private final class OneShotListener: @unchecked Sendable {
    // @unchecked: `target` is written by the accepting thread before it signals `done` and read
    // only after waiting on `done`.
    let port: Int
    private let fd: Int32
    private let done = DispatchSemaphore(value: 0)
    private var target: String?

    init(page: String) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket failed") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && listen(fd, 4) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else {
            Glibc.close(fd)
            throw HarnessError("bind/listen failed")
        }
        self.fd = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in serve(page) }
        thread.stackSize = 256 * 1024
        thread.start()
    }

    deinit { Glibc.close(fd) }

    /// The request target (path and query) of the one request, waiting at most 10 s.
    func requestTarget() throws -> String {
        guard done.wait(timeout: .now() + 10) == .success, let target else { throw HarnessError("the listener got no request") }
        return target
    }

    private func serve(_ page: String) {
        defer { done.signal() }
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, 10_000) == 1 else { return }
        let client = accept(fd, nil, nil)
        guard client >= 0 else { return }
        defer { Glibc.close(client) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while received.firstRange(of: [13, 10, 13, 10]) == nil {
            let count = read(client, &buffer, buffer.count)
            guard count > 0 else { return }
            received += buffer[0..<count]
        }
        let requestLine = String(decoding: received.prefix { $0 != 13 }, as: UTF8.self).split(separator: " ")
        if requestLine.count == 3 { target = String(requestLine[1]) }
        let response = "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: \(page.utf8.count)\r\nConnection: close\r\n\r\n" + page
        _ = Array(response.utf8).withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }
}
