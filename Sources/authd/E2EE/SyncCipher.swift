// E2EE/ — end-to-end encrypted sync (DESIGN §13). The format is the JOSE module's (JWE and
// SignedEnvelope, RFC 7516/7518 and 7515 on OpenSSLCrypto; PublishedDeviceKey, a machine's signed
// key; E2EEFailure). The hub's directory of those keys is the account store's (`DeviceKeyBook`);
// SyncCipher, on a device, seals what its apps send and opens what the hub relays.

import FoundationEssentials
import JOSE
import OpenSSLCrypto
import Protocol
import Synchronization

/// On a device: end-to-end encryption of the account's sync (DESIGN §13). What this machine's
/// apps send as a `message` or `notification` leaves it sealed — a JWE to every device of the
/// account, this one included, signed by this device — and what the hub relays sealed is opened
/// here, the sender's signature checked first, before any app sees it. What does not open is
/// handed on with the reason (`withheld`), never dropped and never shown as it came.
///
/// The account's keys come from the hub (`link.e2ee.keys`) and are trusted only as far as each
/// device's own signature goes: a key its device did not sign is never encrypted to, and a
/// signature is accepted only from a key its device signed. Which devices the account has is
/// the hub's word; a new one is told on every machine (`device.linked`). The keys are kept a
/// minute, and read again at once when a device is linked or removed or the hub says the
/// recipients changed.
final class SyncCipher: Sendable {
    private let identity: MachineIdentity
    private let link: HubLink
    private let directory: any MachineAccounts
    private let logger: Logger
    private let state = Mutex(State())

    /// An account's devices as this machine checked them.
    struct AccountKeys: Sendable {
        let mode: E2EEMode
        /// Devices not removed, whose key their device signed: whom a send is encrypted to.
        let recipients: [JWE.Recipient]
        /// Every device whose key its device signed, removed ones included: whose signature opens.
        let signers: [String: P256PublicKey]
        /// Devices whose key the hub gave did not check: nothing is sent while there is one.
        let forged: [String]
        let read: ContinuousClock.Instant
    }

    private struct State {
        var keys: [String: AccountKeys] = [:]
        /// Sessions' accounts, by the token's SHA-256 (an account never changes under a session).
        var accounts: [[UInt8]: String] = [:]
        var published = false
    }

    /// How long the account's keys are used before they are read again.
    static let keptFor: Duration = .seconds(60)
    /// How soon an unknown signer may send the keys to be read again.
    static let rereadAfter: Duration = .seconds(1)
    /// Sessions remembered.
    static let rememberedSessions = 4096

    init(identity: MachineIdentity, link: HubLink, directory: any MachineAccounts, logger: Logger) {
        self.identity = identity
        self.link = link
        self.directory = directory
        self.logger = logger
    }

    private var deviceID: String { identity.id.description }

    // MARK: This machine's key

    /// Tells the hub this machine's key-agreement key, signed by its device key (each time the
    /// link comes up: a hub restored from a backup learns it again). The hub takes it only from
    /// a machine that holds a session there (`hub.not_signed_in` otherwise): one whose link came
    /// up before its first sign-in tells it after the sign-in (`signedIn()`).
    /// A refused or failed telling counts as not told (a hub restored from a backup may have
    /// refused it before this machine signed in there again).
    func publish() async throws {
        do {
            let statement = try PublishedDeviceKey.make(deviceID: deviceID, signingKey: identity.key, agreementKey: try identity.agreementKey.publicKey())
            _ = try await link.call(LinkE2EEPublish.self, .init(spki: Base64URL.encode(try identity.certificate.publicKeyInfo), statement: statement.statement))
            state.withLock { $0.published = true }
        } catch {
            state.withLock { $0.published = false }
            throw error
        }
    }

    /// A sign-in on this machine was answered: tells the hub this machine's key unless the hub
    /// has it already. Told before the sign-in's answer goes out, the key is at the hub before
    /// anything the signed-in app does, and the account's other machines encrypt to this one
    /// from their next send (what they sent before it had a key stays unreadable here).
    func signedIn() async {
        guard !state.withLock({ $0.published }) else { return }
        do {
            try await publish()
        } catch {
            logger.warning("sync: this machine's encryption key could not be told to the hub after a sign-in (\(error)); it is told again before the next send and when the link comes up")
        }
    }

    // MARK: Sending

    /// `params` as it goes to the hub: a `message` or `notification` of an account whose sync is
    /// encrypted is sealed (`body` null); anything else as it is. `reread`: read the account's
    /// keys from the hub first (the hub said they changed).
    func seal(_ params: SyncSend.Params, reread: Bool = false) async throws -> SyncSend.Params {
        guard SyncService.sendableKinds.contains(params.kind), params.sealed == nil else { return params }
        let account = try await account(ofSession: params.session)
        let keys = try await keys(of: account, reread: reread)
        guard keys.mode == .required else { return params }
        if !state.withLock({ $0.published }) { try await publish() }
        if let forged = keys.forged.first {
            // Read again next time: the hub may have put it right.
            forget(account: account)
            throw E2EEFailure.badDeviceKey(deviceID: forged)
        }
        let inner = SealedBody(account: account, kind: params.kind, conversation: params.conversation, idempotencyKey: params.idempotencyKey, body: params.body)
        let jwe = try JWE.encrypt(Array(try WireCodec.encodeJSON(inner)), to: keys.recipients)
        var sealed = params
        sealed.body = .null
        sealed.sealed = try SignedEnvelope.sign(jwe: jwe, kid: deviceID, key: identity.key)
        return sealed
    }

    /// The hub refused a send because the account's devices changed: read its keys again.
    func forget(account: String) {
        _ = state.withLock { $0.keys.removeValue(forKey: account) }
    }

    // MARK: Receiving

    /// `event` as this machine's apps see it: a sealed body opened (`encrypted`), or withheld
    /// with the reason it did not open.
    func open(_ event: SyncEvent, account: String) async -> SyncEvent {
        // A device linked or removed: the next send reads the account's keys anew.
        if Self.deviceChanges.contains(event.kind) { forget(account: account) }
        guard let sealed = event.sealed else { return event }
        var opened = event
        opened.sealed = nil
        opened.body = .null
        do {
            opened.body = try await body(of: sealed, event: event, account: account)
            opened.encrypted = true
        } catch let failure as E2EEFailure {
            opened.withheld = failure.reason
        } catch {
            // The keys could not be read (the link went down meanwhile): the signer stays unknown.
            logger.warning("sync: the keys of account \(account) could not be read to open event \(event.position): \(error)")
            opened.withheld = E2EEFailure.unknownSender.reason
        }
        return opened
    }

    /// The kinds that change whom the account's events are encrypted to.
    static let deviceChanges: Set<String> = ["device.linked", "device.revoked"]

    func open(_ events: [SyncEvent], account: String) async -> [SyncEvent] {
        guard events.contains(where: { $0.sealed != nil || Self.deviceChanges.contains($0.kind) }) else { return events }
        var opened: [SyncEvent] = []
        opened.reserveCapacity(events.count)
        for event in events { opened.append(await open(event, account: account)) }
        return opened
    }

    private func body(of sealed: String, event: SyncEvent, account: String) async throws -> JSONValue {
        // The hub records which machine forwarded the event; that machine must be its signer.
        guard let signer = SignedEnvelope.signer(of: sealed) else { throw E2EEFailure.malformed }
        guard signer == event.sender.deviceID else { throw E2EEFailure.badSignature }
        var keys = try await keys(of: account, reread: false)
        if keys.signers[signer] == nil, ContinuousClock.now - keys.read > Self.rereadAfter {
            keys = try await self.keys(of: account, reread: true)
        }
        guard let signingKey = keys.signers[signer] else { throw E2EEFailure.unknownSender }
        let jwe = try SignedEnvelope.open(sealed, signerKey: signingKey)
        let plaintext = try JWE.decrypt(jwe, kid: deviceID, key: identity.agreementKey)
        // What the hub shows of the event is what the sender sealed: not moved to another
        // account, conversation, kind or send.
        guard let inner = try? WireCodec.decode(SealedBody.self, from: Data(plaintext)), inner.account.map({ $0 == account }) ?? true,
              inner.kind == event.kind, inner.conversation == event.conversation, inner.idempotencyKey == event.idempotencyKey
        else { throw E2EEFailure.tampered }
        return inner.body
    }

    // MARK: The account's keys

    private func account(ofSession token: String) async throws -> String {
        let hash = OpenSSL.sha256(Array(token.utf8))
        if let known = state.withLock({ $0.accounts[hash] }) { return known }
        let account = try await directory.authenticate(PresentedSession(token, machine: nil)).accountID
        state.withLock { state in
            if state.accounts.count >= Self.rememberedSessions { state.accounts.removeAll(keepingCapacity: true) }
            state.accounts[hash] = account
        }
        return account
    }

    private func keys(of account: String, reread: Bool) async throws -> AccountKeys {
        if !reread, let kept = state.withLock({ $0.keys[account] }), ContinuousClock.now - kept.read < Self.keptFor { return kept }
        let answer = try await link.call(LinkE2EEKeys.self, .init(account: account))
        var recipients: [JWE.Recipient] = []
        var signers: [String: P256PublicKey] = [:]
        var forged: [String] = []
        for device in answer.devices {
            guard let spki = Base64URL.decode(device.spki),
                  let verified = try? PublishedDeviceKey(deviceID: device.deviceID, signingKeySPKI: spki, statement: device.statement).verified()
            else {
                logger.warning("sync: the hub gave a key for device \(device.deviceID) of account \(account) that the device did not sign")
                if !device.revoked { forged.append(device.deviceID) }
                continue
            }
            signers[device.deviceID] = verified.signing
            if !device.revoked { recipients.append(JWE.Recipient(kid: device.deviceID, key: verified.agreement)) }
        }
        let keys = AccountKeys(mode: answer.e2ee, recipients: recipients, signers: signers, forged: forged, read: .now)
        state.withLock { $0.keys[account] = keys }
        return keys
    }
}

/// What a sealed body holds: the body, and what the hub shows beside it, so that a hub that
/// moves a body to another account, conversation, kind or send is caught. A machine holds one
/// agreement key for every account signed in on it, so without the account a hub could show one
/// account's message, opened here, to another account's local users.
struct SealedBody: Codable, Sendable {
    /// The account whose log it was sent to. Absent only in bodies sealed before it was added,
    /// which are taken as they are: a hub cannot take it out of a body, which the sender signed.
    let account: String?
    let kind: String
    let conversation: String?
    let idempotencyKey: String?
    let body: JSONValue

    enum CodingKeys: String, CodingKey { case account, kind, conversation, idempotencyKey = "idempotency_key", body }
}
