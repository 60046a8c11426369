import FoundationEssentials

/// Deletes what has expired for good, at start and then hourly: finished OTP flows (code
/// HMACs), the send records behind the hourly limit, abandoned second-factor steps, session rows
/// that ended more than a week ago (only their hashes), and spooled SMS (which hold codes in
/// clear) older than a day. Accounts, devices and the audit log are kept.
enum Maintenance {
    static let endedSessionRetention: Int64 = 7 * 86400
    static let flowRetention: Int64 = 86400
    static let spoolRetention: Int64 = 86400

    struct Purged: Sendable, Equatable {
        var flows = 0, sends = 0, loginFlows = 0, sessions = 0, spoolFiles = 0
    }

    static func purge(store: Store, spoolDirectory: String, now: Int64) async throws -> Purged {
        var purged = try await store.transaction(durability: .relaxed) { database -> Purged in
            var purged = Purged()
            try database.execute("DELETE FROM otp_flows WHERE expires_at < ?", [.integer(now - flowRetention)])
            purged.flows = database.changes
            try database.execute("DELETE FROM sms_sends WHERE at < ?", [.integer(now - 3600)])
            purged.sends = database.changes
            try database.execute("DELETE FROM login_flows WHERE expires_at < ?", [.integer(now)])
            purged.loginFlows = database.changes
            try database.execute(
                "DELETE FROM sessions WHERE coalesce(revoked_at, expires_at) < ? AND (revoked_at IS NOT NULL OR expires_at < ?)",
                [.integer(now - endedSessionRetention), .integer(now)])
            purged.sessions = database.changes
            return purged
        }
        if let names = try? FileManager.default.contentsOfDirectory(atPath: spoolDirectory) {
            for name in names where name.hasSuffix(".sms") {
                let path = spoolDirectory + "/" + name
                if let status = Syscalls.fileStatus(atPath: path, followingLinks: false), status.modifiedSeconds < now - spoolRetention,
                   Syscalls.remove(path) {
                    purged.spoolFiles += 1
                }
            }
        }
        return purged
    }

    /// Runs `purge` now and every hour until cancelled.
    static func schedule(store: Store, spoolDirectory: String, logger: Logger, now: @escaping @Sendable () -> Date) -> Task<Void, Never> {
        Task {
            while !Task.isCancelled {
                do {
                    let purged = try await purge(store: store, spoolDirectory: spoolDirectory, now: Int64(now().timeIntervalSince1970))
                    if purged != Purged() {
                        logger.info("purged expired records", [
                            ("AUTHD_PURGED_FLOWS", String(purged.flows)), ("AUTHD_PURGED_SESSIONS", String(purged.sessions)),
                            ("AUTHD_PURGED_SPOOL", String(purged.spoolFiles)),
                        ])
                    }
                } catch {
                    logger.warning("purging expired records failed: \(error)")
                }
                try? await Task.sleep(for: .seconds(3600))
            }
        }
    }
}
