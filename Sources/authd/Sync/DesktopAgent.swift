import AuthdClient
import FoundationEssentials
import Glibc
import Protocol

/// `authd --desktop`: runs as a person in their desktop session (the `authd-desktop.service`
/// user unit). It asks the person authd's questions through pinentry (``AgentPrompter``), serves
/// desktop apps on the session bus (``AgentBus``), and shows on their desktop the notifications a
/// system authd hands them — those of the accounts they hold a live session of on this machine
/// (``DesktopDelivery``), and the question of presence's ask mode — through their session bus
/// (``DesktopNotifications``). It keeps no secret and opens no store: it is a client of authd
/// like any other, known to it by its uid. While authd is away it connects again, every 1 s at
/// first and at most every 30 s, and says so once.
enum DesktopAgent {
    /// `org.authd.Desktop` on the session bus, for this user's apps; nil without a session bus
    /// (a server) or when another agent holds the name, which the log says.
    private static func serveBus(_ forwarder: AgentForwarder, logger: Logger) -> AgentBus? {
        do {
            let bus = try AgentBus(address: nil, logger: logger) { call in await forwarder.handle(call) }
            bus.start()
            logger.info("desktop: serving \(AgentBusInterface.name) on the session bus for this user's apps")
            return bus
        } catch {
            logger.warning("desktop: not serving \(AgentBusInterface.name) on the session bus: \(error)")
            return nil
        }
    }

    static func run(socketPath: String, pinentry: String?) -> Never {
        let logger = Logger(sink: Logger.sink(for: .auto))
        let desktop = DesktopNotifications(logger: logger)
        let environment = ProcessInfo.processInfo.environment
        let prompter = AgentPrompter(socketPath: socketPath, pinentry: pinentry, environment: environment, notifications: desktop, logger: logger)
        prompter.start()
        let bus = serveBus(AgentForwarder(socketPath: socketPath, environment: environment, token: prompter.token), logger: logger)
        defer { withExtendedLifetime(bus) {} }
        keepConnected("follow authd's notifications", socketPath: socketPath, logger: logger) { connected in
            let client = RPCClient(connection: try LineConnection(socketPath: socketPath))
            _ = try client.call(EventsSubscribe.self, NoParams())
            logger.info("desktop: showing authd's notifications for this user (\(socketPath))")
            connected()
            while let (method, params) = try client.nextNotification() {
                guard method == EventNotification.name, let params,
                      let event = try? WireCodec.decode(EventNotification.Params.self, from: params) else { continue }
                if let sync = event.sync { desktop.take(sync.event, of: sync.account) }
                if let question = event.presence { desktop.ask(question) }
            }
        }
    }

    /// Runs `session` (one connection to authd) for good: again at once after authd closed it,
    /// after 1 s, 2 s, … at most 30 s while it fails, saying once that authd is away. `session`
    /// calls `connected` once it is connected.
    static func keepConnected(_ what: String, socketPath: String, logger: Logger, _ session: (_ connected: () -> Void) throws -> Void) -> Never {
        var delay: UInt32 = 1
        var toldAway = false
        while true {
            do {
                try session {
                    toldAway = false
                    delay = 1
                }
                logger.info("desktop: authd closed the connection to \(what); connecting again")
            } catch {
                if !toldAway {
                    toldAway = true
                    logger.warning("desktop: cannot \(what) at \(socketPath): \(error); trying again until it answers")
                }
            }
            sleep(delay)
            delay = min(delay * 2, 30)
        }
    }
}
