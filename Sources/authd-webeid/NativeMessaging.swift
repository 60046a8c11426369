// Chrome's and Firefox's native messaging framing: each message is a 32-bit length in the
// machine's byte order, then that many bytes of UTF-8 JSON. Pure; the I/O is in main.swift.

/// The size rules of the Web eID host's messages.
enum NativeFrame {
    /// A request shorter than this cannot be a command object (`{"command":…}`).
    static let minimumRequest = 5
    /// Web eID's limit for a request: the largest (`sign`, with a certificate and a hash) fits.
    static let maximumRequest = 8192
    /// A reply must stay under Chrome's 1 MB limit for messages from a host.
    static let maximumReply = 1024 * 1024 - 1

    /// The length a 4-byte header announces (native byte order).
    static func length(ofHeader header: [UInt8]) -> Int {
        precondition(header.count == 4)
        let value = header.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }
        return Int(value)
    }

    /// A message with its header.
    static func frame(_ json: [UInt8]) -> [UInt8] {
        var length = UInt32(json.count)
        return withUnsafeBytes(of: &length) { Array($0) } + json
    }
}
