import CLinux
import Foundation
import Protocol
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// authd-http: performs one HTTP request for authd (the SMS gateway, OpenID discovery, JWKS,
// token endpoint, remote.fetch) with URLSession, so that TLS and the parsing of remote answers happen in a
// short-lived process that holds no keys, and FoundationNetworking stays out of the daemon.
//
// stdin: one `AuthdHTTP.Request` as JSON. stdout: one `AuthdHTTP.Response` as JSON, the answer or
// an error; exit 0 either way. Both are declared in Protocol, which authd shares.
// Redirects are returned, never followed: a bearer token must not travel to another URL.
// The URL must be https://, or http:// to a loopback address. Never prints the request.

func finish(_ response: AuthdHTTP.Response) -> Never {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    let data = (try? encoder.encode(response)) ?? Data(#"{"error":"cannot encode the answer"}"#.utf8)
    FileHandle.standardOutput.write(data + Data("\n".utf8))
    exit(0)
}

func isLoopback(_ host: String) -> Bool {
    let parts = host.split(separator: ".", omittingEmptySubsequences: false)
    return host == "localhost" || (parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0).map(String.init) == String($0) })
}

/// Collects the body up to the limit and refuses redirects.
final class Collector: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // Touched only on the session's serial delegate queue; read after `done` is signalled.
    let limit: Int
    let done = DispatchSemaphore(value: 0)
    var body = Data()
    var response: HTTPURLResponse?
    var failure: String?

    init(limit: Int) { self.limit = limit }

    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void) {
        completionHandler(nil)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
        self.response = response as? HTTPURLResponse
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        guard failure == nil else { return }
        body.append(data)
        if body.count > limit {
            failure = "the answer is larger than \(limit) bytes"
            dataTask.cancel()
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        if let error, failure == nil { failure = error.localizedDescription }
        done.signal()
    }
}

// The request holds a bearer token or client secret: no core dump, no ptrace by the same uid
// (exec reset what authd set for itself).
_ = authd_disable_dumping()
let input = FileHandle.standardInput.readData(ofLength: 8 << 20)
guard let request = try? JSONDecoder().decode(AuthdHTTP.Request.self, from: input) else { finish(AuthdHTTP.Response(error: "malformed request to authd-http")) }
guard let url = URL(string: request.url), let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else {
    finish(AuthdHTTP.Response(error: "not an absolute URL"))
}
guard scheme == "https" || (scheme == "http" && isLoopback(host)) else {
    finish(AuthdHTTP.Response(error: "only https:// (or http:// to a loopback address) is allowed"))
}

var urlRequest = URLRequest(url: url, timeoutInterval: request.timeout)
urlRequest.httpMethod = request.method
for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
if let body = request.bodyBase64 {
    guard let bytes = Data(base64Encoded: body) else { finish(AuthdHTTP.Response(error: "malformed body")) }
    urlRequest.httpBody = bytes
}

let configuration = URLSessionConfiguration.ephemeral
configuration.timeoutIntervalForRequest = request.timeout
configuration.timeoutIntervalForResource = request.timeout
configuration.httpShouldSetCookies = false
configuration.httpCookieAcceptPolicy = .never
configuration.urlCache = nil
let collector = Collector(limit: request.maxResponseBytes)
let session = URLSession(configuration: configuration, delegate: collector, delegateQueue: nil)
session.dataTask(with: urlRequest).resume()
if collector.done.wait(timeout: .now() + request.timeout + 1) == .timedOut {
    finish(AuthdHTTP.Response(error: "no answer within \(Int(request.timeout)) s"))
}
if let failure = collector.failure { finish(AuthdHTTP.Response(error: failure)) }
guard let response = collector.response else { finish(AuthdHTTP.Response(error: "no HTTP answer")) }
var headers: [String: String] = [:]
for (name, value) in response.allHeaderFields {
    if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
}
finish(AuthdHTTP.Response(status: response.statusCode, headers: headers, bodyBase64: collector.body.base64EncodedString()))
