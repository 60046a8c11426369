// Lock/ — each local user's lock (LocalLock, in the machine's `local_users`): lock, unlock by
// finger, password or a code sent by SMS (UnlockMethods decides what opens it, and whether it
// may close at all), the remembered account. Machine methods. Errors: LockFailure.

import Protocol

extension MethodTable {
    mutating func registerLockMethods(_ unlocker: Unlocker) {
        let lock = unlocker.lock
        announce("lock", "unlock.sms")
        register(Lock.self, home: .machine, access: .anyone, audit: { _, _ in [:] }) { _, context in
            try await lock.lock(context.caller.uid)
        }
        register(Unlock.self, home: .machine, access: .anyone, audit: { _, result in ["method": .string(result.method ?? "")] }) { params, context in
            try await unlocker.unlock(params, context: context)
        }
        register(UnlockBiometric.self, home: .machine, access: .anyone, audit: { _, _ in [:] }) { _, context in
            try await unlocker.unlockBiometric(context: context)
        }
        register(LockStatus.self, home: .machine, access: .anyone) { _, context in
            try await lock.status(context.caller.uid)
        }
    }
}
