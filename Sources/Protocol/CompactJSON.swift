import FoundationEssentials

/// Encodes `Encodable` values as compact JSON, keys sorted by their UTF-8 bytes and slashes left
/// unescaped: byte for byte what `JSONEncoder` with `[.sortedKeys, .withoutEscapingSlashes]`
/// writes, at a fraction of its cost. The wire's hot path (every response, notification,
/// token's claims and audit detail) goes through it; `JSONEncoder` stays the reference.
///
/// How it is built, for speed: a value is written in one pass, straight into one byte buffer,
/// as Codable hands its parts over; nothing is built in between. An object is sorted when it is
/// complete: its members are already text, so sorting moves byte ranges (none, when the keys
/// came in order). A container is complete when its value's `encode(to:)` returns, or when
/// something is written to a container around it (what synthesized `encode(to:)` does).
/// Scalars are checked against the types JSONEncoder encodes specially by their static type
/// (a pointer comparison), not by a dynamic cast per value as JSONEncoder does.
///
/// What one pass cannot write is left to `JSONEncoder` (`encode` answers nil): a container
/// written to after it was complete or asked for again as another kind, a key set twice, a key
/// that needs an escape, super encoders, and the types JSONEncoder encodes by its own rules
/// (Date, Data, URL, Decimal). Our wire types do none of this; a hand-written `encode(to:)` may.
///
/// The hottest results (`hello`'s, a token's) write their own members (``Writable``), which
/// skips Codable's containers.
///
/// Debug builds encode every value both ways and stop at the first difference, so the whole
/// test suite checks that the two agree.
public enum CompactJSON {
    /// The JSON text of `value`, or nil when it is one `JSONEncoder` must write (see above).
    public static func encode<T: Encodable>(_ value: T) throws -> [UInt8]? {
        try written(value)?.text
    }

    /// The writer that wrote `value`, or nil when it is one `JSONEncoder` must write.
    static func written<T: Encodable>(_ value: T) throws -> Writer? {
        try written { try $0.writeOutermost(value, key: nil, topLevel: true) }
    }

    /// The writer `body` wrote with, or nil when what it wrote is one `JSONEncoder` must write.
    static func written(by body: (Writer) throws -> Void) throws -> Writer? {
        let writer = Writer()
        do {
            try body(writer)
        } catch is NotInOnePass {
            return nil
        }
        return writer.failed ? nil : writer
    }

    /// What one pass cannot write: the value goes to `JSONEncoder`.
    struct NotInOnePass: Error {}

    /// One call of `encode`: the text so far, and the values and containers not yet complete.
    ///
    /// The text is a buffer of its own rather than an Array (whose `append` checks uniqueness
    /// and capacity at each call), and the properties are not checked for exclusive access at
    /// run time (as a class's are at each access; that was a third of the cost): a writer lives
    /// for one call of `encode` on one thread, and no method of it reaches a property while it
    /// holds an `inout` access to the same one.
    final class Writer {
        /// The text: `count` bytes at `bytes`, room for `capacity`.
        @exclusivity(unchecked) private var bytes: UnsafeMutablePointer<UInt8>
        @exclusivity(unchecked) private var count = 0
        @exclusivity(unchecked) private var capacity: Int
        /// What is not complete yet, outermost first: values whose `encode(to:)` runs, and
        /// containers that may still be written to.
        @exclusivity(unchecked) private var open: [Open] = []
        /// The members of the open objects, each object's in one run.
        @exclusivity(unchecked) private var members: [Member] = []
        @exclusivity(unchecked) private var lastID = 0
        /// Set where a method that cannot throw met what one pass cannot write.
        @exclusivity(unchecked) private(set) var failed = false
        /// Set where a `RawJSON` was written as it came (not this writer's own writing).
        @exclusivity(unchecked) private(set) var passedThrough = false

        struct Open {
            enum Kind: Equatable {
                /// A value that has asked for no container yet.
                case undecided, object, array
                /// A value that asked for a single-value container; whether it wrote it.
                case single(written: Bool)
            }

            let id: Int
            var kind: Kind
            /// Where it sits in the container around it, for `codingPath`.
            let key: (any CodingKey)?
            /// A value (completed by `write` when its `encode(to:)` returns) rather than a nested
            /// container (completed by a write around it).
            let isValue: Bool
            /// An object's first member in `members`.
            var firstMember: Int
            /// The members or elements written so far.
            var count = 0
            /// An object has a key that is not all ASCII.
            var hasNonASCIIKey = false
        }

        /// Where a member starts (its key's opening quote) and where its key ends (the closing quote).
        struct Member {
            let start: Int
            let keyEnd: Int
        }

        init() {
            // A `hello` response (724 bytes) fits.
            capacity = 1024
            bytes = .allocate(capacity: capacity)
        }

        deinit { bytes.deallocate() }

        /// The text written.
        var text: [UInt8] { Array(UnsafeBufferPointer(start: bytes, count: count)) }

        /// The text written and a newline, in an array of its own.
        func line() -> [UInt8] {
            [UInt8](unsafeUninitializedCapacity: count + 1) { buffer, initialized in
                buffer.baseAddress!.initialize(from: bytes, count: count)
                buffer[count] = UInt8(ascii: "\n")
                initialized = count + 1
            }
        }

        /// The text written, in a string of its own.
        func textAsString() -> String {
            String(unsafeUninitializedCapacity: count) { buffer in
                buffer.baseAddress?.initialize(from: bytes, count: count)
                return count
            }
        }

        /// The text written, and `terminator` after it.
        func data(terminatedBy terminator: UInt8?) -> Data {
            if let terminator {
                reserve(1)
                put(terminator)
            }
            return Data(bytes: bytes, count: count)
        }

        /// A container for none of the open ones: every use fails (`failed` is set already).
        static let noContainer = 0

        // MARK: Bytes

        /// Makes room for `extra` more bytes.
        @inline(__always)
        private func reserve(_ extra: Int) {
            if count + extra > capacity { grow(to: count + extra) }
        }

        private func grow(to needed: Int) {
            capacity = max(needed, capacity * 2)
            let larger = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
            larger.update(from: bytes, count: count)
            bytes.deallocate()
            bytes = larger
        }

        /// Appends a byte there is room for (`reserve`).
        @inline(__always)
        private func put(_ byte: UInt8) {
            bytes[count] = byte
            count += 1
        }

        /// Appends bytes there is room for (`reserve`).
        @inline(__always)
        private func put(_ buffer: UnsafeBufferPointer<UInt8>) {
            guard let source = buffer.baseAddress else { return }
            (bytes + count).update(from: source, count: buffer.count)
            count += buffer.count
        }

        /// Appends text that is JSON already (the fixed parts of an object whose members are
        /// known in their sorted order).
        func append(_ literal: StaticString) {
            raw(UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
        }

        /// A JSON text passed on as it came (``RawJSON``), not this writer's own writing.
        func passThrough(_ value: RawJSON) {
            passedThrough = true
            value.bytes.withUnsafeBufferPointer { raw($0) }
        }

        /// Appends bytes that are JSON already.
        func raw(_ text: UnsafeBufferPointer<UInt8>) {
            reserve(text.count)
            put(text)
        }

        // MARK: Values

        /// Writes `value`, at `key` in the container around it. Scalars, and arrays of them, of
        /// the types JSONEncoder writes without calling their `encode(to:)` are written here;
        /// the rest through `encode(to:)`.
        func write<T: Encodable>(_ value: T, key: (any CodingKey)?, topLevel: Bool = false) throws {
            // Each cast follows the type test before it: it changes no bits.
            if T.self == String.self { return string(unsafeBitCast(value, to: String.self)) }
            if T.self == Int.self { return integer(unsafeBitCast(value, to: Int.self)) }
            if T.self == Int64.self { return integer(unsafeBitCast(value, to: Int64.self)) }
            if T.self == Bool.self { return boolean(unsafeBitCast(value, to: Bool.self)) }
            if T.self == Double.self { return try number(unsafeBitCast(value, to: Double.self), key: key) }
            if T.self == [String].self { return array(unsafeBitCast(value, to: [String].self), string) }
            if T.self == [Int].self { return array(unsafeBitCast(value, to: [Int].self), integer) }
            if T.self == [Int64].self { return array(unsafeBitCast(value, to: [Int64].self), integer) }
            if T.self == [UInt32].self { return array(unsafeBitCast(value, to: [UInt32].self), integer) }
            if T.self == Date.self || T.self == Data.self || T.self == URL.self || T.self == Decimal.self { throw NotInOnePass() }
            if T.self == RawJSON.self { return passThrough(unsafeBitCast(value, to: RawJSON.self)) }
            // A JSON value (every line's id, an audit record's detail): as its `encode(to:)` has
            // it encoded, without Codable's containers.
            if T.self == JSONValue.self { return try json(unsafeBitCast(value, to: JSONValue.self), key: key) }
            if T.self == [String: JSONValue].self { return try json(members: unsafeBitCast(value, to: [String: JSONValue].self)) }
            let id = push(.undecided, key: key, isValue: true)
            try value.encode(to: ValueEncoder(writer: self, id: id))
            guard reopen(id) != nil else { throw NotInOnePass() }
            let entry = open.removeLast()
            switch entry.kind {
            case .undecided, .single(written: false):
                // Nothing encoded: `{}` inside a container, as with JSONEncoder; an error alone.
                if topLevel {
                    throw EncodingError.invalidValue(value, .init(codingPath: [], debugDescription: "Top-level \(T.self) did not encode any values."))
                }
                append("{}")
            case .object, .array, .single(written: true):
                complete(entry)
            }
        }

        /// A JSON value. `key` (where it sits in the innermost open container) is only read for
        /// the error of a number that is not finite at the top of `value`.
        func json(_ value: JSONValue, key: (any CodingKey)?) throws {
            switch value {
            case .null: null()
            case .bool(let value): boolean(value)
            case .integer(let value): integer(value)
            case .double(let value): try number(value, key: key)
            case .string(let value): string(value)
            case .array(let elements):
                append("[")
                for (index, element) in elements.enumerated() {
                    if index > 0 { append(",") }
                    try json(nested: element)
                }
                append("]")
            case .object(let members): try json(members: members)
            }
        }

        /// An object's members, in the order of their keys' bytes. A key that needs an escape is
        /// left to JSONEncoder, as `beginMember` leaves it; so is one that is not ASCII, whose
        /// place in JSONEncoder's order this does not work out.
        private func json(members: [String: JSONValue]) throws {
            var sorted: [(key: String, value: JSONValue)] = []
            sorted.reserveCapacity(members.count)
            for member in members {
                var key = member.key
                guard key.withUTF8({ $0.allSatisfy { $0 < 0x80 } && Self.needsNoEscape($0) }) else { throw fail() }
                sorted.append(member)
            }
            sorted.sort { $0.key < $1.key }  // ASCII: the order of the bytes
            append("{")
            for (index, member) in sorted.enumerated() {
                if index > 0 { append(",") }
                string(member.key)
                append(":")
                try json(nested: member.value)
            }
            append("}")
        }

        /// A value inside an array or object. A number that is not finite there is left to
        /// JSONEncoder, whose error names the whole path to it.
        private func json(nested value: JSONValue) throws {
            if case .double(let number) = value, !number.isFinite { throw fail() }
            try json(value, key: nil)
        }

        /// Writes `value` as `write` does, or a `Writable` by its own members. Only the outermost
        /// value of a text is asked whether it is one: asking is a dynamic cast, which costs
        /// about what writing a small member does (a `Writable` writes the ones inside it).
        /// The type is asked, not the value: a value cast to `any Writable` is boxed (a large
        /// one on the heap), its type is not.
        func writeOutermost<T: Encodable>(_ value: T, key: (any CodingKey)?, topLevel: Bool = false) throws {
            if let writable = T.self as? any Writable.Type { return object(value, as: writable) }
            try write(value, key: key, topLevel: topLevel)
        }

        /// `value`, whose type is `W` (the cast above found it), written by its own members
        /// without a second cast.
        private func object<T, W: Writable>(_ value: T, as _: W.Type) {
            withUnsafePointer(to: value) { $0.withMemoryRebound(to: W.self, capacity: 1) { object($0.pointee) } }
        }

        /// A type that writes its own members.
        func object(_ value: some Writable) {
            var object = Object(writer: self)
            value.write(to: &object)
            append(object.isEmpty ? "{}" : "}")
        }

        func boolean(_ value: Bool) { value ? append("true") : append("false") }
        func null() { append("null") }

        func integer<I: FixedWidthInteger>(_ value: I) {
            var magnitude = UInt64(value.magnitude)
            var digits = 1
            var rest = magnitude
            while rest >= 10 {
                rest /= 10
                digits += 1
            }
            reserve(digits + 1)
            if value < 0 { put(UInt8(ascii: "-")) }
            var position = count + digits
            repeat {
                position -= 1
                bytes[position] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            count += digits
        }

        /// As JSONEncoder writes a finite number: its shortest description, without a trailing
        /// ".0". `key` (where it sits in the innermost open container) is only read for the error.
        func number<F: BinaryFloatingPoint & CustomStringConvertible>(_ value: F, key: (any CodingKey)?) throws {
            guard value.isFinite else {
                throw EncodingError.invalidValue(value, .init(codingPath: codingPath(to: open.last?.id, then: key),
                                                              debugDescription: "Unable to encode \(F.self).\(value) directly in JSON."))
            }
            var text = value.description
            if text.hasSuffix(".0") { text.removeLast(2) }
            text.withUTF8 { text in
                reserve(text.count)
                put(text)
            }
        }

        /// A JSON string as JSONEncoder escapes it: quote, backslash and control characters only.
        /// Runs of bytes that need no escape (nearly always the whole string) are copied at once.
        func string(_ text: String) {
            // A native or small string lends its bytes as they are. Only a string that is not
            // contiguous needs `withUTF8`, which is mutating: its copy is a retain and a release.
            if text.utf8.withContiguousStorageIfAvailable({ quoted($0) }) == nil {
                var text = text
                text.withUTF8 { quoted($0) }
            }
        }

        private func quoted(_ text: UnsafeBufferPointer<UInt8>) {
            // Room for the text unescaped; an escape makes room for itself.
            reserve(text.count + 2)
            put(UInt8(ascii: "\""))
            if Self.needsNoEscape(text) {
                put(text)
            } else {
                var clean = 0
                for (index, byte) in text.enumerated() where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                    put(UnsafeBufferPointer(rebasing: text[clean..<index]))
                    escape(byte, room: text.count - index + 1)
                    clean = index + 1
                }
                put(UnsafeBufferPointer(rebasing: text[clean...]))
            }
            put(UInt8(ascii: "\""))
        }

        /// Whether no byte of `text` is a control character, a quote or a backslash: eight bytes
        /// at a time, the last eight again for the few left over; a text shorter than eight, its
        /// bytes after spaces.
        @inline(__always)
        private static func needsNoEscape(_ text: UnsafeBufferPointer<UInt8>) -> Bool {
            guard text.count >= 8 else {
                var word: UInt64 = 0x2020_2020_2020_2020
                for byte in text { word = word << 8 | UInt64(byte) }
                return !needsEscape(word)
            }
            var index = 0
            while index + 8 <= text.count {
                if needsEscape(ByteWords.load(text, at: index)) { return false }
                index += 8
            }
            return index == text.count || !needsEscape(ByteWords.load(text, at: text.count - 8))
        }

        /// Whether any of the eight bytes in `word` is a control character, a quote or a backslash.
        @inline(__always)
        private static func needsEscape(_ word: UInt64) -> Bool {
            ByteWords.below(0x20, in: word) | ByteWords.equal(to: UInt8(ascii: "\""), in: word) | ByteWords.equal(to: UInt8(ascii: "\\"), in: word) != 0
        }

        /// Writes the escape of `byte`, keeping room for the `room` bytes that follow it.
        private func escape(_ byte: UInt8, room: Int) {
            reserve(6 + room)
            put(UInt8(ascii: "\\"))
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): put(byte)
            case 0x08: put(UInt8(ascii: "b"))
            case 0x0C: put(UInt8(ascii: "f"))
            case 0x0A: put(UInt8(ascii: "n"))
            case 0x0D: put(UInt8(ascii: "r"))
            case 0x09: put(UInt8(ascii: "t"))
            default:
                // \u00XX, lowercase hex.
                let hex = { (digit: UInt8) in digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10 }
                for byte in [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex(byte >> 4), hex(byte & 0xF)] { put(byte) }
            }
        }

        /// An array of strings or integers, written at once (JSONEncoder too writes such arrays
        /// directly).
        func array<Element>(_ elements: [Element], _ writeElement: (Element) -> Void) {
            append("[")
            for (index, element) in elements.enumerated() {
                if index > 0 { append(",") }
                writeElement(element)
            }
            append("]")
        }

        // MARK: Containers

        private func push(_ kind: Open.Kind, key: (any CodingKey)?, isValue: Bool) -> Int {
            lastID += 1
            // Made when first needed: a `Writable` and a scalar need neither list.
            if open.capacity == 0 {
                open.reserveCapacity(8)
                members.reserveCapacity(16)
            }
            open.append(Open(id: lastID, kind: kind, key: key, isValue: isValue, firstMember: members.count))
            return lastID
        }

        /// Makes the open value or container `id` the innermost one, completing the containers
        /// inside it: its index in `open`. Nil (and `failed`) when it is complete already, or a
        /// value inside it is still being encoded.
        private func reopen(_ id: Int) -> Int? {
            if let last = open.indices.last, open[last].id == id, !failed { return last }
            guard !failed, let index = open.lastIndex(where: { $0.id == id }) else {
                failed = true
                return nil
            }
            while open.count - 1 > index {
                guard !open[open.count - 1].isValue else {
                    failed = true
                    return nil
                }
                complete(open.removeLast())
            }
            return index
        }

        /// Makes the open value `id` one of `kind` (JSONEncoder hands back the same container
        /// when asked again for the kind it is): false when it is another kind already.
        func become(_ kind: Open.Kind, _ id: Int) -> Bool {
            guard let index = reopen(id) else { return false }
            if open[index].kind == kind { return true }
            guard open[index].kind == .undecided else {
                failed = true
                return false
            }
            open[index].kind = kind
            open[index].firstMember = members.count
            switch kind {
            case .object: append("{")
            case .array: append("[")
            case .undecided, .single: break
            }
            return true
        }

        /// Starts member `key` of the open object `id`: the comma before it, the key and the colon.
        func beginMember(of id: Int, _ key: some CodingKey) throws(NotInOnePass) {
            guard let index = reopen(id), open[index].kind == .object else { throw fail() }
            let comma = open[index].count > 0
            var name = key.stringValue
            let member = name.withUTF8 { name -> Member? in
                // A key that needs no escape is written as it is, and sorted by its bytes as
                // JSONEncoder sorts it (an escape would change the order).
                guard Self.needsNoEscape(name) else { return nil }
                if !name.isASCII { open[index].hasNonASCIIKey = true }
                reserve(name.count + 4)
                if comma { put(UInt8(ascii: ",")) }
                let start = count
                put(UInt8(ascii: "\""))
                put(name)
                let member = Member(start: start, keyEnd: count)
                put(UInt8(ascii: "\""))
                put(UInt8(ascii: ":"))
                return member
            }
            guard let member else { throw fail() }
            members.append(member)
            open[index].count += 1
        }

        /// Starts the next element of the open array `id` (after its comma): its position.
        func beginElement(of id: Int) throws(NotInOnePass) -> Int {
            guard let index = reopen(id), open[index].kind == .array else { throw fail() }
            if open[index].count > 0 { append(",") }
            open[index].count += 1
            return open[index].count - 1
        }

        /// Starts the value of the open single-value container `id`, which takes one.
        func beginSingle(of id: Int) throws(NotInOnePass) {
            guard let index = reopen(id), open[index].kind == .single(written: false) else { throw fail() }
            open[index].kind = .single(written: true)
        }

        /// Opens a container inside the innermost open one, just started (`beginMember` or
        /// `beginElement`), at `key`: its id.
        func openNested(_ kind: Open.Kind, key: any CodingKey) -> Int {
            kind == .object ? append("{") : append("[")
            return push(kind, key: key, isValue: false)
        }

        /// The elements or members written to the open container `id`.
        func count(of id: Int) -> Int {
            open.last { $0.id == id }?.count ?? 0
        }

        /// `codingPath` of the open value or container `id`, and `key` inside it.
        func codingPath(to id: Int?, then key: (any CodingKey)? = nil) -> [any CodingKey] {
            var keys = open.prefix { $0.id != id }.compactMap(\.key)
            if let index = open.firstIndex(where: { $0.id == id }), let own = open[index].key { keys.append(own) }
            if let key { keys.append(key) }
            return keys
        }

        /// Gives up the one pass (the error, for the methods that throw).
        func fail() -> NotInOnePass {
            failed = true
            return NotInOnePass()
        }

        /// A super encoder's value: JSONEncoder places it before it is filled, which one pass
        /// cannot. No container.
        func giveUp() -> Int {
            failed = true
            return Self.noContainer
        }

        /// Closes an object or array taken from `open`.
        private func complete(_ container: Open) {
            switch container.kind {
            case .object:
                sortMembers(from: container.firstMember, checkingSpellings: container.hasNonASCIIKey)
                append("}")
            case .array:
                append("]")
            case .undecided, .single:
                break
            }
        }

        // MARK: Sorting

        /// Puts the members from `first` on (the last object's, all written) in the order of
        /// their keys' bytes, and forgets them. A key set twice leaves the value to JSONEncoder
        /// (it keeps the last value in the first one's place). Keys that are not all ASCII can be
        /// equal as Strings and differ in bytes ("é" precomposed or not), which JSONEncoder's
        /// dictionary makes one member: `checkingSpellings` compares them as Strings too.
        private func sortMembers(from first: Int, checkingSpellings: Bool) {
            defer { members.removeSubrange(first...) }
            let memberCount = members.count - first
            guard memberCount > 1 else { return }
            if checkingSpellings && Set(members[first...].map { String(decoding: key(of: $0), as: UTF8.self) }).count < memberCount {
                failed = true
                return
            }
            if (first + 1..<members.count).allSatisfy({ compareKeys(members[$0 - 1], members[$0]) < 0 }) { return }
            let base = members[first].start
            let length = count - base
            withUnsafeTemporaryAllocation(of: (member: Member, end: Int).self, capacity: memberCount) { spans in
                var spans = spans
                // Each member's bytes, up to the comma before the next, sorted by key (by
                // insertion, as most objects are a handful of members; a large dictionary by
                // the library's sort).
                for index in 0..<memberCount {
                    spans[index] = (members[first + index], index + 1 < memberCount ? members[first + index + 1].start - 1 : count)
                }
                if memberCount <= 16 {
                    for index in 1..<memberCount {
                        let span = spans[index]
                        var slot = index
                        while slot > 0 && compareKeys(spans[slot - 1].member, span.member) > 0 {
                            spans[slot] = spans[slot - 1]
                            slot -= 1
                        }
                        spans[slot] = span
                    }
                } else {
                    spans.sort { compareKeys($0.member, $1.member) < 0 }
                }
                for index in 1..<memberCount where compareKeys(spans[index - 1].member, spans[index].member) == 0 {
                    failed = true
                    return
                }
                withUnsafeTemporaryAllocation(of: UInt8.self, capacity: length) { copy in
                    _ = copy.initialize(from: UnsafeBufferPointer(start: bytes + base, count: length))
                    count = base
                    for (index, span) in spans.enumerated() {
                        if index > 0 { put(UInt8(ascii: ",")) }
                        put(UnsafeBufferPointer(rebasing: copy[(span.member.start - base)..<(span.end - base)]))
                    }
                }
            }
        }

        private func key(of member: Member) -> UnsafeBufferPointer<UInt8> {
            UnsafeBufferPointer(start: bytes + member.start + 1, count: member.keyEnd - member.start - 1)
        }

        /// The order of two keys' bytes: negative, zero or positive.
        private func compareKeys(_ first: Member, _ second: Member) -> Int {
            let (a, b) = (key(of: first), key(of: second))
            for index in 0..<min(a.count, b.count) where a[index] != b[index] {
                return Int(a[index]) - Int(b[index])
            }
            return a.count - b.count
        }
    }
}

// MARK: Types that write themselves

extension CompactJSON {
    /// A wire type on the hot path that writes its members itself, without Codable's containers
    /// (half of what encoding a `hello` cost). `encode(to:)` stays the reference: what `write`
    /// writes must be byte for byte what JSONEncoder writes for it, and debug builds check every
    /// line against JSONEncoder, so every test that sends one checks it.
    public protocol Writable: Encodable {
        /// Writes the members, in the order of their keys' bytes; a nil optional is left out,
        /// as `encodeIfPresent` leaves it.
        func write(to object: inout Object)
    }

    /// The members of one object, as a `Writable` gives them.
    public struct Object {
        let writer: Writer
        private(set) var isEmpty = true

        init(writer: Writer) { self.writer = writer }

        /// The comma before the member (or the object's brace), its key and the colon. Keys are
        /// the type's coding keys, plain ASCII that needs no escape (the debug check would see
        /// one that does).
        private mutating func key(_ key: some CodingKey) {
            writer.append(isEmpty ? "{\"" : ",\"")
            isEmpty = false
            var name = key.stringValue
            name.withUTF8 { writer.raw($0) }
            writer.append("\":")
        }

        public mutating func member(_ key: some CodingKey, _ value: String) {
            self.key(key)
            writer.string(value)
        }

        public mutating func member(_ key: some CodingKey, _ value: String?) {
            if let value { member(key, value) }
        }

        public mutating func member(_ key: some CodingKey, _ value: some FixedWidthInteger) {
            self.key(key)
            writer.integer(value)
        }

        public mutating func member<I: FixedWidthInteger>(_ key: some CodingKey, _ value: [I]) {
            self.key(key)
            writer.array(value, writer.integer)
        }

        public mutating func member(_ key: some CodingKey, _ value: [String]?) {
            guard let value else { return }
            self.key(key)
            writer.array(value, writer.string)
        }

        public mutating func member(_ key: some CodingKey, _ value: Bool?) {
            guard let value else { return }
            self.key(key)
            writer.boolean(value)
        }

        /// A member whose value's JSON text was written before (``Hello/Features``).
        mutating func member(_ key: some CodingKey, text: [UInt8]) {
            self.key(key)
            text.withUnsafeBufferPointer(writer.raw)
        }

        public mutating func member(_ key: some CodingKey, _ value: some Writable) {
            self.key(key)
            writer.object(value)
        }

        public mutating func member(_ key: some CodingKey, _ value: (some Writable)?) {
            if let value { member(key, value) }
        }

        public mutating func member<I: FixedWidthInteger>(_ key: some CodingKey, _ value: [I]?) {
            if let value { member(key, value) }
        }

        /// A JSON text passed on as it came (a forwarded call's params).
        public mutating func member(_ key: some CodingKey, _ value: RawJSON?) {
            guard let value else { return }
            self.key(key)
            writer.passThrough(value)
        }

        public mutating func member<Name: RawRepresentable<String>>(_ key: some CodingKey, _ value: Name?) {
            if let value { member(key, value.rawValue) }
        }

        /// A JSON value, as the writer writes one (``Writer/json(_:key:)``). One this pass
        /// cannot write (a number that is not finite, a key JSONEncoder orders or escapes its
        /// own way) leaves the whole text to JSONEncoder, which writes it or names the error.
        public mutating func member(_ key: some CodingKey, _ value: JSONValue) {
            self.key(key)
            do {
                try writer.json(value, key: key)
            } catch {
                _ = writer.fail()
            }
        }
    }
}

// MARK: The Encoder

extension CompactJSON {
    /// The encoder of one value: its containers write through the `Writer`.
    struct ValueEncoder: Encoder {
        let writer: Writer
        let id: Int
        var codingPath: [any CodingKey] { writer.codingPath(to: id) }
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func container<Key: CodingKey>(keyedBy _: Key.Type) -> KeyedEncodingContainer<Key> {
            KeyedEncodingContainer(KeyedContainer<Key>(writer: writer, id: writer.become(.object, id) ? id : Writer.noContainer))
        }

        func unkeyedContainer() -> any UnkeyedEncodingContainer {
            UnkeyedContainer(writer: writer, id: writer.become(.array, id) ? id : Writer.noContainer)
        }

        func singleValueContainer() -> any SingleValueEncodingContainer {
            SingleValueContainer(writer: writer, id: writer.become(.single(written: false), id) ? id : Writer.noContainer)
        }
    }

    struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let writer: Writer
        let id: Int
        var codingPath: [any CodingKey] { writer.codingPath(to: id) }

        mutating func encodeNil(forKey key: Key) throws { try writer.beginMember(of: id, key); writer.null() }
        mutating func encode(_ value: Bool, forKey key: Key) throws { try writer.beginMember(of: id, key); writer.boolean(value) }
        mutating func encode(_ value: String, forKey key: Key) throws { try writer.beginMember(of: id, key); writer.string(value) }
        mutating func encode(_ value: Double, forKey key: Key) throws { try writer.beginMember(of: id, key); try writer.number(value, key: key) }
        mutating func encode(_ value: Float, forKey key: Key) throws { try writer.beginMember(of: id, key); try writer.number(value, key: key) }
        mutating func encode(_ value: Int, forKey key: Key) throws { try writer.beginMember(of: id, key); writer.integer(value) }
        mutating func encode(_ value: Int8, forKey key: Key) throws { try writer.beginMember(of: id, key); writer.integer(value) }
        mutating func encode(_ value: Int16, forKey key: Key) throws { try writer.beginMember(of: id, key); writer.integer(value) }
        mutating func encode(_ value: Int32, forKey key: Key) throws { try writer.beginMember(of: id, key); writer.integer(value) }
        mutating func encode(_ value: Int64, forKey key: Key) throws { try writer.beginMember(of: id, key); writer.integer(value) }
        mutating func encode(_ value: UInt, forKey key: Key) throws { try writer.beginMember(of: id, key); writer.integer(value) }
        mutating func encode(_ value: UInt8, forKey key: Key) throws { try writer.beginMember(of: id, key); writer.integer(value) }
        mutating func encode(_ value: UInt16, forKey key: Key) throws { try writer.beginMember(of: id, key); writer.integer(value) }
        mutating func encode(_ value: UInt32, forKey key: Key) throws { try writer.beginMember(of: id, key); writer.integer(value) }
        mutating func encode(_ value: UInt64, forKey key: Key) throws { try writer.beginMember(of: id, key); writer.integer(value) }

        mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
            try writer.beginMember(of: id, key)
            try writer.write(value, key: key)
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy _: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
            let nested = (try? writer.beginMember(of: id, key)) != nil ? writer.openNested(.object, key: key) : Writer.noContainer
            return KeyedEncodingContainer(KeyedContainer<NestedKey>(writer: writer, id: nested))
        }

        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            let nested = (try? writer.beginMember(of: id, key)) != nil ? writer.openNested(.array, key: key) : Writer.noContainer
            return UnkeyedContainer(writer: writer, id: nested)
        }

        mutating func superEncoder() -> any Encoder { ValueEncoder(writer: writer, id: writer.giveUp()) }
        mutating func superEncoder(forKey _: Key) -> any Encoder { superEncoder() }
    }

    struct UnkeyedContainer: UnkeyedEncodingContainer {
        let writer: Writer
        let id: Int
        var codingPath: [any CodingKey] { writer.codingPath(to: id) }
        var count: Int { writer.count(of: id) }

        mutating func encodeNil() throws { _ = try writer.beginElement(of: id); writer.null() }
        mutating func encode(_ value: Bool) throws { _ = try writer.beginElement(of: id); writer.boolean(value) }
        mutating func encode(_ value: String) throws { _ = try writer.beginElement(of: id); writer.string(value) }
        mutating func encode(_ value: Double) throws { try writer.number(value, key: IndexKey(intValue: try writer.beginElement(of: id))) }
        mutating func encode(_ value: Float) throws { try writer.number(value, key: IndexKey(intValue: try writer.beginElement(of: id))) }
        mutating func encode(_ value: Int) throws { _ = try writer.beginElement(of: id); writer.integer(value) }
        mutating func encode(_ value: Int8) throws { _ = try writer.beginElement(of: id); writer.integer(value) }
        mutating func encode(_ value: Int16) throws { _ = try writer.beginElement(of: id); writer.integer(value) }
        mutating func encode(_ value: Int32) throws { _ = try writer.beginElement(of: id); writer.integer(value) }
        mutating func encode(_ value: Int64) throws { _ = try writer.beginElement(of: id); writer.integer(value) }
        mutating func encode(_ value: UInt) throws { _ = try writer.beginElement(of: id); writer.integer(value) }
        mutating func encode(_ value: UInt8) throws { _ = try writer.beginElement(of: id); writer.integer(value) }
        mutating func encode(_ value: UInt16) throws { _ = try writer.beginElement(of: id); writer.integer(value) }
        mutating func encode(_ value: UInt32) throws { _ = try writer.beginElement(of: id); writer.integer(value) }
        mutating func encode(_ value: UInt64) throws { _ = try writer.beginElement(of: id); writer.integer(value) }

        mutating func encode<T: Encodable>(_ value: T) throws {
            try writer.write(value, key: IndexKey(intValue: try writer.beginElement(of: id)))
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy _: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
            let nested = (try? writer.beginElement(of: id)).map { writer.openNested(.object, key: IndexKey(intValue: $0)) } ?? Writer.noContainer
            return KeyedEncodingContainer(KeyedContainer<NestedKey>(writer: writer, id: nested))
        }

        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            let nested = (try? writer.beginElement(of: id)).map { writer.openNested(.array, key: IndexKey(intValue: $0)) } ?? Writer.noContainer
            return UnkeyedContainer(writer: writer, id: nested)
        }

        mutating func superEncoder() -> any Encoder { ValueEncoder(writer: writer, id: writer.giveUp()) }
    }

    /// Writes its value's one value.
    struct SingleValueContainer: SingleValueEncodingContainer {
        let writer: Writer
        let id: Int
        var codingPath: [any CodingKey] { writer.codingPath(to: id) }

        mutating func encodeNil() throws { try writer.beginSingle(of: id); writer.null() }
        mutating func encode(_ value: Bool) throws { try writer.beginSingle(of: id); writer.boolean(value) }
        mutating func encode(_ value: String) throws { try writer.beginSingle(of: id); writer.string(value) }
        mutating func encode(_ value: Double) throws { try writer.beginSingle(of: id); try writer.number(value, key: nil) }
        mutating func encode(_ value: Float) throws { try writer.beginSingle(of: id); try writer.number(value, key: nil) }
        mutating func encode(_ value: Int) throws { try writer.beginSingle(of: id); writer.integer(value) }
        mutating func encode(_ value: Int8) throws { try writer.beginSingle(of: id); writer.integer(value) }
        mutating func encode(_ value: Int16) throws { try writer.beginSingle(of: id); writer.integer(value) }
        mutating func encode(_ value: Int32) throws { try writer.beginSingle(of: id); writer.integer(value) }
        mutating func encode(_ value: Int64) throws { try writer.beginSingle(of: id); writer.integer(value) }
        mutating func encode(_ value: UInt) throws { try writer.beginSingle(of: id); writer.integer(value) }
        mutating func encode(_ value: UInt8) throws { try writer.beginSingle(of: id); writer.integer(value) }
        mutating func encode(_ value: UInt16) throws { try writer.beginSingle(of: id); writer.integer(value) }
        mutating func encode(_ value: UInt32) throws { try writer.beginSingle(of: id); writer.integer(value) }
        mutating func encode(_ value: UInt64) throws { try writer.beginSingle(of: id); writer.integer(value) }

        /// A composite value that encodes nothing is still a value here: JSONEncoder writes `{}`
        /// for it, even at the top level.
        mutating func encode<T: Encodable>(_ value: T) throws {
            try writer.beginSingle(of: id)
            try writer.write(value, key: nil)
        }
    }

    /// An array position in a coding path.
    struct IndexKey: CodingKey {
        let intValue: Int?
        var stringValue: String { "Index \(intValue ?? 0)" }
        init(intValue: Int) { self.intValue = intValue }
        init?(stringValue _: String) { nil }
    }
}
