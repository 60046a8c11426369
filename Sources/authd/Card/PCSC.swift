import CPCSC
import FoundationEssentials
import Glibc
import Synchronization

// The only file that calls pcsc-lite (libpcsclite, through CPCSC). It also calls libc's
// strdup/free for the reader names `SCARD_READERSTATE` points at.

/// The one wrapper over pcsc-lite. Blocking, and not Sendable: it lives inside the `CardQueue`
/// actor, on that actor's own queue. Only its `Wake` leaves it: pcsc-lite allows `SCardCancel`
/// from any thread, to cut a waiting `SCardGetStatusChange` short.
///
/// pcscd going away (restart, crash) invalidates the context; the next call establishes a
/// new one, so authd follows pcscd restarts without restarting itself.
final class PCSC {
    /// pcsc-lite's return codes (`pcsclite.h`), as the shim turns them into numbers.
    enum Code {
        static let success: Int = 0
        static let cancelled = authd_pcsc_code(0x8010_0002)
        static let invalidHandle = authd_pcsc_code(0x8010_0003)
        static let insufficientBuffer = authd_pcsc_code(0x8010_0008)
        static let unknownReader = authd_pcsc_code(0x8010_0009)
        static let timeout = authd_pcsc_code(0x8010_000A)
        static let sharingViolation = authd_pcsc_code(0x8010_000B)
        static let noSmartcard = authd_pcsc_code(0x8010_000C)
        static let commError = authd_pcsc_code(0x8010_0013)
        static let readerUnavailable = authd_pcsc_code(0x8010_0017)
        static let noService = authd_pcsc_code(0x8010_001D)
        static let serviceStopped = authd_pcsc_code(0x8010_001E)
        static let noReadersAvailable = authd_pcsc_code(0x8010_002E)
        static let commDataLost = authd_pcsc_code(0x8010_002F)
        static let unresponsiveCard = authd_pcsc_code(0x8010_0066)
        static let unpoweredCard = authd_pcsc_code(0x8010_0067)
        static let resetCard = authd_pcsc_code(0x8010_0068)
        static let removedCard = authd_pcsc_code(0x8010_0069)
    }

    static let plugAndPlay = "\\\\?PnP?\\Notification"

    struct ReaderState: Equatable {
        let name: String
        let eventState: UInt
        let atr: [UInt8]
        var cardPresent: Bool { eventState & UInt(SCARD_STATE_PRESENT) != 0 && eventState & UInt(SCARD_STATE_MUTE) == 0 }
    }

    /// Wakes a waiting `states(…)` call from any thread (`SCardCancel` on the live context).
    final class Wake: Sendable {
        private let context = Mutex<SCARDCONTEXT>(0)

        /// The context to cancel from now on (0: none).
        fileprivate func track(_ context: SCARDCONTEXT) {
            self.context.withLock { $0 = context }
        }

        func cancel() {
            context.withLock { if $0 != 0 { SCardCancel($0) } }
        }
    }

    private var context: SCARDCONTEXT = 0
    private let wake: Wake

    init(wake: Wake) { self.wake = wake }

    deinit { release() }

    private func establish() throws(CardFailure) {
        guard context == 0 else { return }
        var fresh: SCARDCONTEXT = 0
        let code = SCardEstablishContext(DWORD(SCARD_SCOPE_SYSTEM), nil, nil, &fresh)
        guard code == Code.success else { throw .serviceUnavailable }
        context = fresh
        wake.track(fresh)
    }

    /// Drops the context (after pcscd went away); the next call makes a new one.
    func release() {
        guard context != 0 else { return }
        wake.track(0)
        SCardReleaseContext(context)
        context = 0
    }

    /// Runs `body` with a live context; if pcscd restarted under us, once more with a new one.
    private func withContext<T>(_ body: (SCARDCONTEXT) throws(CardFailure) -> T) throws(CardFailure) -> T {
        for attempt in 0..<2 {
            try establish()
            do {
                return try body(context)
            } catch .serviceUnavailable where attempt == 0 {
                release()
            }
        }
        throw .serviceUnavailable
    }

    static func isServiceGone(_ code: Int) -> Bool {
        code == Code.noService || code == Code.serviceStopped || code == Code.invalidHandle
    }

    func readers() throws(CardFailure) -> [String] {
        try withContext { context throws(CardFailure) in
            var length: DWORD = 0
            var code = SCardListReaders(context, nil, nil, &length)
            if code == Code.noReadersAvailable { return [] }
            guard code == Code.success else { throw Self.isServiceGone(code) ? .serviceUnavailable : .cardError("SCardListReaders \(code)") }
            var buffer = [CChar](repeating: 0, count: Int(length))
            code = SCardListReaders(context, nil, &buffer, &length)
            if code == Code.noReadersAvailable { return [] }
            guard code == Code.success else { throw Self.isServiceGone(code) ? .serviceUnavailable : .cardError("SCardListReaders \(code)") }
            // A multi-string: names separated by NUL, ended by an empty one.
            return buffer.split(separator: 0).map { String(decoding: $0.map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        }
    }

    /// The state of `readers`. With `known` (the event states last seen), waits up to
    /// `timeoutMs` for a change; returns nil on timeout or `Wake.cancel()`.
    func states(_ readers: [String], known: [UInt]?, timeoutMs: Int, watchPlugAndPlay: Bool) throws(CardFailure) -> [ReaderState]? {
        try withContext { context throws(CardFailure) in
            let names = readers + (watchPlugAndPlay ? [Self.plugAndPlay] : [])
            let pointers = names.map { strdup($0)! }
            defer { pointers.forEach { free($0) } }
            var states = pointers.enumerated().map { index, pointer in
                var state = SCARD_READERSTATE()
                state.szReader = UnsafePointer(pointer)
                if let known, index < known.count { state.dwCurrentState = DWORD(known[index]) }
                else if index == readers.count { state.dwCurrentState = DWORD(readers.count) << 16 }
                return state
            }
            let code = SCardGetStatusChange(context, DWORD(known == nil ? 0 : timeoutMs), &states, DWORD(states.count))
            if code == Code.timeout || code == Code.cancelled { return nil }
            guard code == Code.success else {
                if Self.isServiceGone(code) { throw .serviceUnavailable }
                // A reader vanished between listing and waiting: the caller lists again.
                if code == Code.unknownReader || code == Code.readerUnavailable { return [] }
                throw .cardError("SCardGetStatusChange \(code)")
            }
            return states.prefix(readers.count).enumerated().map { index, state in
                let count = min(Int(state.cbAtr), 33)
                let atr = withUnsafeBytes(of: state.rgbAtr) { Array($0.prefix(count)) }
                return ReaderState(name: readers[index], eventState: UInt(state.dwEventState) & ~UInt(SCARD_STATE_CHANGED), atr: atr)
            }
        }
    }

    func connect(_ reader: String) throws(CardFailure) -> Card {
        try withContext { context throws(CardFailure) in
            var handle: SCARDHANDLE = 0
            var active: DWORD = 0
            let code = SCardConnect(context, reader, DWORD(SCARD_SHARE_SHARED), DWORD(SCARD_PROTOCOL_T0 | SCARD_PROTOCOL_T1), &handle, &active)
            guard code == Code.success else { throw Self.failure(code, "SCardConnect") }
            return Card(handle: handle, protocol: active)
        }
    }

    static func failure(_ code: Int, _ call: String) -> CardFailure {
        switch code {
        case Code.removedCard, Code.noSmartcard, Code.resetCard, Code.readerUnavailable, Code.unknownReader,
             Code.commError, Code.commDataLost, Code.unpoweredCard, Code.unresponsiveCard:
            return .removed
        case _ where isServiceGone(code):
            return .removed
        default:
            return .cardError("\(call) \(String(UInt32(truncatingIfNeeded: code), radix: 16))")
        }
    }

    /// A connected card: transactions and APDU exchange.
    final class Card {
        private let handle: SCARDHANDLE
        private let activeProtocol: DWORD
        private var connected = true
        /// Whether the card has answered an APDU on this connection. A connection lost before
        /// that means no card was really there (it was pulled while pcscd still showed it).
        private(set) var answered = false

        fileprivate init(handle: SCARDHANDLE, protocol: DWORD) {
            self.handle = handle
            self.activeProtocol = `protocol`
        }

        deinit { disconnect() }

        /// Exclusive use for one operation; other applications wait until `end()`.
        func begin() throws(CardFailure) {
            let code = SCardBeginTransaction(handle)
            guard code == Code.success else { throw PCSC.failure(code, "SCardBeginTransaction") }
        }

        func end() {
            SCardEndTransaction(handle, DWORD(SCARD_LEAVE_CARD))
        }

        /// One APDU out, one response in (at most 64 KiB + status word, as extended APDUs allow).
        func transmit(_ command: [UInt8]) throws(CardFailure) -> [UInt8] {
            var response = [UInt8](repeating: 0, count: 65_538)
            var length = DWORD(response.count)
            let code = SCardTransmit(handle, authd_pcsc_pci(activeProtocol), command, DWORD(command.count), nil, &response, &length)
            // Any failure here means the connection to the card was lost mid-way (removed,
            // reader unplugged, pcscd gone, the card stopped answering).
            guard code == Code.success else { throw .removed }
            // No status word at all: the driver's link to the card is gone (vpcd answers so).
            guard length >= 2 else { throw .removed }
            answered = true
            return Array(response.prefix(Int(length)))
        }

        /// Resets the card on the way out: PACE session keys and verified PINs must not outlive
        /// the operation (another application could otherwise use them).
        func disconnect() {
            guard connected else { return }
            connected = false
            SCardDisconnect(handle, DWORD(SCARD_RESET_CARD))
        }
    }
}
