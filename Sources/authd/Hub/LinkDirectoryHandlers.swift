import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// Why a hub refused a machine's request for account data, or a device cannot offer an
/// operation through its hub.
enum MachineAccessFailure: Error, Equatable, WireErrorConvertible {
    /// The machine holds no live device of the account (or named a device not its own).
    case notSignedIn
    /// The machine holds no live session of any account: it has not signed in (or no longer is).
    case holdsNoSession
    /// The device cannot do `operation` through its hub (the hub could not check it).
    case notOnDevice(operation: String)

    var rpcError: RPCError {
        switch self {
        case .notSignedIn:
            RPCError(code: .forbidden, reason: .hubNotSignedIn,
                     message: "This machine is not signed in to that account at the hub (or named a device that is not its own); sign in on it first.")
        case .holdsNoSession:
            RPCError(code: .forbidden, reason: .hubNotSignedIn, message: "This machine holds no session of any account at the hub; sign in on it first.")
        case .notOnDevice(let operation):
            .failure(.hubNotOnDevice, "This authd is a device of a hub and cannot \(operation): the hub holds the account and could not check it.",
                     details: ["operation": .string(operation)])
        }
    }
}

extension LinkedMachines {
    /// At a hub: the live device of `account` that `machine` signed in as — what every link
    /// method about an account asks first — or `hub.not_signed_in`.
    func signedInDevice(of machine: DeviceID, account: String) async throws -> String {
        guard let device = try await machineDevice(account: account, machine: machine), device.live else { throw MachineAccessFailure.notSignedIn }
        return device.id
    }

    /// At a hub: refuses (`hub.not_signed_in`) a machine that holds no live session (not ended,
    /// expired or idle) of `account`, or of any account when nil — what a machine must hold
    /// before the hub keeps anything it says of itself or tells others for the account. A live
    /// device is not enough: its sessions may all have ended.
    func requireLiveSession(on machine: DeviceID, of account: String? = nil) async throws {
        let held = try await accounts(heldBy: machine)
        if let account {
            guard held.contains(where: { $0.account == account }) else { throw MachineAccessFailure.notSignedIn }
        } else {
            guard !held.isEmpty else { throw MachineAccessFailure.holdsNoSession }
        }
    }
}

extension MethodTable {
    /// At the hub: the account data a linked machine's own capabilities need (its lock,
    /// fingerprints, PAM), each answered only for accounts the machine is signed in to, and
    /// federated sign-ins it ran, checked against the hub's own `providers`. Every call is
    /// audited with the machine as the caller, refusals included.
    mutating func registerLinkDirectoryMethods(_ services: Services, home directory: any MachineAccounts & LinkedMachines, providers: ProviderDirectory) {
        let named: @Sendable (String) -> [String: JSONValue] = { ["account": .string($0)] }

        @Sendable func signedIn(_ machine: DeviceID, to account: String) async throws -> String {
            try await directory.signedInDevice(of: machine, account: account)
        }

        /// The machine's own device of `account` named `deviceID`, live or not; anything else refused.
        @Sendable func ownDevice(_ machine: DeviceID, _ deviceID: String, of account: String) async throws -> Bool {
            guard let device = try await directory.machineDevice(account: account, machine: machine), device.id == deviceID else {
                throw MachineAccessFailure.notSignedIn
            }
            return device.live
        }

        /// A second step waiting for this machine's local user `uid`: one opened by a sign-in
        /// that user made through it.
        @Sendable func pending(_ flow: String, for machine: DeviceID, uid: UInt32?) async throws -> PendingSignIn? {
            try await directory.pendingSignIn(flow, owner: FlowOwner(machine: machine, user: uid))
        }

        register(LinkAccount.self, home: .link, access: .anyone, audit: { _, _ in [:] }, auditRequest: { named($0.account) }) { params, machine in
            _ = try await signedIn(machine, to: params.account)
            let record = try await directory.account(id: params.account)
            // The stamp is what a remembered sign-in resumes with: only for a machine that holds
            // a live session of the account now (it remembers one just after signing in), never
            // for one that logged out and learns of a new password later.
            let holds = (try? await directory.requireLiveSession(on: machine, of: params.account)) != nil
            return .init(record: record, credentialStamp: holds ? try await directory.credentialStamp(account: params.account).map(Base64URL.encode) : nil)
        }
        register(LinkCredentialConfirm.self, home: .link, access: .anyone, audit: { _, _ in [:] },
                 auditRequest: { named($0.account).merging(["factor": .string($0.factor)]) { a, _ in a } }) { params, machine in
            _ = try await signedIn(machine, to: params.account)
            let secret = SecretBytes(Array(params.secret.utf8))
            switch params.factor {
            case "password": try await directory.confirmPassword(secret, account: params.account)
            case "pin": try await directory.confirmPIN(secret, account: params.account)
            default: throw InvalidParameter("factor must be password or pin", field: "factor")
            }
            return Acknowledged()
        }
        register(LinkSignInResume.self, home: .link, access: .anyone, audit: { _, _ in [:] }, auditRequest: { named($0.account) }) { params, machine in
            // A machine proves the person itself only with a finger (`auth.fast`).
            guard params.amr == ["fpt"] else { throw InvalidParameter("amr must be [\"fpt\"]", field: "amr") }
            guard let sent = params.stamp else { return .init(signedIn: nil) }
            guard let stamp = Base64URL.decode(sent) else { throw InvalidParameter("stamp must be base64url", field: "stamp") }
            guard try await ownDevice(machine, params.deviceID, of: params.account) else { return .init(signedIn: nil) }
            return .init(signedIn: try await directory.resumeSignIn(account: params.account, deviceID: params.deviceID, amr: params.amr, stamp: stamp))
        }
        register(LinkSignInRemembered.self, home: .link, access: .anyone, audit: { _, _ in [:] }, auditRequest: { named($0.account) }) { params, machine in
            guard let stamp = Base64URL.decode(params.stamp) else { throw InvalidParameter("stamp must be base64url", field: "stamp") }
            guard try await ownDevice(machine, params.deviceID, of: params.account) else { return .init(holds: false) }
            return .init(holds: try await directory.rememberedSignInHolds(account: params.account, deviceID: params.deviceID, stamp: stamp))
        }
        register(LinkSignInPending.self, home: .link, access: .anyone, audit: { _, _ in [:] }) { params, machine in
            guard let found = try await pending(params.flow, for: machine, uid: params.uid) else { return .init(pending: nil) }
            let flow = found.flow
            return .init(pending: .init(flow: flow.id, account: flow.account, step: flow.step.rawValue, deviceName: flow.device.name,
                                        expiresAt: flow.expiresAt, accountHasPIN: found.accountHasPIN))
        }
        register(LinkSignInFingerprint.self, home: .link, access: .anyone, audit: { _, _ in [:] }) { params, machine in
            // Decided on the hub's own reading of the flow, never on what the machine says of it.
            guard let found = try await pending(params.flow, for: machine, uid: params.uid), found.flow.step == .fingerprint else { throw AccountFailure.authFailed }
            switch try await directory.completeSignIn(found, fingerMatched: params.matched) {
            case .signedIn(let signedIn): return .init(outcome: "signed_in", signedIn: signedIn)
            case .continuesWithPIN: return .init(outcome: "continues_with_pin", signedIn: nil)
            case .ended: return .init(outcome: "ended", signedIn: nil)
            }
        }
        // A sign-in, so the machine need not be signed in yet; the hub trusts only its own
        // validation of the ID token, with its own provider settings.
        register(LinkSignInFederated.self, home: .link, access: .anyone, audit: { _, result in ["created": .bool(result.created)] },
                 auditRequest: { ["provider": .string(Redaction.printable($0.provider, limit: 64))] }) { params, machine in
            let provider: OpenIDProvider
            do {
                provider = try providers.provider(named: params.provider)
            } catch FederationFailure.unknownProvider(let name, file: _) {
                // The hub's configuration file is none of the device's business.
                throw FederationFailure.unknownProvider(name, file: "the hub's configuration")
            }
            let claims = try await provider.validate(idToken: params.idToken, nonce: params.nonce)
            let settings = provider.settings
            let identity = FederatedIdentity(provider: settings.name, issuer: settings.issuer, subject: claims.subject, email: claims.email, name: claims.name)
            let device = DeviceIdentity(key: DeviceIdentity.key(ofMachine: machine), name: Redaction.printable(params.deviceName, limit: 128))
            let result = try await directory.signIn(federated: identity, proof: FederatedProof(idToken: params.idToken, nonce: params.nonce, expiresAt: claims.expiresAt), device: device)
            return .init(signedIn: result.signedIn, created: result.created)
        }
        register(LinkFederationLogout.self, home: .link, access: .anyone, audit: { _, result in ["sessions_ended": .integer(Int64(result.sessionsEnded))] },
                 auditRequest: { named($0.account).merging(["provider": .string(Redaction.printable($0.provider, limit: 64))]) { a, _ in a } }) {
            params, machine in
            _ = try await signedIn(machine, to: params.account)
            let ended = try await directory.endFederatedSessions(account: params.account, provider: params.provider, issuer: params.issuer,
                                                                 subject: params.subject, madeBy: params.madeBy, machine: machine)
            return .init(sessionsEnded: ended)
        }
        register(LinkFederationEmail.self, home: .link, access: .anyone, audit: { _, _ in [:] }, auditRequest: { named($0.account) }) { params, machine in
            _ = try await signedIn(machine, to: params.account)
            return .init(email: try await directory.federatedEmail(account: params.account, issuer: params.issuer, subject: params.subject))
        }
        // A session is this machine's or none (`authenticate` checks its binding).
        register(LinkSessionAuthenticate.self, home: .link, access: .anyone, audit: { _, _ in [:] }) { params, machine in
            let session = try await directory.authenticate(PresentedSession(params.session, machine: machine))
            return .init(id: session.id, account: session.accountID, deviceID: session.deviceID, amr: session.amr, createdAt: session.createdAt,
                         expiresAt: session.expiresAt, idleExpiresAt: session.idleExpiresAt)
        }
        register(LinkSessionEnd.self, home: .link, access: .anyone, audit: { _, result in ["session": .string(result.id)] }) { params, machine in
            .init(id: try await directory.endSession(PresentedSession(params.session, machine: machine)))
        }
    }
}
