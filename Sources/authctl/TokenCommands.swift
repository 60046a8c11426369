import Foundation
import Protocol

extension Command {
    static let tokenLocal = Command(
        path: ["token", "local"], synopsis: "--aud AUDIENCE [--nonce NONCE]",
        abstract: """
            Print a JWT in which authd asserts your Unix identity (sub = unix:UID), for AUDIENCE.
            The token alone goes to stdout, so a script can write TOKEN=$(authctl token local --aud myapp).
            """,
        options: [
            OptionSpec(name: "aud", value: "AUDIENCE", help: "who the token is for (required)"),
            OptionSpec(name: "nonce", value: "NONCE", help: "a value to echo in the nonce claim"),
        ]
    ) { invocation throws(CLIError) in
        guard let audience = invocation.value("aud") else { throw .usage("--aud is required") }
        let issued = try invocation.connect().call(AuthLocal.self, .init(aud: audience, nonce: invocation.value("nonce")))
        if invocation.global.json { Output.json(issued) } else { Output.line(issued.token) }
        return .ok
    }

    static let tokenVerify = Command(
        path: ["token", "verify"], synopsis: "TOKEN|- [--aud AUDIENCE]",
        abstract: "Check a token authd issued; print its claims. Exit 5 when it is not valid. '-' reads it from stdin.",
        options: [OptionSpec(name: "aud", value: "AUDIENCE", help: "also require this audience")],
        positionals: 1...1
    ) { invocation throws(CLIError) in
        var token = invocation.positionals[0]
        if token == "-" { token = (readLine(strippingNewline: true) ?? "").trimmingCharacters(in: .whitespaces) }
        let verified = try invocation.connect().call(TokenVerify.self, .init(token: token, aud: invocation.value("aud")))
        if invocation.global.json { Output.json(verified) } else { Output.prettyJSON(verified.claims) }
        return .ok
    }

    static let keysJWKS = Command(
        path: ["keys", "jwks"], synopsis: "",
        abstract: "Print the public keys that verify authd's tokens, as a JWK Set (RFC 7517)."
    ) { invocation throws(CLIError) in
        let jwks = try invocation.connect().call(KeysJWKS.self, NoParams())
        Output.json(jwks)
        return .ok
    }
}
