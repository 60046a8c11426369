import FoundationEssentials
import Protocol

/// What a client can send on the socket: bytes cut into lines by `LineFramer`, each line read as
/// a JSON-RPC request (`WireCodec.decodeRequest`, strict JSON first), then its params decoded as
/// the method it names and as the method the input's first byte picks, so every method's
/// `Params` is reached even before the fuzzer learns the method names.
enum WireFuzz {
    /// Every method of the protocol (Sources/Protocol/*Methods.swift).
    // Metatypes of a non-Sendable protocol are not Sendable; these lists are never changed.
    nonisolated(unsafe) static let methods: [any RPCMethod.Type] = [
        AccountRegisterStart.self, AccountRegisterResend.self, AccountRegisterVerify.self, SessionGet.self, AuthLogout.self,
        AuthLogin.self, AuthLoginPIN.self, TwoFactorPINEnable.self, TwoFactorPINDisable.self, AccountProfileSet.self,
        AccountPasswordCheck.self, SessionList.self, SessionRevoke.self, DeviceList.self, DeviceRevoke.self, AuthToken.self,
        AuthOTPStart.self, AuthOTPVerify.self, AccountDeactivate.self, AdminAccountsList.self, AdminAccountsShow.self,
        AdminAccountsUnlock.self, AdminAccountsDeactivate.self, AdminAccountsSet.self, AdminStatus.self, AdminReload.self,
        AdminBackup.self, AdminKeysRotate.self, AdminAuditTail.self, AdminSMSLast.self, Lock.self, Unlock.self,
        UnlockBiometric.self, LockStatus.self, BiometricStatus.self, BiometricEnable.self, BiometricDisable.self,
        CardBiometricEnable.self, CardBiometricDisable.self, AuthFast.self, AuthLoginFingerprint.self,
        TwoFactorFingerprintEnable.self, TwoFactorFingerprintDisable.self, CardReaders.self, CardRead.self, CardLogin.self,
        CardSign.self, CardCANSet.self, CardCANGet.self, CardCANClear.self, Hello.self, AuthLocal.self, TokenVerify.self,
        KeysJWKS.self, SubscriptionCancel.self, FederationLogin.self, FederationStatus.self, FederationLogout.self,
        RemoteToken.self, RemoteFetch.self, RemoteUnauthorized.self, EventsSubscribe.self, PasskeyCreate.self, PasskeyGet.self,
        PasskeyList.self, PasskeyDelete.self, AuthPasskeyRegisterBegin.self, AuthPasskeyRegisterFinish.self,
        AuthPasskeyLoginBegin.self, AuthPasskeyLoginFinish.self, AuthPasskeyList.self, AuthPasskeyRemove.self,
        PromptAnswer.self, PromptCancel.self,
    ]

    nonisolated(unsafe) static let byName: [String: any RPCMethod.Type] = Dictionary(uniqueKeysWithValues: methods.map { ($0.name, $0) })

    /// A line cap small enough that the fuzzer reaches "line too long" (the daemon's is 1 MiB).
    static let maxLineLength = 4096

    static func run(_ input: [UInt8]) {
        guard let selector = input.first else { return }
        let picked = methods[Int(selector) % methods.count]
        var framer = LineFramer(maxLineLength: maxLineLength)
        // Fed in two pieces, as reads split lines anywhere.
        let body = input.dropFirst()
        let cut = body.startIndex + body.count / 2
        framer.append(body[..<cut])
        var lines = 0
        drain(&framer, picked, &lines)
        framer.append(body[cut...])
        drain(&framer, picked, &lines)
        precondition(framer.bufferedByteCount <= maxLineLength, "the framer buffers more than a line")
    }

    private static func drain(_ framer: inout LineFramer, _ picked: any RPCMethod.Type, _ lines: inout Int) {
        while true {
            let line: [UInt8]?
            do { line = try framer.nextLine() } catch { return }  // the daemon closes the connection
            guard let line else { return }
            lines += 1
            precondition(line.count <= maxLineLength && !line.contains(UInt8(ascii: "\n")), "the framer returned more than a line")
            guard case .success(let request) = WireCodec.decodeRequest(line) else { continue }
            if let named = byName[request.method] { decodeParams(named, request) }
            decodeParams(picked, request)
        }
    }

    private static func decodeParams<M: RPCMethod>(_: M.Type, _ request: Request) {
        _ = try? WireCodec.decodeParams(M.Params.self, from: request)
    }
}
