/// Helpers to make untrusted text safe to echo in messages and logs.
public enum Redaction {
    /// `text` cut to `limit` characters with control characters replaced, so a hostile method
    /// name or path cannot forge log lines or flood a message.
    public static func printable(_ text: String, limit: Int) -> String {
        var out = ""
        for scalar in text.unicodeScalars.prefix(limit) {
            if scalar.properties.generalCategory == .control || scalar == "\u{2028}" || scalar == "\u{2029}" {
                out.unicodeScalars.append("?")
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        if text.unicodeScalars.count > limit { out += "…" }
        return out
    }
}

extension StringProtocol {
    /// Whether the text holds a control character (Unicode's general category Cc: C0, DEL or
    /// C1), which would let it forge a line of a log. Read from the UTF-8 bytes, with no
    /// property lookup per character: Cc is exactly U+0000–U+001F and U+007F–U+009F, and a C1
    /// character is encoded 0xC2 followed by 0x80–0x9F. Callers run it on every request field
    /// that names something (a conversation, a key, a caller's path), so it is kept cheap.
    public var containsControlCharacter: Bool {
        var afterC2 = false
        for byte in utf8 {
            if byte < 0x20 || byte == 0x7F || (afterC2 && byte < 0xA0) { return true }
            afterC2 = byte == 0xC2
        }
        return false
    }
}
