import CLinux
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// authd-http: performs one HTTP request for authd (the SMS gateway, OpenID discovery, JWKS,
// token endpoint, remote.fetch) with URLSession, so that TLS and the parsing of remote answers happen in a
// short-lived process that holds no keys, and FoundationNetworking stays out of the daemon.
//
// stdin: one JSON object {"method","url","headers":{…},"body_base64","timeout","max_response_bytes"}.
// stdout: one JSON object {"status","headers":{…},"body_base64"} or {"error": "…"}; exit 0 either way.
// Redirects are returned, never followed: a bearer token must not travel to another URL.
// The URL must be https://, or http:// to a loopback address. Never prints the request.

struct Request: Decodable {
    var method: String
    var url: String
    var headers: [String: String]
    var body_base64: String?
    var timeout: Double
    var max_response_bytes: Int
}

struct Response: Encodable {
    var status: Int?
    var headers: [String: String]?
    var body_base64: String?
    var error: String?
}

func finish(_ response: Response) -> Never {
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
guard let request = try? JSONDecoder().decode(Request.self, from: input) else { finish(Response(error: "malformed request to authd-http")) }
guard let url = URL(string: request.url), let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else {
    finish(Response(error: "not an absolute URL"))
}
guard scheme == "https" || (scheme == "http" && isLoopback(host)) else {
    finish(Response(error: "only https:// (or http:// to a loopback address) is allowed"))
}

var urlRequest = URLRequest(url: url, timeoutInterval: request.timeout)
urlRequest.httpMethod = request.method
for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
if let body = request.body_base64 {
    guard let bytes = Data(base64Encoded: body) else { finish(Response(error: "malformed body")) }
    urlRequest.httpBody = bytes
}

let configuration = URLSessionConfiguration.ephemeral
configuration.timeoutIntervalForRequest = request.timeout
configuration.timeoutIntervalForResource = request.timeout
configuration.httpShouldSetCookies = false
configuration.httpCookieAcceptPolicy = .never
configuration.urlCache = nil
let collector = Collector(limit: request.max_response_bytes)
let session = URLSession(configuration: configuration, delegate: collector, delegateQueue: nil)
session.dataTask(with: urlRequest).resume()
if collector.done.wait(timeout: .now() + request.timeout + 1) == .timedOut {
    finish(Response(error: "no answer within \(Int(request.timeout)) s"))
}
if let failure = collector.failure { finish(Response(error: failure)) }
guard let response = collector.response else { finish(Response(error: "no HTTP answer")) }
var headers: [String: String] = [:]
for (name, value) in response.allHeaderFields {
    if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
}
finish(Response(status: response.statusCode, headers: headers, body_base64: collector.body.base64EncodedString()))
