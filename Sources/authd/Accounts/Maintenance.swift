import FoundationEssentials

/// Deletes what has expired for good, at start and then hourly: in the account directory,
/// finished code flows (code HMACs), the send records behind the hourly limit, abandoned second
/// steps, session rows that ended more than a week ago (only their hashes) and the digests of
/// ID tokens that can no longer be presented; on the machine,
/// spooled SMS (which hold codes in clear) older than a day, and any persistent logout whose
/// sessions could not be ended at the time; and audit records past `[audit] retention` or beyond
/// `[audit] max_size` (the purge leaves a record of what it deleted). Accounts and devices are kept.
enum Maintenance {
    static let spoolRetention: Int64 = 86400

    struct Purged: Sendable, Equatable {
        var flows = 0, sends = 0, loginFlows = 0, sessions = 0, idTokens = 0, spoolFiles = 0
    }

    static func purge(directory: any AccountAdministration, spoolDirectory: String, now: Int64) async throws -> Purged {
        let expired = try await directory.purgeExpired()
        var purged = Purged(flows: expired.flows, sends: expired.sends, loginFlows: expired.signIns, sessions: expired.sessions, idTokens: expired.idTokens)
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

    /// Ends the sessions of provider logouts that were interrupted, and returns how many it
    /// finished with what that announces (the sessions it ended, the accounts' events), for
    /// `Services.announce`, as a call's would be. The events go to the logs in `home` (the
    /// account store's engine) as `noticeOrigin`, in the transactions that end the sessions.
    static func finishInterruptedLogouts(vault: TokenVault, now: @escaping @Sendable () -> Date, home: String,
                                         noticeOrigin: SyncLog.Origin) async throws -> (Int, Announcements) {
        try await AuditScope.collecting(now: now, home: home, noticeOrigin: noticeOrigin) { try await vault.finishPendingLogouts() }
    }

    /// Runs `purge` (and finishes interrupted logouts) now and every hour until cancelled.
    /// `announce`: where what maintenance changed is announced (`Services.announce`).
    static func schedule(directory: any AccountAdministration, vault: TokenVault, audit: AuditLog, sync: SyncLog, noticeOrigin: SyncLog.Origin,
                         config: ConfigHolder, spoolDirectory: String, logger: Logger, now: @escaping @Sendable () -> Date,
                         announce: @escaping @Sendable (Announcements) async -> Void) -> Task<Void, Never> {
        Task {
            while !Task.isCancelled {
                do {
                    let (finished, announcements) = try await finishInterruptedLogouts(vault: vault, now: now, home: audit.home, noticeOrigin: noticeOrigin)
                    await announce(announcements)
                    if finished > 0 { logger.notice("ended the sessions of \(finished) interrupted provider logout(s)") }
                } catch {
                    logger.warning("finishing interrupted provider logouts failed: \(error)")
                }
                do {
                    let purged = try await purge(directory: directory, spoolDirectory: spoolDirectory, now: Int64(now().timeIntervalSince1970))
                    if purged != Purged() {
                        logger.info("purged expired records", [
                            ("AUTHD_PURGED_FLOWS", String(purged.flows)), ("AUTHD_PURGED_SESSIONS", String(purged.sessions)),
                            ("AUTHD_PURGED_SPOOL", String(purged.spoolFiles)),
                        ])
                    }
                } catch {
                    logger.warning("purging expired records failed: \(error)")
                }
                do {
                    if let purge = try await audit.enforceBounds() {
                        logger.info("purged \(purge.rows) old audit record(s)", [
                            ("AUTHD_PURGED_AUDIT_ROWS", String(purge.rows)), ("AUTHD_PURGED_AUDIT_THROUGH", String(purge.throughID)),
                            ("AUTHD_PURGED_AUDIT_WHY", purge.why.joined(separator: ",")),
                        ])
                    }
                } catch {
                    logger.warning("purging old audit records failed: \(error)")
                }
                do {
                    let purged = try await sync.purge(retention: Int64(config.current.syncRetentionSeconds))
                    if purged > 0 { logger.info("purged \(purged) sync event(s) past [sync] retention", [("AUTHD_PURGED_SYNC_EVENTS", String(purged))]) }
                } catch {
                    logger.warning("purging old sync events failed: \(error)")
                }
                try? await Task.sleep(for: .seconds(3600))
            }
        }
    }
}
