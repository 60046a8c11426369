import Protocol

/// Why a friends, groups, hotspots or presence call was refused; nothing changed.
enum PresenceFailure: Error, Equatable, WireErrorConvertible {
    /// `friends.add`: no account has the address.
    case nobodyThere
    /// No friend of the caller's (or, to block, nobody who added them) has the address.
    case friendNotFound
    case friendSelf
    case groupNotFound
    case groupExists
    case groupDefault
    case groupLimit(Int)
    case hotspotNotFound
    case hotspotExists
    case hotspotLimit(Int)
    case pinOutside
    case off
    case notAsked

    var rpcError: RPCError {
        switch self {
        case .nobodyThere: .failure(.friendNotFound, "No account has that email address.")
        case .friendNotFound: .failure(.friendNotFound, "No friend of yours (and nobody who added you) has that email address.")
        case .friendSelf: .failure(.friendSelf, "That is your own email address.")
        case .groupNotFound: .failure(.groupNotFound, "You have no group of that name.")
        case .groupExists: .failure(.groupExists, "You have a group of that name already.")
        case .groupDefault: .failure(.groupDefault, "The group \"\(PresenceBook.defaultGroup)\" can be neither renamed nor deleted.")
        case .groupLimit(let limit):
            .failure(.groupLimit, "You have \(limit) groups already; delete one first.", details: ["limit": .integer(Int64(limit))])
        case .hotspotNotFound: .failure(.hotspotNotFound, "No hotspot of that id is yours to change.")
        case .hotspotExists: .failure(.hotspotExists, "A hotspot of that name exists already.")
        case .hotspotLimit(let limit):
            .failure(.hotspotLimit, "You have \(limit) hotspots of your own already; remove one first.", details: ["limit": .integer(Int64(limit))])
        case .pinOutside: .failure(.presencePinOutside, "A point can be pinned only inside the circle of the hotspot you are in now.")
        case .off: .failure(.presenceOff, "Presence is off for this account; turn it on first (presence.on).")
        case .notAsked: .failure(.presenceNotAsked, "No question about that hotspot is open (it was answered, or you left it).")
        }
    }
}
