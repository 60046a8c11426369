/// Decodes a `Decodable` type from a `JSONValue` already read (``StrictJSON``), with the errors
/// `JSONDecoder` throws: `keyNotFound`, `typeMismatch` and `valueNotFound` at their coding paths.
/// A number its field cannot hold is `NumberOutOfRange`, which names the field (`JSONDecoder`'s
/// parser throws an error of its own, with no path). A `JSONValue` inside is taken as it is:
/// through `JSONDecoder`, each kind tried before the right one was a thrown error with its
/// message, and those were most of the time a device spent reading a pushed sync event.
public struct JSONValueDecoder {
    public static func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws -> T {
        try T(from: Reading(value: value, codingPath: []))
    }

    /// A number its field's type cannot hold (7.5 or 2³² for a `UInt32`), and where, as a
    /// parameter is named in errors (`list[1].count`).
    public struct NumberOutOfRange: Error, Equatable {
        public let field: String
    }

    /// The decoder of one value, at `codingPath`.
    struct Reading: Decoder {
        let value: JSONValue
        let codingPath: [any CodingKey]
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func container<Key: CodingKey>(keyedBy _: Key.Type) throws -> KeyedDecodingContainer<Key> {
            guard case .object(let members) = value else { throw mismatch(KeyedDecodingContainer<Key>.self, value, codingPath) }
            return KeyedDecodingContainer(Keyed<Key>(members: members, codingPath: codingPath))
        }

        func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
            guard case .array(let elements) = value else { throw mismatch((any UnkeyedDecodingContainer).self, value, codingPath) }
            return Unkeyed(elements: elements, codingPath: codingPath)
        }

        func singleValueContainer() throws -> any SingleValueDecodingContainer { Single(value: value, codingPath: codingPath) }
    }

    struct Single: SingleValueDecodingContainer {
        let value: JSONValue
        let codingPath: [any CodingKey]

        func decodeNil() -> Bool { value == .null }
        func decode(_: Bool.Type) throws -> Bool { try JSONValueDecoder.bool(value, codingPath) }
        func decode(_: String.Type) throws -> String { try JSONValueDecoder.string(value, codingPath) }
        func decode(_: Double.Type) throws -> Double { try JSONValueDecoder.double(value, codingPath) }
        func decode(_: Float.Type) throws -> Float { Float(try JSONValueDecoder.double(value, codingPath)) }
        func decode(_ type: Int.Type) throws -> Int { try JSONValueDecoder.integer(type, value, codingPath) }
        func decode(_ type: Int8.Type) throws -> Int8 { try JSONValueDecoder.integer(type, value, codingPath) }
        func decode(_ type: Int16.Type) throws -> Int16 { try JSONValueDecoder.integer(type, value, codingPath) }
        func decode(_ type: Int32.Type) throws -> Int32 { try JSONValueDecoder.integer(type, value, codingPath) }
        func decode(_ type: Int64.Type) throws -> Int64 { try JSONValueDecoder.integer(type, value, codingPath) }
        func decode(_ type: UInt.Type) throws -> UInt { try JSONValueDecoder.integer(type, value, codingPath) }
        func decode(_ type: UInt8.Type) throws -> UInt8 { try JSONValueDecoder.integer(type, value, codingPath) }
        func decode(_ type: UInt16.Type) throws -> UInt16 { try JSONValueDecoder.integer(type, value, codingPath) }
        func decode(_ type: UInt32.Type) throws -> UInt32 { try JSONValueDecoder.integer(type, value, codingPath) }
        func decode(_ type: UInt64.Type) throws -> UInt64 { try JSONValueDecoder.integer(type, value, codingPath) }
        func decode<T: Decodable>(_: T.Type) throws -> T { try T(from: Reading(value: value, codingPath: codingPath)) }
    }

    struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let members: [String: JSONValue]
        let codingPath: [any CodingKey]

        var allKeys: [Key] { members.keys.compactMap { Key(stringValue: $0) } }
        func contains(_ key: Key) -> Bool { members[key.stringValue] != nil }

        /// The member's value (null is the value's own decoding's to refuse or take).
        private func present(_ key: Key) throws -> JSONValue {
            guard let value = members[key.stringValue] else {
                throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "No value associated with key \(key.stringValue)."))
            }
            return value
        }

        func decodeNil(forKey key: Key) throws -> Bool { try present(key) == .null }

        func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try JSONValueDecoder.bool(try present(key), codingPath + [key]) }
        func decode(_ type: String.Type, forKey key: Key) throws -> String { try JSONValueDecoder.string(try present(key), codingPath + [key]) }
        func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try JSONValueDecoder.double(try present(key), codingPath + [key]) }
        func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try JSONValueDecoder.integer(type, try present(key), codingPath + [key]) }
        func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try JSONValueDecoder.integer(type, try present(key), codingPath + [key]) }
        func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try JSONValueDecoder.integer(type, try present(key), codingPath + [key]) }
        func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try JSONValueDecoder.integer(type, try present(key), codingPath + [key]) }
        func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try JSONValueDecoder.integer(type, try present(key), codingPath + [key]) }
        func decode<T: Decodable>(_: T.Type, forKey key: Key) throws -> T {
            try T(from: Reading(value: try present(key), codingPath: codingPath + [key]))
        }

        // A member that may be left out is looked up once (the protocol's own decodeIfPresent
        // asks `contains`, `decodeNil` and `decode`: three lookups of the key). As there, a
        // member that is null is nil.
        private func optional(_ key: Key) -> JSONValue? {
            guard let value = members[key.stringValue] else { return nil }
            if case .null = value { return nil }
            return value
        }

        func decodeIfPresent(_: Bool.Type, forKey key: Key) throws -> Bool? { try optional(key).map { try JSONValueDecoder.bool($0, codingPath + [key]) } }
        func decodeIfPresent(_: String.Type, forKey key: Key) throws -> String? { try optional(key).map { try JSONValueDecoder.string($0, codingPath + [key]) } }
        func decodeIfPresent(_: Double.Type, forKey key: Key) throws -> Double? { try optional(key).map { try JSONValueDecoder.double($0, codingPath + [key]) } }
        func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try optional(key).map { try JSONValueDecoder.integer(type, $0, codingPath + [key]) } }
        func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try optional(key).map { try JSONValueDecoder.integer(type, $0, codingPath + [key]) } }
        func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? { try optional(key).map { try JSONValueDecoder.integer(type, $0, codingPath + [key]) } }
        func decodeIfPresent<T: Decodable>(_: T.Type, forKey key: Key) throws -> T? {
            try optional(key).map { try T(from: Reading(value: $0, codingPath: codingPath + [key])) }
        }

        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
            try Reading(value: try present(key), codingPath: codingPath + [key]).container(keyedBy: type)
        }

        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
            try Reading(value: try present(key), codingPath: codingPath + [key]).unkeyedContainer()
        }

        func superDecoder() throws -> any Decoder { Reading(value: members["super"] ?? .null, codingPath: codingPath) }
        func superDecoder(forKey key: Key) throws -> any Decoder { Reading(value: members[key.stringValue] ?? .null, codingPath: codingPath + [key]) }
    }

    struct Unkeyed: UnkeyedDecodingContainer {
        let elements: [JSONValue]
        let codingPath: [any CodingKey]
        private(set) var currentIndex = 0

        init(elements: [JSONValue], codingPath: [any CodingKey]) {
            self.elements = elements
            self.codingPath = codingPath
        }

        var count: Int? { elements.count }
        var isAtEnd: Bool { currentIndex >= elements.count }

        /// The next element, which the caller then takes (`currentIndex` moves past it).
        private mutating func next(_ type: Any.Type) throws -> (JSONValue, [any CodingKey]) {
            let path = codingPath + [Index(intValue: currentIndex)]
            guard !isAtEnd else {
                throw DecodingError.valueNotFound(type, .init(codingPath: path, debugDescription: "Unkeyed container is at end."))
            }
            let value = elements[currentIndex]
            currentIndex += 1
            return (value, path)
        }

        mutating func decodeNil() throws -> Bool {
            guard !isAtEnd else {
                throw DecodingError.valueNotFound(Any?.self, .init(codingPath: codingPath + [Index(intValue: currentIndex)], debugDescription: "Unkeyed container is at end."))
            }
            guard elements[currentIndex] == .null else { return false }
            currentIndex += 1
            return true
        }

        mutating func decode(_ type: Bool.Type) throws -> Bool { let (value, path) = try next(type); return try JSONValueDecoder.bool(value, path) }
        mutating func decode(_ type: String.Type) throws -> String { let (value, path) = try next(type); return try JSONValueDecoder.string(value, path) }
        mutating func decode(_ type: Double.Type) throws -> Double { let (value, path) = try next(type); return try JSONValueDecoder.double(value, path) }
        mutating func decode(_ type: Int.Type) throws -> Int { let (value, path) = try next(type); return try JSONValueDecoder.integer(type, value, path) }
        mutating func decode(_ type: Int64.Type) throws -> Int64 { let (value, path) = try next(type); return try JSONValueDecoder.integer(type, value, path) }
        mutating func decode(_ type: UInt32.Type) throws -> UInt32 { let (value, path) = try next(type); return try JSONValueDecoder.integer(type, value, path) }
        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
            let (value, path) = try next(type)
            return try T(from: Reading(value: value, codingPath: path))
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
            let (value, path) = try next([String: JSONValue].self)
            return try Reading(value: value, codingPath: path).container(keyedBy: type)
        }

        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
            let (value, path) = try next([JSONValue].self)
            return try Reading(value: value, codingPath: path).unkeyedContainer()
        }

        mutating func superDecoder() throws -> any Decoder {
            let (value, path) = try next(JSONValue.self)
            return Reading(value: value, codingPath: path)
        }
    }

    /// An array element's place in a coding path.
    struct Index: CodingKey {
        let intValue: Int?
        var stringValue: String { "Index \(intValue ?? 0)" }
        init(intValue: Int) { self.intValue = intValue }
        init?(stringValue _: String) { nil }
    }

    // MARK: Values

    /// What a value of `type` that is not there is: `valueNotFound` for null (as `JSONDecoder`
    /// says it), else `typeMismatch`.
    static func mismatch(_ type: Any.Type, _ value: JSONValue, _ codingPath: [any CodingKey]) -> DecodingError {
        guard value != .null else {
            return .valueNotFound(type, .init(codingPath: codingPath, debugDescription: "Expected \(type) value but found null instead."))
        }
        return .typeMismatch(type, .init(codingPath: codingPath, debugDescription: "Expected to decode \(type) but found \(value.typeName) instead."))
    }

    static func bool(_ value: JSONValue, _ codingPath: @autoclosure () -> [any CodingKey]) throws -> Bool {
        guard case .bool(let bool) = value else { throw mismatch(Bool.self, value, codingPath()) }
        return bool
    }

    static func string(_ value: JSONValue, _ codingPath: @autoclosure () -> [any CodingKey]) throws -> String {
        guard case .string(let string) = value else { throw mismatch(String.self, value, codingPath()) }
        return string
    }

    static func double(_ value: JSONValue, _ codingPath: @autoclosure () -> [any CodingKey]) throws -> Double {
        switch value {
        case .double(let double): return double
        case .integer(let integer): return Double(integer)
        default: throw mismatch(Double.self, value, codingPath())
        }
    }

    /// An integer that `T` holds exactly, as `JSONDecoder` reads one (`7.0` is 7; `7.5` and
    /// numbers out of `T`'s range are refused).
    static func integer<T: FixedWidthInteger>(_: T.Type, _ value: JSONValue, _ codingPath: @autoclosure () -> [any CodingKey]) throws -> T {
        let exact: T? = switch value {
        case .integer(let integer): T(exactly: integer)
        case .double(let double): T(exactly: double)
        default: throw mismatch(T.self, value, codingPath())
        }
        guard let exact else {
            throw NumberOutOfRange(field: codingPath().parameterName)
        }
        return exact
    }
}

extension [any CodingKey] {
    /// The path as errors name a parameter: `list[1].count`.
    var parameterName: String {
        map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".").replacing(".[", with: "[")
    }
}
