import Foundation
import Protocol
import Testing

/// CompactJSON must write what JSONEncoder([.sortedKeys, .withoutEscapingSlashes]) writes, byte
/// for byte (debug builds also compare every wire encoding; these are the corners).
@Suite("Compact JSON")
struct CompactJSONTests {
    private static func reference(_ value: some Encodable) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return [UInt8](try encoder.encode(value))
    }

    struct Nested: Encodable {
        var name: String
        var count: Int
        var ratio: Double
        var flag: Bool?
        var missing: String?
        var list: [Int8]
        var table: [String: UInt64]
        var inner: [Nested]
        var value: JSONValue
    }

    /// Writes through every container kind by hand, in one pass: a nested container is complete
    /// when its parent is written to again.
    struct Handwritten: Encodable {
        enum Keys: String, CodingKey { case b, a, nested, list, z }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(UInt8.max, forKey: .b)
            try container.encodeNil(forKey: .a)
            var nested = container.nestedContainer(keyedBy: Keys.self, forKey: .nested)
            try nested.encode(Float(0.5), forKey: .z)
            try nested.encode("first", forKey: .a)
            var list = container.nestedUnkeyedContainer(forKey: .list)
            try list.encodeNil()
            try list.encode(Int16.min)
            var inner = list.nestedUnkeyedContainer()
            try inner.encode("x")
            var object = list.nestedContainer(keyedBy: Keys.self)
            try object.encode(true, forKey: .b)
            try list.encode(list.count)
            try container.encode(["é": 1, "e": 2, "f": 3], forKey: .z)
        }
    }

    /// Writes to a nested container after its parent was written to again: one pass cannot.
    struct WritesLate: Encodable {
        enum Keys: String, CodingKey { case a, b }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            var nested = container.nestedContainer(keyedBy: Keys.self, forKey: .a)
            try container.encode(1, forKey: .b)
            try nested.encode(2, forKey: .a)  // complete already
        }
    }

    struct Empty: Encodable {
        func encode(to encoder: any Encoder) throws {}
    }

    static let strings = [
        "", "plain", "quote \" and backslash \\", "slash / stays", "\u{8}\u{C}\n\r\t", "\u{0}\u{1}\u{F}\u{10}\u{1F}\u{7F}",
        "é ü 😀 中文", "</script>", "\u{2028}\u{2029}",
        // Clean runs between escapes, escapes first and last, in strings stored inline (up to 15
        // bytes) and on the heap.
        "\"", "\\\\", "\"a\"", "\na", "a\n", "ab\"cd\\ef\u{1}gh", "\u{1F}x\u{0}", String(repeating: "clean run ", count: 20) + "\"end",
        "\t" + String(repeating: "x", count: 40) + "\u{7}" + String(repeating: "y", count: 40), "é\"ü\n😀\\中",
    ]

    @Test("strings, escapes and non-ASCII text", arguments: strings)
    func escapes(_ text: String) throws {
        #expect(try CompactJSON.encode(text) == Self.reference(text))
        #expect(try CompactJSON.encode(["key": [text]]) == Self.reference(["key": [text]]))
        // As a key: written in one pass unless it needs an escape (which would change the
        // order); then JSONEncoder writes it.
        let keyed = [text: [text]]
        let compact = try CompactJSON.encode(keyed)
        #expect((compact == nil) == text.utf8.contains { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") })
        #expect(try [UInt8](WireCodec.encodeJSON(keyed)) == Self.reference(keyed))
        if let compact { #expect(compact == (try Self.reference(keyed))) }
    }

    /// Strings are scanned eight bytes at a time: an escape at every offset from a word's start,
    /// beside bytes just outside the escaped set (0x20, 0x21, 0x23, 0x5B, 0x5D, multi-byte UTF-8).
    @Test("an escape is found wherever it falls in an eight-byte word")
    func escapesAtEveryOffset() throws {
        let fillers = ["a", " ", "!", "#", "[", "]", "é", "\u{7F}"]
        for escaped in ["\"", "\\", "\u{0}", "\u{1F}", "\n"] {
            for filler in fillers {
                for length in 0..<20 {
                    for position in 0...length {
                        var text = String(repeating: filler, count: length)
                        text.insert(contentsOf: escaped, at: text.index(text.startIndex, offsetBy: position))
                        #expect(try CompactJSON.encode(text) == Self.reference(text), "\(escaped.debugDescription) at \(position) of \(length) × \(filler)")
                    }
                }
            }
        }
        for filler in fillers {
            let clean = String(repeating: filler, count: 37)
            #expect(try CompactJSON.encode(clean) == Self.reference(clean))
        }
    }

    @Test("numbers at their limits", arguments: [0.0, -0.0, 1.0, -1.5, 0.1, 1e20, 1e21, 1.7976931348623157e308, 5e-324, 123456789.125, 1e-7])
    func doubles(_ number: Double) throws {
        #expect(try CompactJSON.encode(number) == Self.reference(number))
        let single = Float(number)
        if single.isFinite { #expect(try CompactJSON.encode([single]) == Self.reference([single])) }
    }

    @Test("integers, booleans and null")
    func scalars() throws {
        #expect(try CompactJSON.encode([Int64.min, Int64.max]) == Self.reference([Int64.min, Int64.max]))
        #expect(try CompactJSON.encode([UInt64.max]) == Self.reference([UInt64.max]))
        #expect(try CompactJSON.encode([true, false]) == Self.reference([true, false]))
        #expect(try CompactJSON.encode([String?.none, "x"]) == Self.reference([String?.none, "x"]))
    }

    @Test("structures: key order by UTF-8 bytes, optionals left out, nesting")
    func structures() throws {
        let leaf = Nested(name: "leaf", count: -3, ratio: 2.0, flag: nil, missing: nil, list: [], table: [:], inner: [], value: .null)
        let value = Nested(name: "root", count: 1, ratio: 0.25, flag: true, missing: nil, list: [-128, 127],
                           table: ["b": 2, "a": 1, "B": 3, "é": 4, "aa": 5, "a10": 6, "a9": 7], inner: [leaf, leaf],
                           value: .object(["z": .array([.integer(1), .double(1.5), .string("s"), .bool(false), .null]), "Z": .object([:])]))
        #expect(try CompactJSON.encode(value) == Self.reference(value))
        let handwritten = try #require(try CompactJSON.encode(Handwritten()))
        #expect(handwritten == (try Self.reference(Handwritten())))
        #expect(handwritten == Array(#"{"a":null,"b":255,"list":[null,-32768,["x"],{"b":true},4],"nested":{"a":"first","z":0.5},"z":{"e":2,"f":3,"é":1}}"#.utf8))
        #expect(try CompactJSON.encode([Empty()]) == Self.reference([Empty()]))
        #expect(try CompactJSON.encode([String: Int]()) == Self.reference([String: Int]()))
    }

    @Test("the hot path's results write their own members as JSONEncoder writes them, alone, nested, and in a response line")
    func selfWritten() throws {
        let callers = [CallerIdentity(uid: 1000, gid: 1000, pid: 42, exe: "/usr/bin/a\"b\\c/\u{1}é", username: "jürgen", groups: [4, 27, .max]),
                       CallerIdentity(uid: 0, gid: 0, pid: .max, exe: nil, username: nil, groups: [])]
        for caller in callers {
            let hello = Hello.Result(protocolVersion: 1, daemonVersion: "0.1.0", mode: "user", caller: caller, features: ["auth.local", "", "é\n"])
            let token = IssuedToken(token: "a.b.c", kid: "k\"1", jti: "j", expiresAt: "2026-11-26T00:00:00Z")
            #expect(try CompactJSON.encode(caller) == Self.reference(caller))
            #expect(try CompactJSON.encode(hello) == Self.reference(hello))
            #expect(try CompactJSON.encode(token) == Self.reference(token))
            #expect(try CompactJSON.encode([hello.caller]) == Self.reference([hello.caller]))
            #expect(try CompactJSON.encode(["b": token, "a": token]) == Self.reference(["b": token, "a": token]))
            let line = try WireCodec.responseLine(id: .integer(7), result: hello)
            #expect(Array(line) == Array(#"{"id":7,"jsonrpc":"2.0","result":"#.utf8) + (try Self.reference(hello)) + Array("}\n".utf8))
            // The features' text, written once, reads back as the list it was made from.
            guard case .response(_, .result(let result)) = try WireCodec.decodeIncoming(line) else {
                Issue.record("not a result: \(String(decoding: line, as: UTF8.self))")
                continue
            }
            #expect(try WireCodec.decode(Hello.Result.self, from: result) == hello)
        }
        for names in [[], ["a"], ["a\"b", "\u{7F}\u{1F}", "é"]] as [[String]] {
            let features = Hello.Features(names)
            #expect(Array(features) == names)
            #expect(try CompactJSON.encode(features) == Self.reference(names))
            #expect(try JSONDecoder().decode(Hello.Features.self, from: Data(try Self.reference(names))) == features)
        }
    }

    @Test("a pushed sync event writes its own members as JSONEncoder writes them, in a request line with and without an id; a body this pass cannot write is JSONEncoder's")
    func pushedEvent() throws {
        let sender = SyncSender(machine: "desk\"top", deviceID: nil, exe: "/usr/bin/é")
        let events = [
            SyncEvent(position: 1, kind: "message", conversation: "c", body: .object(["z": .array([.integer(-1), .double(2.5)]), "a": .string("x\ny")]),
                      sender: SyncSender(machine: "m", deviceID: "ABCD-EFGH", exe: nil), at: "2026-11-29T00:00:00Z", idempotencyKey: "k"),
            SyncEvent(position: .max, kind: "message", conversation: nil, body: .null, sender: sender, at: "t", idempotencyKey: nil,
                      withheld: Reason("sync.too_large"), sealed: "a.b.c", encrypted: true),
            SyncEvent(position: 0, kind: "read", conversation: "", body: .object(["up_to": .integer(3)]), sender: sender, at: "t", idempotencyKey: nil, encrypted: false),
        ]
        for event in events {
            for users in [nil, [], [0, 1000, .max]] as [[UInt32]?] {
                let params = LinkSyncEvent.Params(account: "acct", event: event, users: users)
                #expect(try CompactJSON.encode(params) == Self.reference(params))
                let notification = try WireCodec.notificationLine(method: LinkSyncEvent.name, params: params)
                #expect(Array(notification) == Array(#"{"jsonrpc":"2.0","method":"link.sync_event","params":"#.utf8) + (try Self.reference(params)) + Array("}\n".utf8))
                let request = try WireCodec.requestLine(id: "r\"1", method: "m\u{1}", params: params)
                #expect(Array(request) == Array(#"{"id":"r\"1","jsonrpc":"2.0","method":"m\u0001","params":"#.utf8) + (try Self.reference(params)) + Array("}\n".utf8))
            }
        }
        // Keys JSONEncoder orders its own way, and a number it refuses, inside the body.
        var odd = events[0]
        odd.body = .object(["é": .integer(1), "f": .integer(2)])
        #expect(try CompactJSON.encode(odd) == nil)
        #expect(try [UInt8](WireCodec.encodeJSON(odd)) == Self.reference(odd))
        odd.body = .array([.double(.infinity)])
        let ours = Self.failure { try WireCodec.notificationLine(method: LinkSyncEvent.name, params: LinkSyncEvent.Params(account: "a", event: odd, users: nil)) }
        let theirs = Self.failure { try Self.reference(LinkSyncEvent.Params(account: "a", event: odd, users: nil)) }
        #expect(ours != nil && ours?.message == theirs?.message)
    }

    @Test("a forwarded call and a session, which write their own members, as JSONEncoder writes them")
    func forwardedCallAndSession() throws {
        let callers = [
            ForwardedCaller(uid: 0, username: nil, exe: nil, machine: nil),
            ForwardedCaller(uid: .max, username: "ann\"e", exe: "/usr/bin/é/x", machine: "desk\u{1}top", fingerprintAccounts: []),
            ForwardedCaller(uid: 1000, username: "u", exe: nil, machine: "m", fingerprintAccounts: ["acc_1", "acc_\\2"]),
        ]
        for caller in callers {
            #expect(try CompactJSON.encode(caller) == Self.reference(caller))
            // Without params the line is checked against JSONEncoder's whole.
            let bare = LinkForward.Params(method: "session.get", params: nil, caller: caller)
            #expect(try CompactJSON.encode(bare) == Self.reference(bare))
            let line = try WireCodec.requestLine(id: .integer(7), method: LinkForward.name, params: bare)
            #expect(Array(line) == Array(#"{"id":7,"jsonrpc":"2.0","method":"link.forward","params":"#.utf8) + (try Self.reference(bare)) + Array("}\n".utf8))
            // With params, their text goes as it came: here one JSONEncoder writes the same way.
            let params = try RawJSON(encoding: JSONValue.object(["session": .string("as1.x\ny"), "a": .array([.integer(-1), .null])]))
            let forwarded = LinkForward.Params(method: "m", params: params, caller: caller)
            #expect(try CompactJSON.encode(forwarded) == Self.reference(forwarded))
        }
        let sessions = [
            SessionGet.Result(id: "ses_1", account: AccountInfo(id: "acc_1", phone: "+37250000001", email: nil, hasPassword: true),
                              device: DeviceSummary(id: "dev_1", name: "desk\"top"), amr: ["otp", "pwd"],
                              createdAt: "2026-11-29T00:00:00Z", expiresAt: "2026-11-30T00:00:00Z", idleExpiresAt: "2026-11-29T01:00:00Z"),
            SessionGet.Result(id: "", account: AccountInfo(id: "a", phone: nil, email: "é@x/y", hasPassword: false),
                              device: DeviceSummary(id: "", name: ""), amr: [], createdAt: "", expiresAt: "", idleExpiresAt: ""),
        ]
        for session in sessions {
            #expect(try CompactJSON.encode(session) == Self.reference(session))
            let line = try WireCodec.responseLine(id: .string("r\"1"), result: session)
            #expect(line == Array(#"{"id":"r\"1","jsonrpc":"2.0","result":"#.utf8) + (try Self.reference(session)) + Array("}\n".utf8))
        }
    }

    @Test("arrays of strings and integers, which are written at once")
    func scalarArrays() throws {
        struct Lists: Encodable {
            var strings: [String]
            var ints: [Int]
            var longs: [Int64]
            var groups: [UInt32]
            var none: [String]
        }
        let lists = Lists(strings: ["a", "", "b\"c", "é"], ints: [0, -1, .max], longs: [.min], groups: [0, 27, .max], none: [])
        #expect(try CompactJSON.encode(lists) == Self.reference(lists))
        #expect(try CompactJSON.encode([[String]]()) == Self.reference([[String]]()))
        #expect(try CompactJSON.encode([["x"], []]) == Self.reference([["x"], []]))
    }

    /// A keyed container handed the same key more than once, in every way it can be.
    struct Repeats: Encodable {
        struct Key: CodingKey {
            var stringValue: String
            init(_ name: String) { stringValue = name }
            init?(stringValue: String) { self.stringValue = stringValue }
            var intValue: Int? { nil }
            init?(intValue _: Int) { nil }
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Key.self)
            // Scalars: the last value wins.
            for (index, name) in ["b", "a", "b", "a", "c"].enumerated() { try container.encode(index, forKey: Key(name)) }
            // A nested container asked for again is the same container; so is one over a value.
            var first = container.nestedContainer(keyedBy: Key.self, forKey: Key("n"))
            try first.encode(1, forKey: Key("x"))
            var second = container.nestedContainer(keyedBy: Key.self, forKey: Key("n"))
            try second.encode(2, forKey: Key("y"))
            try first.encode(3, forKey: Key("z"))
            var list = container.nestedUnkeyedContainer(forKey: Key("u"))
            try list.encode(1)
            var sameList = container.nestedUnkeyedContainer(forKey: Key("u"))
            try sameList.encode(2)
            try container.encode(["p": 1], forKey: Key("m"))
            var merged = container.nestedContainer(keyedBy: Key.self, forKey: Key("m"))
            try merged.encode(2, forKey: Key("q"))
            // A value after a nested container replaces it.
            var replaced = container.nestedContainer(keyedBy: Key.self, forKey: Key("r"))
            try replaced.encode(1, forKey: Key("gone"))
            try container.encode("replaced", forKey: Key("r"))
            // Keys that are not all ASCII are matched as Strings, as JSONEncoder's dictionary
            // does: equal as Strings but not in bytes ("f" sorts between them) is one member,
            // under the first spelling.
            var unicode = container.nestedContainer(keyedBy: Key.self, forKey: Key("unicode"))
            for (index, name) in ["e\u{301}", "b", "f", "\u{E9}", "b", "ü"].enumerated() { try unicode.encode(index, forKey: Key(name)) }
        }
    }

    @Test("a key set twice is left to JSONEncoder, which keeps its last value")
    func repeatedKeys() throws {
        #expect(try CompactJSON.encode(Repeats()) == nil)
        let encoded = try [UInt8](WireCodec.encodeJSON(Repeats()))
        #expect(encoded == (try Self.reference(Repeats())))
        // As bytes: Strings would compare the two spellings of é equal.
        #expect(encoded == Array(#"{"a":3,"b":2,"c":4,"m":{"p":1,"q":2},"n":{"x":1,"y":2,"z":3},"r":"replaced","u":[1,2],"unicode":{"b":4,"e\#u{301}":3,"f":2,"ü":5}}"#.utf8))
        // One key in two spellings, each set once, is a key set twice too.
        struct TwoSpellings: Encodable {
            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: Repeats.Key.self)
                try container.encode(1, forKey: .init("e\u{301}"))
                try container.encode(2, forKey: .init("\u{E9}"))
            }
        }
        #expect(try CompactJSON.encode(TwoSpellings()) == nil)
        #expect(try [UInt8](WireCodec.encodeJSON(TwoSpellings())) == Self.reference(TwoSpellings()))
    }

    /// Containers filled after later members were set, and super encoders.
    struct FilledLater: Encodable {
        enum Keys: String, CodingKey { case z, object, list, a, parent, empty }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            var object = container.nestedContainer(keyedBy: Keys.self, forKey: .object)
            var list = container.nestedUnkeyedContainer(forKey: .list)
            let parent = container.superEncoder(forKey: .parent)
            let unnamed = container.superEncoder()  // "super", a key Keys does not have
            _ = container.nestedContainer(keyedBy: Keys.self, forKey: .empty)
            try container.encode(1, forKey: .z)
            try container.encode(2, forKey: .a)
            try object.encode("late", forKey: .z)
            var inner = object.nestedUnkeyedContainer(forKey: .list)
            try list.encode(1)
            let slot = list.superEncoder()
            try list.encode(3)
            var slotValue = slot.singleValueContainer()
            try slotValue.encode(2)
            try inner.encode(true)
            var parentObject = parent.container(keyedBy: Keys.self)
            try parentObject.encode([Int](), forKey: .list)
            try parentObject.encode([String: Int](), forKey: .object)
            _ = unnamed  // encodes nothing: `{}`
        }
    }

    /// Asks for a container again where a value of the same kind was set (a subclass and its
    /// superclass share an encoder, for one): JSONEncoder fills the one container.
    struct AsksAgain: Encodable {
        enum Keys: String, CodingKey { case a, b, z, list, strings, empty }
        func encode(to encoder: any Encoder) throws {
            var single = encoder.singleValueContainer()
            try single.encode(["z": 0])
            var first = encoder.container(keyedBy: Keys.self)
            try first.encode(1, forKey: .a)
            var second = encoder.container(keyedBy: Keys.self)
            try second.encode(2, forKey: .b)
            // Arrays of strings and integers are written at once: asked for again, they are
            // split into their elements (commas and quotes inside strings included), which the
            // container counts.
            try first.encode([1, 2], forKey: .list)
            var list = first.nestedUnkeyedContainer(forKey: .list)
            try list.encode(list.count)
            try first.encode(["a,b", "\"", "\\", "", "\\\",\""], forKey: .strings)
            var strings = first.nestedUnkeyedContainer(forKey: .strings)
            try strings.encode(strings.count)
            try first.encode([String](), forKey: .empty)
            var empty = first.nestedUnkeyedContainer(forKey: .empty)
            try empty.encode(empty.count)
        }
    }

    /// The same, at the top level and for an array.
    struct AsksAgainForArray: Encodable {
        var first: [String]
        func encode(to encoder: any Encoder) throws {
            var single = encoder.singleValueContainer()
            try single.encode(first)
            var list = encoder.unkeyedContainer()
            try list.encode(list.count)
            var again = encoder.unkeyedContainer()
            try again.encode(["nested"])
        }
    }

    /// Hands a value that encodes nothing to a single-value container (JSONEncoder writes `{}`).
    struct WrapsEmpty: Encodable {
        func encode(to encoder: any Encoder) throws {
            var single = encoder.singleValueContainer()
            try single.encode(Empty())
        }
    }

    @Test("containers filled late, super encoders and containers asked for again are left to JSONEncoder")
    func lateContainers() throws {
        let values: [any Encodable] = [FilledLater(), AsksAgain(), WritesLate()] + [[], [""], ["a", "b,c"]].map(AsksAgainForArray.init)
        for value in values {
            #expect(try CompactJSON.encode(value) == nil, "\(value)")
            #expect(try [UInt8](WireCodec.encodeJSON(value)) == Self.reference(value), "\(value)")
        }
        #expect(try [UInt8](WireCodec.encodeJSON(FilledLater()))
            == Array(#"{"a":2,"empty":{},"list":[1,2,3],"object":{"list":[true],"z":"late"},"parent":{"list":[],"object":{}},"super":{},"z":1}"#.utf8))
        #expect(try [UInt8](WireCodec.encodeJSON(AsksAgain()))
            == Array(#"{"a":1,"b":2,"empty":[0],"list":[1,2,2],"strings":["a,b","\"","\\","","\\\",\"",5],"z":0}"#.utf8))
    }

    @Test("empty containers, and values that encode nothing")
    func emptyContainers() throws {
        #expect(try CompactJSON.encode(WrapsEmpty()) == Self.reference(WrapsEmpty()))
        #expect(try CompactJSON.encode([WrapsEmpty()]) == Self.reference([WrapsEmpty()]))
        #expect(try CompactJSON.encode([String]()) == Self.reference([String]()))
        #expect(try CompactJSON.encode([[String: Int]()]) == Self.reference([[String: Int]()]))
        #expect(try CompactJSON.encode(JSONValue.array([.object([:]), .array([])])) == Self.reference(JSONValue.array([.object([:]), .array([])])))
    }

    /// The coding path and message of the `EncodingError.invalidValue` that `encode` throws.
    private static func failure(_ encode: () throws -> Any?) -> (path: [String], message: String)? {
        do {
            _ = try encode()
        } catch let error as EncodingError {
            if case .invalidValue(_, let context) = error { return (context.codingPath.map(\.stringValue), context.debugDescription) }
        } catch {}
        return nil
    }

    @Test("JSON values and objects of them (an audit record's detail) are written as JSONEncoder writes them; keys it orders or escapes its own way are left to it")
    func jsonValues() throws {
        let detail: [String: JSONValue] = [
            "b": .integer(-7), "a": .array([.object(["y": .null, "x": .bool(true)]), .array([]), .double(0.1), .string("q\"uote/\n")]),
            "B": .object([:]), "a10": .string("é"), "a9": .double(-1e21), "": .integer(Int64.max),
        ]
        let written = try #require(try CompactJSON.encode(detail))
        #expect(written == (try Self.reference(detail)))
        #expect(written.starts(with: Array(#"{"":9223372036854775807,"B":{},"a":[{"x":true,"y":null},[],0.1,"q\"uote/\n"],"a10":"é""#.utf8)))
        for value in [JSONValue.object(detail), .array([.object(detail), .integer(0)]), .object([:]), .array([])] {
            #expect(try CompactJSON.encode(value) == Self.reference(value), "\(value)")
        }
        // A non-ASCII key ("é" sorts after "f" by its bytes, and JSONEncoder may order it
        // otherwise) and a key that needs an escape, at the top and nested: JSONEncoder's text.
        for odd in [["é": .integer(1), "f": .integer(2)], ["a\"b": .null], ["n": .object(["é": .integer(1), "e": .integer(2)])]] as [[String: JSONValue]] {
            #expect(try CompactJSON.encode(odd) == nil)
            #expect(try [UInt8](WireCodec.encodeJSON(odd)) == Self.reference(odd))
        }
        // A number that is not finite inside a value: JSONEncoder's error, with its path.
        let bad: [String: JSONValue] = ["k": .array([.integer(0), .double(.nan)])]
        let ours = Self.failure { try WireCodec.encodeJSON(bad) }
        let theirs = Self.failure { try Self.reference(bad) }
        #expect(ours != nil && ours?.path == theirs?.path && ours?.message == theirs?.message)
    }

    @Test("encodeJSONText is encodeJSON's text in a string: written by CompactJSON, or by JSONEncoder where it is left to it, and its errors")
    func text() throws {
        let written: [String: JSONValue] = ["jti": .string("q\"uote/é"), "n": .integer(-3), "list": .array([.bool(false), .null])]
        let leftToJSONEncoder: [String: JSONValue] = ["é": .integer(1), "f": .integer(2)]
        #expect(try CompactJSON.encode(written) != nil && CompactJSON.encode(leftToJSONEncoder) == nil)
        for value in [written, leftToJSONEncoder, [:]] {
            let text = try WireCodec.encodeJSONText(value)
            #expect(Array(text.utf8) == (try Self.reference(value)), "\(value)")
            #expect(Array(text.utf8) == [UInt8](try WireCodec.encodeJSON(value)))
        }
        #expect(try WireCodec.encodeJSONText(Handwritten()) == String(decoding: try Self.reference(Handwritten()), as: UTF8.self))
        let bad: [String: JSONValue] = ["k": .double(.infinity)]
        let ours = Self.failure { try WireCodec.encodeJSONText(bad) }
        let theirs = Self.failure { try Self.reference(bad) }
        #expect(ours != nil && ours?.path == theirs?.path && ours?.message == theirs?.message)
    }

    @Test("the same errors as JSONEncoder: coding path and message")
    func errors() throws {
        struct Member: Encodable { var inner: [String: [Double]] }
        let values: [any Encodable] = [Double.nan, [1.5, -Double.infinity], ["x": Double.infinity], Member(inner: ["k": [0, .nan]]), [Float.nan], Empty()]
        for value in values {
            let ours = Self.failure { try CompactJSON.encode(value) }
            let theirs = Self.failure { try Self.reference(value) }
            #expect(ours != nil)
            #expect(ours?.path == theirs?.path && ours?.message == theirs?.message, "\(value)")
        }
    }

    @Test("what JSONEncoder refuses is refused; what it treats specially is left to it")
    func refusals() throws {
        #expect(throws: EncodingError.self) { try CompactJSON.encode([Double.nan]) }
        #expect(throws: EncodingError.self) { try CompactJSON.encode(["x": Double.infinity]) }
        #expect(throws: EncodingError.self) { try CompactJSON.encode(Empty()) }
        #expect(try CompactJSON.encode(["when": Date(timeIntervalSince1970: 0)]) == nil)
        #expect(try CompactJSON.encode([Data([1, 2, 3])]) == nil)
        // Through WireCodec, those values still encode, as JSONEncoder writes them.
        let data = ["bytes": Data([1, 2, 3])]
        #expect(try [UInt8](WireCodec.encodeJSON(data)) == Self.reference(data))
    }
}
