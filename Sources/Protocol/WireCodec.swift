import FoundationEssentials

/// A request as the daemon receives it. `id == nil` means a JSON-RPC notification (no reply).
///
/// Params stay in their wire form until the method is known; ``WireCodec/decodeParams(_:from:)``
/// then reads them (``StrictJSON``) and maps the value onto the method's typed parameters
/// (``JSONValueDecoder``).
public struct Request: Sendable, Equatable {
    public var id: JSONValue?
    public var method: String
    fileprivate var source: ParamsSource

    fileprivate enum ParamsSource: Sendable, Equatable {
        /// The text of the `params` object, as the request line has it (nil when the line has
        /// none: absent or null), and its members' names as the strict check read them.
        case text(ParamsText?, names: [String])
        case value(JSONValue?)
    }

    /// The `params` object's text: where it lies in the request line, which the request keeps.
    /// It is read only to be decoded (a request without params costs nothing).
    struct ParamsText: Sendable, Equatable {
        let line: [UInt8]
        let range: Range<Int>

        static func == (lhs: Self, rhs: Self) -> Bool { lhs.line[lhs.range].elementsEqual(rhs.line[rhs.range]) }
    }

    /// A request built in-process (tests, internal callers).
    public init(id: JSONValue?, method: String, params: JSONValue?) {
        self.id = id
        self.method = method
        source = .value(params == .null ? nil : params)
    }

    fileprivate init(id: JSONValue?, method: String, paramsText: ParamsText?, names: [String]) {
        self.id = id
        self.method = method
        source = .text(paramsText, names: names)
    }

    /// Whether the request has no params to decode: absent, null or `{}`.
    public var hasNoParams: Bool {
        switch source {
        case .text(_, let names): return names.isEmpty
        case .value(let value): return value == nil || value == .object([:])
        }
    }

    /// The params as their text, to be passed on unread (a device forwarding a call to its hub).
    public var rawParams: RawJSON? {
        switch source {
        case .value(let value): return value.flatMap { try? RawJSON(encoding: $0) }
        case .text(let text, _): return text.map { RawJSON(checked: $0.line, range: $0.range) }
        }
    }

    /// The params as a generic JSON value (slow path: diagnostics and tests).
    public var params: JSONValue? {
        switch source {
        case .value(let value): return value
        case .text(let text, _): return text.flatMap { StrictJSON.value(at: $0.range, in: $0.line) }
        }
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

/// A line a client reads, as ``Incoming`` is, with its result and params kept as their text
/// (``RawJSON``): what is passed on, or decoded typed next, is not built into a value first.
public enum RawIncoming: Sendable, Equatable {
    case response(id: JSONValue, outcome: Result<RawJSON, RPCError>)
    case notification(method: String, params: RawJSON?)
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
    /// `JSONEncoder` for a value CompactJSON leaves to it.
    public static func encodeJSON(_ value: some Encodable) throws -> Data {
        try encode(value, asLine: false)
    }

    /// `encodeJSON`'s text as a string: the writer's bytes copied once into the string, with
    /// no `Data` in between (a column of the store, an audit record's detail, a line to print).
    public static func encodeJSONText(_ value: some Encodable) throws -> String {
        guard let writer = try written({ value }, by: { try $0.writeOutermost(value, key: nil, topLevel: true) }) else {
            return String(decoding: try makeEncoder().encode(value), as: UTF8.self)
        }
        return writer.textAsString()
    }

    /// The JSON text, with a `\n` after it for a line (written into the one buffer, not
    /// appended to a copy).
    private static func encode(_ value: some Encodable, asLine: Bool) throws -> Data {
        try encode(asLine: asLine, { value }) { try $0.writeOutermost(value, key: nil, topLevel: true) }
    }

    /// The JSON text `body` writes. `reference` makes the value JSONEncoder writes instead (and
    /// debug builds check the text against), only when it is needed.
    private static func encode(asLine: Bool, _ reference: () -> some Encodable, writtenBy body: (CompactJSON.Writer) throws -> Void) throws -> Data {
        guard let writer = try written(reference, by: body) else {
            var data = try makeEncoder().encode(reference())
            if asLine { data.append(UInt8(ascii: "\n")) }
            return data
        }
        return writer.data(terminatedBy: asLine ? UInt8(ascii: "\n") : nil)
    }

    /// The line `body` writes, as `encode(asLine: true, …)` writes it, in an array: what a
    /// connection copies into its output (a `Data` is a storage object and a buffer besides).
    private static func line(_ reference: () -> some Encodable, writtenBy body: (CompactJSON.Writer) throws -> Void) throws -> [UInt8] {
        guard let writer = try written(reference, by: body) else {
            return [UInt8](try makeEncoder().encode(reference())) + [UInt8(ascii: "\n")]
        }
        return writer.line()
    }

    /// The writer `body` wrote with, or nil when JSONEncoder must write `reference` instead.
    private static func written(_ reference: () -> some Encodable, by body: (CompactJSON.Writer) throws -> Void) throws -> CompactJSON.Writer? {
        guard let writer = try CompactJSON.written(by: body) else { return nil }
        #if DEBUG
        // Every test checks the two encoders against each other (the texts may hold secrets:
        // only where they part is said), except where a text was passed through as it came.
        guard !writer.passedThrough else { return writer }
        let bytes = writer.text
        let value = reference()
        let expected = [UInt8](try makeEncoder().encode(value))
        if bytes != expected {
            // Where they part is looked for only when they do: a byte-by-byte walk of every
            // text a debug build writes would make a 64 KiB body cost a test seconds.
            let parted = zip(bytes, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(bytes.count, expected.count)
            assertionFailure("CompactJSON and JSONEncoder part at byte \(parted) of \(expected.count) encoding \(type(of: value))")
        }
        #endif
        return writer
    }

    // The envelopes' members are declared in the order they are written (sorted). A response's
    // envelope is written as text around its id and result (what every call pays for Codable's
    // containers, a tenth of a `hello`, goes); the struct is what JSONEncoder writes instead.

    private struct ResponseEnvelope<R: Encodable>: Encodable {
        let id: JSONValue
        let jsonrpc = WireCodec.jsonrpcVersion
        let result: R
    }

    private struct ErrorEnvelope: Encodable {
        let error: RPCError
        let id: JSONValue
        let jsonrpc = WireCodec.jsonrpcVersion
    }

    /// Where a value sits in a line written as text (for an error's coding path).
    private enum LineKey: String, CodingKey { case error, id, result }

    private struct RequestEnvelope<P: Encodable>: Encodable {
        let id: JSONValue?
        let jsonrpc = WireCodec.jsonrpcVersion
        let method: String
        let params: P
    }

    /// A response line (with its `\n`).
    public static func responseLine(id: JSONValue, result: some Encodable) throws -> [UInt8] {
        try line({ ResponseEnvelope(id: id, result: result) }) { writer in
            writer.append(#"{"id":"#)
            try writer.write(id, key: LineKey.id)
            writer.append(#","jsonrpc":"2.0","result":"#)
            try writer.writeOutermost(result, key: LineKey.result)
            writer.append("}")
        }
    }

    /// An error response line (with its `\n`). Never fails: error objects are plain data.
    public static func errorLine(id: JSONValue, error: RPCError) -> [UInt8] {
        // swiftlint:disable:next force_try — RPCError holds only strings, integers and JSONValues.
        try! line({ ErrorEnvelope(error: error, id: id) }) { writer in
            writer.append(#"{"error":"#)
            try writer.write(error, key: LineKey.error)
            writer.append(#","id":"#)
            try writer.write(id, key: LineKey.id)
            writer.append(#","jsonrpc":"2.0"}"#)
        }
    }

    /// A request line; `id == nil` makes it a notification. Written as text around the id and
    /// params, as a response line is (every event a hub pushes is one of these).
    public static func requestLine(id: JSONValue?, method: String, params: some Encodable) throws -> Data {
        try encode(asLine: true, { RequestEnvelope(id: id, method: method, params: params) }) { writer in
            if let id {
                writer.append(#"{"id":"#)
                try writer.write(id, key: RequestKey.id)
                writer.append(#","jsonrpc":"2.0","method":"#)
            } else {
                writer.append(#"{"jsonrpc":"2.0","method":"#)
            }
            writer.string(method)
            writer.append(#","params":"#)
            try writer.writeOutermost(params, key: RequestKey.params)
            writer.append("}")
        }
    }

    /// Where a value sits in a request line written as text (for an error's coding path).
    private enum RequestKey: String, CodingKey { case id, params }

    /// A daemon → client notification line.
    public static func notificationLine(method: String, params: some Encodable) throws -> Data {
        try requestLine(id: nil, method: method, params: params)
    }

    // MARK: Decoding

    /// Parses one line (without its terminator) as a JSON-RPC 2.0 request, in one pass: the
    /// strict-JSON check (``StrictJSON``) finds the envelope's members as it goes, and only the
    /// params' text is kept, for the method's typed decoding.
    ///
    /// On failure, returns the error to send and the id to send it with (`null` when the id
    /// could not be read), exactly as JSON-RPC 2.0 §5 prescribes.
    public static func decodeRequest(_ line: some Collection<UInt8>) -> Result<Request, RequestDecodingError> {
        let bytes = Array(line)
        let members: [StrictJSON.Member]
        do throws(StrictJSON.Violation) {
            guard let object = try StrictJSON.members(of: bytes) else {
                // Valid JSON, but not an object (a number, a string, null, a batch array).
                return .failure(RequestDecodingError(id: .null, error: .invalidRequest("A request must be a JSON object (batches are not supported).")))
            }
            members = object
        } catch {
            return .failure(RequestDecodingError(id: .null, error: .parseError("The line is not strict JSON: \(error).")))
        }
        let envelope = Envelope(members, in: bytes)
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
        var paramsText: Request.ParamsText?
        if let params = envelope.params, bytes[params.value.lowerBound] != UInt8(ascii: "n") {
            guard params.names != nil else {
                return .failure(RequestDecodingError(
                    id: replyID, error: .invalidParams("'params' must be an object (named parameters).", field: "params")))
            }
            paramsText = Request.ParamsText(line: bytes, range: params.value)
        }
        return .success(Request(id: id.value, method: method, paramsText: paramsText, names: envelope.params?.names ?? []))
    }

    /// The request envelope's members, read from where the strict-JSON check found them.
    private struct Envelope {
        /// The outer optional: was `id` well formed; the inner: was it present (nil = notification).
        var id: RequestID? = RequestID(value: nil)
        var jsonrpc: String?
        var method: String?
        /// The `params` member, when it is there.
        var params: StrictJSON.Member?
        /// The first member that is not the envelope's, in the line's order.
        var unknownMember: String?

        struct RequestID { let value: JSONValue? }

        init(_ members: [StrictJSON.Member], in bytes: [UInt8]) {
            func string(_ range: Range<Int>) -> String? { StrictJSON.string(in: range, of: bytes) }
            for member in members {
                if member.isNamed("jsonrpc", in: bytes) {
                    // As nearly every line writes it: compared as bytes, not made a String.
                    jsonrpc = StrictJSON.bytes(member.value, of: bytes, are: #""2.0""#) ? WireCodec.jsonrpcVersion : string(member.value)
                } else if member.isNamed("method", in: bytes) {
                    method = string(member.value)
                } else if member.isNamed("params", in: bytes) {
                    params = member
                } else if member.isNamed("id", in: bytes) {
                    id = Self.id(member.value, in: bytes)
                } else if unknownMember == nil {
                    unknownMember = member.name(in: bytes)
                }
            }
        }

        /// A string, a number or null; nil for anything else. A number that is a whole one
        /// within Int64 (`7`, `7.0`, `7e0`) is an integer, as the strict reader (and JSONDecoder)
        /// reads it.
        private static func id(_ range: Range<Int>, in bytes: [UInt8]) -> RequestID? {
            switch bytes[range.lowerBound] {
            case UInt8(ascii: "\""), UInt8(ascii: "n"), UInt8(ascii: "-"), 0x30...0x39: StrictJSON.value(at: range, in: bytes).map { RequestID(value: $0) }
            default: nil  // booleans, arrays and objects are not ids
            }
        }
    }

    /// Why a line is not a request, with the id to answer with.
    public struct RequestDecodingError: Error, Sendable, Equatable {
        public var id: JSONValue
        public var error: RPCError
    }

    /// Parses one line as a response or notification (the client side), as strict JSON.
    public static func decodeIncoming(_ line: some Collection<UInt8>) throws(RPCError) -> Incoming {
        switch try decodeIncomingRaw(line) {
        case .notification(let method, let params): .notification(method: method, params: params?.value)
        case .response(let id, .success(let result)): .response(id: id, outcome: .result(result.value))
        case .response(let id, .failure(let error)): .response(id: id, outcome: .error(error))
        }
    }

    /// Parses one line as ``decodeIncoming(_:)`` does, in one pass over its envelope: the
    /// result and params are left as their text.
    public static func decodeIncomingRaw(_ line: some Collection<UInt8>) throws(RPCError) -> RawIncoming {
        let bytes = Array(line)
        let notJSONRPC = RPCError.parseError("The daemon sent a line that is not a JSON-RPC 2.0 message.")
        guard let members = try? StrictJSON.members(of: bytes) else { throw notJSONRPC }
        var (version, id, method, params, result, error): (Range<Int>?, Range<Int>?, Range<Int>?, Range<Int>?, Range<Int>?, Range<Int>?)
        for member in members {
            switch member.name(in: bytes) {
            case "jsonrpc": version = member.value
            case "id": id = member.value
            case "method": method = member.value
            case "params": params = member.value
            case "result": result = member.value
            case "error": error = member.value
            default: break
            }
        }
        guard let version, StrictJSON.string(in: version, of: bytes) == jsonrpcVersion else {
            throw notJSONRPC
        }
        if id == nil, let method, let name = StrictJSON.string(in: method, of: bytes) {
            return .notification(method: name, params: params.map { RawJSON(checked: bytes, range: $0) })
        }
        guard let id, let idValue = StrictJSON.value(at: id, in: bytes) else { throw .parseError("The daemon sent a response without an id.") }
        if let error {
            guard let decoded = try? RawJSON(checked: bytes, range: error).decode(RPCError.self) else {
                throw .parseError("The daemon sent an error object that cannot be read.")
            }
            return .response(id: idValue, outcome: .failure(decoded))
        }
        return .response(id: idValue, outcome: .success(result.map { RawJSON(checked: bytes, range: $0) } ?? RawJSON.null))
    }

    /// Decodes a method's typed parameters. Missing or ill-typed fields, and fields the method
    /// does not know, become −32602 errors that name the field.
    public static func decodeParams<P: Decodable>(_ type: P.Type, from request: Request) throws(RPCError) -> P {
        if case .text(let params?, _) = request.source, let readable = P.self as? any ParamsReadable.Type {
            // swiftlint:disable:next force_cast — `readable` is `P`'s own metatype.
            return try readable.read(params, of: request) as! P
        }
        return try decodeDecodable(type, from: request)
    }

    /// Decodes params as ``decodeParams(_:from:)`` does, through `P`'s `Decodable` conformance
    /// (the reference for ``ParamsReadable``).
    static func decodeDecodable<P: Decodable>(_ type: P.Type, from request: Request) throws(RPCError) -> P {
        let value: JSONValue
        /// The fields given; nil when the params are not an object.
        let given: [String]?
        switch request.source {
        case .text(let params, let names):
            if let params {
                // The text passed the strict check with the line: read, it is one value.
                guard let read = StrictJSON.value(at: params.range, in: params.line) else { throw .invalidParams("The parameters cannot be read.") }
                value = read
            } else {
                value = .object([:])
            }
            given = names
        case .value(let params):
            value = params ?? .object([:])
            switch params {
            case nil: given = []
            case .object(let object)?: given = Array(object.keys)
            default: given = nil
            }
        }
        let decoded: Params<P>
        do {
            decoded = try Params<P>(from: JSONValueDecoder.Reading(value: value, codingPath: []))
        } catch let error as RPCError {
            throw error
        } catch let error as DecodingError {
            throw describe(error)
        } catch {
            throw .invalidParams("The parameters cannot be read.")
        }
        // Fields present in the text but never asked for by `P`'s decoding are rejected: a typo
        // ("audience" for "aud") must not be silently ignored by a security daemon. An explicit
        // null for a field the method does not know is still unknown; of several, the first in
        // sorted order is named. The names given are the strict check's (a second keyed
        // container from JSONDecoder, only to list them, cost a fifth of the decoding).
        guard let given else { throw .invalidParams("'params' must be an object (named parameters).", field: "params") }
        if let field = given.filter({ !decoded.asked.contains($0) }).min() {
            throw .invalidParams("Unknown parameter '\(Redaction.printable(field, limit: 64))'.", field: field)
        }
        return decoded.value
    }

    /// A `link.forward` request's inner call and who made it. The inner params stay in their
    /// wire form, as the device sent them, for the method's own decoding: a forwarded call is
    /// decoded once, as a local one is, with no generic value built and written again between.
    /// A caller no process could be is refused (``ForwardedCaller/check()``).
    public static func decodeForwarded(_ request: Request) throws(RPCError) -> (request: Request, caller: ForwardedCaller) {
        guard case .text(let text, _) = request.source else {
            // Built in-process: the typed way.
            let forwarded = try decodeParams(LinkForward.Params.self, from: request)
            try forwarded.caller.check()
            return (Request(id: request.id, method: forwarded.method, params: forwarded.params?.value), forwarded.caller)
        }
        guard let text else { throw .invalidParams("Missing parameter 'method'.", field: "method") }
        // The params' members are read where they lie in the line, as a method's own are.
        let bytes = text.line
        guard let members = StrictJSON.members(at: text.range, in: bytes) else { throw .invalidParams("'params' must be an object (named parameters).", field: "params") }
        var method: String?
        var caller: ForwardedCaller?
        var inner: (text: Request.ParamsText?, names: [String]) = (nil, [])
        for member in members {
            switch member.name(in: bytes) {
            case "method":
                guard let name = StrictJSON.string(in: member.value, of: bytes) else {
                    throw .invalidParams("Parameter 'method' must be a string.", field: "method")
                }
                method = name
            case "caller":
                guard let read = try? RawJSON(checked: bytes, range: member.value).decode(ForwardedCaller.self) else {
                    throw .invalidParams("Parameter 'caller' is invalid.", field: "caller")
                }
                try read.check()
                caller = read
            case "params":
                guard bytes[member.value.lowerBound] != UInt8(ascii: "n") else { continue }
                guard let names = member.names else { throw .invalidParams("'params' must be an object (named parameters).", field: "params") }
                inner = (Request.ParamsText(line: bytes, range: member.value), names)
            case let other:
                throw .invalidParams("Unknown parameter '\(Redaction.printable(other, limit: 64))'.", field: other)
            }
        }
        guard let method else { throw .invalidParams("Missing parameter 'method'.", field: "method") }
        guard let caller else { throw .invalidParams("Missing parameter 'caller'.", field: "caller") }
        return (Request(id: request.id, method: method, paramsText: inner.text, names: inner.names), caller)
    }

    /// Decodes typed params from a JSONValue (absent or null means `{}`).
    public static func decodeParams<P: Decodable>(_ type: P.Type, from params: JSONValue?) throws(RPCError) -> P {
        try decodeParams(type, from: Request(id: nil, method: "", params: params))
    }

    /// `P` decoded, and the fields its decoding asked for.
    private struct Params<P: Decodable>: Decodable {
        let value: P
        let asked: Set<String>

        init(from decoder: any Decoder) throws {
            let recorder = FieldRecorder()
            do {
                value = try P(from: RecordingDecoder(base: decoder, recorder: recorder))
            } catch let error as JSONValueDecoder.NumberOutOfRange {
                // A number that does not fit the field's type (1.5 or 1e30 for an integer).
                throw RPCError.invalidParams("Parameter '\(Redaction.printable(error.field, limit: 64))' has a value of the wrong type or out of range.",
                                             field: error.field)
            }
            asked = recorder.asked
        }
    }

    /// Decodes a typed value from a JSONValue (results on the client side, params on the server).
    public static func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws -> T {
        try JSONValueDecoder.decode(type, from: value)
    }

    /// Decodes a JSON text from outside (a provider's documents, a token's parts, WebAuthn's
    /// client data): strict JSON only (``StrictJSON``), then typed.
    public static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        if let violation = StrictJSON.check(data) { throw violation }
        return try JSONDecoder().decode(type, from: data)
    }

    private static func describe(_ error: DecodingError) -> RPCError {
        func path(_ context: DecodingError.Context, appending key: (any CodingKey)? = nil) -> String {
            (context.codingPath + (key.map { [$0] } ?? [])).parameterName
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
