import FoundationEssentials

/// A method's parameters on the hot path, read from the request's text by the type itself: the
/// counterpart of ``CompactJSON/Writable``. ``WireCodec/decodeParams(_:from:)`` then builds no
/// generic value and goes through none of Codable's containers (under `auth.local` load, decoding
/// took 4.4% of authd's CPU that way; this takes 2.4%). `init(from:)` stays the reference: for
/// every text, `init(reading:)` gives the value or the error the `Decodable` path gives, and
/// debug builds check every request against it, so every test that sends one checks it.
public protocol ParamsReadable: Decodable, Equatable {
    /// Reads the fields in the order `init(from:)` decodes them, so that of several bad fields
    /// the same one is named.
    init(reading params: inout ParamsReader) throws(RPCError)
}

/// The members of a request's params object, as a ``ParamsReadable`` type reads them. It
/// remembers which it was asked for: the others are unknown fields.
public struct ParamsReader {
    private let text: [UInt8]
    private let members: [StrictJSON.Member]
    private var asked: [Bool]

    fileprivate init(text: [UInt8], members: [StrictJSON.Member]) {
        self.text = text
        self.members = members
        asked = Array(repeating: false, count: members.count)
    }

    /// A string the params must have (`decode(String.self, forKey:)`).
    public mutating func string(_ name: StaticString) throws(RPCError) -> String {
        guard let value = member(name) else { throw .invalidParams("Missing parameter '\(name)'.", field: name.description) }
        guard let string = try string(value, name) else {
            throw .invalidParams("Parameter '\(name)' must be a string, not null.", field: name.description)
        }
        return string
    }

    /// A string the params may have; absent or null is nil (`decodeIfPresent(String.self, forKey:)`).
    public mutating func optionalString(_ name: StaticString) throws(RPCError) -> String? {
        guard let value = member(name) else { return nil }
        return try string(value, name)
    }

    /// The string at `range`, nil for null; any other value is of the wrong type.
    private func string(_ range: Range<Int>, _ name: StaticString) throws(RPCError) -> String? {
        switch text[range.lowerBound] {
        case UInt8(ascii: "n"): return nil
        case UInt8(ascii: "\""):
            // The text passed the strict check: its strings read.
            guard let string = StrictJSON.string(at: range.lowerBound, in: text) else { throw .invalidParams("The parameters cannot be read.") }
            return string
        default: throw .invalidParams("Parameter '\(name)' must be a string.", field: name.description)
        }
    }

    private mutating func member(_ name: StaticString) -> Range<Int>? {
        guard let index = members.firstIndex(where: { $0.isNamed(name, in: text) }) else { return nil }
        asked[index] = true
        return members[index].value
    }

    /// Of the members never asked for, the first name in sorted order, as the `Decodable` path
    /// names it.
    fileprivate var unknownField: String? {
        members.indices.lazy.filter { !asked[$0] }.map { members[$0].name(in: text) }.min()
    }
}

extension ParamsReadable {
    /// `Self` read from `params`, the text of `request`'s params object.
    static func read(_ params: Request.ParamsText, of request: Request) throws(RPCError) -> Self {
        #if DEBUG
        let read = Result { () throws(RPCError) in try Self(params) }
        // The params may hold secrets: only that the two disagree is said, not on what.
        let reference = Result { () throws(RPCError) in try WireCodec.decodeDecodable(Self.self, from: request) }
        let same = switch (read, reference) {
        // Strings are equal when canonically equivalent; the bytes must be the same too.
        case (.success(let value), .success(let expected)): value == expected && String(reflecting: value).utf8.elementsEqual(String(reflecting: expected).utf8)
        // An error's equality is its code and reason: the message and the field count here.
        case (.failure(let error), .failure(let expected)): error == expected && error.message == expected.message && error.details == expected.details
        default: false
        }
        assert(same, "ParamsReadable and Decodable read \(Self.self) differently")
        return try read.get()
        #else
        return try Self(params)
        #endif
    }

    private init(_ params: Request.ParamsText) throws(RPCError) {
        guard let members = StrictJSON.members(at: params.range, in: params.line) else {
            throw .invalidParams("'params' must be an object (named parameters).", field: "params")
        }
        var reader = ParamsReader(text: params.line, members: members)
        self = try Self(reading: &reader)
        if let field = reader.unknownField {
            throw .invalidParams("Unknown parameter '\(Redaction.printable(field, limit: 64))'.", field: field)
        }
    }
}
