import FoundationEssentials
import Protocol

/// StrictJSON alone, and differentially: whatever it accepts, Foundation's JSON decoder (which
/// reads the text next, as `JSONValue`) must accept too, or a "strict" line would still be
/// refused, or worse, read differently.
enum StrictJSONFuzz {
    static func run(_ input: [UInt8]) {
        guard StrictJSON.check(input) == nil else { return }
        do {
            _ = try JSONDecoder().decode(JSONValue.self, from: Data(input))
        } catch {
            preconditionFailure("StrictJSON accepts what JSONDecoder refuses: \(error)")
        }
    }
}
