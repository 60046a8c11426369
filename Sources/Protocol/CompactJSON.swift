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
/// Debug builds encode every value both ways and stop at the first difference, so the whole
/// test suite checks that the two agree.
public enum CompactJSON {
    /// The JSON text of `value`, or nil when it holds a type `JSONEncoder` treats specially.
    public static func encode<T: Encodable>(_ value: T) throws -> [UInt8]? {
        let root: Node
        do {
            root = try node(for: value, path: .root)
        } catch is SpecialType {
            return nil
        }
        guard root.kind != .empty else {
            throw EncodingError.invalidValue(value, .init(codingPath: [], debugDescription: "Top-level \(T.self) did not encode any values."))
        }
        var output: [UInt8] = []
        output.reserveCapacity(256)
        root.write(to: &output)
        return output
    }

    /// A type `JSONEncoder` encodes by its own rules rather than the type's `encode(to:)`.
    struct SpecialType: Error {}

    /// The tree of one value, its scalars already written out.
    final class Node {
        enum Kind { case empty, scalar, array, object }
        var kind = Kind.empty
        var scalar: [UInt8] = []
        var elements: [Node] = []
        var members: [String: Node] = [:]

        init() {}

        init(scalar: [UInt8]) {
            kind = .scalar
            self.scalar = scalar
        }

        func becomeObject() {
            if kind != .object {
                kind = .object
                members = [:]
            }
        }

        func becomeArray() {
            if kind != .array {
                kind = .array
                elements = []
            }
        }

        /// Takes `other`'s content (a single-value container handed a composite value).
        func take(_ other: Node) {
            kind = other.kind
            scalar = other.scalar
            elements = other.elements
            members = other.members
        }

        func write(to output: inout [UInt8]) {
            switch kind {
            case .scalar:
                output.append(contentsOf: scalar)
            case .array:
                output.append(UInt8(ascii: "["))
                for (index, element) in elements.enumerated() {
                    if index > 0 { output.append(UInt8(ascii: ",")) }
                    element.write(to: &output)
                }
                output.append(UInt8(ascii: "]"))
            case .object, .empty:
                // A value that encoded nothing inside a container is `{}`, as with JSONEncoder.
                output.append(UInt8(ascii: "{"))
                let sorted = members.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
                for (index, member) in sorted.enumerated() {
                    if index > 0 { output.append(UInt8(ascii: ",")) }
                    appendString(member.key, to: &output)
                    output.append(UInt8(ascii: ":"))
                    member.value.write(to: &output)
                }
                output.append(UInt8(ascii: "}"))
            }
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

    static func node<T: Encodable>(for value: T, path: Path) throws -> Node {
        if T.self == String.self { return Node(scalar: string(unsafeBitCast(value, to: String.self))) }
        if T.self == Int.self { return Node(scalar: integer(unsafeBitCast(value, to: Int.self))) }
        if T.self == Int64.self { return Node(scalar: integer(unsafeBitCast(value, to: Int64.self))) }
        if T.self == Bool.self { return Node(scalar: boolean(unsafeBitCast(value, to: Bool.self))) }
        if T.self == Double.self { return Node(scalar: try number(unsafeBitCast(value, to: Double.self), path: path)) }
        if T.self == Date.self || T.self == Data.self || T.self == URL.self || T.self == Decimal.self { throw SpecialType() }
        let node = Node()
        try value.encode(to: TreeEncoder(node: node, path: path))
        return node
    }

    static func string(_ text: String) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(text.utf8.count + 2)
        appendString(text, to: &output)
        return output
    }

    /// A JSON string as JSONEncoder escapes it: quote, backslash and control characters only.
    static func appendString(_ text: String, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x08: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
            case 0x0C: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
            case 0x0A: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0x00..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default: output.append(byte)
            }
        }
        output.append(UInt8(ascii: "\""))
    }

    static func boolean(_ value: Bool) -> [UInt8] { value ? Array("true".utf8) : Array("false".utf8) }

    static func integer(_ value: some FixedWidthInteger) -> [UInt8] { Array(value.description.utf8) }

    /// As JSONEncoder writes a finite number: its shortest description, without a trailing ".0".
    static func number<F: BinaryFloatingPoint & CustomStringConvertible>(_ value: F, path: Path) throws -> [UInt8] {
        guard value.isFinite else {
            throw EncodingError.invalidValue(value, .init(codingPath: path.keys, debugDescription: "Unable to encode \(F.self).\(value) directly in JSON."))
        }
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        return Array(text.utf8)
    }
}

// MARK: The Encoder

extension CompactJSON {
    final class TreeEncoder: Encoder {
        let node: Node
        let path: Path
        var codingPath: [any CodingKey] { path.keys }
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        init(node: Node, path: Path) {
            self.node = node
            self.path = path
        }

        func container<Key: CodingKey>(keyedBy _: Key.Type) -> KeyedEncodingContainer<Key> {
            node.becomeObject()
            return KeyedEncodingContainer(KeyedContainer<Key>(node: node, path: path))
        }

        func unkeyedContainer() -> any UnkeyedEncodingContainer {
            node.becomeArray()
            return UnkeyedContainer(node: node, path: path)
        }

        func singleValueContainer() -> any SingleValueEncodingContainer {
            SingleValueContainer(node: node, path: path)
        }
    }

    struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let node: Node
        let path: Path
        var codingPath: [any CodingKey] { path.keys }

        private func set(_ key: Key, _ scalar: [UInt8]) { node.members[key.stringValue] = Node(scalar: scalar) }

        mutating func encodeNil(forKey key: Key) { set(key, Array("null".utf8)) }
        mutating func encode(_ value: Bool, forKey key: Key) { set(key, CompactJSON.boolean(value)) }
        mutating func encode(_ value: String, forKey key: Key) { set(key, CompactJSON.string(value)) }
        mutating func encode(_ value: Double, forKey key: Key) throws { set(key, try CompactJSON.number(value, path: path.appending(key))) }
        mutating func encode(_ value: Float, forKey key: Key) throws { set(key, try CompactJSON.number(value, path: path.appending(key))) }
        mutating func encode(_ value: Int, forKey key: Key) { set(key, CompactJSON.integer(value)) }
        mutating func encode(_ value: Int8, forKey key: Key) { set(key, CompactJSON.integer(value)) }
        mutating func encode(_ value: Int16, forKey key: Key) { set(key, CompactJSON.integer(value)) }
        mutating func encode(_ value: Int32, forKey key: Key) { set(key, CompactJSON.integer(value)) }
        mutating func encode(_ value: Int64, forKey key: Key) { set(key, CompactJSON.integer(value)) }
        mutating func encode(_ value: UInt, forKey key: Key) { set(key, CompactJSON.integer(value)) }
        mutating func encode(_ value: UInt8, forKey key: Key) { set(key, CompactJSON.integer(value)) }
        mutating func encode(_ value: UInt16, forKey key: Key) { set(key, CompactJSON.integer(value)) }
        mutating func encode(_ value: UInt32, forKey key: Key) { set(key, CompactJSON.integer(value)) }
        mutating func encode(_ value: UInt64, forKey key: Key) { set(key, CompactJSON.integer(value)) }

        mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
            node.members[key.stringValue] = try CompactJSON.node(for: value, path: path.appending(key))
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy _: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
            let child = Node()
            child.becomeObject()
            node.members[key.stringValue] = child
            return KeyedEncodingContainer(KeyedContainer<NestedKey>(node: child, path: path.appending(key)))
        }

        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            let child = Node()
            child.becomeArray()
            node.members[key.stringValue] = child
            return UnkeyedContainer(node: child, path: path.appending(key))
        }

        mutating func superEncoder() -> any Encoder { superEncoder(forKey: Key(stringValue: "super")!) }

        mutating func superEncoder(forKey key: Key) -> any Encoder {
            let child = Node()
            node.members[key.stringValue] = child
            return TreeEncoder(node: child, path: path.appending(key))
        }
    }

    struct UnkeyedContainer: UnkeyedEncodingContainer {
        let node: Node
        let path: Path
        var codingPath: [any CodingKey] { path.keys }
        var count: Int { node.elements.count }

        private var nextPath: Path { path.appending(IndexKey(intValue: count)) }
        private func add(_ scalar: [UInt8]) { node.elements.append(Node(scalar: scalar)) }

        mutating func encodeNil() { add(Array("null".utf8)) }
        mutating func encode(_ value: Bool) { add(CompactJSON.boolean(value)) }
        mutating func encode(_ value: String) { add(CompactJSON.string(value)) }
        mutating func encode(_ value: Double) throws { add(try CompactJSON.number(value, path: nextPath)) }
        mutating func encode(_ value: Float) throws { add(try CompactJSON.number(value, path: nextPath)) }
        mutating func encode(_ value: Int) { add(CompactJSON.integer(value)) }
        mutating func encode(_ value: Int8) { add(CompactJSON.integer(value)) }
        mutating func encode(_ value: Int16) { add(CompactJSON.integer(value)) }
        mutating func encode(_ value: Int32) { add(CompactJSON.integer(value)) }
        mutating func encode(_ value: Int64) { add(CompactJSON.integer(value)) }
        mutating func encode(_ value: UInt) { add(CompactJSON.integer(value)) }
        mutating func encode(_ value: UInt8) { add(CompactJSON.integer(value)) }
        mutating func encode(_ value: UInt16) { add(CompactJSON.integer(value)) }
        mutating func encode(_ value: UInt32) { add(CompactJSON.integer(value)) }
        mutating func encode(_ value: UInt64) { add(CompactJSON.integer(value)) }

        mutating func encode<T: Encodable>(_ value: T) throws {
            node.elements.append(try CompactJSON.node(for: value, path: nextPath))
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy _: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
            let child = Node()
            child.becomeObject()
            let childPath = nextPath
            node.elements.append(child)
            return KeyedEncodingContainer(KeyedContainer<NestedKey>(node: child, path: childPath))
        }

        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            let child = Node()
            child.becomeArray()
            let childPath = nextPath
            node.elements.append(child)
            return UnkeyedContainer(node: child, path: childPath)
        }

        mutating func superEncoder() -> any Encoder {
            let child = Node()
            let childPath = nextPath
            node.elements.append(child)
            return TreeEncoder(node: child, path: childPath)
        }
    }

    struct SingleValueContainer: SingleValueEncodingContainer {
        let node: Node
        let path: Path
        var codingPath: [any CodingKey] { path.keys }

        private func set(_ scalar: [UInt8]) {
            node.kind = .scalar
            node.scalar = scalar
        }

        mutating func encodeNil() { set(Array("null".utf8)) }
        mutating func encode(_ value: Bool) { set(CompactJSON.boolean(value)) }
        mutating func encode(_ value: String) { set(CompactJSON.string(value)) }
        mutating func encode(_ value: Double) throws { set(try CompactJSON.number(value, path: path)) }
        mutating func encode(_ value: Float) throws { set(try CompactJSON.number(value, path: path)) }
        mutating func encode(_ value: Int) { set(CompactJSON.integer(value)) }
        mutating func encode(_ value: Int8) { set(CompactJSON.integer(value)) }
        mutating func encode(_ value: Int16) { set(CompactJSON.integer(value)) }
        mutating func encode(_ value: Int32) { set(CompactJSON.integer(value)) }
        mutating func encode(_ value: Int64) { set(CompactJSON.integer(value)) }
        mutating func encode(_ value: UInt) { set(CompactJSON.integer(value)) }
        mutating func encode(_ value: UInt8) { set(CompactJSON.integer(value)) }
        mutating func encode(_ value: UInt16) { set(CompactJSON.integer(value)) }
        mutating func encode(_ value: UInt32) { set(CompactJSON.integer(value)) }
        mutating func encode(_ value: UInt64) { set(CompactJSON.integer(value)) }

        mutating func encode<T: Encodable>(_ value: T) throws {
            node.take(try CompactJSON.node(for: value, path: path))
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
