import FoundationEssentials

/// Encodes `Encodable` values as compact JSON, keys sorted by their UTF-8 bytes and slashes left
/// unescaped: byte for byte what `JSONEncoder` with `[.sortedKeys, .withoutEscapingSlashes]`
/// writes, at a fraction of its cost. The wire's hot path (every response, notification,
/// token's claims and audit detail) goes through it; `JSONEncoder` stays the reference.
///
/// Where the cost goes in `JSONEncoder`: every value it is handed, down to each string of an
/// array, is checked with dynamic casts against the types it encodes specially (Date, Data,
/// URL, Decimal, string-keyed dictionaries). Here a value's static type is compared with those
/// types instead (a pointer comparison), and a value of one of them is not encoded at all:
/// `encode` answers nil and the caller uses `JSONEncoder` (our wire types hold none of them).
///
/// How it is built, for speed: a value becomes a small tree (objects must be sorted before they
/// are written, and a container may still be filled after it was created). Scalars are written
/// out at once into one byte buffer per call and the tree refers to them by range, so a string
/// or number costs no allocation of its own, nor does an array of them; any other array or
/// object is one box with one array. Objects keep their members in the order they were set
/// and are sorted when written.
///
/// Debug builds encode every value both ways and stop at the first difference, so the whole
/// test suite checks that the two agree.
public enum CompactJSON {
    /// The JSON text of `value`, or nil when it holds a type `JSONEncoder` treats specially.
    public static func encode<T: Encodable>(_ value: T) throws -> [UInt8]? {
        let run = Run()
        let root: Node
        do {
            root = try run.node(for: value, path: .root)
        } catch is SpecialType {
            return nil
        }
        if case .empty = root {
            throw EncodingError.invalidValue(value, .init(codingPath: [], debugDescription: "Top-level \(T.self) did not encode any values."))
        }
        return run.text(of: root)
    }

    /// A type `JSONEncoder` encodes by its own rules rather than the type's `encode(to:)`.
    struct SpecialType: Error {}

    /// A value in the tree.
    enum Node {
        /// A value that encoded nothing: `{}` inside a container, as with JSONEncoder (at the top
        /// level, an error).
        case empty
        /// A string, number, boolean or null, already written: these bytes of `Run.scalars`.
        case scalar(Range<Int>)
        /// An array of strings or integers, written at once (`Run.array`): these bytes of
        /// `Run.scalars`, brackets included.
        case scalarArray(Range<Int>)
        case array(ArrayBox)
        case object(ObjectBox)
        /// What a super encoder was given, read when written: it is placed in its container
        /// when it is created, and filled afterwards.
        case pending(TreeEncoder)
    }

    /// An array's elements. A box, so that a container handed out earlier can still add to it.
    final class ArrayBox {
        var elements: [Node]

        init(elements: [Node] = []) {
            self.elements = elements
        }
    }

    /// An object's members in the order they were set; a key may appear more than once until
    /// `sortForWriting`.
    final class ObjectBox {
        struct Member {
            var key: String
            var value: Node
        }

        var members: [Member] = []

        init() {
            // Most objects are small structs: one allocation rather than three or four.
            members.reserveCapacity(8)
        }

        /// The object or array last set for `key`, for a nested container asked for again:
        /// JSONEncoder hands back the same one, so that both fill one value.
        func lastValue(for key: String) -> Node? {
            members.last { $0.key == key }?.value
        }

        /// Puts `members` as JSONEncoder writes them: sorted by the UTF-8 bytes of their keys,
        /// one per key, with the value set last (JSONEncoder's members are a `[String: …]`, so a
        /// key set again replaces the value and keeps the key as first spelled). In place, and
        /// on an `inout` array rather than the box's property: one exclusivity check, not one
        /// per element moved.
        static func sortForWriting(_ members: inout [Member]) {
            guard members.count > 1 else { return }
            guard members.allSatisfy({ CompactJSON.isASCII($0.key) }) else { return sortForWritingNonASCII(&members) }
            // Stable, so that of equal keys the one set last stays last. On ASCII, String's `<`
            // is byte order (and compares the bytes at once).
            members.sort { $0.key < $1.key }
            // Equal keys are now side by side: one member each, with the last value.
            var kept = 1
            for index in 1..<members.count {
                if members[index].key == members[kept - 1].key {
                    members[kept - 1].value = members[index].value
                } else {
                    members[kept] = members[index]
                    kept += 1
                }
            }
            members.removeLast(members.count - kept)
        }

        /// Keys that are not all ASCII can be equal as Strings and differ in bytes ("é"
        /// precomposed or not), which JSONEncoder's dictionary makes one member; its way, then,
        /// for these rare objects. (String's `<` would order them as normalized scalars.)
        private static func sortForWritingNonASCII(_ members: inout [Member]) {
            var slots: [String: Int] = [:]
            var unique: [Member] = []
            for member in members {
                if let slot = slots[member.key] {
                    unique[slot].value = member.value
                } else {
                    slots[member.key] = unique.count
                    unique.append(member)
                }
            }
            members = unique
            members.sort { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
        }
    }

    /// One call of `encode`: the bytes of every scalar, in the order they were encoded.
    final class Run {
        var scalars: [UInt8] = []

        init() {
            // A small response's scalars fit; a `hello` result's (576 bytes) take one reallocation.
            scalars.reserveCapacity(512)
        }

        // MARK: Scalars

        /// A scalar written by `write` at the end of `scalars`. (One access to `scalars`, which
        /// being a class's property is checked for exclusivity at each.)
        private func scalar(_ write: (inout [UInt8]) -> Void) -> Node {
            .scalar(CompactJSON.appending(to: &scalars, write))
        }

        func string(_ text: String) -> Node { scalar { CompactJSON.appendString(text, to: &$0) } }
        func integer(_ value: some FixedWidthInteger) -> Node { scalar { CompactJSON.appendInteger(value, to: &$0) } }
        func boolean(_ value: Bool) -> Node { scalar { $0.append(contentsOf: value ? "true".utf8 : "false".utf8) } }
        func null() -> Node { scalar { $0.append(contentsOf: "null".utf8) } }

        /// As JSONEncoder writes a finite number: its shortest description, without a trailing
        /// ".0". `path` is only built for the error.
        func number<F: BinaryFloatingPoint & CustomStringConvertible>(_ value: F, path: @autoclosure () -> Path) throws -> Node {
            guard value.isFinite else {
                throw EncodingError.invalidValue(value, .init(codingPath: path().keys, debugDescription: "Unable to encode \(F.self).\(value) directly in JSON."))
            }
            var text = value.description
            if text.hasSuffix(".0") { text.removeLast(2) }
            return scalar { $0.append(contentsOf: text.utf8) }
        }

        /// An array of strings or integers, written at once: one node, no encoder call per
        /// element (JSONEncoder too writes such arrays directly).
        func array<Element>(_ elements: [Element], _ writeElement: (Element, inout [UInt8]) -> Void) -> Node {
            .scalarArray(CompactJSON.appending(to: &scalars) { output in
                output.append(UInt8(ascii: "["))
                for (index, element) in elements.enumerated() {
                    if index > 0 { output.append(UInt8(ascii: ",")) }
                    writeElement(element, &output)
                }
                output.append(UInt8(ascii: "]"))
            })
        }

        /// The box of the array `node` is, for a container asked for again where the array was
        /// set, to add to it as JSONEncoder does: the same box, or a new one holding the elements
        /// of an array written at once (found at its commas outside strings; rare, so not kept
        /// all along). Nil when `node` is no array.
        func arrayToAddTo(_ node: Node?) -> ArrayBox? {
            switch node {
            case .array(let box):
                return box
            case .scalarArray(let range):
                let bytes = scalars
                let end = range.upperBound - 1  // the "]"
                var elements: [Node] = []
                var start = range.lowerBound + 1
                var inString = false, escaped = false
                for index in start..<end {
                    let byte = bytes[index]
                    if escaped {
                        escaped = false
                    } else if byte == UInt8(ascii: "\\") {
                        escaped = true  // only ever in a string
                    } else if byte == UInt8(ascii: "\"") {
                        inString.toggle()
                    } else if byte == UInt8(ascii: ","), !inString {
                        elements.append(.scalar(start..<index))
                        start = index + 1
                    }
                }
                if start < end { elements.append(.scalar(start..<end)) }
                return ArrayBox(elements: elements)
            default:
                return nil
            }
        }

        /// The node of any value: scalars, and arrays of them, of the types JSONEncoder writes
        /// directly without calling their `encode(to:)`; the rest through it. `path` is built
        /// only for a value that gets an encoder of its own (or for an error).
        func node<T: Encodable>(for value: T, path: @autoclosure () -> Path) throws -> Node {
            // Each cast follows the type test before it: it changes no bits.
            if T.self == String.self { return string(unsafeBitCast(value, to: String.self)) }
            if T.self == Int.self { return integer(unsafeBitCast(value, to: Int.self)) }
            if T.self == Int64.self { return integer(unsafeBitCast(value, to: Int64.self)) }
            if T.self == Bool.self { return boolean(unsafeBitCast(value, to: Bool.self)) }
            if T.self == Double.self { return try number(unsafeBitCast(value, to: Double.self), path: path()) }
            if T.self == [String].self { return array(unsafeBitCast(value, to: [String].self), CompactJSON.appendString) }
            if T.self == [Int].self { return array(unsafeBitCast(value, to: [Int].self), CompactJSON.appendInteger) }
            if T.self == [Int64].self { return array(unsafeBitCast(value, to: [Int64].self), CompactJSON.appendInteger) }
            if T.self == [UInt32].self { return array(unsafeBitCast(value, to: [UInt32].self), CompactJSON.appendInteger) }
            if T.self == Date.self || T.self == Data.self || T.self == URL.self || T.self == Decimal.self { throw SpecialType() }
            let encoder = TreeEncoder(run: self, path: path())
            try value.encode(to: encoder)
            return encoder.node
        }

        // MARK: Writing

        /// The JSON text of the tree `root`.
        func text(of root: Node) -> [UInt8] {
            var output: [UInt8] = []
            // Keys and punctuation add about a quarter to the scalars in a typical response (the
            // `hello` result: 576 bytes of scalars, 724 in all); more costs a reallocation.
            output.reserveCapacity(scalars.count + scalars.count / 2 + 64)
            Run.write(root, scalars: scalars, to: &output)
            return output
        }

        /// Static, with the scalars passed in: read through `self`, each would be checked for
        /// exclusivity.
        private static func write(_ node: Node, scalars: [UInt8], to output: inout [UInt8]) {
            switch node {
            case .scalar(let range), .scalarArray(let range):
                output.append(contentsOf: scalars[range])
            case .array(let box):
                output.append(UInt8(ascii: "["))
                for (index, element) in box.elements.enumerated() {
                    if index > 0 { output.append(UInt8(ascii: ",")) }
                    write(element, scalars: scalars, to: &output)
                }
                output.append(UInt8(ascii: "]"))
            case .object(let box):
                ObjectBox.sortForWriting(&box.members)
                output.append(UInt8(ascii: "{"))
                for (index, member) in box.members.enumerated() {
                    if index > 0 { output.append(UInt8(ascii: ",")) }
                    CompactJSON.appendString(member.key, to: &output)
                    output.append(UInt8(ascii: ":"))
                    write(member.value, scalars: scalars, to: &output)
                }
                output.append(UInt8(ascii: "}"))
            case .pending(let encoder):
                write(encoder.node, scalars: scalars, to: &output)
            case .empty:
                output.append(contentsOf: "{}".utf8)
            }
        }
    }

    /// Over the contiguous bytes when there are (always, for a native string): faster than
    /// through the UTF8View's iterator.
    static func isASCII(_ text: String) -> Bool {
        text.utf8.withContiguousStorageIfAvailable { $0.allSatisfy { $0 < 0x80 } } ?? text.utf8.allSatisfy { $0 < 0x80 }
    }

    /// Where `write` appended to `bytes`.
    static func appending(to bytes: inout [UInt8], _ write: (inout [UInt8]) -> Void) -> Range<Int> {
        let start = bytes.count
        write(&bytes)
        return start..<bytes.count
    }

    static func appendInteger(_ value: some FixedWidthInteger, to output: inout [UInt8]) {
        output.append(contentsOf: value.description.utf8)
    }

    /// A JSON string as JSONEncoder escapes it: quote, backslash and control characters only.
    /// Runs of bytes that need no escape (nearly always the whole string) are copied at once.
    static func appendString(_ text: String, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        var text = text  // withUTF8 is mutating (it makes a string contiguous if it is not)
        text.withUTF8 { bytes in
            var clean = 0, index = 0
            while index < bytes.count {
                // Eight bytes at a time while none of them needs an escape (a token, a key id).
                if index + 8 <= bytes.count, !needsEscape(UnsafeRawPointer(bytes.baseAddress! + index).loadUnaligned(as: UInt64.self)) {
                    index += 8
                    continue
                }
                let byte = bytes[index]
                if byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                    output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[clean..<index]))
                    appendEscape(byte, to: &output)
                    clean = index + 1
                }
                index += 1
            }
            output.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[clean...]))
        }
        output.append(UInt8(ascii: "\""))
    }

    /// Whether any of the eight bytes in `word` is a control character, a quote or a backslash
    /// (the classic "has a zero byte" test, `(x - 0x01…) & ~x & 0x80…`, on the word as it is for
    /// "below 0x20", and XORed with each of the two characters). Never false when one is there.
    @inline(__always)
    private static func needsEscape(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        let quote = word ^ (ones &* UInt64(UInt8(ascii: "\""))), backslash = word ^ (ones &* UInt64(UInt8(ascii: "\\")))
        let below0x20 = (word &- ones &* 0x20) & ~word
        let isQuote = (quote &- ones) & ~quote
        let isBackslash = (backslash &- ones) & ~backslash
        return (below0x20 | isQuote | isBackslash) & highs != 0
    }

    private static func appendEscape(_ byte: UInt8, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\\"))
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"): output.append(byte)
        case 0x08: output.append(UInt8(ascii: "b"))
        case 0x0C: output.append(UInt8(ascii: "f"))
        case 0x0A: output.append(UInt8(ascii: "n"))
        case 0x0D: output.append(UInt8(ascii: "r"))
        case 0x09: output.append(UInt8(ascii: "t"))
        default:
            // \u00XX, lowercase hex.
            let hex = { (digit: UInt8) in digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10 }
            output.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex(byte >> 4), hex(byte & 0xF)])
        }
    }

    /// Where a value sits, for error messages and for `encode(to:)` methods that read
    /// `codingPath` (built only when asked for).
    indirect enum Path {
        case root
        case child(Path, any CodingKey)

        var keys: [any CodingKey] {
            var keys: [any CodingKey] = []
            var current = self
            while case .child(let parent, let key) = current {
                keys.append(key)
                current = parent
            }
            return keys.reversed()
        }

        func appending(_ key: any CodingKey) -> Path { .child(self, key) }
    }
}

// MARK: The Encoder

extension CompactJSON {
    /// The encoder of one composite value (or of a super encoder's): `node` is what it was given.
    final class TreeEncoder: Encoder {
        let run: Run
        let path: Path
        var node = Node.empty
        var codingPath: [any CodingKey] { path.keys }
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        init(run: Run, path: Path) {
            self.run = run
            self.path = path
        }

        /// The same object for each call, as with JSONEncoder (also one set through the
        /// single-value container).
        func container<Key: CodingKey>(keyedBy _: Key.Type) -> KeyedEncodingContainer<Key> {
            let box: ObjectBox
            if case .object(let existing) = node {
                box = existing
            } else {
                box = ObjectBox()
                node = .object(box)
            }
            return KeyedEncodingContainer(KeyedContainer<Key>(run: run, box: box, path: path))
        }

        func unkeyedContainer() -> any UnkeyedEncodingContainer {
            let box = run.arrayToAddTo(node) ?? ArrayBox()
            node = .array(box)
            return UnkeyedContainer(run: run, box: box, path: path)
        }

        func singleValueContainer() -> any SingleValueEncodingContainer {
            SingleValueContainer(encoder: self)
        }
    }

    struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let run: Run
        let box: ObjectBox
        let path: Path
        var codingPath: [any CodingKey] { path.keys }

        /// Appends; a key set again is resolved when written (`sortForWriting`).
        private func set(_ key: Key, _ node: Node) { box.members.append(.init(key: key.stringValue, value: node)) }

        mutating func encodeNil(forKey key: Key) { set(key, run.null()) }
        mutating func encode(_ value: Bool, forKey key: Key) { set(key, run.boolean(value)) }
        mutating func encode(_ value: String, forKey key: Key) { set(key, run.string(value)) }
        mutating func encode(_ value: Double, forKey key: Key) throws { set(key, try run.number(value, path: path.appending(key))) }
        mutating func encode(_ value: Float, forKey key: Key) throws { set(key, try run.number(value, path: path.appending(key))) }
        mutating func encode(_ value: Int, forKey key: Key) { set(key, run.integer(value)) }
        mutating func encode(_ value: Int8, forKey key: Key) { set(key, run.integer(value)) }
        mutating func encode(_ value: Int16, forKey key: Key) { set(key, run.integer(value)) }
        mutating func encode(_ value: Int32, forKey key: Key) { set(key, run.integer(value)) }
        mutating func encode(_ value: Int64, forKey key: Key) { set(key, run.integer(value)) }
        mutating func encode(_ value: UInt, forKey key: Key) { set(key, run.integer(value)) }
        mutating func encode(_ value: UInt8, forKey key: Key) { set(key, run.integer(value)) }
        mutating func encode(_ value: UInt16, forKey key: Key) { set(key, run.integer(value)) }
        mutating func encode(_ value: UInt32, forKey key: Key) { set(key, run.integer(value)) }
        mutating func encode(_ value: UInt64, forKey key: Key) { set(key, run.integer(value)) }

        mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
            set(key, try run.node(for: value, path: path.appending(key)))
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy _: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
            let child: ObjectBox
            if case .object(let existing) = box.lastValue(for: key.stringValue) {
                child = existing
            } else {
                child = ObjectBox()
                set(key, .object(child))
            }
            return KeyedEncodingContainer(KeyedContainer<NestedKey>(run: run, box: child, path: path.appending(key)))
        }

        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            let last = box.lastValue(for: key.stringValue)
            let child: ArrayBox
            if case .array(let existing) = last {
                child = existing
            } else {
                child = run.arrayToAddTo(last) ?? ArrayBox()
                set(key, .array(child))
            }
            return UnkeyedContainer(run: run, box: child, path: path.appending(key))
        }

        /// Under the key "super", which `Key` need not have (JSONEncoder's own key type has it).
        mutating func superEncoder() -> any Encoder { superEncoder(named: "super", key: SuperKey()) }

        mutating func superEncoder(forKey key: Key) -> any Encoder { superEncoder(named: key.stringValue, key: key) }

        private func superEncoder(named name: String, key: any CodingKey) -> any Encoder {
            let encoder = TreeEncoder(run: run, path: path.appending(key))
            box.members.append(.init(key: name, value: .pending(encoder)))
            return encoder
        }
    }

    struct UnkeyedContainer: UnkeyedEncodingContainer {
        let run: Run
        let box: ArrayBox
        let path: Path
        var codingPath: [any CodingKey] { path.keys }
        var count: Int { box.elements.count }

        private var nextPath: Path { path.appending(IndexKey(intValue: count)) }
        private func add(_ node: Node) { box.elements.append(node) }

        mutating func encodeNil() { add(run.null()) }
        mutating func encode(_ value: Bool) { add(run.boolean(value)) }
        mutating func encode(_ value: String) { add(run.string(value)) }
        mutating func encode(_ value: Double) throws { add(try run.number(value, path: nextPath)) }
        mutating func encode(_ value: Float) throws { add(try run.number(value, path: nextPath)) }
        mutating func encode(_ value: Int) { add(run.integer(value)) }
        mutating func encode(_ value: Int8) { add(run.integer(value)) }
        mutating func encode(_ value: Int16) { add(run.integer(value)) }
        mutating func encode(_ value: Int32) { add(run.integer(value)) }
        mutating func encode(_ value: Int64) { add(run.integer(value)) }
        mutating func encode(_ value: UInt) { add(run.integer(value)) }
        mutating func encode(_ value: UInt8) { add(run.integer(value)) }
        mutating func encode(_ value: UInt16) { add(run.integer(value)) }
        mutating func encode(_ value: UInt32) { add(run.integer(value)) }
        mutating func encode(_ value: UInt64) { add(run.integer(value)) }

        mutating func encode<T: Encodable>(_ value: T) throws {
            add(try run.node(for: value, path: nextPath))
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy _: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
            let child = ObjectBox()
            let childPath = nextPath
            add(.object(child))
            return KeyedEncodingContainer(KeyedContainer<NestedKey>(run: run, box: child, path: childPath))
        }

        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            let child = ArrayBox()
            let childPath = nextPath
            add(.array(child))
            return UnkeyedContainer(run: run, box: child, path: childPath)
        }

        mutating func superEncoder() -> any Encoder {
            let encoder = TreeEncoder(run: run, path: nextPath)
            add(.pending(encoder))
            return encoder
        }
    }

    /// Sets its encoder's node.
    struct SingleValueContainer: SingleValueEncodingContainer {
        let encoder: TreeEncoder
        var codingPath: [any CodingKey] { encoder.codingPath }
        private var run: Run { encoder.run }
        private func set(_ node: Node) { encoder.node = node }

        mutating func encodeNil() { set(run.null()) }
        mutating func encode(_ value: Bool) { set(run.boolean(value)) }
        mutating func encode(_ value: String) { set(run.string(value)) }
        mutating func encode(_ value: Double) throws { set(try run.number(value, path: encoder.path)) }
        mutating func encode(_ value: Float) throws { set(try run.number(value, path: encoder.path)) }
        mutating func encode(_ value: Int) { set(run.integer(value)) }
        mutating func encode(_ value: Int8) { set(run.integer(value)) }
        mutating func encode(_ value: Int16) { set(run.integer(value)) }
        mutating func encode(_ value: Int32) { set(run.integer(value)) }
        mutating func encode(_ value: Int64) { set(run.integer(value)) }
        mutating func encode(_ value: UInt) { set(run.integer(value)) }
        mutating func encode(_ value: UInt8) { set(run.integer(value)) }
        mutating func encode(_ value: UInt16) { set(run.integer(value)) }
        mutating func encode(_ value: UInt32) { set(run.integer(value)) }
        mutating func encode(_ value: UInt64) { set(run.integer(value)) }

        /// A composite value that encoded nothing is still a value here: JSONEncoder writes `{}`
        /// for it, even at the top level.
        mutating func encode<T: Encodable>(_ value: T) throws {
            let node = try run.node(for: value, path: encoder.path)
            if case .empty = node {
                set(.object(ObjectBox()))
            } else {
                set(node)
            }
        }
    }

    /// An array position in a coding path.
    struct IndexKey: CodingKey {
        let intValue: Int?
        var stringValue: String { "Index \(intValue ?? 0)" }
        init(intValue: Int) { self.intValue = intValue }
        init?(stringValue _: String) { nil }
    }

    /// The key of a keyed container's `superEncoder()` in a coding path.
    struct SuperKey: CodingKey {
        var stringValue: String { "super" }
        var intValue: Int? { nil }
        init() {}
        init?(stringValue: String) {
            guard stringValue == "super" else { return nil }
        }
        init?(intValue _: Int) { nil }
    }
}
