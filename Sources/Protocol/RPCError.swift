/// A JSON-RPC error object as authd sends it: an integer `code`, one human sentence in `message`,
/// and `data` holding the stable ``Reason`` plus optional details (`retries_left`, `field`, …).
///
/// Equality compares code and reason only, so tests can expect a reason regardless of wording.
public struct RPCError: Error, Sendable, Equatable, CustomStringConvertible {
    public var code: Code
    public var message: String
    public var reason: Reason
    /// Extra machine-readable details, encoded next to `reason` in `error.data`.
    public var details: [String: JSONValue]

    public init(code: Code, reason: Reason, message: String, details: [String: JSONValue] = [:]) {
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
    }

    public static func == (lhs: RPCError, rhs: RPCError) -> Bool {
        lhs.code == rhs.code && lhs.reason == rhs.reason
    }

    public var description: String { "\(message) (\(reason))" }

    /// JSON-RPC error codes: the reserved ones, and the application range −32000…−32099.
    public struct Code: RawRepresentable, Hashable, Sendable, Codable {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }

        public static let parseError = Code(rawValue: -32700)
        public static let invalidRequest = Code(rawValue: -32600)
        public static let methodNotFound = Code(rawValue: -32601)
        public static let invalidParams = Code(rawValue: -32602)
        public static let internalError = Code(rawValue: -32603)
        /// A request that was understood but refused or failed for a stated reason.
        public static let applicationError = Code(rawValue: -32000)
        /// The caller lacks the right to call the method.
        public static let forbidden = Code(rawValue: -32001)
        /// The request was cancelled or the daemon could not take it now.
        public static let unavailable = Code(rawValue: -32002)

        public init(from decoder: any Decoder) throws {
            rawValue = try decoder.singleValueContainer().decode(Int.self)
        }
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(rawValue)
        }
    }
}

extension RPCError {
    public static func parseError(_ message: String = "The line is not valid JSON.") -> RPCError {
        RPCError(code: .parseError, reason: .parseError, message: message)
    }
    public static func invalidRequest(_ message: String) -> RPCError {
        RPCError(code: .invalidRequest, reason: .invalidRequest, message: message)
    }
    public static func unknownMethod(_ method: String) -> RPCError {
        RPCError(code: .methodNotFound, reason: .unknownMethod,
                 message: "Unknown method '\(Redaction.printable(method, limit: 64))'.")
    }
    public static func invalidParams(_ message: String, field: String? = nil) -> RPCError {
        RPCError(code: .invalidParams, reason: .invalidParams, message: message,
                 details: field.map { ["field": .string($0)] } ?? [:])
    }
    public static func lineTooLong(limit: Int) -> RPCError {
        RPCError(code: .invalidRequest, reason: .lineTooLong,
                 message: "The line is longer than \(limit) bytes; closing the connection.",
                 details: ["limit": .integer(Int64(limit))])
    }
    public static let internalError = RPCError(
        code: .internalError, reason: .internal, message: "Internal error; the daemon's log has details.")
    public static func forbidden(_ method: String) -> RPCError {
        RPCError(code: .forbidden, reason: .forbidden,
                 message: "You are not allowed to call '\(method)'.")
    }
    public static let cancelled = RPCError(
        code: .unavailable, reason: .requestCancelled, message: "The request was cancelled.")
    public static let shuttingDown = RPCError(
        code: .unavailable, reason: .shuttingDown, message: "The daemon is shutting down.")
    public static let busy = RPCError(
        code: .unavailable, reason: .serverBusy, message: "The daemon has too many connections; try again later.")
    /// A refusal with a stated reason (the common case for application errors).
    public static func failure(_ reason: Reason, _ message: String, details: [String: JSONValue] = [:]) -> RPCError {
        RPCError(code: .applicationError, reason: reason, message: message, details: details)
    }
}

extension RPCError: Codable {
    private enum CodingKeys: String, CodingKey { case code, message, data }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        code = try container.decode(Code.self, forKey: .code)
        message = try container.decode(String.self, forKey: .message)
        var data = try container.decodeIfPresent([String: JSONValue].self, forKey: .data) ?? [:]
        reason = Reason(data.removeValue(forKey: "reason")?.stringValue ?? "unknown")
        details = data
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(code, forKey: .code)
        try container.encode(message, forKey: .message)
        var data = details
        data["reason"] = .string(reason.rawValue)
        try container.encode(data, forKey: .data)
    }
}
