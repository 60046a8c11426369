import Protocol

/// Why the local lock refused. Each case is one stable wire reason.
enum LockFailure: WireErrorConvertible, Equatable {
    /// The caller's local user is locked: guarded methods wait for `unlock`.
    case locked
    /// `lock` with no remembered account whose password could open it again.
    case nothingToLockWith
    /// `unlock` with no remembered account, so there is no lock to open.
    case nothingToUnlock

    var rpcError: RPCError {
        switch self {
        case .locked: .failure(.sessionLocked, "authd is locked; unlock it with `authctl unlock` (fingerprint or password).")
        case .nothingToLockWith: .failure(.lockNoAccount, "Nothing to lock with: sign in to an account first; its password unlocks.")
        case .nothingToUnlock: .failure(.lockNoAccount, "No account signed in from this user, so there is no lock to open.")
        }
    }
}
