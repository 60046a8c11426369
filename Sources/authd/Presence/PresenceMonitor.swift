import Dispatch
import FoundationEssentials
import Protocol
import Synchronization

/// Where this machine is, decided on the machine: owns the sensors (GeoClue2 for the position,
/// NetworkManager for the Wi-Fi access points, BlueZ for the beacons while the machine is in a
/// hotspot that lists some) and a `HotspotTracker`, and hands each entered/left/pinned transition
/// to the caller. Positions, BSSIDs and beacon addresses stay in here: nothing leaves but
/// transitions (a pinned one carries the point its hotspot's definition gave the beacon).
///
/// The sensors' sd-bus connection is used by one thread only, as sd-bus requires: a session runs
/// on the monitor's own queue, blocked in `Bus.wait` between GeoClue's location updates and the
/// polls of NetworkManager. `update` and `stop` reach it through a wake-up pipe, never by
/// touching the bus.
final class PresenceMonitor: Sendable {
    /// What the monitor is doing, and the hotspots (ids) the machine is in now.
    struct Status: Equatable, Sendable {
        enum Reading: Equatable, Sendable {
            /// Not started, or stopped.
            case off
            /// GeoClue2 is locating the machine (NetworkManager's access points are read when
            /// it answers).
            case reading
            /// GeoClue2 is absent, refused, or went away: nothing is read or reported. Start
            /// again to retry.
            case unavailable(PresenceUnavailable)
        }

        var reading: Reading
        /// Empty unless `reading`: without sensors the machine is nowhere known.
        var inside: [String]
    }

    struct Options: Sendable {
        /// The bus to find GeoClue2 and NetworkManager on; nil: the system bus
        /// (`DBUS_SYSTEM_BUS_ADDRESS`, else the standard socket).
        var busAddress: String?
        /// Seconds a hotspot's access point may be missing before the machine leaves it
        /// (`[presence] bssid_absence`).
        var bssidAbsenceSeconds: Int64
        /// How often NetworkManager (and, when beacons are wanted, BlueZ) is asked, and time is
        /// given to the tracker.
        var pollInterval: Duration = .seconds(5)
        /// Unix seconds now: the time transitions carry.
        var clock: @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }

        init(busAddress: String? = nil, bssidAbsenceSeconds: Int64, pollInterval: Duration = .seconds(5)) {
            self.busAddress = busAddress
            self.bssidAbsenceSeconds = bssidAbsenceSeconds
            self.pollInterval = pollInterval
        }
    }

    typealias TransitionHandler = @Sendable (HotspotTracker.Transition) -> Void

    private let options: Options
    private let logger: Logger
    private let queue = DispatchQueue(label: "authd.presence", qos: .utility)
    private let state = Mutex(State())

    private struct State {
        var session: Session?
        var hotspots: [Hotspot] = []
        var status = Status(reading: .off, inside: [])
    }

    init(options: Options, logger: Logger) {
        self.options = options
        self.logger = logger
    }

    var status: Status { state.withLock { $0.status } }

    /// Starts reading the sensors, matching `hotspots`, and returns once GeoClue2 has answered:
    /// `reading`, or `unavailable` with its reason. `onTransition` is called on the monitor's
    /// queue, in order. While a session runs, this only replaces the hotspots.
    @discardableResult
    func start(hotspots: [Hotspot], onTransition: @escaping TransitionHandler) async -> Status {
        let session: Session? = state.withLock { state in
            state.hotspots = hotspots
            if let running = state.session, !running.isFinished {
                running.deliver(hotspots)
                return nil
            }
            guard let session = try? Session() else {
                state.status = Status(reading: .unavailable(PresenceUnavailable(message: "authd cannot make a wake-up pipe")), inside: [])
                return nil
            }
            state.session = session
            return session
        }
        guard let session else { return status }
        await withCheckedContinuation { (started: CheckedContinuation<Void, Never>) in
            queue.async { [self] in run(session, hotspots: hotspots, onTransition: onTransition, started: started) }
        }
        return status
    }

    /// Replaces the hotspots matched: one no longer listed is left at once, a new one is judged
    /// from the next fix or access-point report. Kept for the next `start` when stopped.
    func update(hotspots: [Hotspot]) {
        state.withLock { state in
            state.hotspots = hotspots
            state.session?.deliver(hotspots)
        }
    }

    /// Stops reading: GeoClue2's client is stopped and the bus connection closed before this
    /// returns. No transition is reported afterwards (the hotspots the machine was in are not
    /// left: the account's authd lets presence expire, or `presence.off` deletes it).
    func stop() async {
        guard let session = state.withLock({ $0.session }) else { return }
        session.requestStop()
        await session.finished()
        state.withLock { state in
            if state.session === session {
                state.session = nil
                state.status = Status(reading: .off, inside: [])
            }
        }
    }

    // MARK: - The session, on `queue`

    private func publish(_ status: Status, of session: Session) {
        state.withLock { state in
            if state.session === session { state.status = status }
        }
    }

    private func run(_ session: Session, hotspots: [Hotspot], onTransition: TransitionHandler, started: CheckedContinuation<Void, Never>) {
        var started: CheckedContinuation<Void, Never>? = started
        defer {
            started?.resume()
            session.finish()
        }
        var tracker = HotspotTracker(bssidAbsence: options.bssidAbsenceSeconds)
        _ = tracker.handle(.hotspots(hotspots, time: options.clock()))
        let ended = readSensors(session, tracker: &tracker, onTransition: onTransition) {
            publish(Status(reading: .reading, inside: []), of: session)
            started?.resume()
            started = nil
        }
        if let ended {
            // No position data in it: GeoClue's errors carry none.
            logger.warning("presence: \(ended.message)")
            publish(Status(reading: .unavailable(ended), inside: []), of: session)
        }
    }

    /// Reads until a stop is asked (nil) or the sensors fail (why). Closes the bus on return.
    private func readSensors(_ session: Session, tracker: inout HotspotTracker, onTransition: TransitionHandler,
                             reading: () -> Void) -> PresenceUnavailable? {
        let bus: Bus
        do throws(BusError) {
            if let address = options.busAddress { bus = try Bus.open(address: address) } else { bus = try Bus.openSystem() }
        } catch {
            return GeoClue2.unavailable(error, while: "connect")
        }
        var newLocation: String?
        var geoClueLeft = false
        let client: GeoClue2.Client
        let matches: [BusSlot]
        do throws(PresenceUnavailable) {
            client = try GeoClue2.Client(bus: bus)
            matches = [try client.locationUpdates { newLocation = $0 }]
                + [try? bus.match(sender: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                                  member: "NameOwnerChanged") { message in
                       // (s name, s old owner, s new owner): GeoClue2 left when its name has no new owner.
                       if (try? message.string()) == GeoClue2.service, (try? message.string()) != nil, (try? message.string()) == "" {
                           geoClueLeft = true
                       }
                   }].compactMap { $0 }
            try client.start()
        } catch {
            return error
        }
        var beacons = BeaconScanner()
        defer {
            withExtendedLifetime(matches) {}
            client.stop()
            beacons.stop(on: bus)
        }
        reading()
        var wifi = WiFiScanner()
        var wifiMissing = false
        var bluezMissing = false
        var readingBeacons = false
        func take(_ input: HotspotTracker.Input) {
            let transitions = tracker.handle(input)
            let inside = tracker.inside
            publish(Status(reading: .reading, inside: inside), of: session)
            transitions.forEach(onTransition)
        }
        /// One optional sensor's reading, or `none` when it cannot be asked: said once until it
        /// answers again, by the D-Bus error's name only (never anything it saw).
        func poll<Seen>(_ sensor: String, for what: String, missing: inout Bool, none: Seen, _ read: () throws(BusError) -> Seen) -> Seen {
            do throws(BusError) {
                let seen = try read()
                missing = false
                return seen
            } catch {
                if !missing { logger.notice("presence: \(sensor) cannot be asked for \(what) (\(error.name))") }
                missing = true
                return none
            }
        }
        var nextPoll = Syscalls.monotonicMicroseconds()
        while true {
            if Syscalls.monotonicMicroseconds() >= nextPoll {
                nextPoll = Syscalls.monotonicMicroseconds() + Bus.microseconds(options.pollInterval)
                // No NetworkManager: position alone decides, and access points count as gone.
                let seen = poll("NetworkManager", for: "Wi-Fi access points", missing: &wifiMissing, none: []) { () throws(BusError) in
                    try wifi.visibleBSSIDs(on: bus)
                }
                take(.accessPoints(seen, time: options.clock()))
                if tracker.wantsBeacons {
                    readingBeacons = true
                    // No BlueZ (or no Bluetooth): no beacon is seen, and the pin stays as it is.
                    let visible = poll("BlueZ", for: "Bluetooth beacons", missing: &bluezMissing, none: [:]) { () throws(BusError) in
                        try beacons.visibleBeacons(on: bus)
                    }
                    take(.beacons(visible, time: options.clock()))
                } else if readingBeacons {
                    // Out of every hotspot with beacons: the radio is let go until the next one.
                    readingBeacons = false
                    beacons.stop(on: bus)
                    take(.beacons([:], time: options.clock()))
                }
            }
            switch bus.wait(until: { newLocation != nil || geoClueLeft }, deadline: nextPoll, cancelFD: session.wakeFD) {
            case .condition:
                if geoClueLeft { return PresenceUnavailable(message: "GeoClue2 stopped while locating the machine") }
                if let path = newLocation.take(), let fix = client.location(at: path) {
                    take(.fix(.init(latitude: fix.latitude, longitude: fix.longitude, accuracy: fix.accuracy, time: options.clock())))
                }
            case .deadline:
                continue
            case .cancelled:
                let (stop, hotspots) = session.takeRequests()
                if stop { return nil }
                if let hotspots { take(.hotspots(hotspots, time: options.clock())) }
            case .disconnected:
                return PresenceUnavailable(message: "the connection to the system bus broke, so GeoClue2 cannot be heard")
            }
        }
    }
}

/// The monitor as `MachinePresence` drives it.
extension PresenceMonitor: HotspotWatcher {
    /// Starts reading with `hotspots`, or, while reading, matches `hotspots` from now on (the
    /// handler given first stays). Transitions reach `transition` one at a time, in order.
    func watch(_ hotspots: [Hotspot], transition: @escaping @Sendable (HotspotTracker.Transition) async -> Void) async {
        if state.withLock({ $0.session.map { !$0.isFinished } ?? false }) {
            update(hotspots: hotspots)
            return
        }
        // A stream keeps the order that separate tasks would not; it ends when the session
        // lets go of its handler (the session ended), which the closer's deinit tells it.
        let (stream, continuation) = AsyncStream.makeStream(of: HotspotTracker.Transition.self)
        let closer = StreamCloser(continuation)
        Task {
            for await change in stream { await transition(change) }
        }
        await start(hotspots: hotspots) { closer.continuation.yield($0) }
    }

    func stopWatching() async { await stop() }

    func watchState() async -> (state: String, detail: String?, inside: [String]) {
        let status = status
        switch status.reading {
        case .off: return ("off", nil, [])
        case .reading: return ("reading", nil, status.inside)
        case .unavailable(let why): return ("unavailable", why.message, [])
        }
    }
}

/// Finishes a stream when the last holder of its continuation lets go.
private final class StreamCloser: Sendable {
    let continuation: AsyncStream<HotspotTracker.Transition>.Continuation
    init(_ continuation: AsyncStream<HotspotTracker.Transition>.Continuation) { self.continuation = continuation }
    deinit { continuation.finish() }
}

/// One run of the sensors: what `update` and `stop` ask of it, the pipe that wakes it to look,
/// and who waits for its end.
private final class Session: Sendable {
    private struct Requests {
        var stop = false
        var hotspots: [Hotspot]?
        var finished = false
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    private let requests = Mutex(Requests())
    private let wake: (read: Int32, write: Int32)
    var wakeFD: Int32 { wake.read }

    init() throws(SystemError) {
        wake = try Syscalls.makeWakePipe()
    }

    deinit {
        Syscalls.close(wake.read)
        Syscalls.close(wake.write)
    }

    var isFinished: Bool { requests.withLock { $0.finished } }

    func deliver(_ hotspots: [Hotspot]) {
        requests.withLock { $0.hotspots = hotspots }
        Syscalls.writeOneByte(wake.write)
    }

    func requestStop() {
        requests.withLock { $0.stop = true }
        Syscalls.writeOneByte(wake.write)
    }

    /// What was asked since the last look (the pipe drained first, so nothing asked after is lost).
    func takeRequests() -> (stop: Bool, hotspots: [Hotspot]?) {
        Syscalls.drain(wake.read)
        return requests.withLock { requests in
            defer { requests.hotspots = nil }
            return (requests.stop, requests.hotspots)
        }
    }

    func finish() {
        let waiting = requests.withLock { requests in
            requests.finished = true
            defer { requests.waiting = [] }
            return requests.waiting
        }
        waiting.forEach { $0.resume() }
    }

    func finished() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = requests.withLock { requests in
                if !requests.finished { requests.waiting.append(continuation) }
                return requests.finished
            }
            if done { continuation.resume() }
        }
    }
}
