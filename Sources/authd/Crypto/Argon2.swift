import CArgon2
import Dispatch
import FoundationEssentials
import OpenSSLCrypto
import Synchronization

// The only file that calls libargon2.

/// Argon2id password and PIN hashing (RFC 9106) in the PHC string format, so parameters and
/// salt travel with the hash and can be raised later without losing old hashes.
struct Argon2id: Sendable, Equatable {
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
        try hash(secret, salt: try OpenSSL.randomBytes(16))
    }

    /// `hash` with the salt given (tests compare it with libargon2's own encoding).
    func hash(_ secret: SecretBytes, salt: [UInt8]) throws -> String {
        var output = [UInt8](repeating: 0, count: 32)
        let status = Self.withContext(self, secret: secret, salt: salt, output: &output) { argon2id_ctx($0) }
        guard status == ARGON2_OK.rawValue else { throw Failure(code: status) }
        return PHCString(parameters: self, salt: salt, hash: output).encoded
    }

    /// True when `secret` matches `encoded`. libargon2 compares in constant time.
    static func verify(_ secret: SecretBytes, against encoded: String) throws -> Bool {
        let status: Int32
        if let stored = PHCString(encoded) {
            var output = [UInt8](repeating: 0, count: stored.hash.count)
            status = withContext(stored.parameters, secret: secret, salt: stored.salt, output: &output) { context in
                stored.hash.withUnsafeBytes { argon2id_verify_ctx(context, $0.bindMemory(to: CChar.self).baseAddress) }
            }
        } else {
            // A form `hash` never writes (another version, a keyed hash): libargon2 reads it
            // itself, with memory from malloc.
            status = secret.withUnsafeBytes { password in argon2id_verify(encoded, password.baseAddress, password.count) }
        }
        switch status {
        case ARGON2_OK.rawValue: return true
        case ARGON2_VERIFY_MISMATCH.rawValue: return false
        default: throw Failure(code: status)
        }
    }

    /// Runs `body` on an Argon2 context for `parameters` whose working memory comes from
    /// `Argon2Memory` (libargon2 wipes it before handing it back).
    private static func withContext(_ parameters: Argon2id, secret: SecretBytes, salt: [UInt8], output: inout [UInt8],
                                    _ body: (UnsafeMutablePointer<argon2_context>) -> Int32) -> Int32 {
        secret.withUnsafeBytes { password in
            salt.withUnsafeBufferPointer { salt in
                output.withUnsafeMutableBufferPointer { output in
                    var context = argon2_context(
                        out: output.baseAddress, outlen: UInt32(output.count),
                        pwd: UnsafeMutablePointer(mutating: password.baseAddress?.assumingMemoryBound(to: UInt8.self)), pwdlen: UInt32(password.count),
                        salt: UnsafeMutablePointer(mutating: salt.baseAddress), saltlen: UInt32(salt.count),
                        secret: nil, secretlen: 0, ad: nil, adlen: 0,
                        t_cost: parameters.iterations, m_cost: parameters.memoryKiB, lanes: parameters.parallelism,
                        // The lanes are computed one after another on the worker's own thread: a
                        // worker is one core's worth of hashing (see `workerCount`).
                        threads: 1, version: UInt32(ARGON2_VERSION_13.rawValue),
                        allocate_cbk: Argon2Memory.allocate, free_cbk: Argon2Memory.deallocate,
                        flags: 0)  // ARGON2_DEFAULT_FLAGS: the caller wipes the secret (SecretBytes)
                    return body(&context)
                }
            }
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
    /// one core busy for its whole run and holds its 19 MiB until it ends (`Argon2Memory` then
    /// keeps the block for the next hash, until sign-ins pause). Workers beyond the core count
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
        let values = PHCString.fields(parameters)
        return (values["m"] ?? 0) < memoryKiB || (values["t"] ?? 0) < iterations
    }
}

/// The PHC string libargon2 writes for Argon2id: `$argon2id$v=19$m=M,t=T,p=P$SALT$HASH`, salt
/// and hash in base64 without padding. libargon2 exports no encoder or decoder for it outside
/// its malloc-based calls, so the one form it writes is read and written here; anything else
/// (`init?` answers nil) goes back to libargon2's own `argon2id_verify`.
struct PHCString: Equatable {
    let parameters: Argon2id
    let salt: [UInt8]
    let hash: [UInt8]

    init(parameters: Argon2id, salt: [UInt8], hash: [UInt8]) {
        self.parameters = parameters
        self.salt = salt
        self.hash = hash
    }

    init?(_ encoded: String) {
        let parts = encoded.split(separator: "$", omittingEmptySubsequences: false)
        guard parts.count == 6, parts[0].isEmpty, parts[1] == "argon2id", parts[2] == "v=19" else { return nil }
        let values = Self.fields(parts[3])
        guard values.count == 3, let memory = values["m"], let iterations = values["t"], let parallelism = values["p"],
              let salt = Self.unpadded(parts[4]), let hash = Self.unpadded(parts[5]), !hash.isEmpty
        else { return nil }
        self.init(parameters: Argon2id(memoryKiB: memory, iterations: iterations, parallelism: parallelism), salt: salt, hash: hash)
        // Only the canonical form: "m=019456", a field that is not a number, or padding would
        // read back differently.
        guard self.encoded == encoded else { return nil }
    }

    /// The numeric fields of a parameter segment, `m=19456,t=2,p=1` (others are left out).
    static func fields(_ segment: Substring) -> [Substring: UInt32] {
        var values: [Substring: UInt32] = [:]
        for pair in segment.split(separator: ",") {
            let parts = pair.split(separator: "=")
            if parts.count == 2, let value = UInt32(parts[1]) { values[parts[0]] = value }
        }
        return values
    }

    var encoded: String {
        "$argon2id$v=19$m=\(parameters.memoryKiB),t=\(parameters.iterations),p=\(parameters.parallelism)$"
            + Self.unpadded(salt) + "$" + Self.unpadded(hash)
    }

    private static func unpadded(_ bytes: [UInt8]) -> String {
        String(Data(bytes).base64EncodedString().prefix { $0 != "=" })
    }

    private static func unpadded(_ text: Substring) -> [UInt8]? {
        let padding = String(repeating: "=", count: (4 - text.count % 4) % 4)
        return Data(base64Encoded: String(text) + padding).map { [UInt8]($0) }
    }
}

/// Argon2id's working memory (19 MiB a hash), mapped here rather than taken from malloc. A
/// block a hash gave back waits for the next hash, so a burst of sign-ins maps each block
/// once; it returns to the system once no hash has wanted it for `idleRelease`. (glibc would
/// keep a freed block that large for good, in the arena of whichever thread freed it.)
final class Argon2Memory: Sendable {
    static let shared = Argon2Memory(idleRelease: .seconds(2))

    /// libargon2's allocator callbacks (`allocate_cbk`, `free_cbk`).
    static let allocate: allocate_fptr = { memory, bytes in
        guard let memory, let block = shared.take(bytes) else { return ARGON2_MEMORY_ALLOCATION_ERROR.rawValue }
        memory.pointee = block.assumingMemoryBound(to: UInt8.self)
        return ARGON2_OK.rawValue
    }
    static let deallocate: deallocate_fptr = { memory, bytes in
        if let memory { shared.give(UnsafeMutableRawPointer(memory), bytes: bytes) }
    }

    /// Sendable because a block has one owner at a time: `idle` under the lock, then whoever
    /// removed it there (a hash, or `releaseIdle` unmapping it).
    private struct Block: @unchecked Sendable {
        let address: UnsafeMutableRawPointer
        let bytes: Int
        let freedAt: ContinuousClock.Instant
    }

    private struct State {
        var idle: [Block] = []
        var releaseScheduled = false
        /// Blocks mapped now, in use or idle.
        var mappedBytes = 0
    }

    let idleRelease: Duration
    private let state = Mutex(State())

    init(idleRelease: Duration) {
        self.idleRelease = idleRelease
    }

    /// Bytes mapped now (in use by a hash or waiting for the next).
    var mappedBytes: Int { state.withLock { $0.mappedBytes } }

    /// A block of `bytes`: an idle one of that size, or a new mapping (nil when none can be made).
    func take(_ bytes: Int) -> UnsafeMutableRawPointer? {
        let reused = state.withLock { state -> UnsafeMutableRawPointer? in
            guard let index = state.idle.lastIndex(where: { $0.bytes == bytes }) else { return nil }
            return state.idle.remove(at: index).address
        }
        if let reused { return reused }
        guard let mapped = Syscalls.mapAnonymous(bytes) else { return nil }
        state.withLock { $0.mappedBytes += bytes }
        return mapped
    }

    /// Takes back a block from `take`; it is unmapped once idle for `idleRelease`.
    func give(_ address: UnsafeMutableRawPointer, bytes: Int) {
        let schedule = state.withLock { state -> Bool in
            state.idle.append(Block(address: address, bytes: bytes, freedAt: .now))
            defer { state.releaseScheduled = true }
            return !state.releaseScheduled
        }
        if schedule { scheduleRelease(after: idleRelease) }
    }

    private func scheduleRelease(after delay: Duration) {
        let nanoseconds = Int(delay.components.seconds) * 1_000_000_000 + Int(delay.components.attoseconds / 1_000_000_000)
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [self] in releaseIdle() }
    }

    /// Unmaps the blocks idle for `idleRelease`; looks again when the next one will be.
    private func releaseIdle() {
        let now = ContinuousClock.now
        let (expired, next) = state.withLock { state -> ([Block], ContinuousClock.Instant?) in
            let kept = state.idle.partition { now - $0.freedAt >= idleRelease }
            let expired = Array(state.idle[kept...])
            state.idle.removeSubrange(kept...)
            state.mappedBytes -= expired.reduce(0) { $0 + $1.bytes }
            let next = state.idle.map(\.freedAt).min().map { $0 + idleRelease }
            state.releaseScheduled = next != nil
            return (expired, next)
        }
        for block in expired { Syscalls.unmap(block.address, bytes: block.bytes) }
        if let next { scheduleRelease(after: max(next - now, .milliseconds(10))) }
    }
}
