import FoundationEssentials

/// A request as the daemon receives it. `id == nil` means a JSON-RPC notification (no reply).
///
/// Params stay in their wire form until the method is known; ``WireCodec/decodeParams(_:from:)``
/// then decodes them straight into the method's typed parameters (one pass, no generic tree).
public struct Request: Sendable, Equatable {
    public var id: JSONValue?
    public var method: String
    fileprivate var source: ParamsSource

    fileprivate enum ParamsSource: Sendable, Equatable {
        /// The request line, whose `params` member is absent, null or an object.
        case line(Data)
        case value(JSONValue?)
    }

    /// A request built in-process (tests, internal callers).
    public init(id: JSONValue?, method: String, params: JSONValue?) {
        self.id = id
        self.method = method
        source = .value(params == .null ? nil : params)
    }

    fileprivate init(id: JSONValue?, method: String, line: Data) {
        self.id = id
        self.method = method
        source = .line(line)
    }

    /// The params as a generic JSON value (slow path: diagnostics and tests).
    public var params: JSONValue? {
        switch source {
        case .value(let value): return value
        case .line(let line):
            let params = (try? JSONDecoder().decode(GenericParams.self, from: line))?.params
            return params == .null ? nil : params
        }
    }

    private struct GenericParams: Decodable { let params: JSONValue? }
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

    /// Any Encodable as compact, key-sorted JSON (no trailing newline): `CompactJSON`, or
    /// `JSONEncoder` for a value that holds a type it encodes specially.
    public static func encodeJSON(_ value: some Encodable) throws -> Data {
        guard let bytes = try CompactJSON.encode(value) else { return try makeEncoder().encode(value) }
        #if DEBUG
        // Every test checks the two encoders against each other (the texts may hold secrets:
        // only where they part is said).
        let reference = [UInt8](try makeEncoder().encode(value))
        let parted = zip(bytes, reference).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(bytes.count, reference.count)
        assert(bytes == reference, "CompactJSON and JSONEncoder part at byte \(parted) of \(reference.count) encoding \(type(of: value))")
        #endif
        return Data(bytes)
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
        line(try encodeJSON(ResponseEnvelope(id: id, result: result)))
    }

    /// An error response line (with its `\n`). Never fails: error objects are plain data.
    public static func errorLine(id: JSONValue, error: RPCError) -> Data {
        // swiftlint:disable:next force_try — RPCError holds only strings, integers and JSONValues.
        line(try! encodeJSON(ErrorEnvelope(id: id, error: error)))
    }

    /// A request line; `id == nil` makes it a notification.
    public static func requestLine(id: JSONValue?, method: String, params: some Encodable) throws -> Data {
        line(try encodeJSON(RequestEnvelope(id: id, method: method, params: params)))
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
        let data = Data(line)
        if let violation = StrictJSON.check(data) {
            return .failure(RequestDecodingError(id: .null, error: .parseError("The line is not strict JSON: \(violation).")))
        }
        let envelope: Envelope
        do {
            envelope = try JSONDecoder().decode(Envelope.self, from: data)
        } catch let error as DecodingError {
            switch error {
            case .typeMismatch, .valueNotFound:
                // Valid JSON, but not an object (a number, a string, null, a batch array).
                return .failure(RequestDecodingError(id: .null, error: .invalidRequest("A request must be a JSON object (batches are not supported).")))
            default:
                return .failure(RequestDecodingError(id: .null, error: .parseError()))
            }
        } catch {
            return .failure(RequestDecodingError(id: .null, error: .parseError()))
        }
        guard let id = envelope.id else {
            return .failure(RequestDecodingError(id: .null, error: .invalidRequest("'id' must be a string, a number or null.")))
        }
        let replyID = id.value ?? .null
        guard envelope.jsonrpc == jsonrpcVersion else {
            return .failure(RequestDecodingError(id: replyID, error: .invalidRequest("'jsonrpc' must be \"2.0\".")))
        }
        guard let method = envelope.method, !method.isEmpty else {
            return .failure(RequestDecodingError(id: replyID, error: .invalidRequest("'method' must be a non-empty string.")))
        }
        if let unknown = envelope.unknownMember {
            return .failure(RequestDecodingError(
                id: replyID, error: .invalidRequest("Unknown member '\(Redaction.printable(unknown, limit: 64))' in the request.")))
        }
        guard envelope.paramsAreObjectOrAbsent else {
            return .failure(RequestDecodingError(
                id: replyID, error: .invalidParams("'params' must be an object (named parameters).", field: "params")))
        }
        return .success(Request(id: id.value, method: method, line: data))
    }

    /// The request envelope, read without building a generic JSON tree.
    private struct Envelope: Decodable {
        /// The outer optional: was `id` well formed; the inner: was it present (nil = notification).
        var id: RequestID?
        var jsonrpc: String?
        var method: String?
        var paramsAreObjectOrAbsent = true
        var unknownMember: String?

        struct RequestID { let value: JSONValue? }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: AnyCodingKey.self)
            for key in container.allKeys {
                switch key.stringValue {
                case "jsonrpc": jsonrpc = try? container.decode(String.self, forKey: key)
                case "method": method = try? container.decode(String.self, forKey: key)
                case "id", "params": break
                default: if unknownMember == nil { unknownMember = key.stringValue }
                }
            }
            let idKey = AnyCodingKey("id")
            if !container.contains(idKey) {
                id = RequestID(value: nil)
            } else if try container.decodeNil(forKey: idKey) {
                id = RequestID(value: .null)
            } else if let number = try? container.decode(Int64.self, forKey: idKey) {
                id = RequestID(value: .integer(number))
            } else if let text = try? container.decode(String.self, forKey: idKey) {
                id = RequestID(value: .string(text))
            } else if let bool = try? container.decode(Bool.self, forKey: idKey) {
                _ = bool  // booleans are not valid ids
                id = nil
            } else if let number = try? container.decode(Double.self, forKey: idKey) {
                id = RequestID(value: .double(number))
            } else {
                id = nil
            }
            let paramsKey = AnyCodingKey("params")
            if try container.contains(paramsKey) && !container.decodeNil(forKey: paramsKey) {
                paramsAreObjectOrAbsent = (try? container.nestedContainer(keyedBy: AnyCodingKey.self, forKey: paramsKey)) != nil
            }
        }
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
    public static func decodeParams<P: Decodable>(_ type: P.Type, from request: Request) throws(RPCError) -> P {
        let data: Data
        switch request.source {
        case .line(let line):
            data = line
        case .value(let value):
            guard let encoded = try? encodeJSON(["params": value ?? .object([:])]) else { throw .invalidParams("The parameters cannot be read.") }
            data = encoded
        }
        do {
            return try JSONDecoder().decode(ParamsEnvelope<P>.self, from: data).params
        } catch let error as RPCError {
            throw error
        } catch let error as DecodingError {
            throw describe(error)
        } catch {
            throw .invalidParams("The parameters cannot be read.")
        }
    }

    /// Decodes typed params from a JSONValue (absent or null means `{}`).
    public static func decodeParams<P: Decodable>(_ type: P.Type, from params: JSONValue?) throws(RPCError) -> P {
        try decodeParams(type, from: Request(id: nil, method: "", params: params))
    }

    /// `{"params": …}` of a request line, decoded as `P`. Absent or null params decode as `{}`.
    /// Fields present in the request but never asked for by `P`'s decoding are rejected: a typo
    /// ("audience" for "aud") must not be silently ignored by a security daemon.
    private struct ParamsEnvelope<P: Decodable>: Decodable {
        let params: P

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: AnyCodingKey.self)
            let key = AnyCodingKey("params")
            let present = try container.contains(key) && !container.decodeNil(forKey: key)
            let recorder = FieldRecorder()
            if present {
                do {
                    params = try P(from: RecordingDecoder(base: try container.superDecoder(forKey: key), recorder: recorder))
                } catch let error where !(error is DecodingError) && !(error is RPCError) && recorder.last != nil {
                    // A number that does not fit the field's type (1.5 or 1e30 for an integer)
                    // fails with the parser's own error, which has no coding path.
                    let field = recorder.last!
                    throw RPCError.invalidParams("Parameter '\(Redaction.printable(field, limit: 64))' has a value of the wrong type or out of range.", field: field)
                }
                let given = try container.nestedContainer(keyedBy: AnyCodingKey.self, forKey: key).allKeys
                for field in given.map(\.stringValue).sorted() where !recorder.asked.contains(field) {
                    // An explicit null for a field the method does not know is still unknown.
                    throw RPCError.invalidParams("Unknown parameter '\(Redaction.printable(field, limit: 64))'.", field: field)
                }
            } else {
                params = try JSONDecoder().decode(P.self, from: Data("{}".utf8))
            }
        }
    }

    /// Decodes a typed value from a JSONValue (results on the client side, params on the server).
    public static func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws -> T {
        try JSONDecoder().decode(type, from: try encodeJSON(value))
    }

    /// Decodes a JSON text from outside (a provider's documents, a token's parts, WebAuthn's
    /// client data): strict JSON only (``StrictJSON``), then typed.
    public static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        if let violation = StrictJSON.check(data) { throw violation }
        return try JSONDecoder().decode(type, from: data)
    }

    private static func describe(_ error: DecodingError) -> RPCError {
        func path(_ context: DecodingError.Context, appending key: (any CodingKey)? = nil) -> String {
            // The envelope's own "params" key is not part of the field name.
            let keys = (context.codingPath + (key.map { [$0] } ?? [])).drop { $0.stringValue == "params" && $0.intValue == nil }
            return keys.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }
                .joined(separator: ".").replacing(".[", with: "[")
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
