import CArgon2
import FoundationEssentials
import OpenSSLCrypto

// The only file that calls libargon2.

/// Argon2id password and PIN hashing (RFC 9106) in the PHC string format, so parameters and
/// salt travel with the hash and can be raised later without losing old hashes.
struct Argon2id: Sendable {
    /// OWASP's recommendation for Argon2id: m = 19 MiB, t = 2, p = 1.
    static let owasp = Argon2id(memoryKiB: 19 * 1024, iterations: 2, parallelism: 1)

    let memoryKiB: UInt32
    let iterations: UInt32
    let parallelism: UInt32

    struct Failure: Error, CustomStringConvertible {
        let code: Int32
        var description: String { "Argon2: " + String(cString: argon2_error_message(code)) }
    }

    /// A PHC string `$argon2id$v=19$m=…,t=…,p=…$salt$hash` with a fresh 16-byte salt.
    func hash(_ secret: SecretBytes) throws -> String {
        let salt = try OpenSSL.randomBytes(16)
        let length = argon2_encodedlen(iterations, memoryKiB, parallelism, UInt32(salt.count), 32, Argon2_id)
        var encoded = [CChar](repeating: 0, count: length)
        let status = secret.withUnsafeBytes { password in
            argon2id_hash_encoded(iterations, memoryKiB, parallelism, password.baseAddress, password.count,
                                  salt, salt.count, 32, &encoded, encoded.count)
        }
        guard status == ARGON2_OK.rawValue else { throw Failure(code: status) }
        return String(decoding: encoded.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// True when `secret` matches `encoded`. libargon2 compares in constant time.
    static func verify(_ secret: SecretBytes, against encoded: String) throws -> Bool {
        let status = secret.withUnsafeBytes { password in
            argon2id_verify(encoded, password.baseAddress, password.count)
        }
        switch status {
        case ARGON2_OK.rawValue: return true
        case ARGON2_VERIFY_MISMATCH.rawValue: return false
        default: throw Failure(code: status)
        }
    }

    /// `hash`, on a worker of `workers`: a 19 MiB, ~50 ms computation must not occupy one of
    /// the few threads of Swift's cooperative pool, where it would stall every other request.
    /// Waits its turn when every worker is busy; a caller cancelled while waiting throws
    /// `CancellationError` without hashing.
    func hashOffPool(_ secret: SecretBytes) async throws -> String {
        try await Self.workers.run { try hash(secret) }
    }

    /// `verify`, on a worker of `workers` (see `hashOffPool`).
    static func verifyOffPool(_ secret: SecretBytes, against encoded: String) async throws -> Bool {
        try await workers.run { try verify(secret, against: encoded) }
    }

    /// The workers every hash and verification of the daemon runs on (see `workerCount`).
    /// They compute, so they take turns on libdispatch's threads for CPU-bound work: the
    /// 19 MiB blocks glibc keeps after a hash stay with those few threads, not one per thread
    /// that ever hashed.
    static let workers = BlockingPool(
        label: "authd.argon2",
        count: workerCount(cores: ProcessInfo.processInfo.activeProcessorCount, memoryBytes: ProcessInfo.processInfo.physicalMemory),
        work: .computing)

    /// How many hashes may run at once. Argon2id is CPU-bound and memory-hard: one hash keeps
    /// one core busy for its whole run and holds its 19 MiB until it ends (glibc then keeps the
    /// block for that worker's next hash, so it stays in RSS). Workers beyond the core count
    /// would add memory and latency but no throughput (the hashes would only share the cores),
    /// so there is one per core, at most `maxWorkers`, as long as all of them together take at
    /// most a sixteenth of the machine's memory: a burst of sign-ins then costs a bounded 19 MiB
    /// per worker (38 MiB on two cores, 76 MiB at most), which the units' `MemoryHigh=` counts
    /// on, and a small device (512 MiB) hashes one at a time instead of swapping. Requests
    /// beyond that wait their turn, the callers taking turns (`BlockingPool`): a caller with
    /// many checks waiting delays another's by about one hash per worker.
    static func workerCount(cores: Int, memoryBytes: UInt64, memoryKiB: UInt32 = owasp.memoryKiB) -> Int {
        let affordable = memoryBytes / 16 / (UInt64(memoryKiB) * 1024)
        return max(1, min(cores, maxWorkers, Int(clamping: affordable)))
    }

    /// Four workers check about 80 passwords a second, more than the sign-ins a machine's users
    /// make, and keep the daemon's memory independent of the core count (76 MiB at most).
    static let maxWorkers = 4

    /// Whether a stored hash uses weaker parameters than these (then it is re-hashed at the
    /// next successful login).
    func isStronger(than encoded: String) -> Bool {
        guard let parameters = encoded.split(separator: "$").dropFirst(2).first else { return true }
        var values: [Substring: UInt32] = [:]
        for pair in parameters.split(separator: ",") {
            let parts = pair.split(separator: "=")
            if parts.count == 2, let value = UInt32(parts[1]) { values[parts[0]] = value }
        }
        return (values["m"] ?? 0) < memoryKiB || (values["t"] ?? 0) < iterations
    }
}
