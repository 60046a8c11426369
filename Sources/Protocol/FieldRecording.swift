import FoundationEssentials

/// A coding key for any string (object members not known in advance).
struct AnyCodingKey: CodingKey {
    let stringValue: String
    var intValue: Int? { nil }
    init(_ string: String) { stringValue = string }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

/// The top-level fields a `Decodable` type asked for while decoding, so fields it never asked
/// about can be reported as unknown without a second parse.
final class FieldRecorder {
    var asked: Set<String> = []
}

/// Forwards to a real decoder and records the keys of the top-level keyed container.
struct RecordingDecoder: Decoder {
    let base: any Decoder
    let recorder: FieldRecorder
    var codingPath: [any CodingKey] { base.codingPath }
    var userInfo: [CodingUserInfoKey: Any] { base.userInfo }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(RecordingKeyedContainer(base: try base.container(keyedBy: type), recorder: recorder))
    }
    func unkeyedContainer() throws -> any UnkeyedDecodingContainer { try base.unkeyedContainer() }
    func singleValueContainer() throws -> any SingleValueDecodingContainer { try base.singleValueContainer() }
}

private struct RecordingKeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let base: KeyedDecodingContainer<Key>
    let recorder: FieldRecorder
    var codingPath: [any CodingKey] { base.codingPath }
    var allKeys: [Key] { base.allKeys }

    private func note(_ key: Key) {
        recorder.asked.insert(key.stringValue)
    }

    func contains(_ key: Key) -> Bool { note(key); return base.contains(key) }
    func decodeNil(forKey key: Key) throws -> Bool { note(key); return try base.decodeNil(forKey: key) }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { note(key); return try base.decode(type, forKey: key) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { note(key); return try base.decode(type, forKey: key) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { note(key); return try base.decode(type, forKey: key) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { note(key); return try base.decode(type, forKey: key) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { note(key); return try base.decode(type, forKey: key) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { note(key); return try base.decode(type, forKey: key) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { note(key); return try base.decode(type, forKey: key) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { note(key); return try base.decode(type, forKey: key) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { note(key); return try base.decode(type, forKey: key) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { note(key); return try base.decode(type, forKey: key) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { note(key); return try base.decode(type, forKey: key) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { note(key); return try base.decode(type, forKey: key) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { note(key); return try base.decode(type, forKey: key) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { note(key); return try base.decode(type, forKey: key) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { note(key); return try base.decode(type, forKey: key) }
    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { note(key); return try base.decodeIfPresent(type, forKey: key) }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { note(key); return try base.decodeIfPresent(type, forKey: key) }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { note(key); return try base.decodeIfPresent(type, forKey: key) }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { note(key); return try base.decodeIfPresent(type, forKey: key) }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { note(key); return try base.decodeIfPresent(type, forKey: key) }
    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? { note(key); return try base.decodeIfPresent(type, forKey: key) }
    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        note(key)
        return try base.nestedContainer(keyedBy: type, forKey: key)
    }
    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        note(key)
        return try base.nestedUnkeyedContainer(forKey: key)
    }
    func superDecoder() throws -> any Decoder { try base.superDecoder() }
    func superDecoder(forKey key: Key) throws -> any Decoder { note(key); return try base.superDecoder(forKey: key) }
}
