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
