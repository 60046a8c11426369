/// Why the fingerprint reader cannot be used, or broke.
enum FingerprintFailure: Error, Equatable, Sendable {
    /// No fprintd, no reader, no enrolled finger, reader busy or not permitted.
    case unavailable(String)
    /// fprintd or the reader failed while in use.
    case failed(String)

    var message: String {
        switch self {
        case .unavailable(let message), .failed(let message): message
        }
    }
}

/// fprintd's D-Bus API (`net.reactivated.Fprint`, fprintd 1.94) over `Bus`. Every call
/// here blocks; they run in the `FingerprintDevice` actor, on its own queue.
enum Fprintd {
    static let service = "net.reactivated.Fprint"
    static let managerPath = "/net/reactivated/Fprint/Manager"
    static let managerInterface = "net.reactivated.Fprint.Manager"
    static let deviceInterface = "net.reactivated.Fprint.Device"
    static let objectManagerPath = "/net/reactivated/Fprint"
    static let errorPrefix = "net.reactivated.Fprint.Error."

    /// fprintd is D-Bus activated and may have to start and open the reader.
    static let startTimeout: Duration = .seconds(10)
    /// VerifyStop may wait up to a second for the driver (fprintd's VERIFY_STOP_DEVICE_WAIT).
    static let stopTimeout: Duration = .seconds(3)

    /// What a probe found: the reader's name and the user's enrolled fingers.
    struct Reader: Sendable, Equatable {
        let name: String
        let fingers: [String]
    }

    /// Turns a bus error from before the scan into a failure with a message for people.
    static func failure(_ error: BusError) -> FingerprintFailure {
        switch error.name {
        case BusError.serviceUnknown: return .unavailable("fprintd is not running or not installed")
        case errorPrefix + "NoSuchDevice": return .unavailable("no fingerprint reader is connected")
        case errorPrefix + "NoEnrolledPrints": return .unavailable("no finger is enrolled for this user (fprintd-enroll)")
        case errorPrefix + "AlreadyInUse": return .unavailable("the fingerprint reader is in use by another program")
        case errorPrefix + "PermissionDenied": return .unavailable("fprintd refused authd (see the polkit rule in authd(8))")
        case BusError.unknownMethod, BusError.unknownObject: return .failed("the fingerprint reader went away")
        case "": return .unavailable("the system bus cannot be reached")
        default: return .failed("fprintd answered \(error.name)")
        }
    }

    /// The default reader and `user`'s fingers, without claiming it.
    static func probe(user: String) throws(FingerprintFailure) -> Reader {
        let (bus, path) = try defaultReader(for: user)
        return Reader(name: (try? readerName(bus, path)) ?? "fingerprint reader", fingers: try fingers(bus, path, user))
    }

    static let noFinger = FingerprintFailure.unavailable("no finger is enrolled for this user (fprintd-enroll)")

    /// A connection of its own and the default reader's object path.
    private static func defaultReader(for user: String) throws(FingerprintFailure) -> (Bus, String) {
        do throws(BusError) {
            let bus = try Bus.openSystem()
            return (bus, try defaultDevice(bus))
        } catch {
            throw failure(error)
        }
    }

    /// `user`'s enrolled fingers; none is `unavailable`.
    private static func fingers(_ bus: Bus, _ path: String, _ user: String) throws(FingerprintFailure) -> [String] {
        let fingers: [String]
        do throws(BusError) {
            fingers = try bus.call(service, path, deviceInterface, "ListEnrolledFingers", [user], timeout: startTimeout).stringArray()
        } catch {
            throw failure(error)
        }
        guard !fingers.isEmpty else { throw noFinger }
        return fingers
    }

    private static func defaultDevice(_ bus: Bus) throws(BusError) -> String {
        try bus.call(service, managerPath, managerInterface, "GetDefaultDevice", timeout: startTimeout).string("o")
    }

    private static func readerName(_ bus: Bus, _ path: String) throws(BusError) -> String {
        let reply = try bus.call(service, path, "org.freedesktop.DBus.Properties", "Get", [deviceInterface, "name"], timeout: startTimeout)
        return try reply.variantString()
    }

    /// The default reader, claimed for `user` on a connection of its own. Release it with
    /// `release()`; closing the connection (a crash) makes fprintd release it too.
    final class ClaimedDevice {
        let bus: Bus
        let path: String
        private var verifying = false

        init(user: String) throws(FingerprintFailure) {
            (bus, path) = try defaultReader(for: user)
            // Checked first: a user without prints can be claimed, but not verified.
            _ = try fingers(bus, path, user)
            do throws(BusError) {
                _ = try bus.call(service, path, deviceInterface, "Claim", [user], timeout: startTimeout)
            } catch {
                throw failure(error)
            }
        }

        /// One verification: VerifyStart("any"), retry statuses reported through `progress`,
        /// until the final status, the deadline (CLOCK_MONOTONIC µs), a cancel on `cancelFD`,
        /// the reader vanishing or fprintd leaving. Always ends with VerifyStop.
        func scan(deadline: UInt64, cancelFD: Int32, progress: @escaping (ScanStatus) -> Void) -> ScanOutcome {
            var final: ScanStatus?
            var gone: String?
            let matches: [BusSlot]
            do throws(BusError) {
                // Subscribed before VerifyStart: a status can arrive before its reply.
                let status = try bus.match(sender: service, path: path, interface: deviceInterface, member: "VerifyStatus") { message in
                    guard final == nil, let result = try? message.string(), let done = try? message.bool() else { return }
                    let scan = ScanStatus(result: result, done: done)
                    if scan.isFinal { final = scan } else { progress(scan) }
                }
                let removed = try bus.match(sender: service, path: objectManagerPath, interface: "org.freedesktop.DBus.ObjectManager",
                                            member: "InterfacesRemoved") { [path] message in
                    if (try? message.string("o")) == path { gone = "the fingerprint reader was disconnected" }
                }
                let owner = try bus.match(sender: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                                          member: "NameOwnerChanged") { message in
                    if (try? message.string()) == service { gone = "fprintd stopped" }
                }
                matches = [status, removed, owner]
                _ = try bus.call(service, path, deviceInterface, "VerifyStart", ["any"], timeout: startTimeout)
                verifying = true
            } catch {
                return .failed(Fprintd.failure(error).message)
            }
            defer { withExtendedLifetime(matches) {} }
            let end = bus.wait(until: { final != nil || gone != nil }, deadline: deadline, cancelFD: cancelFD)
            stop()
            if let gone { return .failed(gone) }
            switch (end, final) {
            case (_, .match?): return .match
            case (_, .noMatch?): return .noMatch
            case (_, .failed(let result)?): return .failed("the reader reported \(result)")
            case (.cancelled, _): return .cancelled
            case (.deadline, _): return .timeout
            default: return .failed("the connection to fprintd broke")
            }
        }

        private func stop() {
            guard verifying else { return }
            verifying = false
            // Required before the next VerifyStart; its errors (already stopped, reader gone) change nothing.
            _ = try? bus.call(service, path, deviceInterface, "VerifyStop", timeout: stopTimeout)
        }

        /// Gives the reader back (errors ignored: the device may be gone).
        func release() {
            stop()
            _ = try? bus.call(service, path, deviceInterface, "Release", timeout: stopTimeout)
        }
    }
}

extension BusMessage {
    /// Reads a variant holding a string (the reply of `org.freedesktop.DBus.Properties.Get`).
    func variantString() throws(BusError) -> String {
        try enterVariant("s")
        return try string()
    }
}
