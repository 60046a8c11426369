import CLinux
import Foundation
import Glibc
import Protocol

/// A real OpenID Connect provider for one test: `Python/oidc_provider.py` (Authlib) on two
/// ephemeral ports of 127.0.0.1, the provider (`issuer`) and a resource server (`api`), with
/// one registered client: public (PKCE, no secret) unless `clientSecret` is given. The rig
/// steers it through its control endpoints (the signed-in user, lifetimes, failure modes,
/// spoiled ID tokens) and reads its counters.
///
/// The provider exits when its stdin reaches end of file. Only this process holds the other
/// end of that pipe (close-on-exec), so when the rig is released, or the test process dies,
/// the provider goes too. Keep the rig alive for the whole test (`withExtendedLifetime(rig) {}`
/// or a last call on it): an optimised build may release an object after its last use.
///
/// All methods block (sockets with deadlines); call them from synchronous tests, never from a
/// task on Swift's cooperative pool.
final class OIDCRig {
    /// How the token endpoint answers refresh requests.
    enum RefreshMode: String, Sendable, CaseIterable {
        case ok
        /// HTTP 401 `{"error":"invalid_client"}` with `WWW-Authenticate: Basic …`.
        case unauthorized = "401"
        /// HTTP 400 `{"error":"invalid_grant"}`.
        case invalidGrant = "invalid_grant"
        /// HTTP 500 `{"error":"server_error"}`.
        case serverError = "500"
    }

    /// How ID tokens issued from now on are spoiled; every mode but `none` must be refused.
    enum Tamper: String, Sendable, CaseIterable {
        case none
        /// One byte of the signature flipped.
        case badSignature = "bad_signature"
        /// `aud` is "another-client" (validly signed).
        case wrongAudience = "wrong_aud"
        /// `exp` ten minutes in the past (validly signed).
        case expired
        /// A different `nonce` (validly signed).
        case wrongNonce = "wrong_nonce"
        /// `iss` is https://issuer.invalid (validly signed).
        case wrongIssuer = "wrong_iss"
        /// Signed by a key of the same type whose `kid` is not in the JWKS.
        case unknownKid = "unknown_kid"
        /// Header `alg: none` (with the real `kid`), empty signature.
        case algNone = "alg_none"
        /// HS256 with the PEM of the public key as HMAC secret (key confusion), real `kid`.
        case hs256
    }

    /// How the resource server answers every request.
    enum APIMode: String, Sendable, CaseIterable {
        case normal
        /// 401 invalid_token whatever the token (the session was killed server-side).
        case unauthorized = "401"
        case serverError = "500"
        /// Answers after 20 s.
        case slow
    }

    /// The last request the token endpoint received.
    struct TokenRequest {
        let form: [String: String]
        let authorization: String?
        let contentType: String?
    }

    static let scriptPath = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Python/oidc_provider.py").path
    static let registeredRedirectURI = "http://127.0.0.1/callback"

    let directory: String
    /// `http://127.0.0.1:P1`, no trailing slash; also the `iss` of its ID tokens.
    let issuer: String
    /// `http://127.0.0.1:P2`, the resource server (`/api/…`).
    let api: String
    let clientID: String
    let clientSecret: String?
    let alg: String
    /// A 0600 file holding `clientSecret`, when there is one.
    let clientSecretFile: String?
    private let pid: pid_t
    private let input: Int32
    private let output: Int32
    private var stopped = false

    var discoveryURL: String { issuer + "/.well-known/openid-configuration" }
    var jwksURL: String { issuer + "/jwks" }
    var logPath: String { directory + "/provider.log" }
    /// The provider's stderr: one line per HTTP request, tracebacks.
    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    init(clientID: String = "authd-test", clientSecret: String? = nil, alg: String = "RS256") throws {
        guard access(Self.scriptPath, R_OK) == 0 else { throw HarnessError("no provider at \(Self.scriptPath)") }
        var template = Array("/tmp/authd-oidc-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw HarnessError("mkdtemp failed") }
        let directory = String(cString: made)
        self.directory = directory
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.alg = alg
        do {
            if let clientSecret {
                let path = directory + "/client_secret"
                try Self.writePrivateFile(path, clientSecret)
                clientSecretFile = path
            } else {
                clientSecretFile = nil
            }
            var arguments = ["/usr/bin/python3", Self.scriptPath, "--client-id", clientID, "--alg", alg]
            if let clientSecret { arguments += ["--client-secret", clientSecret] }
            let started = try Self.start(arguments, log: directory + "/provider.log")
            pid = started.pid
            input = started.input
            output = started.output
            issuer = started.issuer
            api = started.api
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
    }

    deinit {
        stop()
    }

    /// Ends the provider (end of stdin; SIGKILL if it has not exited within 5 s), reaps it and
    /// removes the directory. Idempotent.
    func stop() {
        guard !stopped else { return }
        stopped = true
        Glibc.close(input)
        let deadline = Date().addingTimeInterval(5)
        var status: Int32 = 0
        var exited = false
        while !exited, Date() < deadline {
            let result = waitpid(pid, &status, WNOHANG)
            if result == pid || (result < 0 && errno == ECHILD) { exited = true } else { usleep(10_000) }
        }
        if !exited { ChildProcess.reap(pid) }
        Glibc.close(output)
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// False once the provider has exited (or was stopped).
    var isRunning: Bool {
        guard !stopped else { return false }
        var status: Int32 = 0
        return waitpid(pid, &status, WNOHANG) == 0
    }

    // MARK: - authd configuration

    /// The `[federation.NAME]` section of authd.conf for this provider.
    func configSection(name: String = "test", api: Bool = true) -> String {
        var lines = [
            "[federation.\(name)]",
            "issuer = \(issuer)",
            "client_id = \(clientID)",
            "scopes = openid profile email offline_access",
        ]
        if let clientSecretFile { lines.append("client_secret_file = \(clientSecretFile)") }
        if api { lines.append("api = \(self.api)") }
        return lines.joined(separator: "\n") + "\n"
    }

    // MARK: - Control

    /// The user whom /authorize and device approval sign in from now on (default: alice,
    /// alice@example.test, "Alice Example").
    func setUser(sub: String, email: String? = nil, name: String? = nil) throws {
        var body: [String: JSONValue] = ["sub": .string(sub)]
        if let email { body["email"] = .string(email) }
        if let name { body["name"] = .string(name) }
        try control("/control/user", .object(body))
    }

    /// Changes only the settings given. `accessTokenLifetime` (s, default 3600): `expires_in` of
    /// access tokens issued from now on. `refreshDelayMS` (default 0): the token endpoint sleeps
    /// this long before answering a refresh (outside its lock, so concurrent refreshes overlap).
    /// `deviceInterval` (s, default 1) and `deviceExpiresIn` (s, default 600): of device
    /// authorizations started from now on. `deny`: /authorize answers access_denied.
    /// `offlineAccessRequired` (default false): refresh tokens only for scope offline_access.
    func setSettings(accessTokenLifetime: Int? = nil, refreshDelayMS: Int? = nil, deviceInterval: Int? = nil, deny: Bool? = nil,
                     deviceExpiresIn: Int? = nil, offlineAccessRequired: Bool? = nil) throws {
        var body: [String: JSONValue] = [:]
        if let accessTokenLifetime { body["access_token_lifetime"] = .integer(Int64(accessTokenLifetime)) }
        if let refreshDelayMS { body["refresh_delay_ms"] = .integer(Int64(refreshDelayMS)) }
        if let deviceInterval { body["device_interval"] = .integer(Int64(deviceInterval)) }
        if let deny { body["deny"] = .bool(deny) }
        if let deviceExpiresIn { body["device_expires_in"] = .integer(Int64(deviceExpiresIn)) }
        if let offlineAccessRequired { body["offline_access_required"] = .bool(offlineAccessRequired) }
        try control("/control/settings", .object(body))
    }

    func setRefreshMode(_ mode: RefreshMode) throws {
        try control("/control/refresh", ["mode": .string(mode.rawValue)])
    }

    func setTamper(_ mode: Tamper) throws {
        try control("/control/tamper", ["mode": .string(mode.rawValue)])
    }

    /// Revokes every access and refresh token of `sub`: the API answers 401 for them, a
    /// refresh answers invalid_grant. Returns how many grants were revoked.
    @discardableResult
    func revoke(sub: String) throws -> Int {
        Int(try control("/control/revoke", ["sub": .string(sub)])["revoked"]?.integerValue ?? -1)
    }

    func setAPIMode(_ mode: APIMode) throws {
        try control(api + "/control/api", ["mode": .string(mode.rawValue)], absolute: true)
    }

    /// Requests received so far: authorize, token_code, token_refresh, token_device,
    /// token_other, device_authorization, device_verification, revoke, api, api_401.
    func counts() throws -> [String: Int] {
        let response = try LoopbackHTTP.get(issuer + "/control/counts")
        guard response.status == 200, let object = try response.json().objectValue else {
            throw HarnessError("GET /control/counts: HTTP \(response.status) \(response.text)")
        }
        return object.compactMapValues { $0.integerValue.map { Int($0) } }
    }

    /// The form fields and the Authorization header of the last /token request; nil before any.
    func lastTokenRequest() throws -> TokenRequest? {
        let response = try LoopbackHTTP.get(issuer + "/control/last_token_request")
        guard response.status == 200 else { throw HarnessError("GET /control/last_token_request: HTTP \(response.status)") }
        let value = try response.json()
        guard let form = value["form"]?.objectValue else { return nil }
        return TokenRequest(form: form.compactMapValues(\.stringValue), authorization: value["authorization"]?.stringValue,
                            contentType: value["content_type"]?.stringValue)
    }

    /// The last ID token the token endpoint gave out, as the client received it; nil before any.
    func lastIDToken() throws -> String? {
        let response = try LoopbackHTTP.get(issuer + "/control/last_id_token")
        guard response.status == 200 else { throw HarnessError("GET /control/last_id_token: HTTP \(response.status)") }
        return try response.json()["id_token"]?.stringValue
    }

    /// The user at the verification page approves the device authorization with this user
    /// code (dashes and case do not matter), signing in the current user.
    func approveDevice(userCode: String) throws {
        try verifyDevice(userCode: userCode, action: "approve")
    }

    func denyDevice(userCode: String) throws {
        try verifyDevice(userCode: userCode, action: "deny")
    }

    /// The browser's part of the authorization code flow: GETs `url` (the authorization request
    /// authd built) without following redirects, requires a 302, GETs its Location (authd's
    /// loopback listener) and returns that answer's body. Throws when the provider refuses
    /// the request (no redirect), with its answer.
    func followAuthorize(_ url: String) throws -> String {
        let callback = try followAuthorizeResponse(url)
        return callback.text
    }

    /// The same, returning the loopback listener's whole response.
    func followAuthorizeResponse(_ url: String) throws -> HTTPResponse {
        let answer = try LoopbackHTTP.get(url)
        guard answer.status == 302, let location = answer.header("Location") else {
            throw HarnessError("the provider answered the authorization request with HTTP \(answer.status), not a redirect: \(answer.text)")
        }
        return try LoopbackHTTP.get(location)
    }

    // MARK: - Private

    @discardableResult
    private func control(_ path: String, _ body: JSONValue, absolute: Bool = false) throws -> JSONValue {
        let url = absolute ? path : issuer + path
        let response = try LoopbackHTTP.postJSON(url, body)
        guard response.status == 200 else { throw HarnessError("POST \(url): HTTP \(response.status) \(response.text)") }
        return try response.json()
    }

    private func verifyDevice(userCode: String, action: String) throws {
        let response = try LoopbackHTTP.postForm(issuer + "/device", [("user_code", userCode), ("action", action)])
        guard response.status == 200 else { throw HarnessError("POST /device (\(action)): HTTP \(response.status) \(response.text)") }
    }

    private static func writePrivateFile(_ path: String, _ text: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw HarnessError("open \(path): \(String(cString: strerror(errno)))") }
        defer { Glibc.close(fd) }
        let bytes = Array(text.utf8)
        guard bytes.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == bytes.count else {
            throw HarnessError("write \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// Starts the provider with a pipe on stdin (its end of file stops it) and one on stdout,
    /// and reads the READY line within 20 s.
    private static func start(_ arguments: [String], log: String) throws -> (pid: pid_t, input: Int32, output: Int32, issuer: String, api: String) {
        var inputPipe: [Int32] = [-1, -1]
        guard authd_pipe_cloexec(&inputPipe) == 0 else { throw HarnessError("pipe2: \(String(cString: strerror(errno)))") }
        var outputPipe: [Int32] = [-1, -1]
        guard authd_pipe_cloexec(&outputPipe) == 0 else {
            Glibc.close(inputPipe[0])
            Glibc.close(inputPipe[1])
            throw HarnessError("pipe2: \(String(cString: strerror(errno)))")
        }
        let pid: pid_t
        do {
            pid = try ChildProcess.spawn(arguments, environment: ["PATH=/usr/bin:/bin", "LANG=C.UTF-8", "PYTHONUNBUFFERED=1",
                                                                  "PYTHONDONTWRITEBYTECODE=1"],
                                         stdin: inputPipe[0], stdout: .pipe(outputPipe[1]), stderr: log)
        } catch {
            (inputPipe + outputPipe).forEach { Glibc.close($0) }
            throw error
        }
        Glibc.close(inputPipe[0])
        Glibc.close(outputPipe[1])
        let fail = { (reason: String) -> HarnessError in
            ChildProcess.reap(pid)
            Glibc.close(inputPipe[1])
            Glibc.close(outputPipe[0])
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            return HarnessError("\(reason):\n\(text)")
        }
        var line: [UInt8] = []
        let deadline = Date().addingTimeInterval(20)
        while !line.contains(0x0a) {
            let remaining = deadline.timeIntervalSinceNow
            guard remaining > 0 else { throw fail("the OIDC provider was not ready within 20 s") }
            var poller = pollfd(fd: outputPipe[0], events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, Int32(min(remaining, 1) * 1000) + 1)
            if ready < 0, errno == EINTR { continue }
            guard ready >= 0 else { throw fail("poll: \(String(cString: strerror(errno)))") }
            if ready == 0 { continue }
            var buffer = [UInt8](repeating: 0, count: 512)
            let count = read(outputPipe[0], &buffer, buffer.count)
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { throw fail("the OIDC provider exited before it was ready") }
            line += buffer[0..<count]
        }
        // READY issuer=http://127.0.0.1:P1 api=http://127.0.0.1:P2
        let text = String(decoding: line.prefix { $0 != 0x0a }, as: UTF8.self)
        let words = text.split(separator: " ")
        var fields: [String: String] = [:]
        for word in words.dropFirst() {
            let pair = word.split(separator: "=", maxSplits: 1)
            if pair.count == 2 { fields[String(pair[0])] = String(pair[1]) }
        }
        guard words.first == "READY", let issuer = fields["issuer"], let api = fields["api"] else {
            throw fail("the OIDC provider printed \(text.debugDescription), not its READY line")
        }
        return (pid, inputPipe[1], outputPipe[0], issuer, api)
    }
}
