// The text rules of the Assuan protocol (libassuan; GnuPG's pinentry speaks it on its stdin and
// stdout), as far as a client of pinentry needs them. No I/O.
//
// A command is one line, `COMMAND argument`; the argument is percent-escaped. The server answers
// with `OK [text]` or `ERR code text`, and on the way may send data (`D escaped-bytes`), status
// (`S KEYWORD text`), comments (`# text`) and questions of its own (`INQUIRE KEYWORD args`), which
// the client answers with data and `END`, or refuses with `CAN`.

enum Assuan {
    /// The longest line, without its LF, that every Assuan peer accepts (libassuan's
    /// `ASSUAN_LINELENGTH` is 1002 with the LF and a NUL).
    static let lineLimit = 1000

    /// gpg-error codes pinentry answers with. An `ERR` line carries `source << 24 | code` (pinentry's
    /// source is 5, so `83886179` is 99): match on the low 16 bits.
    enum ErrorCode {
        static let timeout: UInt32 = 62
        static let canceled: UInt32 = 99
        static let notConfirmed: UInt32 = 114
        static let unknownOption: UInt32 = 174
        /// The person cancelled and asked not to be asked again in this session.
        static let fullyCanceled: UInt32 = 198
    }

    /// `text` as a command argument: `%`, CR, LF and every other C0 control character and DEL
    /// become `%XX`; everything else (UTF-8 included) is sent as it is. Pinentry turns `%0A`
    /// back into a line break, so what is meant to stay on one line must be made safe before
    /// (`Pinentry.field`).
    static func escape(_ text: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count)
        for character in text { escaped += escape(character) }
        return escaped
    }

    private static func escape(_ character: Character) -> String {
        var bytes: [UInt8] = []
        for byte in character.utf8 {
            if byte < 0x20 || byte == 0x7F || byte == UInt8(ascii: "%") {
                bytes += [UInt8(ascii: "%"), hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0xF)]]
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    /// `COMMAND escaped-argument`, cut so that it fits `lineLimit` bytes: only between
    /// characters (never inside a `%XX` or a UTF-8 sequence), the cut marked with "…".
    static func line(_ command: String, _ argument: String) -> String {
        let whole = command + " " + escape(argument)
        if whole.utf8.count <= lineLimit { return whole }
        var line = command + " "
        let budget = lineLimit - "…".utf8.count
        for character in argument {
            let piece = escape(character)
            if line.utf8.count + piece.utf8.count > budget { break }
            line += piece
        }
        return line + "…"
    }

    /// The bytes a percent-escaped argument stands for (a `%` not followed by two hex digits is
    /// kept as it is, as libassuan does).
    static func unescape(_ text: Substring) -> [UInt8] {
        let bytes = Array(text.utf8)
        var result: [UInt8] = []
        result.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count,
               let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2]) {
                result.append(high << 4 | low)
                index += 3
            } else {
                result.append(bytes[index])
                index += 1
            }
        }
        return result
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        default: nil
        }
    }

    /// One line from an Assuan server. Its description never shows data, which may be a PIN.
    enum Response: Equatable, CustomStringConvertible {
        case ok
        /// `ERR code text`; `code` is the whole gpg-error value (see `ErrorCode`).
        case error(code: UInt32, message: String)
        /// A `D` line, unescaped. May be (part of) a secret.
        case data([UInt8])
        /// An `S` status line: its keyword only.
        case status(String)
        /// An `INQUIRE`: its keyword only (pinentry's `QUALITY` and `CHECKPIN` inquiries carry the
        /// passphrase typed so far in their arguments, which are dropped here).
        case inquire(String)
        case comment

        /// Nil for a line that is none of these (a protocol error).
        init?(_ line: Substring) {
            let (keyword, rest) = Self.split(line)
            switch keyword {
            case "OK": self = .ok
            case "ERR":
                let (code, message) = Self.split(rest)
                guard let value = UInt32(code) else { return nil }
                self = .error(code: value, message: String(decoding: Assuan.unescape(message), as: UTF8.self))
            case "D": self = .data(Assuan.unescape(rest))
            case "S": self = .status(String(Self.split(rest).0))
            case "INQUIRE": self = .inquire(String(Self.split(rest).0))
            default:
                guard line.first == "#" else { return nil }
                self = .comment
            }
        }

        /// The low 16 bits of an `ERR` code: what went wrong, whichever component said so.
        var errorCode: UInt32? {
            if case .error(let code, _) = self { code & 0xFFFF } else { nil }
        }

        var description: String {
            switch self {
            case .ok: "OK"
            case .error(let code, let message): "ERR \(code) \(message)"
            case .data(let bytes): "D (\(bytes.count) bytes)"
            case .status(let keyword): "S \(keyword)"
            case .inquire(let keyword): "INQUIRE \(keyword)"
            case .comment: "#"
            }
        }

        private static func split(_ text: Substring) -> (Substring, Substring) {
            guard let space = text.firstIndex(of: " ") else { return (text, "") }
            return (text[..<space], text[text.index(after: space)...])
        }
    }
}
