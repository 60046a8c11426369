import Testing
@testable import authd

/// `[pam]`: the methods per PAM service, the settings around them, and what a bad line says.
@Suite("PAM policy")
struct PAMPolicyTests {
    @Test("services name their methods in order; others take default; settings parse; a change is reported per service")
    func services() throws {
        let config = try Config.parse("""
            [pam]
            sudo = card, fingerprint
            login = card,account
            gdm-password = fingerprint account
            default = account
            fingerprint_alone = sudo, gdm-password
            ca_file = /etc/authd/id-card-ca.pem
            card_window = 2m
            fingerprint_timeout = 10s
            link_limit = 3
            """, file: "t.conf")
        #expect(config.pamMethods(service: "sudo") == [.card, .fingerprint])
        #expect(config.pamMethods(service: "login") == [.card, .account])
        #expect(config.pamMethods(service: "gdm-password") == [.fingerprint, .account])
        #expect(config.pamMethods(service: "su") == [.account], "a service not named takes default")
        #expect(config.pamFingerprintAlone == ["sudo", "gdm-password"])
        #expect(config.pamCAFile == "/etc/authd/id-card-ca.pem")
        #expect(config.pamCardWindowSeconds == 120)
        #expect(config.pamFingerprintTimeoutSeconds == 10)
        #expect(config.pamLinkLimit == 3)
        #expect(Config().pamMethods(service: "sudo") == [.card, .fingerprint, .account], "the default default")
        var changed = config
        changed.pamServices["sudo"] = [.card]
        #expect(changed.changes(from: config) == ["pam.sudo"])
    }

    @Test("a bad [pam] line names the line and what it must be", arguments: [
        ("[pam]\nsudo = card, password", 2, "must list methods among card, fingerprint, account"),
        ("[pam]\nsudo = card, card", 2, "names card twice"),
        ("[pam]\nsudo = ", 2, "at least one"),
        ("[pam]\nsudo = card\nsudo = account", 3, "set twice"),
        ("[pam]\nbad/name = card", 2, "nor a PAM service name"),
        ("[pam]\nfingerprint_alone = sudo, a/b", 2, "PAM service names"),
        ("[pam]\nca_file = relative.pem", 2, "absolute path"),
        ("[pam]\nlink_limit = 0", 2, "from 1 to 1000"),
    ])
    func errors(text: String, line: Int, problem: String) {
        #expect {
            try Config.parse(text, file: "t.conf")
        } throws: { error in
            guard let error = error as? ConfigError else { return false }
            return error.line == line && error.reason.contains(problem)
        }
    }

    @Test("PAM service names: what /etc/pam.d files are called", arguments: [
        ("sudo", true), ("gdm-password", true), ("systemd-user", true), ("a.b_c@d", true),
        ("", false), ("a b", false), ("../x", false), ("x/y", false), (String(repeating: "s", count: 65), false),
    ])
    func serviceNames(name: String, valid: Bool) {
        #expect(PAMMethod.isServiceName(name) == valid)
    }
}
