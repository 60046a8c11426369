import Foundation
import Protocol
import Testing

/// A shape with what the protocol's types hold: optionals, nested values, arrays of optionals,
/// integers of several widths, a raw-value enum and free-form JSON.
private struct Shape: Codable, Equatable {
    enum Mode: String, Codable { case on, off }
    struct Inner: Codable, Equatable {
        var name: String
        var tags: [String]?
    }

    var text: String
    var count: Int
    var small: UInt32?
    var wide: Int64?
    var ratio: Double?
    var flag: Bool?
    var mode: Mode?
    var inner: Inner?
    var list: [Inner]?
    var maybe: [Int?]?
    var free: JSONValue?
    var nested: [String: JSONValue]?
}

/// What a decoding ended in, to compare two decoders: the value, or the kind of error and its path.
private enum Outcome: Equatable {
    case value(Shape)
    case failed(kind: String, path: String)

    init(_ body: () throws -> Shape) {
        do {
            self = .value(try body())
        } catch let error as DecodingError {
            let (kind, context): (String, DecodingError.Context) = switch error {
            case .keyNotFound(let key, let context): ("keyNotFound(\(key.stringValue))", context)
            case .typeMismatch(_, let context): ("typeMismatch", context)
            case .valueNotFound(_, let context): ("valueNotFound", context)
            case .dataCorrupted(let context): ("dataCorrupted", context)
            @unknown default: ("unknown", .init(codingPath: [], debugDescription: ""))
            }
            self = .failed(kind: kind, path: context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: "."))
        } catch let error as JSONValueDecoder.NumberOutOfRange {
            self = .failed(kind: "numberOutOfRange", path: error.field)
        } catch {
            self = .failed(kind: "other", path: "")
        }
    }
}

@Suite("JSONValue decoder")
struct JSONValueDecoderTests {
    /// Each text decoded by Foundation's `JSONDecoder` and by `JSONValueDecoder` from the value
    /// StrictJSON read: the same value, or the same kind of error at the same path.
    @Test("decodes as JSONDecoder does: values, nulls, missing keys, wrong types", arguments: [
        #"{"text":"a","count":1}"#,
        #"{"text":"a","count":1,"small":4294967295,"wide":-9007199254740993,"ratio":0.5,"flag":true,"mode":"off"}"#,
        #"{"text":"a","count":7.0,"ratio":3}"#,
        #"{"text":"a","count":1,"inner":{"name":"n","tags":["x","y"]},"list":[{"name":"p"},{"name":"q","tags":[]}]}"#,
        #"{"text":"a","count":1,"maybe":[1,null,3]}"#,
        #"{"text":"a","count":1,"free":{"n":1,"s":"t","a":[true,null,1.5,{"deep":[[]]}]},"nested":{"k":null,"l":[1]}}"#,
        #"{"text":"a","count":1,"free":null,"small":null,"inner":null}"#,
        #"{"text":"a","count":1,"free":"just a string"}"#,
        #"{"count":1}"#,
        #"{"text":null,"count":1}"#,
        #"{"text":1,"count":1}"#,
        #"{"text":"a","count":"1"}"#,
        #"{"text":"a","count":1,"mode":"sideways"}"#,
        #"{"text":"a","count":1,"inner":{"tags":["x"]}}"#,
        #"{"text":"a","count":1,"inner":{"name":"n","tags":["x",2]}}"#,
        #"{"text":"a","count":1,"list":[{"name":"p"},null]}"#,
        #"{"text":"a","count":1,"list":{"name":"p"}}"#,
        #"{"text":"a","count":1,"flag":1}"#,
        // Each optional member's type, wrong, null and left out: one lookup must say what three did.
        #"{"text":"a","count":1,"small":true}"#,
        #"{"text":"a","count":1,"wide":"1"}"#,
        #"{"text":"a","count":1,"ratio":"0.5"}"#,
        #"{"text":"a","count":1,"mode":1}"#,
        #"{"text":"a","count":1,"inner":"n"}"#,
        #"{"text":"a","count":1,"wide":null,"ratio":null,"flag":null,"mode":null,"list":null,"maybe":null,"nested":null}"#,
        #"["text"]"#,
        #"null"#,
    ])
    func sameAsJSONDecoder(text: String) throws {
        let value = try StrictJSON.value(of: Array(text.utf8))
        let foundation = Outcome { try JSONDecoder().decode(Shape.self, from: Data(text.utf8)) }
        let ours = Outcome { try JSONValueDecoder.decode(Shape.self, from: value) }
        #expect(ours == foundation, "\(text)")
    }

    /// The one difference: `JSONDecoder` refuses a number its field's type cannot hold with an
    /// error of its parser, which has no coding path; this decoder's error names the field.
    @Test("a number the field's type cannot hold is refused, naming the field", arguments: [
        (#"{"text":"a","count":1.5}"#, "count"),
        (#"{"text":"a","count":1,"small":-1}"#, "small"),
        (#"{"text":"a","count":1,"small":4294967296}"#, "small"),
        (#"{"text":"a","count":1,"maybe":[1,2.25]}"#, "maybe[1]"),
        (#"{"text":"a","count":1,"wide":1.5}"#, "wide"),
        (#"{"text":"a","count":1,"inner":{"name":"n"},"list":[{"name":"p"}],"small":1e10}"#, "small"),
    ])
    func numberOutOfRange(text: String, field: String) throws {
        let value = try StrictJSON.value(of: Array(text.utf8))
        #expect(Outcome { try JSONDecoder().decode(Shape.self, from: Data(text.utf8)) } == .failed(kind: "dataCorrupted", path: ""))
        #expect(Outcome { try JSONValueDecoder.decode(Shape.self, from: value) } == .failed(kind: "numberOutOfRange", path: field))
    }

    @Test("a pushed sync event decodes from its line to the same event as through JSONDecoder, body and all")
    func syncEvent() throws {
        let line = #"{"account":"acc_1","event":{"position":42,"kind":"message","conversation":"c","body":{"n":1,"list":[1,2.5,"x",null,{"a":false}]},"#
            + #""sender":{"machine":"m","device_id":"d","exe":"/usr/bin/app"},"at":"2026-11-29T12:00:00.000Z","idempotency_key":null},"users":[1000,1001]}"#
        let read = try JSONValueDecoder.decode(LinkSyncEvent.Params.self, from: try StrictJSON.value(of: Array(line.utf8)))
        #expect(read == (try JSONDecoder().decode(LinkSyncEvent.Params.self, from: Data(line.utf8))))
        #expect(read.event.body["list"]?.arrayValue?.count == 5)
        #expect(read.users == [1000, 1001])
    }
}
