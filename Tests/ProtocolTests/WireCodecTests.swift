import Foundation
import Protocol
import Testing

private let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")

private func fixtureLines(_ name: String) throws -> [String] {
    try String(contentsOf: fixtures.appendingPathComponent(name), encoding: .utf8).split(separator: "\n").map(String.init)
}

@Suite("Wire codec")
struct WireCodecTests {
    /// Golden file: each line is `{"line": <raw request line>, "request"|"error": <expected>}`.
    @Test("request decoding matches the golden fixtures")
    func goldenRequests() throws {
        let lines = try fixtureLines("requests.jsonl")
        #expect(lines.count >= 18)
        for fixture in lines {
            let entry = try WireCodec.decode(JSONValue.self, from: Data(fixture.utf8))
            let raw = try #require(entry["line"]?.stringValue)
            switch WireCodec.decodeRequest(Array(raw.utf8)) {
            case .success(let request):
                let expected = try #require(entry["request"], "expected an error for \(raw)")
                #expect(request.method == expected["method"]?.stringValue)
                #expect(request.id == expected["id"], "id of \(raw)")
                #expect(request.params == expected["params"], "params of \(raw)")
            case .failure(let failure):
                let expected = try #require(entry["error"], "expected success for \(raw), got \(failure.error)")
                #expect(failure.id == expected["id"], "id of \(raw)")
                #expect(Int64(failure.error.code.rawValue) == expected["code"]?.integerValue, "code of \(raw)")
                #expect(failure.error.reason.rawValue == expected["reason"]?.stringValue, "reason of \(raw)")
                #expect(!failure.error.message.isEmpty)
            }
        }
    }

    /// Golden file: pairs of lines, a message and its canonical encoding (sorted keys, no
    /// escaped slashes), so the daemon's output stays byte-stable for clients that diff it.
    @Test("responses and notifications encode to the golden lines")
    func goldenResponses() throws {
        let lines = try fixtureLines("responses.jsonl")
        #expect(lines.count % 2 == 0)
        for pair in stride(from: 0, to: lines.count, by: 2) {
            let incoming = try WireCodec.decodeIncoming(Array(lines[pair].utf8))
            let encoded: [UInt8]
            switch incoming {
            case .response(let id, .result(let result)):
                encoded = try WireCodec.responseLine(id: id, result: result)
            case .response(let id, .error(let error)):
                encoded = WireCodec.errorLine(id: id, error: error)
            case .notification(let method, let params):
                encoded = Array(try WireCodec.notificationLine(method: method, params: params ?? .null))
            }
            #expect(String(decoding: encoded, as: UTF8.self) == lines[pair + 1] + "\n")
        }
    }

    @Test("typed params: missing, wrong type, null and unknown fields name the field")
    func paramErrors() throws {
        #expect(throws: RPCError.invalidParams("", field: "aud")) { try WireCodec.decodeParams(AuthLocal.Params.self, from: [:]) }
        do {
            _ = try WireCodec.decodeParams(AuthLocal.Params.self, from: ["aud": 1])
            Issue.record("expected an error")
        } catch {
            #expect(error.details["field"] == "aud")
            #expect(error.message == "Parameter 'aud' must be a string.")
        }
        do {
            _ = try WireCodec.decodeParams(AuthLocal.Params.self, from: ["aud": "x", "extra": true])
            Issue.record("expected an error")
        } catch {
            #expect(error.details["field"] == "extra")
        }
        // null for an optional field means "not given".
        let params = try WireCodec.decodeParams(AuthLocal.Params.self, from: ["aud": "x", "nonce": nil])
        #expect(params == AuthLocal.Params(aud: "x", nonce: nil))
        // Methods without params accept absent, null and {}; nothing else.
        #expect(try WireCodec.decodeParams(NoParams.self, from: nil) == NoParams())
        #expect(try WireCodec.decodeParams(NoParams.self, from: [:]) == NoParams())
        #expect(throws: RPCError.self) { try WireCodec.decodeParams(NoParams.self, from: ["x": 1]) }
    }

    @Test("params read from a request's text (auth.local's own reader): the value, or the error the typed decoding gives", arguments: [
        (#"{"aud":"x"}"#, Result<AuthLocal.Params, RPCError>.success(AuthLocal.Params(aud: "x"))),
        (#"{"nonce":"n","aud":"a\u0062"}"#, .success(AuthLocal.Params(aud: "ab", nonce: "n"))),
        (#"{"\u0061ud":"x","nonce":null}"#, .success(AuthLocal.Params(aud: "x"))),
        (#"{"nonce":"n"}"#, .failure(.invalidParams("Missing parameter 'aud'.", field: "aud"))),
        (#"{"aud":null}"#, .failure(.invalidParams("Parameter 'aud' must be a string, not null.", field: "aud"))),
        (#"{"aud":["x"]}"#, .failure(.invalidParams("Parameter 'aud' must be a string.", field: "aud"))),
        (#"{"aud":7,"nonce":8}"#, .failure(.invalidParams("Parameter 'aud' must be a string.", field: "aud"))),
        (#"{"aud":"x","nonce":{}}"#, .failure(.invalidParams("Parameter 'nonce' must be a string.", field: "nonce"))),
        (#"{"zz":1,"aud":"x","b":null}"#, .failure(.invalidParams("Unknown parameter 'b'.", field: "b"))),
        (#"{"zz":1,"aud":1}"#, .failure(.invalidParams("Parameter 'aud' must be a string.", field: "aud"))),
    ])
    func readParams(params: String, expected: Result<AuthLocal.Params, RPCError>) throws {
        let request = try WireCodec.decodeRequest(Array(#"{"jsonrpc":"2.0","id":1,"method":"auth.local","params":\#(params)}"#.utf8)).get()
        let read = Result { () throws(RPCError) in try WireCodec.decodeParams(AuthLocal.Params.self, from: request) }
        switch (read, expected) {
        case (.success(let value), .success(let expected)): #expect(value == expected)
        case (.failure(let error), .failure(let expected)):
            #expect(error.message == expected.message)
            #expect(error.details == expected.details)
        default: Issue.record("\(params): \(read), expected \(expected)")
        }
    }

    @Test("a number that does not fit the field's type names the field", arguments: [
        (JSONValue.double(1.5), "Parameter 'limit' has a value of the wrong type or out of range."),
        (.double(1e30), "Parameter 'limit' has a value of the wrong type or out of range."),
        ("7", "Parameter 'limit' must be an integer."),
        (true, "Parameter 'limit' must be an integer."),
    ])
    func numberFields(value: JSONValue, message: String) {
        do {
            _ = try WireCodec.decodeParams(AdminAuditTail.Params.self, from: ["limit": value])
            Issue.record("accepted \(value)")
        } catch {
            #expect(error.details["field"] == "limit")
            #expect(error.message == message)
        }
    }

    @Test("error objects round-trip with their details; equality is code and reason")
    func errorCoding() throws {
        let error = RPCError.failure(Reason("pin.wrong"), "Wrong PIN.", details: ["retries_left": 2])
        let decoded = try WireCodec.decode(RPCError.self, from: WireCodec.encodeJSON(error))
        #expect(decoded == error)
        #expect(decoded.details["retries_left"] == 2)
        #expect(decoded.message == "Wrong PIN.")
        #expect(RPCError.failure(Reason("pin.wrong"), "other words") == error)
        #expect(RPCError.failure(Reason("pin.blocked"), "Wrong PIN.") != error)
    }

    @Test("strict JSON: RFC 8259's grammar and unique member names, nothing lenient")
    func strictJSON() throws {
        let accepted = [
            "{}", "[]", " 1 ", "-0.5e+3", #""\ud83d\ude00 é""#, #"{"a":[1,{"b":null}],"c":true,"d":false}"#,
            #"{"a":1,"b":{"a":2}}"#, #"{"x":{"a":1},"y":{"a":{"a":1}},"a":3,"\u0062":4}"#,
            "{" + (0..<40).map { #""n\#($0)":{"n\#($0)":\#($0)}"# }.joined(separator: ",") + "}", "\t[1,\r\n2]\n", "1.7976931348623157e308", "1e-400", "123456789012345678901234567890",
            // Values' strings: plain ASCII is checked without being read; the rest is read.
            #"{"a":"plain ~ text","b":"","c":"q\"\\ \u00e9","d":"é"}"#,
        ]
        for text in accepted {
            #expect(StrictJSON.check(Array(text.utf8)) == nil, "\(text)")
            // What is strict is also what the decoder after the check reads.
            let decoded = try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
            #expect(decoded != nil, "\(text)")
            // And the value the same pass reads is the decoder's.
            #expect(decoded == (try? StrictJSON.value(of: Array(text.utf8))), "\(text)")
        }
        // Numbers: an integer when Int64 holds it exactly, as JSONValue's decoding reads it.
        for (text, value) in [("7", JSONValue.integer(7)), ("7.0", .integer(7)), ("7e0", .integer(7)), ("-0", .integer(0)), ("0.5", .double(0.5)),
                              ("9223372036854775807", .integer(.max)), ("9223372036854775808", .double(9223372036854775808)), ("1e-400", .integer(0))] {
            #expect(try StrictJSON.value(of: Array(text.utf8)) == value, "\(text)")
            #expect(try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)) == value, "\(text)")
        }
        let refused: [(String, String)] = [
            (#"{"a":1,"a":2}"#, "appears twice"),
            (#"{"a":1,"\u0061":2}"#, "appears twice"),
            (#"{"\u0061":1,"a":2}"#, "appears twice"),
            (#"{"é":1,"\u00e9":2}"#, "appears twice"),
            // Names compare as a decoder's keys do: canonically equivalent texts are one name.
            (#"{"K":1,"\u212a":2}"#, "appears twice"),
            (#"{"e\u0301":1,"é":2}"#, "appears twice"),
            // Past sixteen names, an object's names are a set.
            ("{" + (0..<20).map { #""n\#($0)":\#($0)"# }.joined(separator: ",") + #","n3":0}"#, "appears twice"),
            ("{" + (0..<20).map { #""n\#($0)":\#($0)"# }.joined(separator: ",") + #","n\u0031\u0039":0}"#, "appears twice"),
            (#"{"x":{"a":1,"b":{"c":1},"a":2}}"#, "appears twice"),
            ("\u{FEFF}{}", "byte-order mark"),
            (#"{"a":1,}"#, "trailing comma"),
            ("[1,]", "trailing comma"),
            ("[1 2]", "expected"),
            ("01", "text after"),
            ("1.", "fraction"),
            ("1e", "exponent"),
            ("+1", "not a JSON value"),
            ("NaN", "not a JSON value"),
            (#""\ud800""#, "lone surrogate"),
            (#""\udc00\ud800""#, "lone surrogate"),
            ("\"a\u{1}b\"", "control character"),
            ("{\"a\":\"b\u{7F}\u{1}\"}", "control character"),
            ("{\"a\":\"b", "not closed"),
            (#""\x41""#, "unknown escape"),
            ("\"abc", "not closed"),
            ("{\"a\"}", "':'"),
            ("", "ends early"),
            (String(repeating: "[", count: 600) + String(repeating: "]", count: 600), "nested deeper"),
            // Found by the strict-json fuzz target: accepted here, then refused by the decoder.
            ("1e400", "too large"),
            ("[-1E+309]", "too large"),
            ("1" + String(repeating: "0", count: 400), "too large"),
        ]
        for (text, problem) in refused {
            let violation = StrictJSON.check(Array(text.utf8))
            #expect(violation?.problem.contains(problem) == true, "\(text): \(String(describing: violation))")
            #expect(throws: violation!, "\(text)") { try StrictJSON.value(of: Array(text.utf8)) }
        }
        #expect(StrictJSON.check([0x22, 0xFF, 0x22])?.problem == "a string is not valid UTF-8")
        #expect(StrictJSON.check(Array(#"{"a":"b"#.utf8) + [0xFF] + Array(#""}"#.utf8))?.problem == "a string is not valid UTF-8")
        // The typed decoder for outside texts applies the same rule.
        #expect(throws: StrictJSON.Violation.self) { try WireCodec.decode(JSONValue.self, from: Data(#"{"alg":"none","alg":"ES256"}"#.utf8)) }
    }

    @Test("a request line is read in one pass: the first unknown member in the line is named, params keep their text")
    func onePass() throws {
        guard case .failure(let failure) = WireCodec.decodeRequest(Array(#"{"jsonrpc":"2.0","zz":1,"id":3,"aa":2,"method":"x"}"#.utf8)) else {
            Issue.record("expected an error")
            return
        }
        #expect(failure.id == 3)
        #expect(failure.error.message == "Unknown member 'zz' in the request.")

        let line = #"{"params":{"aud":"x","nonce":"n\u00e9"},"method":"auth.local","jsonrpc":"2.0","id":"q"}"#
        let request = try WireCodec.decodeRequest(Array(line.utf8)).get()
        #expect(request.id == "q")
        #expect(try WireCodec.decodeParams(AuthLocal.Params.self, from: request) == AuthLocal.Params(aud: "x", nonce: "né"))
        #expect(request.params == ["aud": "x", "nonce": "né"])

        #expect(!request.hasNoParams)

        // Names and the version as bytes, and the same written with escapes.
        for line in [#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1}}"#,
                     #"{"\u006asonrpc":"\u0032.0","i\u0064":1,"metho\u0064":"m","par\u0061ms":{"\u0061":1}}"#] {
            let request = try WireCodec.decodeRequest(Array(line.utf8)).get()
            #expect(request.id == 1 && request.method == "m" && request.params == ["a": 1], "\(line)")
        }
        for (line, message) in [(#"{"jsonrpc":"2.00","id":1,"method":"m"}"#, "'jsonrpc' must be \"2.0\"."),
                                (#"{"jsonrpc":2.0,"id":1,"method":"m"}"#, "'jsonrpc' must be \"2.0\"."),
                                (#"{"jsonrpc":"2.0","id":1,"method":"m","\u00e9":1}"#, "Unknown member 'é' in the request."),
                                (#"{"jsonrpc":"2.0","id":1,"method":"m","i":1}"#, "Unknown member 'i' in the request.")] {
            guard case .failure(let failure) = WireCodec.decodeRequest(Array(line.utf8)) else {
                Issue.record("expected an error: \(line)")
                continue
            }
            #expect(failure.error.message == message, "\(line)")
        }
        for params in ["", #","params":null"#, #","params":{}"#] {
            #expect(try WireCodec.decodeRequest(Array(#"{"jsonrpc":"2.0","id":1,"method":"m"\#(params)}"#.utf8)).get().hasNoParams, "\(params)")
        }
        #expect(Request(id: 1, method: "m", params: [:]).hasNoParams && !Request(id: 1, method: "m", params: ["a": 1]).hasNoParams)

        // A field's error names its path inside the params, a nested one included.
        let nested = try WireCodec.decodeRequest(Array(#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"params":{"x":1}}}"#.utf8)).get()
        struct Inner: Decodable { let x: String }
        struct Outer: Decodable { let params: Inner }
        do {
            _ = try WireCodec.decodeParams(Outer.self, from: nested)
            Issue.record("expected an error")
        } catch {
            #expect(error.details["field"] == "params.x")
        }
    }

    @Test("a forwarded call's params keep their text: the inner call is decoded as a local one, its errors the same")
    func forwarded() throws {
        func forward(_ params: String) throws(RPCError) -> (request: Request, caller: ForwardedCaller) {
            let line = #"{"jsonrpc":"2.0","id":7,"method":"link.forward","params":\#(params)}"#
            guard case .success(let request) = WireCodec.decodeRequest(Array(line.utf8)) else { throw .invalidRequest(line) }
            return try WireCodec.decodeForwarded(request)
        }
        let (inner, caller) = try forward(#"{"caller":{"uid":1000,"exe":"/usr/bin/x","machine":"m"},"method":"auth.local","params":{"aud":"x","nonce":"n\u00e9"}}"#)
        #expect(inner.id == 7 && inner.method == "auth.local")
        #expect(caller == ForwardedCaller(uid: 1000, username: nil, exe: "/usr/bin/x", machine: "m"))
        #expect(try WireCodec.decodeParams(AuthLocal.Params.self, from: inner) == AuthLocal.Params(aud: "x", nonce: "né"))
        #expect(inner.params == ["aud": "x", "nonce": "né"])
        // An unknown field of the inner call is refused by its own decoding, as a local call's.
        let typo = try forward(#"{"method":"auth.local","params":{"aud":"x","audience":"y"},"caller":{"uid":0}}"#).request
        #expect(throws: RPCError.invalidParams("Unknown parameter 'audience'.", field: "audience")) { try WireCodec.decodeParams(AuthLocal.Params.self, from: typo) }
        for params in [#"{"method":"hello","caller":{"uid":0}}"#, #"{"method":"hello","params":null,"caller":{"uid":0}}"#] {
            #expect(try forward(params).request.hasNoParams, "\(params)")
        }
        // A device passes a caller's params on as the caller wrote them, and the hub's answer
        // back as the hub wrote it: nothing is read and written again on the way.
        let asked = try WireCodec.decodeRequest(Array(#"{"jsonrpc":"2.0","id":"c","method":"auth.local","params": { "nonce" : "n\u00e9", "aud":"x" } }"#.utf8)).get()
        let sent = try WireCodec.requestLine(id: 9, method: LinkForward.name,
                                             params: LinkForward.Params(method: asked.method, params: asked.rawParams, caller: ForwardedCaller(uid: 1, username: nil, exe: nil, machine: nil)))
        #expect(String(decoding: sent, as: UTF8.self).contains(#""params":{ "nonce" : "n\u00e9", "aud":"x" }"#))
        let (unwrapped, _) = try WireCodec.decodeForwarded(try WireCodec.decodeRequest(Array(sent.dropLast())).get())
        #expect(unwrapped.method == "auth.local" && unwrapped.params == asked.params)
        let hubLine = #"{"id":9,"jsonrpc":"2.0","result":{"token":"t","z":[1,2.5,null]}}"#
        guard case .response(9, .success(let answer)) = try WireCodec.decodeIncomingRaw(Array(hubLine.utf8)) else { Issue.record("no answer"); return }
        #expect(String(decoding: try WireCodec.responseLine(id: "c", result: answer), as: UTF8.self) == #"{"id":"c","jsonrpc":"2.0","result":{"token":"t","z":[1,2.5,null]}}"# + "\n")
        #expect(answer.value == ["token": "t", "z": [1, .double(2.5), nil]])
        #expect(try WireCodec.decodeIncomingRaw(Array(#"{"jsonrpc":"2.0","method":"n","params":{"a":1}}"#.utf8))
                == .notification(method: "n", params: try RawJSON(encoding: ["a": 1] as JSONValue)))
        let refused = try WireCodec.decodeIncomingRaw(Array(#"{"error":{"code":-32601,"message":"No.","data":{"reason":"rpc.unknown_method"}},"id":3,"jsonrpc":"2.0"}"#.utf8))
        guard case .response(3, .failure(let error)) = refused else { Issue.record("\(refused)"); return }
        #expect(error.reason == .unknownMethod && error.message == "No.")

        // The caller is read as its decoding reads it.
        for text in [#"{"uid":5,"fingerprint_accounts":["a","b"],"username":null,"newer":1}"#, #"{"uid":7.0,"exe":"/x"}"#,
                     #"{"uid":-1}"#, #"{"uid":5,"username":5}"#, #"{"uid":5,"fingerprint_accounts":["a",1]}"#, #"{"uid":4294967296}"#, "[]"] {
            let decoded = try? JSONDecoder().decode(ForwardedCaller.self, from: Data(text.utf8))
            #expect((try? forward(#"{"method":"hello","caller":\#(text)}"#).caller) == decoded, "\(text)")
        }

        // The same calls built in-process, typed.
        let built = Request(id: 7, method: LinkForward.name, params: ["method": "auth.local", "params": ["aud": "x"], "caller": ["uid": 5]])
        let (builtInner, builtCaller) = try WireCodec.decodeForwarded(built)
        #expect(builtInner == Request(id: 7, method: "auth.local", params: ["aud": "x"]) && builtCaller.uid == 5)

        for (params, field) in [(#"{"params":{},"caller":{"uid":0}}"#, "method"), (#"{"method":1,"caller":{"uid":0}}"#, "method"),
                                (#"{"method":"hello"}"#, "caller"), (#"{"method":"hello","caller":{"uid":-1}}"#, "caller"),
                                (#"{"method":"hello","caller":"root"}"#, "caller"), (#"{"method":"hello","params":[1],"caller":{"uid":0}}"#, "params"),
                                (#"{"method":"hello","caller":{"uid":0},"extra":1}"#, "extra"), (#"{}"#, "method"),
                                (#"{"method":"hello","caller":{"uid":0,"username":5}}"#, "caller")] {
            do {
                _ = try forward(params)
                Issue.record("expected an error: \(params)")
            } catch {
                #expect(error.code == .invalidParams && error.details["field"] == .string(field), "\(params): \(error)")
            }
        }
    }

    @Test("a forwarded caller is held to what a process can be: exe at most 4096 bytes, username 256, machine 255, no control characters; the field is named", arguments: [
        // The field, and its value: `filler` repeated, then `ending`.
        ("exe", "x", 4096, "", nil),
        ("exe", "x", 4097, "", "caller.exe"),
        ("exe", "x", 600_000, "", "caller.exe"),
        ("exe", "é", 2048, "", nil),
        ("exe", "é", 2048, "x", "caller.exe"),
        ("exe", "/usr/bin/app", 1, "\n{\"forged\":1}", "caller.exe"),
        ("exe", "/usr/bin/app", 1, "\u{7F}", "caller.exe"),
        ("exe", "/usr/bin/app", 1, "\u{85}", "caller.exe"),
        ("username", "u", 256, "", nil),
        ("username", "u", 257, "", "caller.username"),
        ("username", "alice", 1, "\u{1B}[2J", "caller.username"),
        ("machine", "m", 255, "", nil),
        ("machine", "m", 256, "", "caller.machine"),
        ("machine", "laptop", 1, "\t", "caller.machine"),
    ] as [(String, String, Int, String, String?)])
    func forwardedCallerLimits(field: String, filler: String, count: Int, ending: String, refused: String?) throws {
        let value = String(repeating: filler, count: count) + ending
        let params: JSONValue = ["method": "sync.read", "params": ["session": "s"], "caller": .object(["uid": 1000, field: .string(value)])]
        let line = try WireCodec.encodeJSONText(["jsonrpc": "2.0", "id": 1, "method": "link.forward", "params": params])
        // The same caller read from a line, and built in-process.
        for request in [try WireCodec.decodeRequest(Array(line.utf8)).get(), Request(id: 1, method: LinkForward.name, params: params)] {
            do {
                let (_, read) = try WireCodec.decodeForwarded(request)
                #expect(refused == nil, "\(field) of \(value.utf8.count) bytes is taken")
                #expect([read.exe, read.username, read.machine].contains(value))
            } catch {
                #expect(error.code == .invalidParams && error.details["field"] == refused.map(JSONValue.string), "\(field): \(error)")
            }
        }
    }

    @Test("the client side rejects lines that are not JSON-RPC")
    func incomingErrors() {
        for line in ["", "{}", #"{"jsonrpc":"2.0"}"#, #"{"jsonrpc":"1.0","id":1,"result":1}"#, "[1]"] {
            #expect(throws: RPCError.self, "\(line)") { try WireCodec.decodeIncoming(Array(line.utf8)) }
        }
    }

    @Test("untrusted text is made printable and bounded")
    func redaction() {
        #expect(Redaction.printable("a\nb\u{1b}[31m", limit: 20) == "a?b?[31m")
        #expect(Redaction.printable(String(repeating: "x", count: 100), limit: 10) == String(repeating: "x", count: 10) + "…")
    }

    @Test("a control character is found from the bytes exactly where Unicode's general category says Cc")
    func controlCharacters() {
        // Every scalar alone, and between others whose UTF-8 ends or starts like a C1 character's
        // (U+00C2 'Â' is 0xC3 0x82; U+0080 is 0xC2 0x80; U+00A0 is 0xC2 0xA0, not a control).
        var wrong: [String] = []
        for value in UInt32(0)...0x10FFFF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            let control = scalar.properties.generalCategory == .control
            for text in [String(Character(scalar)), "aÂ\(Character(scalar))\u{A0}b"] where text.containsControlCharacter != control {
                wrong.append("U+" + String(value, radix: 16, uppercase: true))
            }
        }
        #expect(wrong.isEmpty, "\(wrong.prefix(10))")
        #expect(!"/usr/bin/authctl".containsControlCharacter)
        #expect("c\u{85}d"[...].containsControlCharacter)
        #expect(!"c\u{A0}\u{C2}d"[...].containsControlCharacter)
    }
}
