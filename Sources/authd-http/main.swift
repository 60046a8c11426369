import CLinux
import Foundation
import Protocol
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// authd-http: makes authd's HTTP requests (the SMS gateway, OpenID discovery, JWKS, token
// endpoint, remote.fetch) with URLSession, so that TLS and the parsing of remote answers happen in
// a process that holds no keys, and FoundationNetworking stays out of the daemon.
//
// One per daemon, for as long as it runs. stdin: one `AuthdHTTP.Request` per line. stdout: one
// `AuthdHTTP.Response` per line, with the request's id, the answer or an error, as each finishes.
// Requests run at once on one URLSession, whose connections to a server are kept and used again.
// Both types are declared in Protocol, which authd shares. Ends when stdin ends.
// Redirects are returned, never followed: a bearer token must not travel to another URL.
// The URL must be https://, or http:// to a loopback address. Never prints a request.

/// Answers go out one whole line at a time, whichever request's task finishes.
let output = NSLock()

func answer(_ response: AuthdHTTP.Response) {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    let data = (try? encoder.encode(response)) ?? Data(#"{"error":"cannot encode the answer","id":\#(response.id.map(String.init) ?? "null")}"#.utf8)
    output.lock()
    FileHandle.standardOutput.write(data + Data("\n".utf8))
    output.unlock()
}

func isLoopback(_ host: String) -> Bool {
    let parts = host.split(separator: ".", omittingEmptySubsequences: false)
    return host == "localhost" || (parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0).map(String.init) == String($0) })
}

/// Every request in flight, by its task: collects each body up to its limit, refuses redirects,
/// and answers when the task completes (or its time is up).
final class Exchanges: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private struct Exchange {
        let id: Int
        let limit: Int
        var body = Data()
        var response: HTTPURLResponse?
        var failure: String?
    }

    // Under `lock`: the session's delegate queue and the timers both reach it.
    private let lock = NSLock()
    private var exchanges: [Int: Exchange] = [:]

    func start(_ task: URLSessionDataTask, id: Int, limit: Int, timeout: Double) {
        lock.lock()
        exchanges[task.taskIdentifier] = Exchange(id: id, limit: limit)
        lock.unlock()
        task.resume()
        // The whole exchange, not only the wait between two packets (URLRequest's timeout).
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { [self] in
            update(task) { $0.failure = $0.failure ?? "no answer within \(Int(timeout)) s" }
            task.cancel()
        }
    }

    private func update(_ task: URLSessionTask, _ change: (inout Exchange) -> Void) {
        lock.lock()
        defer { lock.unlock() }
        if var exchange = exchanges[task.taskIdentifier] {
            change(&exchange)
            exchanges[task.taskIdentifier] = exchange
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void) {
        completionHandler(nil)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
        update(dataTask) { $0.response = response as? HTTPURLResponse }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        var tooLarge = false
        update(dataTask) { exchange in
            guard exchange.failure == nil else { return }
            exchange.body.append(data)
            if exchange.body.count > exchange.limit {
                exchange.failure = "the answer is larger than \(exchange.limit) bytes"
                exchange.body = Data()
                tooLarge = true
            }
        }
        if tooLarge { dataTask.cancel() }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        lock.lock()
        let finished = exchanges.removeValue(forKey: task.taskIdentifier)
        lock.unlock()
        guard let exchange = finished else { return }
        if let failure = exchange.failure ?? error?.localizedDescription { return answer(AuthdHTTP.Response(id: exchange.id, error: failure)) }
        guard let response = exchange.response else { return answer(AuthdHTTP.Response(id: exchange.id, error: "no HTTP answer")) }
        var headers: [String: String] = [:]
        for (name, value) in response.allHeaderFields {
            if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
        }
        answer(AuthdHTTP.Response(id: exchange.id, status: response.statusCode, headers: headers, bodyBase64: exchange.body.base64EncodedString()))
    }
}

/// The id of a line that is not a whole request, if it has one, so its caller is answered.
struct Identified: Decodable { let id: Int? }

// The requests hold bearer tokens and client secrets: no core dump, no ptrace by the same uid
// (exec reset what authd set for itself).
_ = authd_disable_dumping()

let configuration = URLSessionConfiguration.ephemeral
configuration.httpShouldSetCookies = false
configuration.httpCookieAcceptPolicy = .never
configuration.urlCache = nil
let exchanges = Exchanges()
let session = URLSession(configuration: configuration, delegate: exchanges, delegateQueue: nil)

while let line = readLine(strippingNewline: true) {
    let data = Data(line.utf8)
    guard let request = try? JSONDecoder().decode(AuthdHTTP.Request.self, from: data) else {
        answer(AuthdHTTP.Response(id: (try? JSONDecoder().decode(Identified.self, from: data))?.id, error: "malformed request to authd-http"))
        continue
    }
    guard let url = URL(string: request.url), let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else {
        answer(AuthdHTTP.Response(id: request.id, error: "not an absolute URL"))
        continue
    }
    guard scheme == "https" || (scheme == "http" && isLoopback(host)) else {
        answer(AuthdHTTP.Response(id: request.id, error: "only https:// (or http:// to a loopback address) is allowed"))
        continue
    }
    var urlRequest = URLRequest(url: url, timeoutInterval: request.timeout)
    urlRequest.httpMethod = request.method
    for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
    if let body = request.bodyBase64 {
        guard let bytes = Data(base64Encoded: body) else {
            answer(AuthdHTTP.Response(id: request.id, error: "malformed body"))
            continue
        }
        urlRequest.httpBody = bytes
    }
    exchanges.start(session.dataTask(with: urlRequest), id: request.id, limit: request.maxResponseBytes, timeout: request.timeout)
}
// authd closed our stdin: it stopped, or let us go. What is in flight has no one to answer.
exit(0)
