import Foundation
import Glibc
import Protocol
import Synchronization
import Testing

/// pam_authd.so in real PAM stacks: pamtester under libpam_wrapper (stacks in a temporary
/// directory, never /etc/pam.d) against a system-mode authd started by the test, with the
/// virtual ID card behind a private pcscd and the fprintd stand-in on a private bus.
@Suite("pam_authd", .serialized)
struct PAMTests {
    static let user = "nobody"
    static let config = """
        [pam]
        card_window = 15s
        fingerprint_timeout = 2s
        fingerprint_alone = authd-test

        """

    /// The config, trusting the virtual card's test CA.
    static func config(trusting rig: CardRig) -> String { config + "ca_file = \(rig.caPath)\n" }
    /// authd decides alone: a refusal fails the stack (what pamtester reports is this module's code).
    static let required = "auth required pam_authd.so\naccount required pam_authd.so"
    /// As the man page suggests for sudo: authd first, the Unix password when authd cannot decide.
    static let sufficient = "auth sufficient pam_authd.so\nauth required pam_permit.so"

    private func start(_ daemon: DaemonHarness, environment: [String: String] = [:]) throws {
        try daemon.start(arguments: ["--system"], environment: environment)
    }

    /// pam_strerror's words for the codes the module answers, as pamtester prints them.
    enum Says {
        static let success = "successfully authenticated"
        static let authError = "Authentication failure"
        static let maxTries = "Have exhausted maximum number of retries for service"
        static let unavailable = "Authentication service cannot retrieve authentication info"
        static let userUnknown = "User not known to the underlying authentication module"
        static let expired = "User account has expired"
        static let permissionDenied = "Permission denied"
    }

    // MARK: The ID card

    /// The card of the virtual card's holder linked to `nobody` by root, as an admin.
    private func cardDaemon(_ rig: CardRig) throws -> DaemonHarness {
        let daemon = try DaemonHarness(config: Self.config(trusting: rig))
        try start(daemon, environment: rig.environment)
        return daemon
    }

    /// The card in the reader, a daemon trusting its CA, the card linked to `nobody`, and the
    /// `required` stack. Bind all three: the rig and the daemon stop when released.
    private func linkedCard() throws -> (rig: CardRig, daemon: DaemonHarness, stack: PAMStack) {
        let rig = try CardRig()
        try rig.insertCard()
        let daemon = try cardDaemon(rig)
        try linkCard(daemon)
        return (rig, daemon, try PAMStack(socket: daemon.socketPath, Self.required))
    }

    /// Takes the card out and waits until authd sees the reader empty.
    private func removeCard(_ rig: CardRig, _ daemon: DaemonHarness) throws {
        rig.stopCard()
        try waitForCard(present: false, daemon)
    }

    private func linkCard(_ daemon: DaemonHarness) throws {
        let client = try daemon.connect()
        let linked = try client.callAnswering("pam.link.card", ["user": .string(Self.user), "timeout_s": 15], answers: [:])
        guard linked.response["result"]?["card"]?["personal_code"] == "38001085718" else { throw HarnessError("link failed: \(linked.response)") }
    }

    /// Waits (at most 20 s) until authd sees the reader with a card, or without one: vpcd
    /// reports a card that went away only after a moment.
    private func waitForCard(present: Bool, _ daemon: DaemonHarness) throws {
        let client = try daemon.connect()
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            let readers = try client.result("card.readers")["readers"]?.arrayValue ?? []
            if readers.contains(where: { $0["card_present"] == .bool(true) }) == present { return }
            usleep(50_000)
        }
        throw HarnessError("the reader never showed the card \(present ? "present" : "absent")")
    }

    @Test("card: the right PIN1 signs in, asked by the holder's name; a wrong one fails; the decisions are audited with service and tty")
    func cardPIN1() throws {
        let (rig, daemon, stack) = try linkedCard()
        let right = try stack.run(Self.user, answers: [("PIN1 for the ID card of JAAK-KRISTJAN JÕEORG:", "1234")], items: ["tty=/dev/pts/7", "rhost=host.example"])
        #expect(right.status == 0, "\(right.transcript)")
        #expect(right.transcript.contains(Says.success))
        #expect(!right.transcript.contains("1234"), "PIN1 is not echoed")
        let wrong = try stack.run(Self.user, answers: [("PIN1 for the ID card", "9999")])
        #expect(wrong.status != 0)
        #expect(wrong.transcript.contains(Says.authError), "\(wrong.transcript)")
        #expect(wrong.transcript.contains("2"), "the card's message says how many tries are left: \(wrong.transcript)")

        let audit = try daemon.connect().result("admin.audit.tail", ["limit": 20])
        let records = audit["records"]?.arrayValue?.filter { $0["method"] == "pam.authenticate" } ?? []
        #expect(records.count == 2, "\(audit)")
        #expect(records.contains { $0["outcome"] == "ok" && $0["detail"]?["service"] == "authd-test" && $0["detail"]?["tty"] == "/dev/pts/7" && $0["detail"]?["rhost"] == "host.example"
            && $0["detail"]?["method"] == "card" && $0["detail"]?["user"] == "nobody" })
        #expect(records.contains { $0["outcome"] != "ok" && $0["reason"] == "pin.wrong" && $0["detail"]?["service"] == "authd-test" })
        withExtendedLifetime(rig) {}
    }

    @Test("card: a blocked PIN1 answers PAM_MAXTRIES")
    func cardBlocked() throws {
        let (rig, daemon, stack) = try linkedCard()
        for _ in 0..<2 {
            let wrong = try stack.run(Self.user, answers: [("PIN1 for the ID card", "9999")])
            #expect(wrong.transcript.contains(Says.authError), "\(wrong.transcript)")
        }
        let last = try stack.run(Self.user, answers: [("PIN1 for the ID card", "9999")])
        #expect(last.transcript.contains(Says.maxTries), "the third wrong PIN1 blocks it: \(last.transcript)")
        let after = try stack.run(Self.user, answers: [("PIN1 for the ID card", "1234")])
        #expect(after.status != 0)
        #expect(after.transcript.contains(Says.maxTries), "blocked stays blocked: \(after.transcript)")
        withExtendedLifetime((rig, daemon)) {}
    }

    @Test("card: absent at first, inserted within the window after the module said to insert it")
    func cardInsertedLater() throws {
        let (rig, daemon, stack) = try linkedCard()
        try removeCard(rig, daemon)
        let session = try stack.pamtester(Self.user)
        try session.expect("Place your ID card on the reader")
        try rig.insertCard()
        try session.answer("PIN1 for the ID card of JAAK-KRISTJAN JÕEORG:", "1234")
        #expect(try session.finish() == 0, "\(session.transcript)")
        #expect(session.transcript.components(separatedBy: "Place your ID card").count == 2, "the countdown is said once: \(session.transcript)")
    }

    @Test("card: another person's card, and a card of an untrusted CA naming the right person, are refused before PIN1 is asked")
    func otherCards() throws {
        let (rig, daemon, stack) = try linkedCard()
        try removeCard(rig, daemon)

        let mari = try rig.generateCard(["--name", "mari", "--personal-code", "49403136526", "--given-names", "MARI", "--surname", "MAASIKAS"])
        try rig.insertCard(profile: mari)
        try waitForCard(present: true, daemon)
        let other = try stack.run(Self.user)
        #expect(other.status != 0)
        #expect(other.transcript.contains("not the one linked"), "\(other.transcript)")
        #expect(!other.transcript.contains("PIN1"), "no PIN1 is asked for another person's card")
        try removeCard(rig, daemon)

        let rogue = try rig.generateCard(["--name", "rogue"], directory: rig.directory + "/rogue")
        try rig.insertCard(profile: rogue)
        try waitForCard(present: true, daemon)
        let untrusted = try stack.run(Self.user)
        #expect(untrusted.status != 0)
        #expect(untrusted.transcript.contains("not issued by a CA"), "\(untrusted.transcript)")
        #expect(!untrusted.transcript.contains("PIN1"))
    }

    // MARK: Fingerprint

    @Test("fingerprint: a match signs in, no match and no finger fail, each said on the terminal")
    func fingerprint() throws {
        let rig = try FprintdRig(enrolled: [Self.user: ["right-index-finger"]])
        let daemon = try DaemonHarness(config: Self.config)
        try start(daemon, environment: rig.environment)
        let stack = try PAMStack(socket: daemon.socketPath, Self.required)

        try rig.setScript([.match])
        let matched = try stack.run(Self.user)
        #expect(matched.status == 0, "\(matched.transcript)")
        #expect(matched.transcript.contains("Touch the fingerprint reader"))

        try rig.setScript([.noMatch, .noMatch, .noMatch])
        let noMatch = try stack.run(Self.user)
        #expect(noMatch.status != 0)
        #expect(noMatch.transcript.contains("Not recognised"), "\(noMatch.transcript)")
        #expect(noMatch.transcript.contains(Says.authError), "\(noMatch.transcript)")

        try rig.setScript([])
        let timeout = try stack.run(Self.user)
        #expect(timeout.status != 0)
        #expect(timeout.transcript.contains("No finger was placed on the reader within 2 s"), "\(timeout.transcript)")
        #expect(timeout.transcript.contains(Says.authError))
    }

    @Test("where a finger alone is not enough the account PIN follows it; a finger that does not match hands over to the password")
    func fingerprintWithPIN() throws {
        let rig = try FprintdRig(enrolled: [Self.user: ["right-index-finger"]])
        let daemon = try DaemonHarness(config: "[pam]\nfingerprint_timeout = 2s\n")
        try start(daemon, environment: rig.environment)
        _ = try linkedAccount(daemon, pin: true)
        let stack = try PAMStack(socket: daemon.socketPath, Self.required)

        try rig.setScript([.match])
        let matched = try stack.run(Self.user, answers: [("Account PIN:", "480913")])
        #expect(matched.status == 0, "\(matched.transcript)")
        #expect(!matched.transcript.contains("Password of the authd account"), "the finger and the PIN did: \(matched.transcript)")

        try rig.setScript([.noMatch, .noMatch, .noMatch])
        let handedOver = try stack.run(Self.user, answers: [("Password of the authd account of nobody:", FingerprintFixture.password), ("Account PIN:", "480913")])
        #expect(handedOver.status == 0, "\(handedOver.transcript)")
        #expect(handedOver.transcript.contains("The fingerprint did not match."), "the next method is preceded by why: \(handedOver.transcript)")
        let audit = try daemon.connect().result("admin.audit.tail", ["limit": 20])
        let methods = audit["records"]?.arrayValue?.filter { $0["method"] == "pam.authenticate" }.compactMap { $0["detail"]?["method"]?.stringValue }
        #expect(Set(methods ?? []) == ["fingerprint+pin", "account"], "\(audit)")
    }

    @Test("a user with no method: PAM_AUTH_ERR, or PAM_USER_UNKNOWN with ignore_unknown_user")
    func noMethod() throws {
        let daemon = try DaemonHarness(config: Self.config)
        try start(daemon)
        let stack = try PAMStack(socket: daemon.socketPath, Self.required)
        let plain = try stack.run("daemon")
        #expect(plain.transcript.contains(Says.authError), "\(plain.transcript)")
        #expect(!plain.transcript.contains("nothing linked"), "a user the module has nothing for hears nothing from it: \(plain.transcript)")
        try stack.write("auth required pam_authd.so ignore_unknown_user", socket: daemon.socketPath)
        let ignored = try stack.run("daemon")
        #expect(ignored.transcript.contains(Says.userUnknown), "\(ignored.transcript)")
        let noSuchUser = try stack.run("no-such-user-here")
        #expect(noSuchUser.status != 0)
    }

    // MARK: The account

    /// An account with a password and a PIN, linked to `nobody`; returns its id.
    private func linkedAccount(_ daemon: DaemonHarness, pin: Bool) throws -> String {
        let client = try daemon.connect()
        let registered = try LoginTests.register(daemon, client, phone: "+37251234567", password: FingerprintFixture.password)
        let token = try #require(registered["session"]?["token"])
        if pin { _ = try client.result("twofactor.pin.enable", ["session": token, "pin": "480913", "confirm": "480913"]) }
        let account = try #require(registered["account"]?["id"]?.stringValue)
        let linked = try client.result("pam.link.account", ["user": .string(Self.user), "account": .string(account)])
        #expect(linked["account"] == .string(account))
        return account
    }

    /// A daemon with an account (a PIN too, with `pin`) linked to `nobody`, and the `required`
    /// stack. Bind the daemon: it stops when released.
    private func linkedAccountStack(pin: Bool) throws -> (daemon: DaemonHarness, account: String, stack: PAMStack) {
        let daemon = try DaemonHarness(config: Self.config)
        try start(daemon)
        let account = try linkedAccount(daemon, pin: pin)
        return (daemon, account, try PAMStack(socket: daemon.socketPath, Self.required))
    }

    @Test("the README's way to try pam_authd without /etc/pam.d works as written: pamtester under libpam_wrapper, a private service file, the module and socket by path")
    func readmeTryRecipe() throws {
        let (daemon, _, _) = try linkedAccountStack(pin: false)
        let readme = try String(contentsOfFile: PackagingTests.root + "/README.md", encoding: .utf8)
        let block = try #require(readme.components(separatedBy: "To try the module before touching").dropFirst().first?
            .components(separatedBy: "```sh\n").dropFirst().first?.components(separatedBy: "```").first)
        // The README's paths and user, made this test's: its daemon, the module built beside it.
        let script = block
            .replacingOccurrences(of: "/tmp/pam-try", with: daemon.directory + "/pam-try")
            .replacingOccurrences(of: "/run/authd/authd.sock", with: daemon.socketPath)
            .replacingOccurrences(of: "$PWD/.build/debug/libpam_authd.so", with: PAMStack.modulePath)
            .replacingOccurrences(of: "sudo env ", with: "env ")
            .replacingOccurrences(of: "\"$USER\"", with: Self.user)
        #expect(script != block && !script.contains("$PWD") && !script.contains("sudo"), "\(script)")
        let run = try TerminalSession(["/bin/bash", "-c", script], environment: ["PATH": "/usr/bin:/bin"])
        try run.answer("Password of the authd account of nobody:", FingerprintFixture.password)
        #expect(try run.finish() == 0, "\(run.transcript)")
        #expect(run.transcript.contains(Says.success), "\(run.transcript)")
    }

    @Test("account: the password and then the PIN sign in; a wrong PIN fails; once the PIN is switched off after too many wrong ones, the password alone is refused")
    func accountPasswordAndPIN() throws {
        let (daemon, _, stack) = try linkedAccountStack(pin: true)
        let right = try stack.run(Self.user, answers: [("Password of the authd account of nobody:", FingerprintFixture.password), ("Account PIN:", "480913")])
        #expect(right.status == 0, "\(right.transcript)")
        let wrongPIN = try stack.run(Self.user, answers: [("Password of the authd account", FingerprintFixture.password), ("Account PIN:", "111111")])
        #expect(wrongPIN.transcript.contains(Says.authError), "\(wrongPIN.transcript)")
        let wrongPassword = try stack.run(Self.user, answers: [("Password of the authd account", "not the password")])
        #expect(wrongPassword.transcript.contains(Says.authError), "\(wrongPassword.transcript)")
        #expect(!wrongPassword.transcript.contains("Account PIN"), "no PIN is asked after a wrong password")

        // As the 100th wrong PIN leaves the account: sign-in wants an SMS code now, and so does PAM.
        _ = try daemon.storeRows("UPDATE accounts SET pin_hash = NULL, pin_reenroll_required = 1", readOnly: false)
        let switchedOff = try stack.run(Self.user, answers: [("Password of the authd account", FingerprintFixture.password)])
        #expect(switchedOff.status != 0 && switchedOff.transcript.contains(Says.authError), "the password alone: \(switchedOff.transcript)")
        withExtendedLifetime(daemon) {}
    }

    @Test("a deactivated linked account is PAM_ACCT_EXPIRED in acct_mgmt, and its password (with its PIN unasked) proves nothing in authenticate")
    func deactivatedAccount() throws {
        let (daemon, account, stack) = try linkedAccountStack(pin: true)
        let active = try stack.run(Self.user, ["acct_mgmt"])
        #expect(active.status == 0, "\(active.transcript)")
        _ = try daemon.connect().result("admin.accounts.deactivate", ["account": .string(account)])
        let expired = try stack.run(Self.user, ["acct_mgmt"])
        #expect(expired.status != 0)
        #expect(expired.transcript.contains(Says.expired), "\(expired.transcript)")
        // pam_authd(8)'s sudo example has no account line: authenticate must refuse on its own.
        let refused = try stack.run(Self.user)
        #expect(refused.status != 0, "\(refused.transcript)")
        #expect(refused.transcript.contains("deactivated"), "\(refused.transcript)")
        #expect(!refused.transcript.contains("Password of the authd account"), "nothing is asked for an account that cannot sign in")
    }

    @Test("20 concurrent pamtester runs with wrong passwords for one user: the lockout holds, then the right password is PAM_MAXTRIES")
    func concurrentLockout() throws {
        let (daemon, _, stack) = try linkedAccountStack(pin: false)
        let outcomes = Mutex<[String]>([])
        let errors = onThreads(20) { _ in
            let run = try stack.run(Self.user, answers: [("Password of the authd account", "wrong password here")], seconds: 60)
            outcomes.withLock { $0.append(run.transcript) }
        }
        #expect(errors.isEmpty, "\(errors)")
        let transcripts = outcomes.withLock { $0 }
        #expect(transcripts.count == 20)
        #expect(transcripts.allSatisfy { $0.contains(Says.authError) || $0.contains(Says.maxTries) }, "\(transcripts)")
        #expect(transcripts.contains { $0.contains(Says.maxTries) }, "the lockout was reached")
        let right = try stack.run(Self.user, answers: [("Password of the authd account", FingerprintFixture.password)])
        #expect(right.status != 0)
        #expect(right.transcript.contains(Says.maxTries), "locked: even the right password is refused: \(right.transcript)")
        let account = try stack.run(Self.user, ["acct_mgmt"])
        #expect(account.transcript.contains(Says.permissionDenied), "acct_mgmt too, while the lock holds: \(account.transcript)")
        #expect(account.transcript.contains("locked after failed sign-ins until"), "\(account.transcript)")
        withExtendedLifetime(daemon) {}
    }

    /// The toolchain's clang (it links AddressSanitizer's runtime statically, so the runtime comes
    /// first even with libpam_wrapper preloaded).
    static var clang: String? {
        let path = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init) + ["/opt/swift/usr/bin"]
        return path.map { $0 + "/clang" }.first { access($0, X_OK) == 0 }
    }

    @Test("under AddressSanitizer, a program's libpam dlopens the module, runs auth and account, and the program dlopens and dlcloses it again")
    func addressSanitizer() throws {
        let clang = try #require(Self.clang, "no clang on PATH or in /opt/swift/usr/bin")
        let (daemon, _, stack) = try linkedAccountStack(pin: true)
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Hosts/pam_host.c").path
        let host = stack.directory + "/pam_host"
        let compiled = try DaemonHarness.run([clang, "-fsanitize=address", "-fno-omit-frame-pointer", "-g", "-fuse-ld=bfd", "-o", host, source, "-lpam", "-ldl"])
        try #require(compiled.status == 0, "\(compiled.stderr)")
        // Any error AddressSanitizer finds ends the program with status 66 and its report.
        let environment = ["PATH": "/usr/bin:/bin", "ASAN_OPTIONS": "exitcode=66:detect_leaks=1"]
        let run = [host, PAMStack.modulePath, stack.directory, PAMStack.service, Self.user]
        let right = try DaemonHarness.run(run + [FingerprintFixture.password, "480913"], environment: environment)
        #expect(right.status == 0, "\(right.stdout)\(right.stderr)")
        #expect(right.stdout.contains("asked: Password of the authd account of nobody:"))
        #expect(right.stdout.contains("asked: Account PIN:"))
        #expect(!right.stderr.contains("AddressSanitizer"), "\(right.stderr)")
        let wrong = try DaemonHarness.run(run + ["not the password"], environment: environment)
        #expect(wrong.stdout.contains("authenticate: Authentication failure"), "\(wrong.stdout)\(wrong.stderr)")
        #expect(!wrong.stderr.contains("AddressSanitizer"), "\(wrong.stderr)")
        withExtendedLifetime(daemon) {}
    }

    // MARK: authd away, and who may ask

    @Test("authd down: PAM_AUTHINFO_UNAVAIL at once, and a sufficient line falls through to the next")
    func daemonDown() throws {
        let directory = try DaemonHarness()
        let socket = directory.directory + "/absent.sock"
        let required = try PAMStack(socket: socket, Self.required)
        let alone = try required.run(Self.user)
        #expect(alone.status != 0)
        #expect(alone.transcript.contains(Says.unavailable), "\(alone.transcript)")
        #expect(alone.elapsed < 5, "no wait at all for a socket nobody listens on (took \(alone.elapsed) s)")
        let fellThrough = try PAMStack(socket: socket, Self.sufficient).run(Self.user)
        #expect(fellThrough.status == 0, "pam_permit, the next line, decided: \(fellThrough.transcript)")
    }

    @Test("a daemon that never answers: PAM_AUTHINFO_UNAVAIL within the one-second bound of the call")
    func daemonHung() throws {
        let directory = try DaemonHarness()
        let socket = directory.directory + "/hung.sock"
        // A listener that accepts and never answers (a socket unit whose service does not start).
        let listener = socket_listening(socket)
        defer { close(listener) }
        let run = try PAMStack(socket: socket, Self.required).run(Self.user, seconds: 20)
        #expect(run.transcript.contains(Says.unavailable), "\(run.transcript)")
        #expect(run.elapsed < 1, "within connect_timeout (1 s) of pamtester's start, as pam_authd(8) promises (took \(run.elapsed) s)")
    }

    @Test("a socket not owned by root is refused without connecting")
    func foreignSocket() throws {
        let daemon = try DaemonHarness(config: Self.config)
        try start(daemon)
        let stack = try PAMStack(socket: daemon.socketPath, Self.required)
        #expect(chown(daemon.socketPath, 65534, 65534) == 0)
        let refused = try stack.run(Self.user)
        #expect(refused.transcript.contains(Says.unavailable), "\(refused.transcript)")
        let audit = try daemon.connect().result("admin.audit.tail", ["limit": 20])
        #expect(audit["records"]?.arrayValue?.contains { $0["method"] == "pam.authenticate" } == false, "authd was never asked")
    }

    @Test("pam.authenticate and pam.account refuse a caller that is not root, and the refusal is audited with the service")
    func nonRootRefused() throws {
        let daemon = try DaemonHarness(config: Self.config)
        try start(daemon)
        let call = try daemon.authctl(["call", "pam.authenticate", #"{"user":"root","service":"sudo","tty":"/dev/pts/1"}"#], user: "nobody")
        #expect(call.status != 0)
        #expect((call.stdout + call.stderr).contains("auth.forbidden"), "\(call)")
        let account = try daemon.authctl(["call", "pam.account", #"{"user":"root","service":"sudo"}"#], user: "nobody")
        #expect((account.stdout + account.stderr).contains("auth.forbidden"), "\(account)")
        let audit = try daemon.connect().result("admin.audit.tail", ["limit": 20])
        #expect(audit["records"]?.arrayValue?.contains {
            $0["method"] == "pam.authenticate" && $0["outcome"] == "denied" && $0["detail"]?["service"] == "sudo" && $0["detail"]?["user"] == "root"
        } == true, "\(audit)")
    }

    @Test("a lock that comes while a card link waits for the card holds for it: nothing is linked")
    func lockDuringTheCardLink() throws {
        let rig = try CardRig()
        let daemon = try cardDaemon(rig)
        let client = try daemon.connect()
        // A sign-in this local user remembers: the lock has something to open it with.
        _ = try LoginTests.register(daemon, client, phone: "+37251234567", password: "a long enough passphrase")
        let locker = try daemon.connect()
        var inserted = false
        let outcome = try client.rpc.request(method: "pam.link.card", params: ["user": .string(Self.user), "timeout_s": 30] as JSONValue) { name, prompt in
            guard name == "prompt", prompt?["kind"] == "card", !inserted else { return }
            inserted = true
            #expect(try locker.result("lock")["locked"] == true)
            try rig.insertCard()
        }
        let response = JSONValue(response: outcome)
        #expect(inserted, "the link waited for the card: \(response)")
        #expect(response["error"]?["data"]?["reason"] == "session.locked", "\(response)")
        let status = try daemon.connect().result("pam.status", ["user": .string(Self.user)])
        #expect(!"\(status)".contains("38001085718"), "nothing was linked: \(status)")
    }

    @Test("links: a user manages their own; another user's only as an admin; one card serves one user unless allowed")
    func links() throws {
        let rig = try CardRig()
        try rig.insertCard()
        let daemon = try cardDaemon(rig)
        try linkCard(daemon)
        let own = try daemon.authctl(["--json", "pam", "status"], user: "nobody")
        #expect(own.status == 0, "\(own)")
        #expect(own.stdout.contains("38001085718"))
        let other = try daemon.authctl(["pam", "status", "--user", "root"], user: "nobody")
        #expect(other.status != 0)
        #expect(other.stderr.contains("admin"), "\(other)")
        let again = try daemon.connect().callAnswering("pam.link.card", ["user": "daemon", "timeout_s": 15], answers: [:])
        #expect(again.response["error"]?["data"]?["reason"] == "pam.already_linked", "\(again.response)")
        let unlinked = try daemon.authctl(["--json", "pam", "unlink", "--card"], user: "nobody")
        #expect(unlinked.status == 0, "\(unlinked)")
        #expect(!unlinked.stdout.contains("38001085718"))
        // A user links a card by proving it is theirs: its PIN1.
        let wrongPIN = try daemon.authctl(["pam", "link", "card", "--pin-fd", "0"], stdin: "9999\n", user: "nobody")
        #expect(wrongPIN.status != 0)
        #expect(try daemon.authctl(["--json", "pam", "status"], user: "nobody").stdout.contains("38001085718") == false, "a wrong PIN1 links nothing")
        let selfLinked = try daemon.authctl(["--json", "pam", "link", "card", "--pin-fd", "0"], stdin: "1234\n", user: "nobody")
        #expect(selfLinked.status == 0, "\(selfLinked)")
        #expect(selfLinked.stdout.contains("38001085718"))
        _ = try daemon.authctl(["pam", "unlink"], user: "nobody")
        let linked = try daemon.connect().callAnswering("pam.link.card", ["user": "daemon", "timeout_s": 15], answers: [:])
        #expect(linked.response["result"]?["user"] == "daemon", "free again, and an admin links without PIN1: \(linked.response)")
    }
}

/// A Unix socket listening at `path` that never accepts a line's answer; its descriptor.
private func socket_listening(_ path: String) -> Int32 {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
    _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
    listen(fd, 16)
    return fd
}
