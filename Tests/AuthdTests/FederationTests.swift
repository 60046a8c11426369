import Foundation
import Protocol
import Testing
@testable import authd

/// RFC 7515 Appendix A.2: an RS256 JWS and the RSA key that signed it.
private enum RFC7515A2 {
    static let jwk: JSONValue = .object([
        "kty": .string("RSA"), "kid": .string("a2"),
        "n": .string("ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-pCgNMsD1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdbBYUsLA9e-KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4FRWyuXpoQ"),
        "e": .string("AQAB"),
    ])
    static let token = "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ."
        + "cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp5jujGbds9uJdbF9CUAr7t1dnZcAcQjbKBYNX4BAynRFdiuB--f_nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBMHlb1L07Qe7K0GarZRmB_eSN9383LcOLn6_dO--xi12jzDwusC-eOkHWEsqtFZESc6BfI7noOPqvhJ1phCnvWh6IeYI2w9QOYEUipUTI8np6LbgGY9Fs98rqVt5AXLIhWkWywlVmtVrBp0igcN_IoypGlUPQGe77Rw"
}

@Suite("Federation: ID token checks, PKCE, device polling")
struct FederationTests {
    @Test("An RSA JWK from RFC 7515 A.2 verifies its example RS256 signature, and not a changed one")
    func rsaKnownAnswer() throws {
        let keys = IDTokenValidator.KeySet.parse(.object(["keys": .array([RFC7515A2.jwk])]))
        let key = try #require(keys.byID["a2"])
        let parsed = try #require(JWS.parse(RFC7515A2.token))
        #expect(key.verify(signature: parsed.signature, message: parsed.signingInput))
        var changed = parsed.signingInput
        changed[changed.count - 1] ^= 1
        #expect(!key.verify(signature: parsed.signature, message: changed))
    }
}
