/// The wire between authd and `authd-http`, the one long-lived process per daemon that makes its
/// HTTP requests (SMS gateway, OpenID discovery, JWKS, token endpoint, `remote.fetch`): each
/// ``Request`` one line of JSON on its stdin, each ``Response`` one line on its stdout, with the
/// request's `id`. Requests run at once, and answers come back in the order they finish.
///
/// It lives here, beside the JSON-RPC types, because two programs speak it and it must be
/// declared once; like the rest of this module it is values only, with no I/O.
public enum AuthdHTTP {
    /// One HTTP request. It carries bearer tokens and client secrets: never log it.
    public struct Request: Codable, Sendable, Equatable {
        /// Names the answer; chosen by authd, unique among the requests in flight.
        public var id: Int
        /// `GET`, `POST`, …
        public var method: String
        /// `https://`, or `http://` to a loopback address; anything else is refused.
        public var url: String
        public var headers: [String: String]
        /// The body, base64-encoded; absent for none.
        public var bodyBase64: String?
        /// Seconds the whole exchange may take.
        public var timeout: Double
        /// A larger answer is refused with ``Response/error``.
        public var maxResponseBytes: Int

        public init(id: Int, method: String, url: String, headers: [String: String], bodyBase64: String?, timeout: Double, maxResponseBytes: Int) {
            self.id = id
            self.method = method
            self.url = url
            self.headers = headers
            self.bodyBase64 = bodyBase64
            self.timeout = timeout
            self.maxResponseBytes = maxResponseBytes
        }

        enum CodingKeys: String, CodingKey {
            case id, method, url, headers, bodyBase64 = "body_base64", timeout, maxResponseBytes = "max_response_bytes"
        }
    }

    /// The HTTP answer (`status`, `headers` with lower-case names, `bodyBase64`), or `error` when
    /// there was none: unreachable, timed out, too large, or a refused URL. A redirect is an
    /// answer; it is never followed.
    public struct Response: Codable, Sendable, Equatable {
        /// The request's; absent only when its line could not be read at all.
        public var id: Int?
        public var status: Int?
        public var headers: [String: String]?
        public var bodyBase64: String?
        /// Why there is no answer, in one sentence.
        public var error: String?

        public init(id: Int?, status: Int? = nil, headers: [String: String]? = nil, bodyBase64: String? = nil, error: String? = nil) {
            self.id = id
            self.status = status
            self.headers = headers
            self.bodyBase64 = bodyBase64
            self.error = error
        }

        enum CodingKeys: String, CodingKey {
            case id, status, headers, bodyBase64 = "body_base64", error
        }
    }
}
