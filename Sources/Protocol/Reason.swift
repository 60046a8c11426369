/// A name from an open set that programs match on and that travels as a bare JSON string: new
/// names are added over time, so a value a program does not know still decodes (``Reason``,
/// ``PromptKind``).
public protocol OpenName: RawRepresentable<String>, Hashable, Sendable, Codable, CustomStringConvertible {
    init(rawValue: String)
}

extension OpenName {
    public var description: String { rawValue }

    public init(from decoder: any Decoder) throws {
        self.init(rawValue: try decoder.singleValueContainer().decode(String.self))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// A stable, dotted machine-readable reason carried in `error.data.reason`.
///
/// Programs match on reasons, never on messages. A reason, once shipped, keeps its meaning;
/// every reason is documented in authd-protocol(7).
public struct Reason: OpenName {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }

    // MARK: JSON-RPC framing and envelopes
    /// The line is not valid JSON (or not UTF-8).
    public static let parseError = Reason("rpc.parse_error")
    /// The JSON is not a JSON-RPC 2.0 request object.
    public static let invalidRequest = Reason("rpc.invalid_request")
    /// No such method.
    public static let unknownMethod = Reason("rpc.unknown_method")
    /// Params missing, of the wrong type, or with an unknown field; `data.field` names it.
    public static let invalidParams = Reason("rpc.invalid_params")
    /// A line longer than the 1 MiB limit; the connection is closed after this error.
    public static let lineTooLong = Reason("rpc.line_too_long")
    /// Something failed inside authd; details are in the daemon's log, never on the wire.
    public static let `internal` = Reason("internal")

    // MARK: Server
    /// The daemon holds its maximum number of connections.
    public static let serverBusy = Reason("server.busy")
    /// The daemon is stopping and takes no new requests.
    public static let shuttingDown = Reason("server.shutting_down")
    /// The request was cancelled (the client cancelled it, or the daemon stopped first).
    public static let requestCancelled = Reason("request.cancelled")
    /// The caller may not call this method.
    public static let forbidden = Reason("auth.forbidden")
    /// No subscription with that id on this connection.
    public static let unknownSubscription = Reason("subscription.unknown")
    /// The connection already has the maximum number of open streams (16).
    public static let subscriptionLimit = Reason("subscription.limit")

    // MARK: Tokens
    /// Not a compact JWS of three base64url parts with JSON header and claims.
    public static let tokenMalformed = Reason("token.malformed")
    /// The signature does not verify with the key named by `kid`.
    public static let tokenBadSignature = Reason("token.bad_signature")
    /// `exp` has passed.
    public static let tokenExpired = Reason("token.expired")
    /// `nbf` is in the future.
    public static let tokenNotYetValid = Reason("token.not_yet_valid")
    /// `aud` does not contain the expected audience.
    public static let tokenWrongAudience = Reason("token.wrong_audience")
    /// `kid` names no key this daemon publishes (never existed, or rotated out of the JWKS).
    public static let tokenUnknownKey = Reason("token.unknown_key")
    /// The token was not issued by this daemon (`iss` differs).
    public static let tokenWrongIssuer = Reason("token.wrong_issuer")

    // MARK: Accounts
    /// The phone number is not valid or not complete (libphonenumber); nothing was stored or sent.
    public static let phoneInvalid = Reason("phone.invalid")
    /// The number is valid but cannot receive SMS (e.g. a fixed line).
    public static let phoneNotMobile = Reason("phone.not_mobile")
    /// The password breaks the policy; `data.rule` says which rule.
    public static let passwordWeak = Reason("password.weak")
    /// Not a usable email address.
    public static let emailInvalid = Reason("email.invalid")
    /// The number already belongs to an account; told only after the code proved the number.
    public static let phoneTaken = Reason("phone.taken")
    /// The email address already belongs to another account.
    public static let emailTaken = Reason("email.taken")
    /// The SMS with the code could not be delivered; that code is never valid (resend).
    public static let smsUndeliverable = Reason("sms.undeliverable")
    /// Wrong code; `data.attempts_left` says how many tries remain.
    public static let otpWrong = Reason("otp.wrong")
    /// Too many wrong codes: the flow is dead; start again.
    public static let otpAttemptsExhausted = Reason("otp.attempts_exhausted")
    /// The code expired (`data.expired_at`); ask for a new one with resend.
    public static let otpExpired = Reason("otp.expired")
    /// The code was already used (each code works once).
    public static let otpUsed = Reason("otp.used")
    /// No such flow (never existed, or finished long ago).
    public static let otpUnknownFlow = Reason("otp.unknown_flow")
    /// Send limit reached (2 resends per flow, 5 codes per number per hour); `data.retry_after` in seconds when known.
    public static let otpTooManySends = Reason("otp.too_many_sends")
    /// Too early to resend; `data.retry_after` in seconds.
    public static let otpTooEarly = Reason("otp.too_early")

    /// Sign-in failed: unknown account, wrong password or PIN, deactivated account — on
    /// purpose indistinguishable.
    public static let authFailed = Reason("auth.failed")
    /// The action needs a session authenticated in the last 10 minutes: sign in again.
    public static let reauthRequired = Reason("auth.reauth_required")
    /// The action needs a session that proved the phone with an SMS code (OTP login).
    public static let otpRequired = Reason("auth.otp_required")
    /// The PIN is not 6 digits, or too easy to guess (000000, 123456, …); `data.rule`.
    public static let pinWeak = Reason("pin.weak")
    /// The PIN and its confirmation differ.
    public static let pinMismatch = Reason("pin.mismatch")
    /// The account has no PIN second factor to confirm or turn off.
    public static let twoFactorNotEnabled = Reason("twofactor.not_enabled")
    /// Too many failed sign-ins; `data.locked_until` says when it lifts.
    public static let accountLocked = Reason("account.locked")
    /// Not locked by failures: checks of the same secret still in progress hold it for a moment
    /// (one of them may be the one that locks). Retry after `data.retry_after` seconds.
    public static let accountBusy = Reason("account.busy")

    /// Too many requests of this kind from the caller's user; `data.retry_after` in seconds.
    public static let rateLimited = Reason("rate.limited")
    /// No account matches (admin methods).
    public static let accountUnknown = Reason("account.unknown")

    // MARK: Sessions and devices
    /// The session token is unknown or was ended (logout, revoke).
    public static let sessionInvalid = Reason("session.invalid")
    /// The session passed its idle timeout or maximum lifetime.
    public static let sessionExpired = Reason("session.expired")
    /// The account already uses its maximum number of devices; no session was created.
    public static let deviceLimitReached = Reason("device.limit_reached")
    /// `session.revoke`: the account has no live session with that id.
    public static let sessionUnknown = Reason("session.unknown")
    /// `device.revoke`: the account has no device with that id.
    public static let deviceUnknown = Reason("device.unknown")

    // MARK: Admin
    /// The configuration file is invalid; `data.file`, `data.line` say where. The running config stays.
    public static let configInvalid = Reason("config.invalid")
    /// The backup could not be written (`data.path`); nothing was left behind.
    public static let backupFailed = Reason("admin.backup_failed")
    /// `admin.sms.last`: the daemon sends SMS through another backend than `spool` and keeps
    /// no copy; `data.backend` names it.
    public static let smsNotSpooled = Reason("sms.not_spooled")
    /// `admin.sms.last`: the spool holds no message (to that number); old ones are deleted
    /// after a day.
    public static let smsNoneSpooled = Reason("sms.none_spooled")
    /// `admin.sms.last` on a device: the hub sends the account's SMS and keeps them in its own
    /// spool; `data.hub` names it.
    public static let smsAtHub = Reason("sms.at_hub")

    // MARK: ID card and prompts
    /// The CAN is not exactly 6 digits; nothing was stored and the card was not touched.
    public static let canInvalid = Reason("can.invalid")
    /// The PIN has the wrong length (PIN1 4–12 digits, PIN2 5–12) or is not digits; checked
    /// before the card is touched, so no retry is burned.
    public static let pinInvalidLength = Reason("pin.invalid_length")
    /// The card refused the PIN; `data.retries_left` says how many tries remain.
    public static let pinWrong = Reason("pin.wrong")
    /// The PIN is blocked on the card (no tries left); unblock it with the PUK elsewhere.
    public static let pinBlocked = Reason("pin.blocked")
    /// No card was presented within the window (`timeout_s`, default 90 s).
    public static let cardTimeout = Reason("card.timeout")
    /// PACE failed: the CAN does not belong to this card. A saved CAN was deleted.
    public static let cardCANMismatch = Reason("card.can_mismatch")
    /// The card left the reader, or the reader or pcscd went away, mid-operation. Retrying
    /// the same request needs no new CAN entry.
    public static let cardRemoved = Reason("card.removed")
    /// No smart-card reader is connected.
    public static let cardNoReader = Reason("card.no_reader")
    /// The card in the reader is not a supported ID card.
    public static let cardUnsupported = Reason("card.unsupported")
    /// The card answered with a status word or data that no correct card sends; nothing was signed.
    public static let cardError = Reason("card.error")
    /// The card in the reader is not the one whose certificate the request names
    /// (`card.sign`'s `certificate`), or it was swapped during the request; nothing was signed.
    public static let cardCertificateMismatch = Reason("card.certificate_mismatch")
    /// The smart-card service (pcscd) cannot be reached.
    public static let cardServiceUnavailable = Reason("card.service_unavailable")
    /// The user declined a prompt (`prompt.cancel`, or Ctrl-D / Esc in authctl).
    public static let userCancelled = Reason("user.cancelled")
    /// No prompt with that id is waiting on this connection.
    public static let promptUnknown = Reason("prompt.unknown")
    /// Nobody answered a prompt within `[server] prompt_timeout` (or the card's window, or
    /// WebAuthn's `timeout`, when shorter); `data.timeout_s`.
    public static let promptTimeout = Reason("prompt.timeout")
    /// A request asked for `prompt: desktop` and there is no desktop to ask on: no desktop agent
    /// (`authd --desktop`) registered for the caller's user (system mode), or no pinentry to run.
    public static let promptNoDesktop = Reason("prompt.no_desktop")
    /// The person cancelled the desktop dialog (pinentry) that asked for a secret.
    public static let promptCancelled = Reason("prompt.cancelled")
    /// The prompt is answered on the person's desktop, not on the asking connection.
    public static let promptOnDesktop = Reason("prompt.on_desktop")
    /// The person refused to let this program have a token for this audience (or closed the question).
    public static let consentDenied = Reason("consent.denied")
    /// `consents.revoke` matched no remembered consent.
    public static let consentUnknown = Reason("consent.unknown")

    // MARK: Lock and biometrics
    /// authd is locked for this local user (`lock`, or idle past `[lock] idle`): methods that
    /// issue a token or release a secret wait for `unlock`.
    public static let sessionLocked = Reason("session.locked")
    /// `lock` needs a remembered account (one that signed in from this user): its password unlocks.
    public static let lockNoAccount = Reason("lock.no_account")
    /// Nothing could open the lock: the remembered account has neither a password nor a
    /// verified phone number to send a code to (or not the one `unlock` was asked to use).
    public static let lockNoUnlockMethod = Reason("lock.no_unlock_method")
    /// The finger did not match; `data.attempts_left` says how many before the cut-off.
    public static let biometricNoMatch = Reason("biometric.no_match")
    /// The reader or fprintd failed during the scan (disconnected, unknown error, vanished).
    public static let biometricFailed = Reason("biometric.failed")
    /// No fprintd, no reader, no enrolled finger, or the reader is busy; `data.detail` says which.
    public static let biometricUnavailable = Reason("biometric.unavailable")
    /// No finger within the wait (`[biometric] timeout`).
    public static let biometricTimeout = Reason("biometric.timeout")
    /// Fingerprint use is not switched on for this (`biometric.enable`, `card.biometric.enable`).
    public static let biometricNotEnabled = Reason("biometric.not_enabled")
    /// Five fingers in a row did not match: fingerprints are off until an unlock by password or SMS code.
    public static let biometricCutOff = Reason("biometric.cut_off")
    /// `auth.fast`: no remembered account, or its credentials no longer hold; sign in normally.
    public static let rememberedInvalid = Reason("auth.remembered_invalid")
    /// `card.biometric.enable` needs a saved PIN1 (`card.pin1.save`).
    public static let cardPIN1NotSaved = Reason("card.pin1_not_saved")
    // MARK: Federation and remote APIs
    /// A 401 (from an API through `remote.fetch`, a refresh, or `remote.unauthorized`) logged the
    /// user out of the provider: tokens deleted, its sessions ended, and this answer until the
    /// next `federation.login` succeeds. `data.provider`, `data.source` (`api`, `refresh`, `reported`).
    public static let sessionLoggedOut = Reason("session.logged_out")
    /// No `[federation.NAME]` provider of that name, or none configured, or several and no default.
    public static let federationUnknownProvider = Reason("federation.unknown_provider")
    /// This local user never signed in with the provider, or signed out (`federation.login`).
    public static let federationNotSignedIn = Reason("federation.not_signed_in")
    /// The provider could not be used: discovery, JWKS or token endpoint unreachable or answering
    /// something that is not OAuth/OIDC; `data.detail` says which. Nothing changed.
    public static let federationProviderError = Reason("federation.provider_error")
    /// The provider refused the sign-in (`access_denied`, `expired_token`, a refused code); `data.error`
    /// is the OAuth error code.
    public static let federationDenied = Reason("federation.denied")
    /// The ID token failed validation (signature, `iss`, `aud`, `exp`, `nonce`, …); `data.check`
    /// names the check. No account or session was created.
    public static let federationIDTokenInvalid = Reason("federation.id_token_invalid")
    /// The sign-in was not completed within `[federation] login_timeout`.
    public static let federationTimeout = Reason("federation.timeout")
    /// The access token expired and the provider gave no refresh token; sign in again.
    public static let remoteTokenExpired = Reason("remote.token_expired")
    /// `remote.fetch`: the URL's origin is not one of the provider's `api` origins, so the
    /// bearer token is not sent there.
    public static let remoteOriginNotAllowed = Reason("remote.origin_not_allowed")
    /// The remote API or the token endpoint could not be reached, timed out, or answered too
    /// much; `data.detail`. The vault is unchanged.
    public static let remoteUnavailable = Reason("remote.unavailable")
    /// Passkeys: the origin is not https (or http://localhost), or the RP ID is neither its host
    /// nor a parent of it that is not a public suffix; or, at the relying party, not an origin
    /// `[passkeys] origins` lists.
    public static let passkeyBadOrigin = Reason("passkey.bad_origin")
    /// Passkeys: the user could not be verified (finger and PIN failed or are unavailable);
    /// nothing was made or signed. `data.detail` says why.
    public static let passkeyUVFailed = Reason("passkey.uv_failed")
    /// Passkeys: this user holds no passkey for the RP ID (or none the allow list names).
    public static let passkeyNone = Reason("passkey.none")
    /// Passkeys: a passkey the request excludes (or an already registered credential) exists.
    public static let passkeyExcluded = Reason("passkey.excluded")
    /// Passkeys: none of `pubKeyCredParams` is ES256 (-7), the only algorithm authd makes or accepts.
    public static let passkeyUnsupportedAlgorithm = Reason("passkey.unsupported_algorithm")
    /// Relying party: a WebAuthn check failed; `data.check` names it (challenge, origin, rp_id,
    /// user_present, user_verified, backup_state, signature, sign_count, credential, …).
    public static let passkeyInvalid = Reason("passkey.invalid")
    /// Relying party: the flow is unknown, expired or already used; begin again.
    public static let passkeyFlowInvalid = Reason("passkey.flow_invalid")

    // MARK: Hub
    /// A device cannot reach its hub (not connected, or the hub did not answer in time): account
    /// methods are refused at once, machine methods keep working. `data.retry_after` (seconds)
    /// says when the link tries again.
    public static let hubUnavailable = Reason("hub.unavailable")
    /// The hub's certificate is not the one configured (`[hub] ca_file` or `pin`): the link
    /// stays down rather than talk to an impostor. `data.detail` says what did not match.
    public static let hubUntrusted = Reason("hub.untrusted")
    /// The session's device (or machine) was removed from the account (`device.revoke`): sign
    /// in again, which counts against the device limit again.
    public static let deviceRevoked = Reason("device.revoked")
    /// Over a hub link: the machine asked about an account it is not signed in to (it holds no
    /// live device of the account at the hub), or named a device that is not its own. Refused
    /// and audited at the hub; sign in on that machine first.
    public static let hubNotSignedIn = Reason("hub.not_signed_in")
    /// On a device: the operation needs account data this machine cannot reach through its hub
    /// (unlock by SMS code, for one); `data.operation` names it. Nothing changed.
    public static let hubNotOnDevice = Reason("hub.not_on_device")

    /// Every reason that means "this session is over: sign in again" — ended or expired, logged
    /// out by a provider, its machine removed from the account, or a machine the hub no longer
    /// counts as signed in. A client treats them alike on every role (authctl: exit 7, and
    /// `logout` removes the saved session).
    public static let sessionOver: Set<Reason> = [
        .sessionInvalid, .sessionExpired, .sessionLoggedOut, .deviceRevoked, .hubNotSignedIn, .federationNotSignedIn, .remoteTokenExpired,
    ]

    // MARK: Sync

    /// An event's body is over 64 KiB (`data.limit` bytes).
    public static let syncTooLarge = Reason("sync.too_large")
    /// `sync.dismiss` of a position that holds no notification of the account.
    public static let syncUnknownEvent = Reason("sync.unknown_event")

    // MARK: Friends and presence
    /// `friends.add`: no account has that email address (or, for other calls, it is not a
    /// friend's); nothing changed.
    public static let friendNotFound = Reason("friend.not_found")
    /// `friends.add` of the caller's own address.
    public static let friendSelf = Reason("friend.self")
    /// No group of the caller's has that name.
    public static let groupNotFound = Reason("group.not_found")
    /// The caller has a group of that name already.
    public static let groupExists = Reason("group.exists")
    /// The default group "friends" can be neither renamed nor deleted.
    public static let groupDefault = Reason("group.default")
    /// The caller has `data.limit` groups already.
    public static let groupLimit = Reason("group.limit")
    /// No hotspot of that id the caller may change (or see).
    public static let hotspotNotFound = Reason("hotspot.not_found")
    /// A hotspot of that name is already one the caller sees.
    public static let hotspotExists = Reason("hotspot.exists")
    /// The caller has `[presence] max_hotspots` hotspots of their own already (`data.limit`).
    public static let hotspotLimit = Reason("hotspot.limit")
    /// `presence.pin` of a point outside the hotspot the caller is in now, or while in none.
    public static let presencePinOutside = Reason("presence.pin_outside")
    /// The person turned presence off (`presence.off`): nothing is kept or reported until
    /// `presence.on`.
    public static let presenceOff = Reason("presence.off")
    /// `presence.answer` when no question about that hotspot is open for the account (it was
    /// answered, or the person left).
    public static let presenceNotAsked = Reason("presence.not_asked")
    /// This machine cannot tell where it is: GeoClue2 is absent or refused (`data.detail`).
    /// Nothing is shared.
    public static let presenceUnavailable = Reason("presence.unavailable")

    // MARK: PAM
    /// `pam.authenticate`: the user has no method the `[pam]` policy allows for the service
    /// (nothing linked, no enrolled finger); pam_authd answers `PAM_USER_UNKNOWN` with
    /// `ignore_unknown_user`, else `PAM_AUTH_ERR`.
    public static let pamNoMethod = Reason("pam.no_method")
    /// The card presented is not the one linked to the user; its PIN was not asked.
    public static let pamCardMismatch = Reason("pam.card_mismatch")
    /// The card's certificate does not chain to `[pam] ca_file` (or none is set): a card anyone
    /// could make is never taken as someone's.
    public static let pamCardUntrusted = Reason("pam.card_untrusted")
    /// No Unix user of that name, or not a name PAM could pass.
    public static let pamUnknownUser = Reason("pam.unknown_user")
    /// The card or account is linked to `[pam] link_limit` other Unix users already; `data.limit`.
    public static let pamAlreadyLinked = Reason("pam.already_linked")
    /// `pam.link.account` without an account: the caller's user is signed in to none.
    public static let pamNoAccount = Reason("pam.no_account")
    /// `pam.account`: the linked account is deactivated.
    public static let pamAccountDeactivated = Reason("pam.account_deactivated")
}
