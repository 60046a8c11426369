import Protocol

/// Why a PAM request or a link change was refused. Each case is one stable wire reason; the
/// module maps reasons to PAM codes (pam_authd(8)).
enum PAMFailure: Error, Equatable, WireErrorConvertible {
    /// No method the policy allows for `service` is set up for the user.
    case noMethod(service: String)
    /// The card presented is not the linked one.
    case cardMismatch
    case unknownUser
    /// The card's certificate does not chain to `[pam] ca_file`, or no CA file is set.
    case cardUntrusted
    /// `[pam] ca_file` cannot be read or holds no certificate.
    case caFileUnusable(String)
    /// The card or account already serves `[pam] link_limit` other users.
    case alreadyLinked(limit: Int)
    /// `pam.link.account`: the caller's user is signed in to no account.
    case noAccount
    case accountDeactivated
    /// On a device: the hub no longer counts this machine as signed in to the linked account
    /// (the machine was removed from it, or the account deactivated).
    case machineRemoved
    /// The linked account is locked after failed sign-ins, until `until` (RFC 3339).
    case accountLocked(until: String)
    /// A non-admin named another user than its own.
    case otherUser

    var rpcError: RPCError {
        switch self {
        case .noMethod(let service):
            .failure(.pamNoMethod, "The user has nothing linked that [pam] allows for the service '\(Redaction.printable(service, limit: 64))'.",
                     details: ["service": .string(Redaction.printable(service, limit: 64))])
        case .cardMismatch:
            .failure(.pamCardMismatch, "This ID card is not the one linked to the user.")
        case .cardUntrusted:
            .failure(.pamCardUntrusted, "The card's certificate is not issued by a CA that [pam] ca_file trusts.")
        case .caFileUnusable(let file):
            .failure(.pamCardUntrusted, "[pam] ca_file (\(file)) is not set, cannot be read, or holds no certificate; ID cards cannot be checked.")
        case .unknownUser:
            .failure(.pamUnknownUser, "There is no such Unix user.")
        case .alreadyLinked(let limit):
            .failure(.pamAlreadyLinked, "It is linked to \(limit) other Unix \(limit == 1 ? "user" : "users") already ([pam] link_limit); unlink it there first.",
                     details: ["limit": .integer(Int64(limit))])
        case .noAccount:
            .failure(.pamNoAccount, "This user is signed in to no account; sign in first (`authctl login`), or, as an admin, name the account.")
        case .accountDeactivated:
            .failure(.pamAccountDeactivated, "The account linked to this user is deactivated.")
        case .machineRemoved:
            .failure(.pamAccountDeactivated,
                     "The account linked to this user no longer lets this machine in (the machine was removed from it, or it was deactivated); sign in on this machine again.")
        case .accountLocked(let until):
            .failure(.accountLocked, "The account linked to this user is locked after failed sign-ins until \(until).",
                     details: ["locked_until": .string(until)])
        case .otherUser:
            .failure(.forbidden, "Only an admin may change or read another user's links.")
        }
    }
}
