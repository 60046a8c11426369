import Foundation

/// The test CA's certificate file: PEM around the DER that `X509Certificate.issue` makes.
enum Certificates {
    static func pem(_ der: [UInt8]) -> String {
        let body = Data(der).base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
        return "-----BEGIN CERTIFICATE-----\n\(body)\n-----END CERTIFICATE-----\n"
    }
}

enum Base64 {
    static func decode(_ text: String) -> [UInt8]? { Data(base64Encoded: text).map(Array.init) }
    static func encode(_ bytes: [UInt8]) -> String { Data(bytes).base64EncodedString() }
}
