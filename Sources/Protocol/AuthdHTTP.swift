/// The wire between authd and `authd-http`, the short-lived process that makes each of the
/// daemon's HTTP requests (SMS gateway, OpenID discovery, JWKS, token endpoint, `remote.fetch`):
/// one ``Request`` as JSON on its stdin, one ``Response`` as JSON on its stdout.
///
/// It lives here, beside the JSON-RPC types, because two programs speak it and it must be
/// declared once; like the rest of this module it is values only, with no I/O.
public enum AuthdHTTP {
    /// One HTTP request. It carries bearer tokens and client secrets: never log it.
    public struct Request: Codable, Sendable, Equatable {
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

        public init(method: String, url: String, headers: [String: String], bodyBase64: String?, timeout: Double, maxResponseBytes: Int) {
            self.method = method
            self.url = url
            self.headers = headers
            self.bodyBase64 = bodyBase64
            self.timeout = timeout
            self.maxResponseBytes = maxResponseBytes
        }

        enum CodingKeys: String, CodingKey {
            case method, url, headers, bodyBase64 = "body_base64", timeout, maxResponseBytes = "max_response_bytes"
        }
    }

    /// The HTTP answer (`status`, `headers` with lower-case names, `bodyBase64`), or `error` when
    /// there was none: unreachable, timed out, too large, or a refused URL. A redirect is an
    /// answer; it is never followed.
    public struct Response: Codable, Sendable, Equatable {
        public var status: Int?
        public var headers: [String: String]?
        public var bodyBase64: String?
        /// Why there is no answer, in one sentence.
        public var error: String?

        public init(status: Int? = nil, headers: [String: String]? = nil, bodyBase64: String? = nil, error: String? = nil) {
            self.status = status
            self.headers = headers
            self.bodyBase64 = bodyBase64
            self.error = error
        }

        enum CodingKeys: String, CodingKey {
            case status, headers, bodyBase64 = "body_base64", error
        }
    }
}
