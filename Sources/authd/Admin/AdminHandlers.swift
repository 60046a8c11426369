// Admin/ — the daemon's own administration: status, reload, backup, key rotation, the audit log's
// tail. Machine methods, for root or the admin group. Errors: AdminFailure.

import FoundationEssentials
import Protocol

extension MethodTable {
    mutating func registerAdminMethods(_ services: Services) {
        announce("admin", "audit.follow")
        register(AdminStatus.self, home: .machine, access: .admin, audit: { _, _ in [:] }) { _, _ in
            let health = try await services.store.health()
            let audit = try await services.audit.size()
            let bounds = AuditLog.Bounds(services.config.current)
            let now = services.now()
            let current = services.keys.current.kid
            let held = services.connections.held
            let accountStore = await services.accountStore.postgresqlStatus(now: Int64(now.timeIntervalSince1970))
            var result = AdminStatus.Result(
                daemonVersion: DaemonVersion.string, protocolVersion: protocolVersion, mode: services.options.mode.rawValue,
                pid: Syscalls.processID(), startedAt: Timestamp.rfc3339(services.startedAt),
                uptimeSeconds: Int64(now.timeIntervalSince(services.startedAt)),
                paths: .init(socket: services.options.socketPath, stateDirectory: services.options.stateDirectory,
                             config: services.options.configPath, database: services.options.databasePath,
                             masterKey: services.masterKeySource.description),
                connections: services.connections.count,
                openFileDescriptors: Syscalls.openFileDescriptorCount(),
                residentMemoryBytes: Syscalls.residentMemoryBytes(), passwordHashingBytes: Int64(Argon2Memory.shared.mappedBytes),
                unreadOutputBytes: Int64(held.output), unfinishedInputBytes: Int64(held.input),
                keys: services.keys.keys(now: now).map { key in
                    .init(kid: key.kid, alg: key.alg, status: key.kid == current ? "current" : "retired",
                          createdAt: Timestamp.rfc3339(epochSeconds: key.createdAt),
                          publishedUntil: key.publishedUntil.map { Timestamp.rfc3339(epochSeconds: $0) })
                },
                store: .init(integrity: health.integrity, schemaVersion: health.schemaVersion, sizeBytes: health.sizeBytes, journalMode: health.journalMode),
                audit: .init(rows: audit.rows, bytes: audit.bytes, oldest: audit.oldest.map { Timestamp.rfc3339($0, milliseconds: true) },
                             purgedThrough: audit.purgedThrough, integrity: audit.integrity, retentionSeconds: bounds.retentionSeconds,
                             maxBytes: bounds.maxBytes),
                hub: services.hub.status(devicesConnected: services.connections.deviceCount,
                                                         newcomersConnected: services.connections.newcomerCount))
            result.accountStore = accountStore
            return result
        }

        register(AdminReload.self, home: .machine, access: .admin, audit: { _, result in
            ["changed": .array(result.changed.map { .string($0) })]
        }) { _, _ in
            do throws(ConfigError) {
                let changed = try services.reloader.reload(trigger: "admin.reload")
                return AdminReload.Result(config: services.reloader.path, changed: changed)
            } catch {
                throw AdminFailure.configInvalid(error)
            }
        }

        register(AdminBackup.self, home: .machine, access: .admin, audit: { params, result in
            ["path": .string(params.path), "bytes": .integer(result.bytes)]
        }) { params, _ in
            var result = try await Backup.write(store: services.store, to: params.path)
            if services.accountStore !== services.store {
                result.accountData = "Account data is in PostgreSQL (hub.database), not in this copy: back it up with PostgreSQL's own tools (pg_dump, pg_basebackup, or the replicas and archives the database already has)."
            }
            return result
        }

        register(AdminKeysRotate.self, home: .machine, access: .admin, audit: { _, result in
            ["kid": .string(result.kid), "previous_kid": result.previousKid.map { .string($0) } ?? .null]
        }) { _, _ in
            let rotation = try await services.keys.rotate(now: services.now())
            services.logger.notice("signing key rotated", [("AUTHD_KID", rotation.kid), ("AUTHD_PREVIOUS_KID", rotation.previousKid ?? "")])
            return AdminKeysRotate.Result(kid: rotation.kid, previousKid: rotation.previousKid,
                                          previousPublishedUntil: rotation.previousPublishedUntil.map { Timestamp.rfc3339(epochSeconds: $0) })
        }

        // The code in clear goes to the caller only; the audit record names the number alone.
        register(AdminSMSLast.self, home: .machine, access: .admin, audit: { _, result in
            ["to": .string(PhoneNumber.redact(result.to))]
        }) { params, _ in
            let config = services.config.current
            if config.role == .device { throw AdminFailure.smsAtHub(hub: config.hubURLs.map(\.description).joined(separator: ", ")) }
            let backend = config.smsBackend
            guard backend == .spool else { throw AdminFailure.smsNotSpooled(backend: backend.rawValue) }
            let number = try params.number.map { try PhoneNumber.parse($0, region: nil) }
            guard let message = SpoolSMSGateway.newest(in: services.options.smsSpoolDirectory, to: number?.e164) else {
                throw AdminFailure.smsNoneSpooled(redactedNumber: number?.redacted)
            }
            return AdminSMSLast.Result(to: message.to, text: message.text, spooledAt: Timestamp.rfc3339(epochSeconds: message.modifiedSeconds),
                                       file: message.path)
        }

        register(AdminAuditTail.self, home: .machine, access: .admin, audit: { params, _ in
            ["limit": .integer(Int64(params.limit ?? 50)), "follow": .bool(params.follow ?? false)]
        }) { params, context in
            let limit = params.limit ?? 50
            guard (0...10_000).contains(limit) else {
                throw InvalidParameter("Parameter 'limit' must be from 0 to 10000.", field: "limit")
            }
            guard params.follow == true else {
                return AdminAuditTail.Result(records: try await services.audit.tail(limit: limit), subscription: nil)
            }
            // Follow before reading the tail, so no record falls between the two; records
            // already in the tail are skipped from the stream.
            let (follower, stream) = await services.audit.follow()
            let records: [AuditRecord]
            do {
                records = try await services.audit.tail(limit: limit)
            } catch {
                await services.audit.unfollow(follower)
                throw error
            }
            let lastID = records.last?.id ?? 0
            let audit = services.audit
            do {
                let subscription = try context.streams.open(onDrop: { Task { await audit.unfollow(follower) } }) { sink in
                    for await record in stream where record.id > lastID {
                        sink.notify(AuditRecordNotification.self, .init(subscription: sink.name, record: record))
                    }
                    await audit.unfollow(follower)
                }
                return AdminAuditTail.Result(records: records, subscription: subscription)
            } catch {
                await audit.unfollow(follower)
                throw error
            }
        }
    }
}

/// `admin.backup`: a new 0600 file, never an existing one, written through SQLite's online
/// backup API. On failure nothing is left at the path.
enum Backup {
    static func write(store: Store, to path: String) async throws -> AdminBackup.Result {
        func fail(_ message: String) -> AdminFailure {
            .backupFailed(message: message, path: path)
        }
        guard path.hasPrefix("/"), !path.contains("\0"), path.utf8.count < 4096 else {
            throw InvalidParameter("Parameter 'path' must be an absolute path.", field: "path")
        }
        do throws(SystemError) {
            Syscalls.close(try Syscalls.createNewFile(path, mode: 0o600))
        } catch {
            throw fail("Cannot create the backup file: \(error.fileExists ? "it already exists" : error.reason).")
        }
        do {
            try await store.backup(to: path)
        } catch {
            Syscalls.remove(path)
            throw fail("The backup failed: \(error).")
        }
        return AdminBackup.Result(path: path, bytes: Syscalls.fileStatus(atPath: path, followingLinks: true)?.size ?? 0)
    }
}
