import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// The methods that act on the sessions and devices of the account behind a session token,
/// and the account tokens a session earns.
struct SessionService: Sendable {
    let directory: any SessionBook & MachineAccounts
    let tokens: TokenService

    func describe(_ session: PresentedSession) async throws -> SessionGet.Result {
        let described = try await directory.describeSession(session)
        let session = described.session
        return SessionGet.Result(
            id: session.id, account: described.account, device: described.device, amr: session.amr,
            createdAt: Timestamp.rfc3339(epochSeconds: session.createdAt), expiresAt: Timestamp.rfc3339(epochSeconds: session.expiresAt),
            idleExpiresAt: Timestamp.rfc3339(epochSeconds: session.idleExpiresAt))
    }

    /// `auth.logout`: ends the session; returns its id.
    func logout(_ session: PresentedSession) async throws -> String {
        try await directory.endSession(session)
    }

    func listSessions(_ session: PresentedSession) async throws -> SessionList.Result {
        SessionList.Result(sessions: try await directory.sessions(session))
    }

    func revokeSession(_ params: SessionItemParams, session: PresentedSession) async throws -> SessionRevoke.Result {
        try await directory.revokeSession(session, id: params.id)
        return SessionRevoke.Result(revoked: true)
    }

    func listDevices(_ session: PresentedSession) async throws -> DeviceList.Result {
        let devices = try await directory.devices(session)
        return DeviceList.Result(devices: devices.devices, limit: devices.limit)
    }

    /// Removes a device: its sessions end at once and it no longer counts against the limit.
    func revokeDevice(_ params: SessionItemParams, session: PresentedSession) async throws -> SessionRevoke.Result {
        try await directory.revokeDevice(session, id: params.id)
        return SessionRevoke.Result(revoked: true)
    }

    func accountToken(_ params: AuthToken.Params, caller: Caller) async throws -> IssuedToken {
        let session = try await directory.authenticate(PresentedSession(params.session, from: caller))
        return try tokens.issueAccount(accountID: session.accountID, amr: session.amr, azp: caller.executable, aud: params.aud, nonce: params.nonce)
    }
}
