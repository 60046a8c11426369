import Foundation

/// A request as the daemon receives it. `id == nil` means a JSON-RPC notification (no reply).
public struct Request: Sendable, Equatable {
    public var id: JSONValue?
    public var method: String
    public var params: JSONValue?

    public init(id: JSONValue?, method: String, params: JSONValue?) {
        self.id = id
        self.method = method
        self.params = params
    }
}

/// What a client receives: a response to one of its requests, or a notification from the daemon
/// (prompts, progress, streamed records).
public enum Incoming: Sendable, Equatable {
    case response(id: JSONValue, outcome: Outcome)
    case notification(method: String, params: JSONValue?)

    public enum Outcome: Sendable, Equatable {
        case result(JSONValue)
        case error(RPCError)
    }
}

/// Encoding and decoding of protocol lines. Stateless; every function is safe from any thread.
public enum WireCodec {
    public static let jsonrpcVersion = "2.0"

    // MARK: Encoding

    static func makeEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }

    /// Any Encodable as compact, key-sorted JSON (no trailing newline).
    public static func encodeJSON(_ value: some Encodable) throws -> Data {
        try makeEncoder().encode(value)
    }

    private struct ResponseEnvelope<R: Encodable>: Encodable {
        let jsonrpc = WireCodec.jsonrpcVersion
        let id: JSONValue
        let result: R
    }

    private struct ErrorEnvelope: Encodable {
        let jsonrpc = WireCodec.jsonrpcVersion
        let id: JSONValue
        let error: RPCError
    }

    private struct RequestEnvelope<P: Encodable>: Encodable {
        let jsonrpc = WireCodec.jsonrpcVersion
        let id: JSONValue?
        let method: String
        let params: P
    }

    /// A response line (with its `\n`).
    public static func responseLine(id: JSONValue, result: some Encodable) throws -> Data {
        line(try makeEncoder().encode(ResponseEnvelope(id: id, result: result)))
    }

    /// An error response line (with its `\n`). Never fails: error objects are plain data.
    public static func errorLine(id: JSONValue, error: RPCError) -> Data {
        // swiftlint:disable:next force_try — RPCError holds only strings, integers and JSONValues.
        line(try! makeEncoder().encode(ErrorEnvelope(id: id, error: error)))
    }

    /// A request line; `id == nil` makes it a notification.
    public static func requestLine(id: JSONValue?, method: String, params: some Encodable) throws -> Data {
        line(try makeEncoder().encode(RequestEnvelope(id: id, method: method, params: params)))
    }

    /// A daemon → client notification line.
    public static func notificationLine(method: String, params: some Encodable) throws -> Data {
        try requestLine(id: nil, method: method, params: params)
    }

    private static func line(_ data: Data) -> Data {
        var data = data
        data.append(UInt8(ascii: "\n"))
        return data
    }

    // MARK: Decoding

    /// Parses one line (without its terminator) as a JSON-RPC 2.0 request.
    ///
    /// On failure, returns the error to send and the id to send it with (`null` when the id
    /// could not be read), exactly as JSON-RPC 2.0 §5 prescribes.
    public static func decodeRequest(_ line: some Collection<UInt8>) -> Result<Request, RequestDecodingError> {
        guard let value = try? JSONDecoder().decode(JSONValue.self, from: Data(line)) else {
            return .failure(RequestDecodingError(id: .null, error: .parseError()))
        }
        guard case .object(let members) = value else {
            if case .array = value {
                return .failure(RequestDecodingError(
                    id: .null, error: .invalidRequest("Batch requests are not supported; send one request per line.")))
            }
            return .failure(RequestDecodingError(
                id: .null, error: .invalidRequest("A request must be a JSON object, not \(value.typeName).")))
        }
        var id: JSONValue? = nil
        if let rawID = members["id"] {
            switch rawID {
            case .string, .integer, .double, .null: id = rawID
            default:
                return .failure(RequestDecodingError(
                    id: .null, error: .invalidRequest("'id' must be a string, a number or null.")))
            }
        }
        let replyID = id ?? .null
        guard members["jsonrpc"] == .string(jsonrpcVersion) else {
            return .failure(RequestDecodingError(id: replyID, error: .invalidRequest("'jsonrpc' must be \"2.0\".")))
        }
        guard case .string(let method)? = members["method"], !method.isEmpty else {
            return .failure(RequestDecodingError(
                id: replyID, error: .invalidRequest("'method' must be a non-empty string.")))
        }
        let params = members["params"]
        switch params {
        case nil, .object?, .null?: break
        case .array?:
            return .failure(RequestDecodingError(
                id: replyID, error: .invalidParams("'params' must be an object (named parameters).", field: "params")))
        case let other?:
            return .failure(RequestDecodingError(
                id: replyID, error: .invalidParams("'params' must be an object, not \(other.typeName).", field: "params")))
        }
        for key in members.keys where !["jsonrpc", "id", "method", "params"].contains(key) {
            return .failure(RequestDecodingError(
                id: replyID, error: .invalidRequest("Unknown member '\(Redaction.printable(key, limit: 64))' in the request.")))
        }
        return .success(Request(id: id, method: method, params: params == .null ? nil : params))
    }

    /// Why a line is not a request, with the id to answer with.
    public struct RequestDecodingError: Error, Sendable, Equatable {
        public var id: JSONValue
        public var error: RPCError
    }

    /// Parses one line as a response or notification (the client side).
    public static func decodeIncoming(_ line: some Collection<UInt8>) throws(RPCError) -> Incoming {
        guard case .object(let members)? = try? JSONDecoder().decode(JSONValue.self, from: Data(line)),
              members["jsonrpc"] == .string(jsonrpcVersion)
        else { throw .parseError("The daemon sent a line that is not a JSON-RPC 2.0 message.") }
        if case .string(let method)? = members["method"], members["id"] == nil {
            return .notification(method: method, params: members["params"])
        }
        guard let id = members["id"] else { throw .parseError("The daemon sent a response without an id.") }
        if let error = members["error"] {
            guard let decoded = try? decode(RPCError.self, from: error) else {
                throw .parseError("The daemon sent an error object that cannot be read.")
            }
            return .response(id: id, outcome: .error(decoded))
        }
        return .response(id: id, outcome: .result(members["result"] ?? .null))
    }

    /// Decodes a method's typed parameters. Missing or ill-typed fields, and fields the method
    /// does not know, become −32602 errors that name the field.
    public static func decodeParams<P: Codable>(_ type: P.Type, from params: JSONValue?) throws(RPCError) -> P {
        let object = params ?? .object([:])
        let decoded: P
        do {
            decoded = try decode(P.self, from: object)
        } catch let error as DecodingError {
            throw describe(error)
        } catch {
            throw .invalidParams("The parameters cannot be read.")
        }
        // Reject fields the method does not define: a typo ("audience" for "aud") must not be
        // silently ignored by a security daemon. Re-encoding gives exactly the known fields that
        // are set; input fields that are null are allowed as "not given".
        if case .object(let given) = object,
           case .object(let known)? = try? decode(JSONValue.self, from: encodeJSON(decoded))
        {
            for (key, value) in given.sorted(by: { $0.key < $1.key }) where known[key] == nil && value != .null {
                throw .invalidParams("Unknown parameter '\(Redaction.printable(key, limit: 64))'.", field: key)
            }
        }
        return decoded
    }

    /// Decodes a typed value from a JSONValue (results on the client side, params on the server).
    public static func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws -> T {
        try decode(type, from: try encodeJSON(value))
    }

    public static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        try JSONDecoder().decode(type, from: data)
    }

    private static func describe(_ error: DecodingError) -> RPCError {
        func path(_ context: DecodingError.Context, appending key: (any CodingKey)? = nil) -> String {
            let keys = context.codingPath + (key.map { [$0] } ?? [])
            return keys.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
                .joined(separator: ".").replacingOccurrences(of: ".[", with: "[")
        }
        switch error {
        case .keyNotFound(let key, let context):
            let field = path(context, appending: key)
            return .invalidParams("Missing parameter '\(field)'.", field: field)
        case .typeMismatch(let type, let context):
            let field = path(context)
            return .invalidParams("Parameter '\(field)' must be \(describe(type)).", field: field)
        case .valueNotFound(let type, let context):
            let field = path(context)
            return .invalidParams("Parameter '\(field)' must be \(describe(type)), not null.", field: field)
        case .dataCorrupted(let context):
            let field = path(context)
            return field.isEmpty
                ? .invalidParams("The parameters cannot be read.")
                : .invalidParams("Parameter '\(field)' is invalid.", field: field)
        @unknown default:
            return .invalidParams("The parameters cannot be read.")
        }
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: return "a string"
        case is Bool.Type: return "a boolean"
        case is Int.Type, is Int64.Type, is Int32.Type, is UInt32.Type, is UInt64.Type: return "an integer"
        case is Double.Type: return "a number"
        default:
            let name = String(describing: type)
            if name.hasPrefix("Array") { return "an array" }
            if name.hasPrefix("Dictionary") { return "an object" }
            return "of type \(name)"
        }
    }
}
