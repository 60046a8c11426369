import Synchronization

/// Re-reads authd.conf on SIGHUP or `admin.reload`. The new file is parsed and validated whole
/// before anything changes; an invalid file leaves the running configuration in force.
final class ConfigReloader: Sendable {
    let path: String
    private let holder: ConfigHolder
    private let logger: Logger
    private let serial = Mutex(())

    init(path: String, holder: ConfigHolder, logger: Logger) {
        self.path = path
        self.holder = holder
        self.logger = logger
    }

    /// Re-reads the file; returns the `section.key` names that changed. Logs the outcome the
    /// same way whatever triggered it (`SIGHUP`, `admin.reload`).
    func reload(trigger: String) throws(ConfigError) -> [String] {
        do {
            let changed = try serial.withLock { _ throws(ConfigError) -> [String] in
                let loaded = try Config.load(path: path)
                let changed = loaded.changes(from: holder.current)
                // The role and the hub link are set up at start: [hub] waits for a restart.
                let new = loaded.keepingHub(of: holder.current)
                if changed.contains(where: { $0.hasPrefix("hub.") }) {
                    logger.warning("[hub] changed in \(path): it takes effect when authd restarts")
                }
                holder.current = new
                logger.level = new.logLevel
                if changed.contains("log.target") { logger.setSink(Logger.sink(for: new.logTarget)) }
                return changed
            }
            logger.notice("configuration reloaded (\(trigger))", [("AUTHD_CONFIG", path), ("AUTHD_CHANGED", changed.joined(separator: ","))])
            return changed
        } catch {
            logger.error("configuration not reloaded (\(trigger)), the running configuration stays: \(error)",
                         [("AUTHD_CONFIG", error.file), ("AUTHD_CONFIG_LINE", String(error.line))])
            throw error
        }
    }
}
