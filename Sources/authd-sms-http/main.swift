import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// authd-sms-http: the `[sms] backend = http` sender. authd runs it like the command backend
// (number in SMS_TO, text on stdin) so that URLSession, TLS and remote responses stay out of
// the process that holds the keys, and out of its memory. POSTs {"to","text"} as JSON with a
// bearer token; exit 0 when the gateway answers 2xx, 1 otherwise. Never prints the text.
//
// Environment: SMS_TO (E.164), SMS_URL (https://…, or http:// to a loopback address),
// SMS_TOKEN_FILE (optional: a file holding the bearer token), SMS_TIMEOUT (seconds, default 10).

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("authd-sms-http: \(message)\n".utf8))
    exit(1)
}

let environment = ProcessInfo.processInfo.environment
guard let to = environment["SMS_TO"], to.hasPrefix("+") else { fail("SMS_TO must be an E.164 number") }
guard let urlText = environment["SMS_URL"], let url = URL(string: urlText), let scheme = url.scheme?.lowercased(), let host = url.host else {
    fail("SMS_URL must be an absolute URL")
}
// A bearer token must not travel in clear text, except to this machine (tests, local relays).
let loopback = host == "localhost" || host == "::1" || host == "[::1]"
    || (host.hasPrefix("127.") && host.split(separator: ".").count == 4 && host.split(separator: ".").allSatisfy { UInt8($0) != nil })
guard scheme == "https" || (scheme == "http" && loopback) else { fail("SMS_URL must use https (http only to a loopback address)") }
let timeout = Double(environment["SMS_TIMEOUT"] ?? "10") ?? 10
var text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
if text.hasSuffix("\n") { text.removeLast() }

var request = URLRequest(url: url, timeoutInterval: timeout)
request.httpMethod = "POST"
request.setValue("application/json", forHTTPHeaderField: "Content-Type")
if let tokenFile = environment["SMS_TOKEN_FILE"], !tokenFile.isEmpty {
    guard let token = try? String(contentsOfFile: tokenFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines), !token.isEmpty else {
        fail("cannot read a token from SMS_TOKEN_FILE")
    }
    request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
}
let encoder = JSONEncoder()
encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
request.httpBody = try encoder.encode(["to": to, "text": text])

let configuration = URLSessionConfiguration.ephemeral
configuration.timeoutIntervalForRequest = timeout
configuration.timeoutIntervalForResource = timeout
let done = DispatchSemaphore(value: 0)
nonisolated(unsafe) var status = 0
nonisolated(unsafe) var problem: String?
URLSession(configuration: configuration).dataTask(with: request) { _, response, error in
    // Written once here, read after the semaphore: the wait orders the accesses.
    if let error { problem = error.localizedDescription }
    status = (response as? HTTPURLResponse)?.statusCode ?? 0
    done.signal()
}.resume()
if done.wait(timeout: .now() + timeout + 1) == .timedOut { fail("no answer within \(Int(timeout)) s") }
if let problem { fail(problem) }
guard (200..<300).contains(status) else { fail("the gateway answered HTTP \(status)") }
exit(0)
