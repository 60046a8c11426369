import Foundation
import Glibc
import Protocol
import Synchronization
import Testing

/// One federation test: a real OpenID provider (`OIDCRig`, Authlib) and authd configured for it.
final class FederationFixture {
    let rig: OIDCRig
    let daemon: DaemonHarness
    private(set) var client: LineClient

    init(clientSecret: String? = nil, alg: String = "RS256", extraConfig: String = "", api: Bool = true) throws {
        rig = try OIDCRig(clientSecret: clientSecret, alg: alg)
        daemon = try DaemonHarness(config: "[federation]\nlogin_timeout = 20s\nhttp_timeout = 5s\n" + extraConfig + rig.configSection(api: api))
        try daemon.start()
        client = try daemon.connect()
    }

    func restart(kill9: Bool = false) throws {
        client.close()
        if kill9 { try daemon.kill9() } else { #expect(try daemon.terminate() == 0) }
        try daemon.start()
        client = try daemon.connect()
    }

    /// `federation.login` with the code flow; the test plays the browser: it follows the
    /// `browser` prompt's URL to the provider, which redirects to authd's loopback listener.
    /// `page` receives what the listener answered the browser.
    func codeLogin(on client: LineClient? = nil, params: JSONValue = [:], page: ((String) -> Void)? = nil) throws -> PromptedCall {
        let rig = rig
        return try (client ?? self.client).exchange("federation.login", params) { prompt in
            guard prompt["kind"] == "browser", let url = prompt["url"]?.stringValue else { return .ignore }
            let body = (try? rig.followAuthorize(url)) ?? "the provider did not redirect"
            page?(body)
            return .ignore
        }
    }

    /// `federation.login` with the device grant; the test approves (or denies) the user code.
    func deviceLogin(approve: Bool = true) throws -> PromptedCall {
        let rig = rig
        return try client.exchange("federation.login", ["flow": "device"]) { prompt in
            guard prompt["kind"] == "device_code", let code = prompt["user_code"]?.stringValue else { return .ignore }
            if approve { try? rig.approveDevice(userCode: code) } else { try? rig.denyDevice(userCode: code) }
            return .ignore
        }
    }

    func signedIn() throws -> JSONValue {
        let call = try codeLogin()
        guard let result = call.result else { throw HarnessError("federation.login failed: \(call.response)") }
        return result
    }

    func remoteToken(_ client: LineClient? = nil) throws -> JSONValue { try (client ?? self.client).call("remote.token", [:]) }
    func fetch(_ path: String, method: String = "GET") throws -> JSONValue {
        try client.call("remote.fetch", ["url": .string(rig.api + path), "method": .string(method)])
    }
    /// One value from the daemon's SQLite file, read by Python's sqlite3 (read-only, beside the daemon's WAL).
    func storeQuery(_ sql: String) throws -> String {
        try daemon.storeRows(sql).first ?? ""
    }

    func state() throws -> JSONValue? { try client.result("federation.status")["providers"]?.arrayValue?.first }
}

@Suite("Federated sign-in, token vault and persistent logout against a real OpenID provider")
struct FederationFlowTests {
    @Test("code + PKCE: the first sign-in registers a linked account, the second signs in to it")
    func codeFlowRegistersThenSignsIn() throws {
        let fixture = try FederationFixture()
        var page = ""
        let first = try fixture.codeLogin(page: { page = $0 })
        let result = try #require(first.result, "\(first.response)")
        #expect(result["created"] == true)
        #expect(result["subject"] == "alice")
        #expect(result["account"]?["phone"] == nil, "a federated account has no phone number")
        #expect(page.contains("Signed in"), "\(page)")
        let prompt = try #require(first.ofKind("browser").first)
        let url = try #require(prompt["url"]?.stringValue)
        #expect(url.hasPrefix(fixture.rig.issuer + "/authorize?"))
        #expect(url.contains("code_challenge_method=S256") && url.contains("redirect_uri=http%3A%2F%2F127.0.0.1%3A"))
        // The token request carried the PKCE verifier, and a public client sends no secret.
        let tokenRequest = try #require(try fixture.rig.lastTokenRequest())
        #expect(tokenRequest.form["code_verifier"]?.count == 43)
        #expect(tokenRequest.form["client_id"] == "authd-test")
        #expect(tokenRequest.authorization == nil)
        let session = try fixture.client.result("session.get", ["session": result["session"]!["token"]!])
        #expect(session["amr"] == ["fed"])
        let second = try #require(try fixture.codeLogin().result)
        #expect(second["created"] == false)
        #expect(second["account"]?["id"] == result["account"]?["id"])
        let state = try #require(try fixture.state())
        #expect(state["state"] == "signed_in")
        #expect(state["email"] == "alice@example.test")
        #expect(state["has_refresh_token"] == true)
        // Another identity at the same provider is another account.
        try fixture.rig.setUser(sub: "bob", email: "bob@example.test")
        let bob = try #require(try fixture.codeLogin().result)
        #expect(bob["created"] == true && bob["account"]?["id"] != result["account"]?["id"])
    }

    @Test("a confidential client authenticates with HTTP Basic from client_secret_file")
    func confidentialClient() throws {
        let fixture = try FederationFixture(clientSecret: "s3cret-for-tests")
        _ = try fixture.signedIn()
        let request = try #require(try fixture.rig.lastTokenRequest())
        #expect(request.authorization == "Basic " + Data("authd-test:s3cret-for-tests".utf8).base64EncodedString())
        #expect(request.form["client_secret"] == nil)
        #expect(!fixture.daemon.log.contains("s3cret-for-tests"))
    }

    @Test("ES256 ID tokens verify as well as RS256")
    func es256Provider() throws {
        let fixture = try FederationFixture(alg: "ES256")
        #expect(try fixture.signedIn()["created"] == true)
    }

    @Test("device grant: the approved code signs in, a denied one answers federation.denied")
    func deviceGrant() throws {
        let fixture = try FederationFixture()
        let approved = try fixture.deviceLogin()
        let result = try #require(approved.result, "\(approved.response)")
        #expect(result["created"] == true)
        let prompt = try #require(approved.ofKind("device_code").first)
        #expect(prompt["url"]?.stringValue?.hasPrefix(fixture.rig.issuer + "/device") == true)
        #expect(prompt["expects_answer"] == false)
        #expect(try fixture.rig.counts()["token_device"] ?? 0 >= 1)
        let denied = try fixture.deviceLogin(approve: false)
        #expect(denied.reason == "federation.denied")
        #expect(denied.data?["error"] == "access_denied")
    }

    @Test("every spoiled ID token is refused with the check it fails, and nothing is created", arguments: [
        (OIDCRig.Tamper.badSignature, "signature"), (.wrongAudience, "aud"), (.expired, "exp"), (.wrongNonce, "nonce"),
        (.wrongIssuer, "iss"), (.unknownKid, "kid"), (.algNone, "alg"), (.hs256, "alg"),
    ])
    func tamperedIDTokens(tamper: OIDCRig.Tamper, check: String) throws {
        let fixture = try FederationFixture()
        try fixture.rig.setTamper(tamper)
        let call = try fixture.codeLogin()
        #expect(call.reason == "federation.id_token_invalid", "\(call.response)")
        #expect(call.data?["check"] == .string(check))
        #expect(try fixture.state()?["state"] == "signed_out")
        #expect(try fixture.client.result("admin.accounts.list")["accounts"] == [])
        #expect(try fixture.remoteToken().errorReason == "federation.not_signed_in")
    }

    @Test("a redirect with another state gets 400, idle connections do not block it, the sign-in goes on; prompt.cancel ends it and closes the listener")
    func loopbackListener() throws {
        let fixture = try FederationFixture()
        var stray: HTTPResponse?
        var idle: [Int32] = []
        let call = try fixture.client.exchange("federation.login", [:]) { prompt in
            guard let url = prompt["url"]?.stringValue, let range = url.range(of: "redirect_uri=") else { return .ignore }
            let encoded = url[range.upperBound...].prefix { $0 != "&" }
            let redirect = String(encoded).removingPercentEncoding ?? ""
            stray = try? LoopbackHTTP.get(redirect + "?code=forged&state=not-this-one")
            // Idle connections from another local process must not keep the browser out.
            let port = UInt16(redirect.split(separator: ":").last?.prefix { $0.isNumber } ?? "") ?? 0
            idle = (0..<12).map { _ in Self.openIdleConnection(port: port) }
            _ = try? fixture.rig.followAuthorize(url)
            return .ignore
        }
        #expect(idle.count == 12 && idle.allSatisfy { $0 >= 0 })
        idle.forEach { close($0) }
        #expect(stray?.status == 400)
        #expect(call.result?["created"] == true, "\(call.response)")

        var port = ""
        let cancelled = try fixture.client.exchange("federation.login", [:]) { prompt in
            guard let url = prompt["url"]?.stringValue else { return .ignore }
            port = String(url.split(separator: "%3A").last?.prefix { $0.isNumber } ?? "")
            return .cancel
        }
        #expect(cancelled.reason == "user.cancelled")
        #expect(throws: (any Error).self) { _ = try LoopbackHTTP.get("http://127.0.0.1:\(port)/callback?code=late&state=x") }
    }

    /// A TCP connection to 127.0.0.1:`port` that never sends anything.
    static func openIdleConnection(port: UInt16) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
        address.sin_port = port.bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if connected != 0 { close(fd); return -1 }
        return fd
    }

    @Test("remote.token refreshes a token with under 30 s left; the new token works on the API")
    func refresh() throws {
        let fixture = try FederationFixture()
        try fixture.rig.setSettings(accessTokenLifetime: 10)
        let login = try fixture.signedIn()
        try fixture.rig.setSettings(accessTokenLifetime: 3600)
        let token = try #require(try fixture.remoteToken()["result"])
        #expect(token["refreshed"] == true)
        #expect(try fixture.rig.counts()["token_refresh"] == 1)
        let again = try #require(try fixture.remoteToken()["result"])
        #expect(again["refreshed"] == false && again["access_token"] == token["access_token"])
        let fetched = try #require(try fixture.fetch("/api/me")["result"])
        #expect(fetched["status"] == 200)
        let echo = try WireCodec.decode(JSONValue.self, from: Data((fetched["body"]?.stringValue ?? "").utf8))
        #expect(echo["sub"] == "alice")
        #expect(echo["headers"]?["Authorization"] == .string("Bearer " + (token["access_token"]?.stringValue ?? "")))
        #expect(login["session"] != nil)
    }

    @Test("eight concurrent remote.token callers share one refresh")
    func singleFlightRefresh() throws {
        let fixture = try FederationFixture()
        try fixture.rig.setSettings(accessTokenLifetime: 5)
        _ = try fixture.signedIn()
        // New tokens live long, so a caller arriving after the refresh needs none; the delay
        // makes the refresh overlap the callers that arrive while it runs.
        try fixture.rig.setSettings(accessTokenLifetime: 3600, refreshDelayMS: 500)
        let socket = fixture.daemon.socketPath
        let tokens = Mutex<[String]>([])
        let errors = onThreads(8) { _ in
            let client = try LineClient(socketPath: socket)
            let token = try client.result("remote.token", [:])
            tokens.withLock { $0.append(token["access_token"]?.stringValue ?? "") }
        }
        #expect(errors.isEmpty, "\(errors)")
        #expect(Set(tokens.withLock { $0 }).count == 1)
        #expect(try fixture.rig.counts()["token_refresh"] == 1)
    }

    @Test("a 401 from the API logs out for good: event, no token, sessions ended, across restart and kill -9, until a new sign-in")
    func persistentLogoutOnAPI401() throws {
        let fixture = try FederationFixture()
        let login = try fixture.signedIn()
        let events = try fixture.daemon.connect()
        let subscription = try events.result("events.subscribe")
        #expect(subscription["subscription"]?.stringValue != nil)
        try fixture.rig.setAPIMode(.unauthorized)
        let fetch = try fixture.fetch("/api/me")
        #expect(fetch.errorReason == "session.logged_out")
        #expect(fetch["error"]?["data"]?["source"] == "api")
        let event = try #require(try events.readJSON())
        #expect(event["method"] == "event")
        #expect(event["params"]?["type"] == "session.logged_out")
        #expect(event["params"]?["logged_out"]?["source"] == "api")
        #expect(event["params"]?["logged_out"]?["sessions_ended"] == 1)
        #expect(try fixture.remoteToken().errorReason == "session.logged_out")
        #expect(try fixture.client.call("session.get", ["session": login["session"]!["token"]!]).errorReason == "session.invalid")
        let state = try #require(try fixture.state())
        #expect(state["state"] == "logged_out" && state["logged_out_by"] == "api" && state["email"] == nil, "cached user data deleted")
        try fixture.restart()
        #expect(try fixture.remoteToken().errorReason == "session.logged_out")
        try fixture.restart(kill9: true)
        #expect(try fixture.remoteToken().errorReason == "session.logged_out")
        // The tokens and the cached user data are gone from the store, not only hidden.
        #expect(try fixture.storeQuery("SELECT count(*) FROM remote_tokens WHERE access_sealed IS NOT NULL OR refresh_sealed IS NOT NULL") == "0")
        #expect(try fixture.storeQuery("SELECT count(*) FROM federated_identities WHERE email IS NOT NULL OR name IS NOT NULL") == "0")
        #expect(try fixture.storeQuery("SELECT count(*) FROM federated_identities") == "1", "the link to the account stays")
        #expect(try fixture.rig.counts()["token_refresh"] == 0)
        try fixture.rig.setAPIMode(.normal)
        let again = try #require(try fixture.codeLogin().result)
        #expect(again["created"] == false)
        #expect(try fixture.remoteToken()["result"]?["access_token"] != nil)
        #expect(try fixture.fetch("/api/me")["result"]?["status"] == 200)
        #expect(try fixture.state()?["state"] == "signed_in")
    }

    @Test("a refresh answered 401 or invalid_grant is final: logged out with source refresh", arguments: [OIDCRig.RefreshMode.unauthorized, .invalidGrant])
    func refreshRefused(mode: OIDCRig.RefreshMode) throws {
        let fixture = try FederationFixture()
        try fixture.rig.setSettings(accessTokenLifetime: 10)
        _ = try fixture.signedIn()
        try fixture.rig.setRefreshMode(mode)
        let answer = try fixture.remoteToken()
        #expect(answer.errorReason == "session.logged_out")
        #expect(answer["error"]?["data"]?["source"] == "refresh")
        try fixture.rig.setRefreshMode(.ok)
        #expect(try fixture.remoteToken().errorReason == "session.logged_out", "no retry after a refused refresh")
        #expect(try fixture.rig.counts()["token_refresh"] == 1)
        #expect(try fixture.state()?["logged_out_by"] == "refresh")
    }

    @Test("a refresh that fails for another reason changes nothing; a revoked grant logs out")
    func refreshTransientAndRevoked() throws {
        let fixture = try FederationFixture()
        try fixture.rig.setSettings(accessTokenLifetime: 10)
        _ = try fixture.signedIn()
        try fixture.rig.setRefreshMode(.serverError)
        #expect(try fixture.remoteToken().errorReason == "remote.unavailable")
        #expect(try fixture.state()?["state"] == "signed_in")
        try fixture.rig.setRefreshMode(.ok)
        #expect(try fixture.remoteToken()["result"]?["refreshed"] == true)
        try fixture.rig.setSettings(accessTokenLifetime: 10)
        #expect(try fixture.remoteToken()["result"]?["refreshed"] == true)
        try fixture.rig.revoke(sub: "alice")
        let answer = try fixture.remoteToken()
        #expect(answer.errorReason == "session.logged_out", "\(answer)")
    }

    @Test("remote.fetch sends the token only to api origins, returns redirects unfollowed, and refuses Authorization from the caller")
    func fetchBoundaries() throws {
        let fixture = try FederationFixture()
        _ = try fixture.signedIn()
        let foreign = try fixture.client.call("remote.fetch", ["url": .string(fixture.rig.issuer + "/api/me")])
        #expect(foreign.errorReason == "remote.origin_not_allowed")
        let redirect = try #require(try fixture.fetch("/api/redirect")["result"])
        #expect(redirect["status"] == 302)
        #expect(try fixture.rig.counts()["api"] == 1, "the redirect target was not requested")
        let injected = try fixture.client.call("remote.fetch", ["url": .string(fixture.rig.api + "/api/me"), "headers": ["Authorization": "Bearer mine"]])
        #expect(injected.errorReason == "rpc.invalid_params")
        let posted = try #require(try fixture.client.call("remote.fetch", [
            "url": .string(fixture.rig.api + "/api/items?x=1"), "method": "POST", "headers": ["Content-Type": "text/plain", "X-Test": "yes"], "body": "hello",
        ])["result"])
        let echo = try WireCodec.decode(JSONValue.self, from: Data((posted["body"]?.stringValue ?? "").utf8))
        #expect(echo["method"] == "POST" && echo["body"] == "hello" && echo["headers"]?["X-Test"] == "yes")
        try fixture.rig.setAPIMode(.serverError)
        #expect(try fixture.fetch("/api/me")["result"]?["status"] == 500, "a 500 is an answer, not a logout")
        #expect(try fixture.state()?["state"] == "signed_in")
    }

    /// authd's `authd-http` helpers (children of authd by that name).
    static func httpHelpers(of daemon: DaemonHarness) -> [Int32] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap(Int32.init).filter { pid in
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return false }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return stat.contains("(authd-http)") && fields.count > 1 && Int32(fields[1]) == daemon.pid
        }
    }

    @Test("one authd-http serves every request; killed while a request is in flight, that request fails at once and says why, and the next starts a new one")
    func httpHelperLifecycle() throws {
        let fixture = try FederationFixture()
        _ = try fixture.signedIn()
        for _ in 0..<3 { #expect(try fixture.fetch("/api/me")["result"]?["status"] == 200) }
        let helpers = Self.httpHelpers(of: fixture.daemon)
        #expect(helpers.count == 1, "one helper for the daemon: \(helpers)")

        try fixture.rig.setAPIMode(.slow)
        let before = try fixture.rig.counts()["api"] ?? 0
        let waiting = try fixture.daemon.connect()
        let started = Date()
        try waiting.send(#"{"jsonrpc":"2.0","id":1,"method":"remote.fetch","params":{"url":"\#(fixture.rig.api)/api/me"}}"# + "\n")
        let deadline = Date().addingTimeInterval(10)
        while try fixture.rig.counts()["api"] ?? 0 == before, Date() < deadline { usleep(20_000) }
        #expect(try fixture.rig.counts()["api"] ?? 0 > before, "the slow request reached the API")
        for pid in helpers { kill(pid, SIGKILL) }
        // Answered whatever happens within the daemon's own 5 s limit on a request.
        let failed = try #require(try waiting.readJSON(), "the request in flight was answered")
        #expect(Date().timeIntervalSince(started) < 10, "at once, not after the API's 20 s")
        #expect(failed.errorReason == "remote.unavailable" && (failed["error"]?["message"]?.stringValue ?? "").contains("HTTP helper stopped"), "\(failed)")

        try fixture.rig.setAPIMode(.normal)
        #expect(try fixture.fetch("/api/me")["result"]?["status"] == 200, "the next request starts a new helper")
        let again = Self.httpHelpers(of: fixture.daemon)
        #expect(again.count == 1 && again != helpers, "\(again) after \(helpers)")
    }

    @Test("authctl: token remote, remote fetch, report-401 (exit 7), federation status and logout")
    func authctlCommands() throws {
        let fixture = try FederationFixture()
        _ = try fixture.signedIn()
        let token = try fixture.daemon.authctl(["token", "remote"])
        #expect(token.status == 0, "\(token.stderr)")
        let access = Data(token.stdout.trimmingCharacters(in: .whitespacesAndNewlines).utf8)
        #expect(access.count > 20)
        for file in ["authd.db", "authd.db-wal"] {
            let bytes = FileManager.default.contents(atPath: fixture.daemon.stateDirectory + "/" + file) ?? Data()
            #expect(bytes.range(of: access) == nil, "the access token is sealed in \(file)")
        }
        let fetch = try fixture.daemon.authctl(["remote", "fetch", fixture.rig.api + "/api/me"])
        #expect(fetch.status == 0 && fetch.stdout.contains("\"sub\":\"alice\""), "\(fetch)")
        let status = try fixture.daemon.authctl(["federation", "status"])
        #expect(status.stdout.contains("signed in as alice"), "\(status.stdout)")
        let report = try fixture.daemon.authctl(["remote", "report-401"])
        #expect(report.status == 0 && report.stdout.contains("logged out of test"), "\(report)")
        let after = try fixture.daemon.authctl(["token", "remote"])
        #expect(after.status == 7 && after.stderr.contains("session.logged_out"), "\(after)")
        #expect(try fixture.daemon.authctl(["remote", "fetch", fixture.rig.api + "/api/me"]).status == 7)
        _ = try fixture.signedIn()
        let logout = try fixture.daemon.authctl(["federation", "logout"])
        #expect(logout.status == 0 && logout.stdout.contains("1 session(s) ended"), "\(logout)")
        #expect(try fixture.daemon.authctl(["token", "remote"]).status == 7)
        #expect(try fixture.state()?["state"] == "signed_out")
        let unknown = try fixture.daemon.authctl(["token", "remote", "nope"])
        #expect(unknown.status == 1 && unknown.stderr.contains("federation.unknown_provider"))
        #expect(unknown.stderr.contains(fixture.daemon.configPath), "the error names the file to fix: \(unknown.stderr)")
        #expect(!fixture.daemon.log.contains(token.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), "no token in the log")
    }

    @Test("remote.token answers session.locked while the local user is locked")
    func lockedUser() throws {
        let fixture = try FederationFixture()
        _ = try fixture.signedIn()
        _ = try LoginTests.register(fixture.daemon, fixture.client, phone: "+37251234567", password: "a long enough passphrase", device: "d1")
        _ = try fixture.client.result("lock")
        #expect(try fixture.remoteToken().errorReason == "session.locked")
    }
}
