import AuthdClient
import Foundation
import Glibc
import Protocol

// What the token vault and remote.fetch cost. The OpenID provider and the API are the
// tests' Authlib provider (Python, one process); authd's HTTP goes through its one authd-http,
// so remote.fetch is compared with curl making the same request.

/// The tests' OpenID provider and resource server, on ephemeral loopback ports.
final class ProviderStack {
    let directory: String
    let issuer: String
    let api: String
    private let pid: pid_t

    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("IntegrationTests/Python/oidc_provider.py").path

    init() throws {
        var template = Array("/tmp/authd-bench-oidc-XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template)!)
        pid = try CardStack.spawn(["/usr/bin/python3", Self.script], log: directory + "/provider.log")
        for _ in 0..<400 {
            let log = (try? String(contentsOfFile: directory + "/provider.log", encoding: .utf8)) ?? ""
            if let line = log.split(separator: "\n").first(where: { $0.hasPrefix("READY ") }),
               let issuer = line.firstMatch(of: /issuer=(\S+)/)?.output.1, let api = line.firstMatch(of: /api=(\S+)/)?.output.1 {
                self.issuer = String(issuer)
                self.api = String(api)
                return
            }
            usleep(50_000)
        }
        kill(pid, SIGKILL)
        throw BenchError(description: "the OpenID provider did not start; see \(directory)/provider.log")
    }

    func stop() {
        kill(pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Runs Python with `code` (argv[1...] = `arguments`) and waits; the browser and the control calls.
    func python(_ code: String, _ arguments: [String] = []) throws {
        let pid = try CardStack.spawn(["/usr/bin/python3", "-c", code] + arguments, log: directory + "/python.log")
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        guard status == 0 else { throw BenchError(description: "python failed; see \(directory)/python.log") }
    }

    func settings(_ json: String) throws {
        try python("import urllib.request,sys; urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(), headers={'Content-Type':'application/json'})).read()",
                   [issuer + "/control/settings", json])
    }
}

func federationFigures() throws {
    let rounds = 200
    let provider = try ProviderStack()
    defer { provider.stop() }
    let daemon = try Daemon(config: "[federation.bench]\nissuer = \(provider.issuer)\nclient_id = authd-test\napi = \(provider.api)\n")
    defer { daemon.stop() }
    let client = try Client(daemon.socket)

    // Tokens that live 10 s are always within the 30 s margin: every remote.token refreshes.
    try provider.settings(#"{"access_token_lifetime":10}"#)
    // Sign in: the browser's part is urllib, which follows the provider's redirect to authd.
    let login = try client.rpc.callRaw(method: "federation.login", params: NoParams()) { _, params in
        if let url = params?["url"]?.stringValue {
            try provider.python("import urllib.request,sys; urllib.request.urlopen(sys.argv[1]).read()", [url])
        }
    }
    guard login["session"] != nil else { throw BenchError(description: "federation.login failed: \(login)") }

    func timed(_ method: String, _ params: String, check: (JSONValue) -> Bool) throws -> [Double] {
        var latencies: [Double] = []
        for _ in 0..<rounds {
            let started = ContinuousClock.now
            let answer = try WireCodec.decode(JSONValue.self, from: Data(try client.call(method, params)))
            latencies.append((ContinuousClock.now - started).milliseconds)
            guard check(answer) else { throw BenchError(description: "\(method) failed: \(answer)") }
        }
        return latencies.sorted()
    }
    let refresh = try timed("remote.token", "{}") { $0["result"]?["refreshed"] == true }
    row("remote.token with a refresh at the provider", String(format: "p50 %.1f ms, p99 %.1f ms (n=\(rounds))", percentile(refresh, 0.5), percentile(refresh, 0.99)))
    try provider.settings(#"{"access_token_lifetime":3600}"#)
    _ = try client.call("remote.token")
    let vault = try timed("remote.token", "{}") { $0["result"]?["refreshed"] == false }
    row("remote.token from the vault (n=\(rounds))", String(format: "p50 %.2f ms, p99 %.2f ms", percentile(vault, 0.5), percentile(vault, 0.99)))
    let fetch = try timed("remote.fetch", #"{"url":"\#(provider.api)/api/me"}"#) { $0["result"]?["status"] == 200 }
    row("remote.fetch GET, through authd-http (n=\(rounds))", String(format: "p50 %.1f ms, p99 %.1f ms", percentile(fetch, 0.5), percentile(fetch, 0.99)))

    // The same GET by curl, with the same access token, in the same run: a fresh process per
    // request, as authd-http once was; the ratio is what authd adds to it.
    let token = try WireCodec.decode(JSONValue.self, from: Data(try client.call("remote.token")))["result"]?["access_token"]?.stringValue ?? ""
    var curl: [Double] = []
    for _ in 0..<50 {
        let started = ContinuousClock.now
        let pid = try CardStack.spawn(["/usr/bin/curl", "-sS", "-o", "/dev/null", "-H", "Authorization: Bearer \(token)", provider.api + "/api/me"],
                                      log: provider.directory + "/curl.log")
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        curl.append((ContinuousClock.now - started).milliseconds)
        guard status == 0 else { throw BenchError(description: "curl failed; see \(provider.directory)/curl.log") }
    }
    curl.sort()
    row("same GET by curl, same token (n=50)", String(format: "p50 %.1f ms, p99 %.1f ms", percentile(curl, 0.5), percentile(curl, 0.99)))
    row("remote.fetch ÷ curl, p50 (target ≤ 1.5)", String(format: "%.2f", percentile(fetch, 0.5) / percentile(curl, 0.5)))
    row("idle RSS after the federation rounds", String(format: "%.1f MB", Double(daemon.residentBytes) / 1e6))
}
