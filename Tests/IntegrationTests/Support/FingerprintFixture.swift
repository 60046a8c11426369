import Foundation
import Glibc
import Protocol
import Testing

/// One fingerprint test: a private bus with the fprintd mock (`FprintdRig`), authd on it, and a
/// client. The caller's login name is the fprintd user, so fingers are enrolled for it.
final class FingerprintFixture {
    static let password = "a long enough passphrase"
    static let phone = "+37251234567"
    /// The local user the tests run as, as authd names it to fprintd.
    static let user: String = String(cString: getpwuid(getuid())!.pointee.pw_name)
    static let finger = ["right-index-finger"]

    let rig: FprintdRig
    let daemon: DaemonHarness
    private(set) var client: LineClient
    /// The registration's result (account and session), once `register` ran.
    private(set) var registered: JSONValue?
    private let extraEnvironment: [String: String]

    var token: JSONValue { registered?["session"]?["token"] ?? .null }
    var accountID: JSONValue { registered?["account"]?["id"] ?? .null }

    init(config: String? = nil, enrolled: [String: [String]]? = nil, device: Bool = true, startMock: Bool = true,
         environment: [String: String] = [:]) throws {
        rig = try FprintdRig(enrolled: enrolled ?? [Self.user: Self.finger], device: device, startMock: startMock)
        daemon = try DaemonHarness(config: config)
        extraEnvironment = environment
        try daemon.start(environment: rig.environment.merging(environment) { _, new in new })
        client = try daemon.connect()
    }

    /// Restarts authd (SIGTERM, or SIGKILL with `kill9`) on the same state and bus; a new client.
    func restart(kill9: Bool = false) throws {
        client.close()
        if kill9 { try daemon.kill9() } else { #expect(try daemon.terminate() == 0) }
        try daemon.start(environment: rig.environment.merging(extraEnvironment) { _, new in new })
        client = try daemon.connect()
    }

    /// Registers an account from this local user: it becomes the remembered account.
    @discardableResult
    func register(phone: String = FingerprintFixture.phone, device: String = "device-1") throws -> JSONValue {
        let result = try LoginTests.register(daemon, client, phone: phone, password: Self.password, device: device)
        if registered == nil { registered = result }
        return result
    }

    /// `biometric.enable` with one matching scan; the script is empty afterwards.
    func enableFingerprint() throws {
        try rig.setScript([.match])
        let enabled = try client.exchange("biometric.enable")
        guard enabled.response["result"]?["enabled"] == true else { throw HarnessError("biometric.enable failed: \(enabled.response)") }
    }

    /// `biometric.status`.
    func status() throws -> JSONValue { try client.result("biometric.status") }

    /// Locks, checking that it took.
    func lock() throws {
        let locked = try client.result("lock")
        guard locked["locked"] == true else { throw HarnessError("lock failed: \(locked)") }
    }

    func isLocked() throws -> Bool { try client.result("lock.status")["locked"] == true }

    /// fprintd calls so far (0 for a method never called).
    func calls(_ method: String) throws -> Int { try rig.callCounts()[method] ?? 0 }

    /// Every claim of the reader was given back, and nobody holds it now.
    func expectReleased(_ comment: String = "", sourceLocation: SourceLocation = #_sourceLocation) throws {
        let counts = try rig.callCounts()
        #expect(counts["Release", default: 0] == counts["Claim", default: 0], "every Claim has its Release: \(counts) \(comment)",
                sourceLocation: sourceLocation)
        #expect(try rig.claimedBy() == "", "the reader is free \(comment)", sourceLocation: sourceLocation)
    }

    /// `auth.local` as the guard sees it: its error reason, or nil when it issued a token.
    func authLocalReason() throws -> String? {
        let response = try client.call("auth.local", ["aud": "app.example"])
        if response["result"]?["token"]?.stringValue != nil { return nil }
        return response.errorReason ?? "?"
    }
}

/// What one request produced: its response and the prompts raised while it ran.
struct PromptedCall {
    let response: JSONValue
    let prompts: [JSONValue]
    var reason: String? { response.errorReason }
    var result: JSONValue? { response["result"] }
    var data: JSONValue? { response["error"]?["data"] }
    /// The messages of the `fingerprint` prompts, in order.
    var fingerprintMessages: [String] { prompts.filter { $0["kind"] == "fingerprint" }.compactMap { $0["message"]?.stringValue } }
    func ofKind(_ kind: String) -> [JSONValue] { prompts.filter { $0["kind"] == .string(kind) } }
    /// The kinds of the prompts, in order.
    var kinds: [String] { prompts.compactMap { $0["kind"]?.stringValue } }
}

/// How the test answers one prompt.
enum PromptReply {
    case ignore
    case answer(String)
    case cancel
}

extension LineClient {
    /// Sends a request and answers its prompts with `reply` (by default: `password` and PIN
    /// prompts from `answers`, other answerable prompts cancelled, progress left alone).
    func exchange(_ method: String, _ params: JSONValue = [:], answers: [String: String] = [:],
                  reply: ((JSONValue) -> PromptReply)? = nil) throws -> PromptedCall {
        var prompts: [JSONValue] = []
        let outcome = try rpc.request(method: method, params: params) { name, prompt in
            guard name == "prompt", let prompt, let promptID = prompt["prompt_id"] else { return }
            prompts.append(prompt)
            let decision: PromptReply
            if let reply {
                decision = reply(prompt)
            } else if prompt["expects_answer"] == .bool(true) {
                decision = prompt["kind"]?.stringValue.flatMap { answers[$0] }.map { .answer($0) } ?? .cancel
            } else {
                decision = .ignore
            }
            switch decision {
            case .ignore: break
            case .answer(let value): try replyToPrompt(promptID, answer: value)
            case .cancel: try replyToPrompt(promptID, answer: nil)
            }
        }
        return PromptedCall(response: JSONValue(response: outcome), prompts: prompts)
    }
}
