// PAM/ — what pam_authd.so asks of the system daemon: `pam.authenticate` runs the methods the
// `[pam]` policy allows for a service (the ID card's PIN1 signature, a fingerprint, the linked
// account's password and PIN) through the caller's prompts, which the module turns into PAM
// conversation messages; `pam.account` answers acct_mgmt; the links between Unix users and
// cards or accounts live in `pam_links`. Errors: PAMFailure, and the card's, fingerprint's and
// account's own.

/// A way pam_authd can prove a Unix user, as `[pam]` names it.
enum PAMMethod: String, Sendable, CaseIterable, Equatable {
    /// The linked ID card: PIN1 and a signature the card certificate verifies.
    case card
    /// An enrolled finger (fprintd); with the account's PIN unless the service takes it alone.
    case fingerprint
    /// The linked account's password, and its PIN second factor when it has one.
    case account

    /// The comma- or space-separated items of a `[pam]` value.
    static func items(_ value: String) -> [String] {
        value.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" }).map(String.init)
    }

    /// `card, fingerprint`: at least one method, none twice.
    static func list(_ value: String) throws(Config.ValueError) -> [PAMMethod] {
        var methods: [PAMMethod] = []
        for item in items(value) {
            guard let method = PAMMethod(rawValue: item) else {
                throw Config.ValueError(message: "must list methods among card, fingerprint, account (comma-separated), not \(Config.shown(item))")
            }
            guard !methods.contains(method) else { throw Config.ValueError(message: "names \(item) twice") }
            methods.append(method)
        }
        guard !methods.isEmpty else { throw Config.ValueError(message: "must name at least one of card, fingerprint, account") }
        return methods
    }

    /// What PAM applications use as service names (the files of /etc/pam.d): 1–64 of
    /// letters, digits, `-`, `_`, `.`, `@`.
    static func isServiceName(_ name: String) -> Bool {
        (1...64).contains(name.utf8.count) && name.utf8.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || "-_.@".utf8.contains(byte)
        }
    }
}
