/// What one fprintd `VerifyStatus(result, done)` signal means (fprintd 1.94,
/// `verify_result_to_name`). Retry results come with `done = false`: fprintd rescans by itself
/// and the same verification goes on.
enum ScanStatus: Equatable, Sendable {
    case match
    case noMatch
    /// The scan was not usable; the user should try again (`message` says how).
    case retry(message: String)
    /// The reader failed (`verify-disconnected`, `verify-unknown-error`, anything unknown).
    case failed(result: String)

    init(result: String, done: Bool) {
        switch (result, done) {
        case ("verify-match", true): self = .match
        case ("verify-no-match", true): self = .noMatch
        case ("verify-retry-scan", false): self = .retry(message: "The scan did not work; touch the fingerprint reader again")
        case ("verify-swipe-too-short", false): self = .retry(message: "The swipe was too short; swipe your finger again")
        case ("verify-finger-not-centered", false): self = .retry(message: "Your finger was not centred; touch the reader again")
        case ("verify-remove-and-retry", false): self = .retry(message: "Lift your finger and touch the reader again")
        case (_, false): self = .retry(message: "Touch the fingerprint reader again")
        default: self = .failed(result: result)
        }
    }

    var isFinal: Bool {
        if case .retry = self { return false }
        return true
    }
}

/// How one fingerprint attempt ended, as the daemon sees it.
enum ScanOutcome: Equatable, Sendable {
    case match
    case noMatch
    /// The reader or fprintd failed during the scan (disconnected, unknown error, vanished).
    case failed(String)
    /// No final result within the configured wait.
    case timeout
    /// The user declined, or the request was cancelled.
    case cancelled
}

/// Fingerprint use for one local user (uid): whether fingerprint unlock is on, and the
/// consecutive failures that switch every fingerprint use off until a password proves the
/// user again (at most 5). A pure value: the store keeps it, handlers decide with it.
struct BiometricGate: Equatable, Sendable {
    static let failureLimit = 5

    var enabled = false
    var failures = 0

    /// True once `failureLimit` consecutive scans did not match.
    var cutOff: Bool { failures >= Self.failureLimit }
    var attemptsLeft: Int { max(0, Self.failureLimit - failures) }

    /// Counts what a scan proved. Only a finger that does not match counts against the user;
    /// a reader failure, a timeout or a cancel says nothing about who is there.
    mutating func record(_ outcome: ScanOutcome) {
        switch outcome {
        case .match: failures = 0
        case .noMatch: failures = min(failures + 1, Self.failureLimit)
        case .failed, .timeout, .cancelled: break
        }
    }

    /// The password (or a code sent to the account's number) proved the user: the count starts
    /// again and the cut-off lifts.
    mutating func passwordProved() { failures = 0 }
}

/// Whether the saved PIN1 of the ID card is released by a fingerprint.
enum PIN1Release: Int, Sendable, Equatable {
    /// The saved PIN1 (if any) is used as it is; no fingerprint involved.
    case off = 0
    /// A matching finger releases the saved PIN1; otherwise PIN1 is asked for.
    case fingerprint = 1
    /// The card refused the released PIN1: off until a new PIN1 is saved.
    case suspended = 2

    var name: String {
        switch self {
        case .off: "off"
        case .fingerprint: "on"
        case .suspended: "suspended"
        }
    }

    /// Saving a new PIN1 lifts a suspension.
    func afterPIN1Saved() -> PIN1Release { self == .suspended ? .fingerprint : self }
    /// The card refused the PIN1 the finger released.
    func afterCardRefusedPIN1() -> PIN1Release { self == .fingerprint ? .suspended : self }
}

/// The login name fprintd gets. fprintd builds a storage path from it without checking, so
/// only plain names pass: 1–64 of `A–Z a–z 0–9 . _ -`, not starting with `.` or `-`.
enum FingerprintUser {
    static func validated(_ name: String?) -> String? {
        guard let name, (1...64).contains(name.utf8.count),
              name.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5a) || ($0 >= 0x61 && $0 <= 0x7a) || $0 == 0x2e || $0 == 0x5f || $0 == 0x2d }),
              let first = name.utf8.first, first != 0x2e, first != 0x2d
        else { return nil }
        return name
    }
}
