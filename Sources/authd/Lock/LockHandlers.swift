import Protocol

extension MethodTable {
    mutating func registerLockMethods(_ unlocker: Unlocker) {
        let lock = unlocker.lock
        register(Lock.self, access: .anyone, audit: { _, _ in [:] }) { _, context in
            try await lock.lock(context.caller.uid)
        }
        register(Unlock.self, access: .anyone, audit: { _, result in ["method": .string(result.method ?? "")] }) { params, context in
            try await unlocker.unlock(params, context: context)
        }
        register(UnlockBiometric.self, access: .anyone, audit: { _, _ in [:] }) { _, context in
            try await unlocker.unlockBiometric(context: context)
        }
        register(LockStatus.self, access: .anyone) { _, context in
            try await lock.status(context.caller.uid)
        }
    }
}
