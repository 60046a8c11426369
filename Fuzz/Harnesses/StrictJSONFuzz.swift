import FoundationEssentials
import Protocol

/// StrictJSON alone, and differentially: whatever it accepts, Foundation's JSON decoder (which
/// reads the text next, as `JSONValue`) must accept too, or a "strict" line would still be
/// refused, or worse, read differently. For an object, the members the same pass finds (how a
/// request line's envelope is read) must be the object's, each value's text read as Foundation
/// reads that member, and the names given for a value that is an object its members' names.
/// What was read is then written back by CompactJSON, which must write what JSONEncoder writes
/// (or leave the value to it). The value StrictJSON reads itself in the same pass must be
/// Foundation's, and it must refuse exactly what the check refuses, for the same reason.
enum StrictJSONFuzz {
    static func run(_ input: [UInt8]) {
        let parsed: Result<JSONValue, StrictJSON.Violation> = Result { () throws(StrictJSON.Violation) in try StrictJSON.value(of: input) }
        if let violation = StrictJSON.check(input) {
            precondition(parsed == .failure(violation), "StrictJSON.value refuses differently from StrictJSON.check")
            return
        }
        let value: JSONValue
        do {
            value = try JSONDecoder().decode(JSONValue.self, from: Data(input))
        } catch {
            preconditionFailure("StrictJSON accepts what JSONDecoder refuses: \(error)")
        }
        precondition(parsed == .success(value), "StrictJSON.value reads the text differently from JSONDecoder")
        if let compact = try? CompactJSON.encode(value) {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            precondition(compact == (try? encoder.encode(value)).map(Array.init), "CompactJSON writes a value differently from JSONEncoder")
        }
        let members: [StrictJSON.Member]?
        do {
            members = try StrictJSON.members(of: input)
        } catch {
            preconditionFailure("StrictJSON.members refuses what StrictJSON.check accepts: \(error)")
        }
        guard case .object(let object) = value else {
            precondition(members == nil, "StrictJSON.members found members in a value that is not an object")
            return
        }
        guard let members else { preconditionFailure("StrictJSON.members found no object") }
        precondition(members.count == object.count, "StrictJSON.members found \(members.count) members of \(object.count)")
        for member in members {
            let read = try? JSONDecoder().decode(JSONValue.self, from: Data(input[member.value]))
            precondition(read != nil && object[member.name(in: input)] == read, "StrictJSON.members reads member \(member.name(in: input)) differently")
            if case .string(let text)? = read {
                precondition(StrictJSON.string(at: member.value.lowerBound, in: input) == text, "StrictJSON.string reads \(member.name(in: input)) differently")
            }
            if case .object(let inner)? = read {
                precondition(member.names.map(Set.init) == Set(inner.keys) && member.names?.count == inner.count,
                             "StrictJSON.members names the members of \(member.name(in: input)) differently")
            } else {
                precondition(member.names == nil, "StrictJSON.members gives names for \(member.name(in: input)), which is not an object")
            }
        }
    }
}
