import CCBOR
import Glibc

// The only file that calls libcbor (through CCBOR), and libc's free for the buffers it allocates.

/// A CBOR data item, as WebAuthn uses them (no tags, no floats). Maps keep their pairs in order.
indirect enum CBORValue: Equatable, Sendable {
    case unsigned(UInt64)
    /// The value −1 − n.
    case negative(UInt64)
    case bytes([UInt8])
    case text(String)
    case array([CBORValue])
    case map([(CBORValue, CBORValue)])
    case bool(Bool)
    case null

    static func == (lhs: CBORValue, rhs: CBORValue) -> Bool {
        switch (lhs, rhs) {
        case (.unsigned(let a), .unsigned(let b)), (.negative(let a), .negative(let b)): return a == b
        case (.bytes(let a), .bytes(let b)): return a == b
        case (.text(let a), .text(let b)): return a == b
        case (.array(let a), .array(let b)): return a == b
        case (.map(let a), .map(let b)): return a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        case (.bool(let a), .bool(let b)): return a == b
        case (.null, .null): return true
        default: return false
        }
    }

    /// An integer value (`.unsigned` or `.negative`) that fits Int64.
    static func integer(_ value: Int64) -> CBORValue { value >= 0 ? .unsigned(UInt64(value)) : .negative(UInt64(-1 - value)) }

    var integerValue: Int64? {
        switch self {
        case .unsigned(let value) where value <= UInt64(Int64.max): return Int64(value)
        case .negative(let value) where value < UInt64(Int64.max): return -1 - Int64(value)
        default: return nil
        }
    }

    /// The value under `key` in a map.
    subscript(key: CBORValue) -> CBORValue? {
        guard case .map(let pairs) = self else { return nil }
        return pairs.first { $0.0 == key }?.1
    }
}

/// Why bytes are not the CBOR authd accepts.
struct CBORError: Error, Equatable, CustomStringConvertible {
    let description: String
}

/// CBOR through libcbor (the only file that calls it). Encoding is CTAP2 canonical (smallest
/// integers, definite lengths, map keys sorted by major type, then length, then bytes), because
/// WebAuthn hashes and compares these bytes. Decoding is strict in the same way: anything a
/// canonical encoder would not write (indefinite lengths, non-minimal integers, duplicate or
/// unsorted keys, tags, floats, trailing bytes) is refused, since libcbor itself accepts it all.
enum CBOR {
    /// Inputs larger than this are refused before libcbor sees them: a definite header can claim
    /// billions of entries, which libcbor would try to allocate up front.
    static let maxInput = 64 * 1024

    // MARK: Encoding

    static func encode(_ value: CBORValue) throws(CBORError) -> [UInt8] {
        var owned = try build(value)
        guard let item = owned else { throw CBORError(description: "cannot build a CBOR item") }
        defer { cbor_decref(&owned) }
        return try serialize(item)
    }

    /// The bytes of a built item.
    private static func serialize(_ item: UnsafeMutablePointer<cbor_item_t>) throws(CBORError) -> [UInt8] {
        var buffer: UnsafeMutablePointer<UInt8>?
        var capacity = 0
        // The return value is the length; `capacity` is the allocation.
        let length = cbor_serialize_alloc(item, &buffer, &capacity)
        defer { free(buffer) }
        guard length > 0, let buffer else { throw CBORError(description: "cannot serialize a CBOR item") }
        return Array(UnsafeBufferPointer(start: buffer, count: length))
    }

    /// A new item with one reference, owned by the caller.
    private static func build(_ value: CBORValue) throws(CBORError) -> UnsafeMutablePointer<cbor_item_t>? {
        switch value {
        case .unsigned(let number): return buildUnsigned(number)
        case .negative(let number):
            // The width chosen is the width written: take the smallest.
            switch number {
            case 0...UInt64(UInt8.max): return cbor_build_negint8(UInt8(number))
            case 0...UInt64(UInt16.max): return cbor_build_negint16(UInt16(number))
            case 0...UInt64(UInt32.max): return cbor_build_negint32(UInt32(number))
            default: return cbor_build_negint64(number)
            }
        case .bytes(let bytes): return bytes.withUnsafeBufferPointer { cbor_build_bytestring($0.baseAddress, $0.count) }
        case .text(let text): return Array(text.utf8).withUnsafeBufferPointer { $0.withMemoryRebound(to: CChar.self) { cbor_build_stringn($0.baseAddress, $0.count) } }
        case .bool(let flag): return cbor_build_bool(flag)
        case .null: return cbor_new_null()
        case .array(let elements):
            // Every way out before the end (nil, or an error thrown by a nested map) frees what
            // was built so far: a hostile attestation object must not leak on each attempt.
            guard let array = cbor_new_definite_array(elements.count) else { return nil }
            var complete = false
            defer { if !complete { release(array) } }
            for element in elements {
                guard let child = try build(element) else { return nil }
                defer { release(child) }  // the array takes its own reference
                guard cbor_array_push(array, child) else { return nil }
            }
            complete = true
            return array
        case .map(let pairs):
            // Each key is built once and its bytes (for the canonical order) serialized from that
            // item. Encoding a key apart from building it would do the work twice at every level
            // of maps used as keys of maps: 2^depth for a few hundred hostile bytes.
            var keys: [(encoded: [UInt8], item: UnsafeMutablePointer<cbor_item_t>, value: CBORValue)] = []
            defer { for key in keys { release(key.item) } }  // the map takes its own references
            for (key, value) in pairs {
                guard let keyItem = try build(key) else { return nil }
                let encoded: [UInt8]
                do throws(CBORError) {
                    encoded = try serialize(keyItem)
                } catch {
                    release(keyItem)
                    throw error
                }
                keys.append((encoded, keyItem, value))
            }
            keys.sort { canonicalOrder($0.encoded, $1.encoded) }
            for index in keys.indices.dropFirst() where keys[index].encoded == keys[index - 1].encoded {
                throw CBORError(description: "a map has a duplicate key")
            }
            guard let map = cbor_new_definite_map(pairs.count) else { return nil }
            var complete = false
            defer { if !complete { release(map) } }
            for key in keys {
                guard let valueItem = try build(key.value) else { return nil }
                defer { release(valueItem) }
                guard cbor_map_add(map, cbor_pair(key: key.item, value: valueItem)) else { return nil }
            }
            complete = true
            return map
        }
    }

    /// Drops one reference to `item`, freeing it (and its children) with the last.
    private static func release(_ item: UnsafeMutablePointer<cbor_item_t>) {
        var owned: UnsafeMutablePointer<cbor_item_t>? = item
        cbor_decref(&owned)
    }

    private static func buildUnsigned(_ number: UInt64) -> UnsafeMutablePointer<cbor_item_t>? {
        switch number {
        case 0...UInt64(UInt8.max): return cbor_build_uint8(UInt8(number))
        case 0...UInt64(UInt16.max): return cbor_build_uint16(UInt16(number))
        case 0...UInt64(UInt32.max): return cbor_build_uint32(UInt32(number))
        default: return cbor_build_uint64(number)
        }
    }

    /// CTAP2 canonical key order on encoded keys: major type, then length, then bytes.
    static func canonicalOrder(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        let (majorL, majorR) = ((lhs.first ?? 0) >> 5, (rhs.first ?? 0) >> 5)
        if majorL != majorR { return majorL < majorR }
        if lhs.count != rhs.count { return lhs.count < rhs.count }
        return lhs.lexicographicallyPrecedes(rhs)
    }

    // MARK: Decoding

    /// One item that fills `bytes` exactly.
    static func decode(_ bytes: [UInt8]) throws(CBORError) -> CBORValue {
        let (value, read) = try decodePrefix(bytes)
        guard read == bytes.count else { throw CBORError(description: "\(bytes.count - read) bytes follow the CBOR item") }
        return value
    }

    /// The item at the start of `bytes` and how many bytes it took (authenticator data carries
    /// the COSE key followed by extensions, with no length of its own).
    static func decodePrefix(_ bytes: some Collection<UInt8>) throws(CBORError) -> (CBORValue, Int) {
        let input = Array(bytes)
        guard !input.isEmpty else { throw CBORError(description: "no CBOR data") }
        guard input.count <= maxInput else { throw CBORError(description: "CBOR data larger than \(maxInput) bytes") }
        try checkHeaders(input)
        var result = cbor_load_result()
        var root = input.withUnsafeBufferPointer { cbor_load($0.baseAddress, $0.count, &result) }
        defer { if root != nil { cbor_decref(&root) } }
        guard let item = root, result.error.code == CBOR_ERR_NONE else {
            throw CBORError(description: "malformed CBOR at byte \(result.error.position)")
        }
        let value = try value(of: item)
        // Canonical form: re-encoding must give back the very bytes. This catches long integers
        // (`18 05`, which libcbor reports as width 8 like `05`), unsorted keys, and duplicate
        // keys (the encoder refuses them).
        guard try encode(value) == Array(input[..<result.read]) else { throw CBORError(description: "the CBOR is not in canonical form") }
        return (value, result.read)
    }

    /// What the header scan saw of one head: the entries it claims (an array's elements, a
    /// map's keys and values), and whether it claimed more than could possibly follow, an
    /// indefinite length or a tag.
    private struct HeaderScan {
        var remaining = 0
        var claimed = 0
        var refused = false
    }

    /// Walks every head with libcbor's streaming decoder, which allocates nothing, before
    /// `cbor_load` builds the tree: `cbor_load` allocates (and clears) the entries each definite
    /// array or map head claims, up front. So the entries claimed and not yet seen, by every
    /// container open at once, must fit the bytes left (each entry takes one at least): 5 bytes
    /// claiming 2^31 entries would cost gigabytes, and so would two thousand nested heads each
    /// claiming what is left. Nesting deeper than `maxDepth` is refused here too.
    private static func checkHeaders(_ input: [UInt8]) throws(CBORError) {
        var callbacks = cbor_empty_callbacks
        callbacks.array_start = { context, size in
            context!.withMemoryRebound(to: HeaderScan.self, capacity: 1) {
                // A size past Int.max (a 64-bit head) arrives negative.
                if size < 0 || size > $0.pointee.remaining { $0.pointee.refused = true } else { $0.pointee.claimed = size }
            }
        }
        callbacks.map_start = { context, size in
            context!.withMemoryRebound(to: HeaderScan.self, capacity: 1) {
                if size < 0 || size > $0.pointee.remaining / 2 { $0.pointee.refused = true } else { $0.pointee.claimed = 2 * size }
            }
        }
        callbacks.indef_array_start = { context in context!.withMemoryRebound(to: HeaderScan.self, capacity: 1) { $0.pointee.refused = true } }
        callbacks.indef_map_start = { context in context!.withMemoryRebound(to: HeaderScan.self, capacity: 1) { $0.pointee.refused = true } }
        callbacks.byte_string_start = { context in context!.withMemoryRebound(to: HeaderScan.self, capacity: 1) { $0.pointee.refused = true } }
        callbacks.string_start = { context in context!.withMemoryRebound(to: HeaderScan.self, capacity: 1) { $0.pointee.refused = true } }
        // A tag's item follows it and fills no entry of its own (WebAuthn uses none).
        callbacks.tag = { context, _ in context!.withMemoryRebound(to: HeaderScan.self, capacity: 1) { $0.pointee.refused = true } }
        var scan = HeaderScan()
        var offset = 0
        // The entries still to come in each open container, innermost last, and their sum.
        var open: [Int] = []
        var owed = 0
        while offset < input.count {
            scan.remaining = input.count - offset
            scan.claimed = 0
            let result = input.withUnsafeBufferPointer { buffer in
                withUnsafeMutablePointer(to: &scan) { cbor_stream_decode(buffer.baseAddress! + offset, buffer.count - offset, &callbacks, $0) }
            }
            guard !scan.refused else { throw CBORError(description: "a CBOR head claims more than the data holds, an indefinite length or a tag") }
            guard result.status == CBOR_DECODER_FINISHED, result.read > 0 else { throw CBORError(description: "malformed CBOR at byte \(offset)") }
            offset += result.read
            // This item is an entry of the innermost open container; its own entries follow.
            if !open.isEmpty {
                open[open.count - 1] -= 1
                owed -= 1
            }
            if scan.claimed > 0 {
                open.append(scan.claimed)
                owed += scan.claimed
            }
            while open.last == 0 { open.removeLast() }
            guard open.count <= maxDepth else { throw CBORError(description: "CBOR nested deeper than \(maxDepth) levels") }
            guard owed <= input.count - offset else { throw CBORError(description: "CBOR heads claim more entries than the data holds") }
        }
    }

    /// WebAuthn nests three levels deep; anything far deeper is refused before it can exhaust a stack.
    static let maxDepth = 16

    private static func value(of item: UnsafeMutablePointer<cbor_item_t>, depth: Int = 0) throws(CBORError) -> CBORValue {
        guard depth <= maxDepth else { throw CBORError(description: "CBOR nested deeper than \(maxDepth) levels") }
        switch cbor_typeof(item) {
        case CBOR_TYPE_UINT, CBOR_TYPE_NEGINT:
            // Shortest form, key order and the absence of duplicates are all checked at once
            // by the round trip in decodePrefix.
            let number = cbor_get_int(item)
            return cbor_typeof(item) == CBOR_TYPE_UINT ? .unsigned(number) : .negative(number)
        case CBOR_TYPE_BYTESTRING:
            guard cbor_bytestring_is_definite(item) else { throw CBORError(description: "an indefinite byte string") }
            let length = cbor_bytestring_length(item)
            guard length > 0, let handle = cbor_bytestring_handle(item) else { return .bytes([]) }
            return .bytes(Array(UnsafeBufferPointer(start: handle, count: length)))
        case CBOR_TYPE_STRING:
            guard cbor_string_is_definite(item) else { throw CBORError(description: "an indefinite text string") }
            let length = cbor_string_length(item)
            guard length > 0, let handle = cbor_string_handle(item) else { return .text("") }
            guard let text = String(validating: UnsafeBufferPointer(start: handle, count: length), as: UTF8.self) else {
                throw CBORError(description: "a text string is not UTF-8")
            }
            return .text(text)
        case CBOR_TYPE_ARRAY:
            guard cbor_array_is_definite(item) else { throw CBORError(description: "an indefinite array") }
            var elements: [CBORValue] = []
            for index in 0..<cbor_array_size(item) {
                // cbor_array_get hands out a reference of its own.
                var owned = cbor_array_get(item, index)
                defer { if owned != nil { cbor_decref(&owned) } }
                guard let element = owned else { throw CBORError(description: "a broken array") }
                elements.append(try value(of: element, depth: depth + 1))
            }
            return .array(elements)
        case CBOR_TYPE_MAP:
            guard cbor_map_is_definite(item) else { throw CBORError(description: "an indefinite map") }
            var pairs: [(CBORValue, CBORValue)] = []
            let handle = cbor_map_handle(item)
            for index in 0..<cbor_map_size(item) {
                guard let pair = handle?[index], let keyItem = pair.key, let valueItem = pair.value else { throw CBORError(description: "a broken map") }
                pairs.append((try value(of: keyItem, depth: depth + 1), try value(of: valueItem, depth: depth + 1)))
            }
            return .map(pairs)
        case CBOR_TYPE_FLOAT_CTRL:
            // Ask for the width first: libcbor's null/bool accessors assert on a float and abort.
            guard cbor_float_get_width(item) == CBOR_FLOAT_0 else { throw CBORError(description: "floats are not used by WebAuthn") }
            if cbor_is_null(item) { return .null }
            if cbor_is_bool(item) { return .bool(cbor_get_bool(item)) }
            throw CBORError(description: "floats and other simple values are not used by WebAuthn")
        default:
            throw CBORError(description: "tags are not used by WebAuthn")
        }
    }
}
