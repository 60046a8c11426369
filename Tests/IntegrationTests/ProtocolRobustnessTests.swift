import Foundation
import Glibc
import Protocol
import Testing

/// Every bad input of the foundation issue, against the real daemon: each gets a typed error,
/// changes nothing, and leaves the daemon (and usually the connection) serving.
@Suite("Bad input")
struct ProtocolRobustnessTests {
    @Test("malformed JSON gets -32700 and the connection stays usable")
    func malformedJSON() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        for line in ["{", "not json", "{\"jsonrpc\":\"2.0\",", "\u{7f}\u{1}"] {
            try client.send(line + "\n")
            let response = try #require(try client.readJSON())
            #expect(response.errorCode == -32700, "for \(line)")
            #expect(response.errorReason == "rpc.parse_error")
            #expect(response["id"] == .null)
        }
        #expect(try client.result("hello")["protocol_version"] == 1)
    }

    @Test("valid JSON that is not a request gets -32600", arguments: [
        "42", "\"hello\"", "null", "[]", "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"hello\"}]",
        "{\"id\":1,\"method\":\"hello\"}", "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"hello\"}",
        "{\"jsonrpc\":\"2.0\",\"id\":1}", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":7}",
        "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"hello\"}", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"hello\",\"extra\":1}",
    ])
    func notARequest(line: String) throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        try client.send(line + "\n")
        let response = try #require(try client.readJSON())
        #expect(response.errorCode == -32600)
        #expect(response.errorReason == "rpc.invalid_request")
        #expect(try client.result("hello")["mode"] == "user")
    }

    @Test("unknown method gets -32601 with the id echoed")
    func unknownMethod() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        try client.send(#"{"jsonrpc":"2.0","id":"abc","method":"no.such.method"}"# + "\n")
        let response = try #require(try client.readJSON())
        #expect(response.errorCode == -32601)
        #expect(response.errorReason == "rpc.unknown_method")
        #expect(response["id"] == "abc")
    }

    @Test("missing, ill-typed and unknown params get -32602 naming the field", arguments: [
        (#"{}"#, "aud"),
        (#"{"aud":5}"#, "aud"),
        (#"{"aud":"x","nonce":[1]}"#, "nonce"),
        (#"{"aud":"x","audience":"y"}"#, "audience"),
        (#"{"aud":""}"#, "aud"),
        (#"{"aud":"a\u0000b"}"#, "aud"),
    ])
    func badParams(params: String, field: String) throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        try client.send(#"{"jsonrpc":"2.0","id":1,"method":"auth.local","params":"# + params + "}\n")
        let response = try #require(try client.readJSON())
        #expect(response.errorCode == -32602)
        #expect(response.errorReason == "rpc.invalid_params")
        #expect(response["error"]?["data"]?["field"] == .string(field))
        // Nothing was issued: the audit log has no auth.local record.
        let records = try #require(try client.result("admin.audit.tail", ["limit": 100])["records"]?.arrayValue)
        #expect(!records.contains { $0["method"] == "auth.local" })
    }

    @Test("params that are not an object get -32602")
    func positionalParams() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        try client.send(#"{"jsonrpc":"2.0","id":1,"method":"auth.local","params":["x"]}"# + "\n")
        #expect(try client.readJSON()?.errorCode == -32602)
    }

    @Test("a line over 1 MiB gets an error, then the connection is closed; the daemon keeps serving")
    func oversizedLine() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        let huge = [UInt8](repeating: UInt8(ascii: "a"), count: (1 << 20) + 10)
        try? client.send(huge)
        let response = try #require(try client.readJSON())
        #expect(response.errorReason == "rpc.line_too_long")
        #expect(try client.readLine() == nil, "the connection must be closed")
        #expect(try daemon.connect().result("hello")["protocol_version"] == 1)
    }

    @Test("a line of exactly 1 MiB is still read")
    func lineAtTheLimit() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        let prefix = #"{"jsonrpc":"2.0","id":1,"method":"hello","params":{"#
        let suffix = "}}"
        // A 1 MiB line whose params carry one unknown, padded field: it must be parsed (and
        // refused for the field), not cut off.
        let padding = (1 << 20) - prefix.utf8.count - suffix.utf8.count - #""p":"""#.utf8.count
        let line = prefix + #""p":""# + String(repeating: "x", count: padding) + "\"" + suffix
        #expect(line.utf8.count == 1 << 20)
        try client.send(line + "\n")
        let response = try #require(try client.readJSON())
        #expect(response.errorReason == "rpc.invalid_params")
        #expect(try client.result("hello")["protocol_version"] == 1)
    }

    @Test("binary garbage and NUL bytes never crash the daemon")
    func binaryGarbage() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20 {
            let client = try daemon.connect()
            var bytes = (0..<4096).map { _ in UInt8.random(in: 0...255, using: &generator) }
            bytes.append(0x0a)
            try? client.send(bytes)
            try? client.send([0, 0, 0, 0x0a, 0xff, 0xfe, 0x0a])
            client.close()
        }
        let client = try daemon.connect()
        try client.send("\u{0}\u{0}{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"hello\"}\n")
        #expect(try client.readJSON()?.errorCode == -32700)
        #expect(try client.result("hello")["protocol_version"] == 1)
        #expect(daemon.process?.isRunning == true)
    }

    @Test("a duplicate member, a byte-order mark or a trailing comma is a parse error, not read leniently", arguments: [
        #"{"jsonrpc":"2.0","id":1,"method":"hello","method":"auth.local"}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"auth.local","params":{"aud":"a","aud":"b"}}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"hello","\u006dethod":"auth.local"}"#,
        "\u{FEFF}" + #"{"jsonrpc":"2.0","id":1,"method":"hello"}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"hello",}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"auth.local","params":{"aud":"a",}}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"passkey.list","params":{"rp_ids":["a",]}}"#,
    ])
    func lenientJSON(line: String) throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        try client.send(line + "\n")
        let response = try #require(try client.readJSON())
        #expect(response.errorCode == -32700)
        #expect(response.errorReason == "rpc.parse_error")
        #expect(response["id"] == .null, "nothing of a refused line is trusted, not even its id")
        #expect(try client.result("hello")["protocol_version"] == 1)
    }

    @Test("deeply nested JSON is refused, not recursed into until the stack runs out")
    func deepNesting() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        try client.send(String(repeating: "[", count: 500_000) + "\n")
        #expect(try client.readJSON()?.errorCode == -32700)
        let nested = String(repeating: #"{"a":"#, count: 100_000) + "1" + String(repeating: "}", count: 100_000)
        try client.send(#"{"jsonrpc":"2.0","id":2,"method":"auth.local","params":{"aud":"x","nonce":"# + nested + "}}\n")
        #expect(try client.readJSON()?.errorCode == -32700)
        // A forged token with deeply nested claims is just malformed.
        let claims = base64URL(String(repeating: "[", count: 5000) + String(repeating: "]", count: 5000))
        #expect(try client.call("token.verify", ["token": .string("eyJhbGciOiJFUzI1NiJ9.\(claims).AAAA")]).errorReason == "token.malformed")
        #expect(try client.result("hello")["protocol_version"] == 1)
    }

    @Test("notifications (no id) get no reply; CRLF and blank lines are accepted")
    func notificationsAndLineEndings() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        try client.send(#"{"jsonrpc":"2.0","method":"hello"}"# + "\n\n\r\n")
        try client.send(#"{"jsonrpc":"2.0","id":7,"method":"hello"}"# + "\r\n")
        let response = try #require(try client.readJSON())
        #expect(response["id"] == 7, "the notification must not have produced a reply first")
    }

    @Test("a client that half-closes still gets every answer")
    func halfClose() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let client = try daemon.connect()
        let requests = (1...20).map { #"{"jsonrpc":"2.0","id":\#($0),"method":"auth.local","params":{"aud":"x"}}"# + "\n" }.joined()
        try client.send(requests)
        client.finishWriting()
        var ids: Set<Int64> = []
        while let response = try client.readJSON() {
            #expect(response["result"]?["token"] != nil)
            if let id = response["id"]?.integerValue { ids.insert(id) }
        }
        #expect(ids == Set(1...20))
    }

    @Test("a client that half-closes with more answers pending than the socket holds gets them all, then the end, and no descriptor stays open")
    func halfCloseWithBacklog() throws {
        let daemon = try DaemonHarness()
        try daemon.start()
        let observer = try daemon.connect()
        let before = try #require(try observer.result("admin.status")["open_fds"]?.integerValue)
        let client = try daemon.connect()
        // Thousands of answers (over a megabyte) fill the socket, so the daemon waits until it
        // is writable again, and closes after the last byte is written.
        let requests = (1...3000).map { #"{"jsonrpc":"2.0","id":\#($0),"method":"hello"}"# + "\n" }.joined()
        try client.send(requests)
        client.finishWriting()
        var answers = 0
        while try client.readLine() != nil { answers += 1 }
        #expect(answers == 3000, "the end of the stream came after every answer")
        let after = try observer.openDescriptorsOnceAlone(atMost: before)
        #expect(after <= before, "the closed connection's descriptor stays open")
    }
}
