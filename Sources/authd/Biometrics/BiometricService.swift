import FoundationEssentials
import Protocol
import Synchronization

/// Fingerprint checks for the daemon's flows (unlock, fast-forward login, the sign-in step,
/// the ID card's PIN1): each asks the user through a `fingerprint` prompt, scans through
/// fprintd, and keeps each local user's gate (enabled, consecutive failures) in the store.
struct BiometricService: Sendable {
    let store: Store
    let config: ConfigHolder
    let logger: Logger
    let reader: FingerprintReader

    /// A local user's fingerprint settings as stored.
    struct Settings: Sendable, Equatable {
        var gate = BiometricGate()
        var pin1 = PIN1Release.off
    }

    /// A local user's settings, read inside the caller's transaction (the lock reads the gate).
    static func settings(in database: Database, _ uid: UInt32) throws -> Settings {
        try database.queryOne("SELECT biometric_enabled, biometric_failures, card_pin1_release FROM local_users WHERE uid = ?",
                              [.integer(Int64(uid))]) {
            Settings(gate: BiometricGate(enabled: $0.int(0) != 0, failures: $0.int(1)), pin1: PIN1Release(rawValue: $0.int(2)) ?? .off)
        } ?? Settings()
    }

    func settings(_ uid: UInt32) async throws -> Settings {
        try await store.read { database in try Self.settings(in: database, uid) }
    }

    /// Changes a local user's settings in one transaction (creating their row if needed).
    @discardableResult
    func update(_ uid: UInt32, _ change: @escaping @Sendable (inout Settings) -> Void) async throws -> Settings {
        try await store.transaction { database in
            var settings = try Self.settings(in: database, uid)
            change(&settings)
            try database.execute(
                """
                INSERT INTO local_users (uid, biometric_enabled, biometric_failures, card_pin1_release) VALUES (?, ?, ?, ?)
                ON CONFLICT (uid) DO UPDATE SET biometric_enabled = excluded.biometric_enabled,
                    biometric_failures = excluded.biometric_failures, card_pin1_release = excluded.card_pin1_release
                """,
                [.integer(Int64(uid)), .integer(settings.gate.enabled ? 1 : 0), .integer(Int64(settings.gate.failures)), .integer(Int64(settings.pin1.rawValue))])
            return settings
        }
    }

    /// The fprintd user name of the caller, or `biometric.unavailable`.
    static func user(of caller: CallerIdentity) throws(BiometricFailure) -> String {
        guard let name = FingerprintUser.validated(caller.username) else { throw .noUsableUserName }
        return name
    }

    func status(_ uid: UInt32, caller: CallerIdentity) async throws -> BiometricStatus.Result {
        let settings = try await settings(uid)
        var reader: Fprintd.Reader?
        var reason: String?
        if let user = FingerprintUser.validated(caller.username) {
            switch await self.reader.probe(user: user) {
            case .success(let found): reader = found
            case .failure(let failure): reason = failure.message
            }
        } else {
            reason = "no usable user name"
        }
        return .init(enabled: settings.gate.enabled, available: reader != nil, unavailableReason: reason, reader: reader?.name,
                     fingers: reader?.fingers ?? [], failures: settings.gate.failures, cutOff: settings.gate.cutOff, cardPin1: settings.pin1.name)
    }

    /// Checks that the caller has a reader and an enrolled finger (no scan).
    func requireAvailable(_ caller: CallerIdentity) async throws {
        if case .failure(let failure) = await reader.probe(user: try Self.user(of: caller)) { throw BiometricFailure.reader(failure) }
    }

    /// Scans `user`'s finger, asking through a `fingerprint` prompt on the caller's connection:
    /// up to `attempts` scans until one matches. With `gateUID`, every finger that does not
    /// match counts against that local user's gate, and a cut-off gate refuses at once.
    /// Returns on a match; throws the `biometric.*` reason (or `user.cancelled`) otherwise.
    /// Each scan waits `timeout` seconds (`[biometric] timeout` when nil).
    func verify(user: String, gateUID: UInt32?, attempts: Int, purpose: String, timeout: Int? = nil, context: RequestContext) async throws {
        if let gateUID, try await settings(gateUID).gate.cutOff { throw BiometricFailure.cutOff }
        let timeout = timeout ?? config.current.biometricTimeoutSeconds
        let prompts = context.prompts
        let current = Mutex<CancelPipe?>(nil)
        let userCancelled = Atomic(false)
        let promptID = prompts.progress {
            userCancelled.store(true, ordering: .releasing)
            current.withLock { $0?.fire() }
        }
        defer { prompts.finish(promptID) }
        let say: @Sendable (String) -> Void = { message in
            prompts.notify(id: promptID, kind: .fingerprint, message: message, secondsLeft: timeout)
        }
        try await reader.withReader(user: user) { device in
            // Again with the reader held: a request that queued behind others must not scan past a cut-off they tripped.
            if let gateUID, try await settings(gateUID).gate.cutOff { throw BiometricFailure.cutOff }
            var left = attempts
            var message = "Touch the fingerprint reader \(purpose)"
            while true {
                say(message)
                let pipe = try CancelPipe()
                current.withLock { $0 = pipe }
                if userCancelled.load(ordering: .acquiring) { pipe.fire() }
                let outcome = await device.scan(timeout: .seconds(timeout), cancel: pipe) { status in
                    if case .retry(let hint) = status { say(hint) }
                }
                try Task.checkCancellation()
                var attemptsLeft = left - 1
                var gateLeft = 0
                if let gateUID {
                    let gate = try await update(gateUID) { $0.gate.record(outcome) }.gate
                    gateLeft = gate.attemptsLeft
                    attemptsLeft = min(attemptsLeft, gate.attemptsLeft)
                    if outcome == .noMatch && gate.cutOff {
                        logger.notice("fingerprints switched off after \(BiometricGate.failureLimit) fingers in a row did not match",
                                      [("AUTHD_CALLER_UID", String(gateUID))])
                        throw BiometricFailure.cutOff
                    }
                }
                switch outcome {
                case .match:
                    return
                case .noMatch where attemptsLeft > 0:
                    left = attemptsLeft
                    message = "Not recognised; touch the reader again (\(attemptsLeft) \(attemptsLeft == 1 ? "try" : "tries") left)"
                case .noMatch:
                    throw BiometricFailure.noMatch(attemptsLeft: gateLeft)
                case .cancelled:
                    throw BiometricFailure.cancelled
                case .timeout:
                    throw BiometricFailure.timeout(seconds: timeout)
                case .failed(let why):
                    throw BiometricFailure.readerFailed(why)
                }
            }
        }
    }

}

extension FingerprintReader {
    /// Claims the reader, mapping why it cannot be claimed to the wire reasons.
    func withReader<T: Sendable>(user: String, _ body: (ClaimedReader) async throws -> T) async throws -> T {
        do {
            return try await claim(user: user, body)
        } catch let failure as FingerprintFailure {
            throw BiometricFailure.reader(failure)
        }
    }
}
