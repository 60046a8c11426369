@testable import authd

/// authd.conf as `Config.load` reads it: a byte-order mark dropped, UTF-8 or refused, then parsed.
enum ConfigFuzz {
    static func run(_ input: [UInt8]) {
        let body = input.starts(with: [0xEF, 0xBB, 0xBF]) ? Array(input.dropFirst(3)) : input
        guard let text = String(validating: body, as: UTF8.self) else { return }
        do {
            _ = try Config.parse(text, file: "fuzz.conf")
        } catch {
            _ = error.description
        }
    }
}
