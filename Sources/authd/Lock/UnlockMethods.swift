/// What can open a local user's lock, and the order `unlock` asks in: a finger first (when
/// fingerprint unlock is on and not cut off), then the account's password, else a code sent by
/// SMS to its verified number. A pure value, made from the machine's fingerprint gate and the
/// account's credentials; table-tested.
struct UnlockMethods: Sendable, Equatable {
    var fingerprint: Bool
    var password: Bool
    /// The account's verified number (E.164), to send a code to.
    var phone: String?
    /// Why a code is never an option here (see `LockCredentials.codesRefused`).
    var codesRefused: MachineAccessFailure?

    init(fingerprint: Bool, password: Bool, phone: String?, codesRefused: MachineAccessFailure? = nil) {
        self.fingerprint = fingerprint
        self.password = password
        self.phone = phone
        self.codesRefused = codesRefused
    }

    init(gate: BiometricGate, credentials: LockCredentials) {
        self.init(fingerprint: gate.enabled && !gate.cutOff, password: credentials.hasPassword, phone: credentials.verifiedPhone,
                  codesRefused: credentials.codesRefused)
    }

    /// Whether a lock could be opened again: `lock` is refused and the idle lock does not arm
    /// otherwise. A finger alone is not enough: five that do not match switch it off, and only a
    /// password or a code switches it back on.
    var canOpen: Bool { password || phone != nil }

    /// The secret `unlock` asks for after the finger, or instead of it.
    enum Secret: Sendable, Equatable {
        case password
        case code(phone: String)
    }

    /// The password when the account has one and the caller did not ask for a code; else a code
    /// to the account's number; nil when neither is there.
    func secret(codeAsked: Bool) -> Secret? {
        if password && !codeAsked { return .password }
        return phone.map { .code(phone: $0) }
    }

    /// The wire names (`lock.status`): what `unlock` can take, in the order it asks; empty when
    /// nothing could open the lock.
    var names: [String] {
        guard canOpen else { return [] }
        return (fingerprint ? ["fingerprint"] : []) + (password ? ["password"] : []) + (phone != nil ? ["sms"] : [])
    }
}
