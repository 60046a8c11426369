import FoundationEssentials
import OpenSSLCrypto
import Protocol

/// The methods that act on the sessions and devices of the account behind a session token,
/// and the account tokens a session earns.
struct SessionService: Sendable {
    let directory: any AccountDirectory
    let tokens: TokenService

    func describe(_ token: String) async throws -> SessionGet.Result {
        try await directory.describeSession(token)
    }

    /// `auth.logout`: ends the session; returns its id.
    func logout(_ token: String) async throws -> String {
        try await directory.endSession(token)
    }

    func listSessions(_ token: String) async throws -> SessionList.Result {
        SessionList.Result(sessions: try await directory.sessions(token))
    }

    func revokeSession(_ params: SessionItemParams) async throws -> SessionRevoke.Result {
        try await directory.revokeSession(params.session, id: params.id)
        return SessionRevoke.Result(revoked: true)
    }

    func listDevices(_ token: String) async throws -> DeviceList.Result {
        try await directory.devices(token)
    }

    /// Removes a device: its sessions end at once and it no longer counts against the limit.
    func revokeDevice(_ params: SessionItemParams) async throws -> SessionRevoke.Result {
        try await directory.revokeDevice(params.session, id: params.id)
        return SessionRevoke.Result(revoked: true)
    }

    func accountToken(_ params: AuthToken.Params, caller: Caller) async throws -> IssuedToken {
        let session = try await directory.authenticate(params.session)
        return try tokens.issueAccount(accountID: session.accountID, amr: session.amr, azp: caller.executable, aud: params.aud, nonce: params.nonce)
    }
}
