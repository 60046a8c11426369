/// The JSON authd accepts from outside: RFC 8259's grammar with nothing lenient, and I-JSON's
/// (RFC 7493) rule that an object's member names are unique.
///
/// Foundation's decoder takes a leading byte-order mark, trailing commas and a duplicate member
/// (first one wins). A security daemon must not: two parsers reading one request differently is
/// how a check gets bypassed (the method a proxy logs is not the one authd runs). Every JSON text
/// from outside passes ``check(_:)`` before it is decoded.
public enum StrictJSON {
    /// How deep arrays and objects may nest; deeper texts are refused before any recursion runs
    /// out of stack (Foundation's own limit is the same).
    public static let maximumDepth = 512

    /// Why a text is not strict JSON. `offset` is the byte where reading stopped.
    public struct Violation: Error, Sendable, Equatable, CustomStringConvertible {
        public let offset: Int
        public let problem: String
        public var description: String { "\(problem) (at byte \(offset))" }
    }

    /// Nil when `text` is one strict JSON value, surrounded by nothing but whitespace.
    public static func check(_ text: some Collection<UInt8>) -> Violation? {
        var reader = Reader(bytes: Array(text))
        do throws(Violation) {
            try reader.document()
            return nil
        } catch {
            return error
        }
    }

    /// A member of an object: its name, and where its value's text lies.
    public struct Member: Sendable, Equatable {
        /// Where the name's bytes lie, inside its quotes.
        let nameBytes: Range<Int>
        /// The name, when its bytes are not plain ASCII without an escape (see ``Name``).
        let decodedName: String?
        public let value: Range<Int>
        /// When the value is an object: its members' names, as the check read them (a request's
        /// params are checked for unknown fields without being read again).
        public let names: [String]?

        /// The member's name, escapes resolved; `text` is the one the member was read from.
        public func name(in text: [UInt8]) -> String { decodedName ?? String(decoding: text[nameBytes], as: UTF8.self) }

        /// Whether the member's name is `expected`, plain ASCII.
        public func isNamed(_ expected: StaticString, in text: [UInt8]) -> Bool {
            guard let decodedName else { return StrictJSON.bytes(nameBytes, of: text, are: expected) }
            return decodedName == expected.description
        }
    }

    /// An object member's name as the check read it. Nearly every name is plain ASCII without an
    /// escape: its bytes are its text, and names are compared by their bytes. Any other is read
    /// as the text it means (`"\u006dethod"` is `"method"`), kept by the reader, and compared
    /// as Strings compare (canonical equivalence, as a decoder's keys are).
    struct Name: Sendable, Equatable {
        /// Where its bytes lie, inside its quotes.
        let bytes: Range<Int>
        /// Where its text is in the reader's `decodedNames`, when it is not plain.
        let decoded: Int?
    }

    /// Whether the bytes at `range` of `text` are `expected`'s.
    static func bytes(_ range: Range<Int>, of text: [UInt8], are expected: StaticString) -> Bool {
        text.withUnsafeBufferPointer { equal($0, range, UnsafeBufferPointer(start: expected.utf8Start, count: expected.utf8CodeUnitCount)) }
    }

    private static func equal(_ text: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, _ expected: UnsafeBufferPointer<UInt8>) -> Bool {
        guard range.count == expected.count else { return false }
        for offset in 0..<expected.count where text[range.lowerBound + offset] != expected[offset] { return false }
        return true
    }

    /// Checks `text` as ``check(_:)`` does and, in the same pass, returns the members of the
    /// object it is, in their order (nil for strict JSON that is not an object): how a request
    /// line is read once rather than checked, then decoded (``WireCodec/decodeRequest(_:)``).
    public static func members(of text: [UInt8]) throws(Violation) -> [Member]? {
        var reader = Reader(bytes: text)
        try reader.document()
        return reader.topLevel
    }

    /// The members of the object whose text lies at `range` of a text that passed the check
    /// (a request's params), as ``members(of:)`` finds them; nil when it is not an object.
    public static func members(at range: Range<Int>, in text: [UInt8]) -> [Member]? {
        guard text[range.lowerBound] == UInt8(ascii: "{") else { return nil }
        var reader = Reader(bytes: text, index: range.lowerBound)
        guard (try? reader.object(depth: 1)) != nil, reader.index == range.upperBound else { return nil }
        return reader.topLevel
    }

    /// The string value whose text starts at `offset` of a text that passed the check.
    public static func string(at offset: Int, in text: [UInt8]) -> String? {
        var reader = Reader(bytes: text, index: offset)
        return try? reader.string()
    }

    /// The value at `range` of a text that passed the check, when it is a string (a member's
    /// value, as ``members(of:)`` found it); nil for any other kind of value.
    public static func string(in range: Range<Int>, of text: [UInt8]) -> String? {
        text[range.lowerBound] == UInt8(ascii: "\"") ? string(at: range.lowerBound, in: text) : nil
    }

    /// Checks `text` as ``check(_:)`` does and, in the same pass, reads the value it is: how a
    /// generic value (a forwarded call's params, an answer a client reads) is read without
    /// `JSONDecoder`, whose decoding of an open-shaped value tries each kind in turn and throws
    /// for each wrong one. A number is an integer when `Int64` holds it exactly (`7`, `7.0`,
    /// `7e0`), a double otherwise, as `JSONValue`'s decoding reads it.
    public static func value(of text: [UInt8]) throws(Violation) -> JSONValue {
        var reader = Reader(bytes: text)
        if text.starts(with: [0xEF, 0xBB, 0xBF]) { throw Violation(offset: 0, problem: "a byte-order mark precedes the JSON text") }
        reader.skipWhitespace()
        let value = try reader.parsedValue(depth: 0)
        reader.skipWhitespace()
        guard reader.index == text.count else { throw reader.violation("text after the JSON value") }
        return value
    }

    /// The value whose text lies at `range` of a text that passed the check.
    public static func value(at range: Range<Int>, in text: [UInt8]) -> JSONValue? {
        var reader = Reader(bytes: text, index: range.lowerBound)
        guard let value = try? reader.parsedValue(depth: 0), reader.index == range.upperBound else { return nil }
        return value
    }

    private struct Reader {
        let bytes: [UInt8]
        var index = 0
        /// The members of the outermost value, when it is an object.
        var topLevel: [Member]?
        /// The member names of the object a top-level member's value just was.
        var valueNames: [String]?
        /// The names of the objects being read, the innermost's last: one list for the whole
        /// text, not one per object.
        var openNames: [Name] = []
        /// The texts of the names that are not plain (``Name``).
        var decodedNames: [String] = []

        mutating func document() throws(Violation) {
            if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { throw Violation(offset: 0, problem: "a byte-order mark precedes the JSON text") }
            skipWhitespace()
            try value(depth: 0)
            skipWhitespace()
            guard index == bytes.count else { throw violation("text after the JSON value") }
        }

        func violation(_ problem: String) -> Violation { Violation(offset: index, problem: problem) }

        var next: UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func skipWhitespace() {
            while let byte = next, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { index += 1 }
        }

        mutating func expect(_ literal: StaticString) throws(Violation) {
            let expected = UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount)
            guard bytes.count - index >= expected.count, bytes[index..<index + expected.count].elementsEqual(expected) else {
                throw violation("not a JSON value")
            }
            index += expected.count
        }

        mutating func value(depth: Int) throws(Violation) {
            switch next {
            case UInt8(ascii: "{")?: try object(depth: depth + 1)
            case UInt8(ascii: "[")?: try array(depth: depth + 1)
            case UInt8(ascii: "\"")?: try skipString()
            case UInt8(ascii: "t")?: try expect("true")
            case UInt8(ascii: "f")?: try expect("false")
            case UInt8(ascii: "n")?: try expect("null")
            case let byte? where byte == UInt8(ascii: "-") || (0x30...0x39).contains(byte): try number()
            case nil: throw violation("the JSON text ends early")
            default: throw violation("not a JSON value")
            }
        }

        /// The value at `index`, read as `value(depth:)` checks it.
        mutating func parsedValue(depth: Int) throws(Violation) -> JSONValue {
            switch next {
            case UInt8(ascii: "{")?: return .object(try parsedObject(depth: depth + 1))
            case UInt8(ascii: "[")?: return .array(try parsedArray(depth: depth + 1))
            case UInt8(ascii: "\"")?: return .string(try string())
            case UInt8(ascii: "t")?: try expect("true"); return .bool(true)
            case UInt8(ascii: "f")?: try expect("false"); return .bool(false)
            case UInt8(ascii: "n")?: try expect("null"); return .null
            case let byte? where byte == UInt8(ascii: "-") || (0x30...0x39).contains(byte): return try parsedNumber()
            case nil: throw violation("the JSON text ends early")
            default: throw violation("not a JSON value")
            }
        }

        /// An object's members; a name twice is refused, compared as the text it means.
        mutating func parsedObject(depth: Int) throws(Violation) -> [String: JSONValue] {
            guard depth <= StrictJSON.maximumDepth else { throw violation("nested deeper than \(StrictJSON.maximumDepth) levels") }
            index += 1
            skipWhitespace()
            var members: [String: JSONValue] = [:]
            if next == UInt8(ascii: "}") {
                index += 1
                return members
            }
            while true {
                guard next == UInt8(ascii: "\"") else {
                    throw violation(next == nil ? "the JSON text ends early" : "a member name was expected (a trailing comma?)")
                }
                let start = index
                let name = try memberName()
                let key = text(of: name)
                guard members[key] == nil else {
                    throw Violation(offset: start, problem: "the member name '\(Redaction.printable(key, limit: 64))' appears twice")
                }
                skipWhitespace()
                guard next == UInt8(ascii: ":") else { throw violation("':' was expected after a member name") }
                index += 1
                skipWhitespace()
                members[key] = try parsedValue(depth: depth)
                skipWhitespace()
                switch next {
                case UInt8(ascii: ",")?: index += 1; skipWhitespace()
                case UInt8(ascii: "}")?: index += 1; return members
                default: throw violation(next == nil ? "the JSON text ends early" : "',' or '}' was expected")
                }
            }
        }

        mutating func parsedArray(depth: Int) throws(Violation) -> [JSONValue] {
            guard depth <= StrictJSON.maximumDepth else { throw violation("nested deeper than \(StrictJSON.maximumDepth) levels") }
            index += 1
            skipWhitespace()
            var elements: [JSONValue] = []
            if next == UInt8(ascii: "]") { index += 1; return elements }
            while true {
                if next == UInt8(ascii: "]") { throw violation("a value was expected (a trailing comma?)") }
                elements.append(try parsedValue(depth: depth))
                skipWhitespace()
                switch next {
                case UInt8(ascii: ",")?: index += 1; skipWhitespace()
                case UInt8(ascii: "]")?: index += 1; return elements
                default: throw violation(next == nil ? "the JSON text ends early" : "',' or ']' was expected")
                }
            }
        }

        mutating func parsedNumber() throws(Violation) -> JSONValue {
            let start = index
            _ = try numberGrammar()
            let text = String(decoding: bytes[start..<index], as: UTF8.self)
            if let integer = Int64(text) { return .integer(integer) }
            guard let double = Double(text), double.isFinite else { throw Violation(offset: start, problem: "a number is too large for a double") }
            return Int64(exactly: double).map { .integer($0) } ?? .double(double)
        }

        mutating func object(depth: Int) throws(Violation) {
            guard depth <= StrictJSON.maximumDepth else { throw violation("nested deeper than \(StrictJSON.maximumDepth) levels") }
            index += 1
            skipWhitespace()
            let outermost = depth == 1
            if outermost {
                topLevel = []
                topLevel!.reserveCapacity(4)  // a request's members
            }
            // A top-level member's value (depth 2) leaves its names for that member.
            if next == UInt8(ascii: "}") {
                index += 1
                if depth == 2 { valueNames = [] }
                return
            }
            // This object's names are `openNames` from `firstName` on, or, once there are many,
            // a set of their texts (comparing a few names costs less than hashing them).
            let firstName = openNames.count
            var manyNames: Set<String>?
            defer { while openNames.count > firstName { openNames.removeLast() } }
            while true {
                guard next == UInt8(ascii: "\"") else {
                    throw violation(next == nil ? "the JSON text ends early" : "a member name was expected (a trailing comma?)")
                }
                let start = index
                let name = try memberName()
                guard insert(name, from: firstName, orInto: &manyNames) else {
                    throw Violation(offset: start, problem: "the member name '\(Redaction.printable(text(of: name), limit: 64))' appears twice")
                }
                skipWhitespace()
                guard next == UInt8(ascii: ":") else { throw violation("':' was expected after a member name") }
                index += 1
                skipWhitespace()
                let valueStart = index
                valueNames = nil
                try value(depth: depth)
                if outermost {
                    topLevel?.append(Member(nameBytes: name.bytes, decodedName: name.decoded.map { decodedNames[$0] }, value: valueStart..<index,
                                            names: valueNames))
                }
                skipWhitespace()
                switch next {
                case UInt8(ascii: ",")?: index += 1; skipWhitespace()
                case UInt8(ascii: "}")?:
                    index += 1
                    if depth == 2 { valueNames = manyNames.map(Array.init) ?? openNames[firstName...].map(text(of:)) }
                    return
                default: throw violation(next == nil ? "the JSON text ends early" : "',' or '}' was expected")
                }
            }
        }

        mutating func array(depth: Int) throws(Violation) {
            guard depth <= StrictJSON.maximumDepth else { throw violation("nested deeper than \(StrictJSON.maximumDepth) levels") }
            index += 1
            skipWhitespace()
            if next == UInt8(ascii: "]") { index += 1; return }
            while true {
                if next == UInt8(ascii: "]") { throw violation("a value was expected (a trailing comma?)") }
                try value(depth: depth)
                skipWhitespace()
                switch next {
                case UInt8(ascii: ",")?: index += 1; skipWhitespace()
                case UInt8(ascii: "]")?: index += 1; return
                default: throw violation(next == nil ? "the JSON text ends early" : "',' or ']' was expected")
                }
            }
        }

        /// A number as RFC 8259 writes it, whose magnitude an IEEE 754 double holds (I-JSON,
        /// RFC 7493 §2.2): Foundation's decoder, which reads the text next, refuses `1e400`.
        mutating func number() throws(Violation) {
            let start = index
            // Without an exponent, a number needs 309 digits to pass a double's largest: a
            // shorter one (an id, a count) is not parsed to know it fits.
            guard try numberGrammar() || index - start > 300 else { return }
            guard Double(String(decoding: bytes[start..<index], as: UTF8.self))?.isFinite == true else {
                throw Violation(offset: start, problem: "a number is too large for a double")
            }
        }

        /// Whether the number has an exponent.
        mutating func numberGrammar() throws(Violation) -> Bool {
            func digits(_ reader: inout Reader) -> Int {
                let start = reader.index
                while let byte = reader.next, (0x30...0x39).contains(byte) { reader.index += 1 }
                return reader.index - start
            }
            if next == UInt8(ascii: "-") { index += 1 }
            if next == UInt8(ascii: "0") {
                index += 1
            } else if digits(&self) == 0 {
                throw violation("a number needs digits")
            }
            if next == UInt8(ascii: ".") {
                index += 1
                guard digits(&self) > 0 else { throw violation("a fraction needs digits") }
            }
            if next == UInt8(ascii: "e") || next == UInt8(ascii: "E") {
                index += 1
                if next == UInt8(ascii: "+") || next == UInt8(ascii: "-") { index += 1 }
                guard digits(&self) > 0 else { throw violation("an exponent needs digits") }
                return true
            }
            return false
        }

        /// `bytes` as text when they are valid UTF-8. `String(decoding:as:)` replaces each invalid
        /// sequence with U+FFFD, so its bytes equal the input exactly when the input is valid.
        /// (`String(validating:as:)`, generic over the encoding, looked up type metadata on every
        /// call: it was half the cost of reading a request line.)
        private func utf8String(_ bytes: ArraySlice<UInt8>) -> String? {
            var text = String(decoding: bytes, as: UTF8.self)
            let valid = bytes.withUnsafeBufferPointer { input in
                input.isASCII  // as nearly every string on the wire is
                    || text.withUTF8 { decoded in decoded.elementsEqual(input) }
            }
            return valid ? text : nil
        }

        /// Checks a string whose text is not kept (a value's). One of printable ASCII without
        /// escapes, nearly every one, is checked without being made a String; any other is read
        /// as `string()` reads it, with its errors.
        mutating func skipString() throws(Violation) {
            if let end = plainStringEnd() {
                index = end + 1
            } else {
                _ = try string()
            }
        }

        /// A member's name: a plain one as where it lies, any other read as `string()` reads it.
        mutating func memberName() throws(Violation) -> Name {
            let start = index + 1
            if let end = plainStringEnd() {
                index = end + 1
                return Name(bytes: start..<end, decoded: nil)
            }
            decodedNames.append(try string())
            return Name(bytes: start..<index - 1, decoded: decodedNames.count - 1)
        }

        func text(of name: Name) -> String {
            name.decoded.map { decodedNames[$0] } ?? String(decoding: bytes[name.bytes], as: UTF8.self)
        }

        /// Adds `name` to the object's names (`openNames` from `first` on, or `many`); false
        /// when the object has it already.
        mutating func insert(_ name: Name, from first: Int, orInto many: inout Set<String>?) -> Bool {
            if many != nil { return many!.insert(text(of: name)).inserted }
            for index in first..<openNames.count where isSame(openNames[index], name) { return false }
            if openNames.capacity == 0 { openNames.reserveCapacity(8) }
            openNames.append(name)
            if openNames.count - first == 16 { many = Set(openNames[first...].map(text(of:))) }
            return true
        }

        func isSame(_ first: Name, _ second: Name) -> Bool {
            guard first.decoded == nil, second.decoded == nil else { return text(of: first) == text(of: second) }
            return bytes.withUnsafeBufferPointer { StrictJSON.equal($0, first.bytes, UnsafeBufferPointer(rebasing: $0[second.bytes])) }
        }

        /// Where the string at `index` closes, when all of it is printable ASCII without an escape.
        func plainStringEnd() -> Int? {
            // On the buffer, with plain comparisons: a 64 KiB string is read here byte by byte.
            bytes.withUnsafeBufferPointer { buffer in
                var end = index + 1
                while end < buffer.count {
                    let byte = buffer[end]
                    guard byte >= 0x20, byte < 0x80, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\") else { break }
                    end += 1
                }
                return end < buffer.count && buffer[end] == UInt8(ascii: "\"") ? end : nil
            }
        }

        /// A string, its escapes resolved (member names are compared as the text they mean:
        /// `"\u006dethod"` is `"method"`). Lone surrogates and invalid UTF-8 are refused.
        mutating func string() throws(Violation) -> String {
            index += 1
            // Most strings have no escape: their bytes are the text, validated as UTF-8 once.
            var end = index
            while end < bytes.count, bytes[end] != UInt8(ascii: "\""), bytes[end] != UInt8(ascii: "\\"), bytes[end] >= 0x20 { end += 1 }
            if end < bytes.count, bytes[end] == UInt8(ascii: "\"") {
                guard let text = utf8String(bytes[index..<end]) else {
                    throw Violation(offset: index, problem: "a string is not valid UTF-8")
                }
                index = end + 1
                return text
            }
            var scalars = String.UnicodeScalarView()
            var runStart = index
            func flushRun(_ reader: Reader, upTo end: Int) throws(Violation) {
                guard runStart < end else { return }
                guard let run = utf8String(reader.bytes[runStart..<end]) else {
                    throw Violation(offset: runStart, problem: "a string is not valid UTF-8")
                }
                scalars.append(contentsOf: run.unicodeScalars)
            }
            while true {
                guard let byte = next else { throw violation("a string is not closed") }
                switch byte {
                case UInt8(ascii: "\""):
                    try flushRun(self, upTo: index)
                    index += 1
                    return String(scalars)
                case UInt8(ascii: "\\"):
                    try flushRun(self, upTo: index)
                    index += 1
                    scalars.append(try escape())
                    runStart = index
                case 0x00..<0x20:
                    throw violation("a control character must be escaped in a string")
                default:
                    index += 1
                }
            }
        }

        mutating func escape() throws(Violation) -> Unicode.Scalar {
            guard let byte = next else { throw violation("a string is not closed") }
            index += 1
            switch byte {
            case UInt8(ascii: "\""): return "\""
            case UInt8(ascii: "\\"): return "\\"
            case UInt8(ascii: "/"): return "/"
            case UInt8(ascii: "b"): return "\u{8}"
            case UInt8(ascii: "f"): return "\u{C}"
            case UInt8(ascii: "n"): return "\n"
            case UInt8(ascii: "r"): return "\r"
            case UInt8(ascii: "t"): return "\t"
            case UInt8(ascii: "u"):
                let unit = try hexUnit()
                switch unit {
                case 0xD800..<0xDC00:
                    guard next == UInt8(ascii: "\\"), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "u") else {
                        throw violation("a lone surrogate in a \\u escape")
                    }
                    index += 2
                    let low = try hexUnit()
                    guard (0xDC00..<0xE000).contains(low) else { throw violation("a lone surrogate in a \\u escape") }
                    return Unicode.Scalar(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))!
                case 0xDC00..<0xE000:
                    throw violation("a lone surrogate in a \\u escape")
                default:
                    return Unicode.Scalar(unit)!
                }
            default:
                throw violation("an unknown escape in a string")
            }
        }

        mutating func hexUnit() throws(Violation) -> UInt32 {
            guard bytes.count - index >= 4 else { throw violation("a \\u escape needs four hex digits") }
            var unit: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[index]
                let digit: UInt8
                switch byte {
                case 0x30...0x39: digit = byte - 0x30
                case 0x41...0x46: digit = byte - 0x41 + 10
                case 0x61...0x66: digit = byte - 0x61 + 10
                default: throw violation("a \\u escape needs four hex digits")
                }
                unit = unit << 4 | UInt32(digit)
                index += 1
            }
            return unit
        }
    }
}
