import Foundation
import Protocol

extension Command {
    static let call = Command(
        path: ["call"], synopsis: "METHOD [PARAMS-JSON|-]",
        abstract: """
            Call any daemon method with JSON params (an object; '-' reads it from stdin) and print the
            JSON result. For scripts and debugging; see authd-protocol(7) for the methods.
            """,
        positionals: 1...2
    ) { invocation throws(CLIError) in
        let method = invocation.positionals[0]
        var text = invocation.positionals.count > 1 ? invocation.positionals[1] : "{}"
        if text == "-" { text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self) }
        guard case .object? = try? WireCodec.decode(JSONValue.self, from: Data(text.utf8)) else {
            throw .usage("PARAMS must be a JSON object, e.g. '{\"aud\":\"myapp\"}'")
        }
        let params = try! WireCodec.decode(JSONValue.self, from: Data(text.utf8))
        let result = try invocation.connect().callRaw(method, params: params) { name, params in
            Output.json(["notification": JSONValue.string(name), "params": params ?? .null])
        }
        Output.json(result)
        return .ok
    }
}
