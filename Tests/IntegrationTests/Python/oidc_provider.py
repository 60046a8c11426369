#!/usr/bin/python3
"""A real OpenID Connect provider and a resource server for the integration tests, built on
Authlib 1.2 (Debian 12: python3-authlib, python3-flask). Authlib does the protocol work:
client authentication, the authorization code grant with PKCE (RFC 7636), refresh with rotation,
the device authorization grant (RFC 8628), revocation (RFC 7009), ID tokens (OpenID Connect
Core) and bearer-token checks (RFC 6750). This file only supplies in-memory storage, the
loopback redirect rule of RFC 8252, and control endpoints through which a test steers the
provider (the signed-in user, lifetimes, failure modes, spoiled ID tokens).

usage: oidc_provider.py [--client-id ID] [--client-secret SECRET] [--alg RS256|ES256]

Listens on two ephemeral ports of 127.0.0.1 (the provider and the resource server), prints
    READY issuer=http://127.0.0.1:P1 api=http://127.0.0.1:P2
on stdout once both accept connections, logs to stderr, and exits on SIGTERM or, when stdin is a
pipe, when stdin reaches end of file (so a test process that dies leaves no provider behind).
By hand: `sleep infinity | oidc_provider.py`.
"""
import argparse
import base64
import copy
import hmac
import json
import logging
import os
import signal
import stat
import sys
import threading
import time
import urllib.parse

# The issuer is plain http on 127.0.0.1; Authlib refuses anything but https or
# http://localhost: unless told otherwise. Must be set before any request is parsed.
os.environ["AUTHLIB_INSECURE_TRANSPORT"] = "1"

from authlib.common.security import generate_token
from authlib.integrations.flask_oauth2 import AuthorizationServer, ResourceProtector
from authlib.jose import JsonWebKey, JsonWebSignature, OctKey
from authlib.oauth2 import OAuth2Error
from authlib.oauth2.rfc6749 import ClientMixin, TokenMixin, grants
from authlib.oauth2.rfc6749.errors import (
    InvalidClientError, InvalidGrantError, InvalidRequestError, MissingAuthorizationError, UnsupportedTokenTypeError,
)
from authlib.oauth2.rfc6750 import BearerTokenGenerator, BearerTokenValidator, InvalidTokenError
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oauth2.rfc8628 import (
    DEVICE_CODE_GRANT_TYPE, DeviceAuthorizationEndpoint, DeviceCodeGrant, DeviceCredentialDict,
)
from authlib.oidc.core import OpenIDCode, OpenIDToken, UserInfo
from flask import Flask, Response, jsonify, request
from werkzeug.serving import make_server

log = logging.getLogger("oidc_provider")

SCOPES = ["openid", "profile", "email", "offline_access"]
GRANT_TYPES = ["authorization_code", "refresh_token", DEVICE_CODE_GRANT_TYPE]
CODE_LIFETIME = 60
ID_TOKEN_LIFETIME = 3600
TAMPER_MODES = {"none", "bad_signature", "wrong_aud", "expired", "wrong_nonce", "wrong_iss", "unknown_kid", "alg_none", "hs256"}


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# MARK: - State

class State:
    """Everything the provider knows, in memory. One lock: Flask serves each request on its own
    thread, and a real provider's database would make a refresh (check the old refresh token,
    store the new one, retire the old one) atomic too; without it two concurrent refreshes with
    the same refresh token could both succeed."""

    def __init__(self, client, alg):
        self.lock = threading.RLock()
        self.client = client
        self.alg = alg
        self.issuer = None
        self.api = None
        self.user = {"sub": "alice", "email": "alice@example.test", "name": "Alice Example"}
        self.settings = {
            "access_token_lifetime": 3600,
            "refresh_delay_ms": 0,
            "device_interval": 1,
            "device_expires_in": 600,
            "deny": False,
            "offline_access_required": False,
        }
        self.refresh_mode = "ok"
        self.tamper = "none"
        self.api_mode = "normal"
        self.codes = {}              # code → AuthorizationCode
        self.used_nonces = set()     # (client_id, nonce) of every authorization request
        self.by_access = {}          # access token → Token
        self.by_refresh = {}         # refresh token → Token
        self.devices = {}            # device_code → DeviceCredentialDict
        self.device_grants = {}      # normalised user_code → (user, approved)
        self.counts = {name: 0 for name in ("authorize", "token_code", "token_refresh", "token_device", "token_other",
                                            "device_authorization", "device_verification", "revoke", "api", "api_401")}
        self.last_token_request = None
        self.last_id_token = None    # the last ID token the token endpoint gave out
        self.kid_suffix = generate_token(8)
        self.key = self.generate_key("authd-test-" + self.kid_suffix)
        self._rogue_key = None

    def generate_key(self, kid):
        options = {"kid": kid, "use": "sig", "alg": self.alg}
        if self.alg == "ES256":
            return JsonWebKey.generate_key("EC", "P-256", options, is_private=True)
        return JsonWebKey.generate_key("RSA", 2048, options, is_private=True)

    @property
    def rogue_key(self):
        """Signs ID tokens in "unknown_kid" mode; never published. Made on first use: an RSA
        key pair takes a quarter of a second, and most tests never need it."""
        with self.lock:
            if self._rogue_key is None:
                self._rogue_key = self.generate_key("rogue-" + self.kid_suffix)
            return self._rogue_key

    def count(self, name):
        with self.lock:
            self.counts[name] += 1


class Client(ClientMixin):
    """The one registered client. Public (PKCE required, auth method "none") without a secret;
    confidential (client_secret_basic or client_secret_post) with one."""

    REDIRECT_URI = "http://127.0.0.1/callback"

    def __init__(self, client_id, secret):
        self.client_id = client_id
        self.secret = secret

    @property
    def is_public(self):
        return self.secret is None

    @property
    def auth_methods(self):
        return ["none"] if self.is_public else ["client_secret_basic", "client_secret_post"]

    def get_client_id(self):
        return self.client_id

    def get_default_redirect_uri(self):
        # None: an authorization request must name its redirect_uri (a loopback port changes
        # every time, so there is no sensible default).
        return None

    def get_allowed_scope(self, scope):
        return " ".join(s for s in scope.split() if s in SCOPES)

    def check_redirect_uri(self, redirect_uri):
        """RFC 8252 §7.3: for a loopback redirect URI the port is ignored; everything else must
        match the registered http://127.0.0.1/callback exactly."""
        try:
            parts = urllib.parse.urlsplit(redirect_uri)
            port = parts.port
        except ValueError:
            return False
        return (parts.scheme == "http" and parts.netloc.split(":")[0] == "127.0.0.1" and parts.username is None
                and parts.path == "/callback" and not parts.query and not parts.fragment
                and (port is None or 0 < port < 65536))

    def check_client_secret(self, client_secret):
        return self.secret is not None and hmac.compare_digest(self.secret.encode(), client_secret.encode())

    def check_endpoint_auth_method(self, method, endpoint):
        return method in self.auth_methods

    def check_response_type(self, response_type):
        return response_type == "code"

    def check_grant_type(self, grant_type):
        return grant_type in GRANT_TYPES


class AuthorizationCode:
    def __init__(self, code, request, user, nonce):
        self.code = code
        self.client_id = request.client_id
        self.redirect_uri = request.redirect_uri
        self.scope = request.scope
        self.user = user
        self.nonce = nonce
        self.auth_time = int(time.time())
        self.code_challenge = request.data.get("code_challenge")
        self.code_challenge_method = request.data.get("code_challenge_method")
        self.expires_at = time.time() + CODE_LIFETIME

    def get_redirect_uri(self):
        return self.redirect_uri

    def get_scope(self):
        return self.scope

    def get_nonce(self):
        return self.nonce

    def get_auth_time(self):
        return self.auth_time


class Token(TokenMixin):
    def __init__(self, token, client_id, user):
        self.client_id = client_id
        self.user = user
        self.access_token = token["access_token"]
        self.refresh_token = token.get("refresh_token")
        self.scope = token.get("scope", "")
        self.issued_at = time.time()
        self.expires_in = token.get("expires_in", 0)
        self.access_revoked = False
        self.refresh_revoked = False

    def check_client(self, client):
        return client.get_client_id() == self.client_id

    def get_scope(self):
        return self.scope

    def get_expires_in(self):
        return self.expires_in

    def is_expired(self):
        return time.time() >= self.issued_at + self.expires_in

    def is_revoked(self):
        return self.access_revoked


# MARK: - Grants (Authlib does the protocol; these supply storage)

class LoopbackCodeChallenge(CodeChallenge):
    """PKCE with S256 only. Authlib 1.2's CodeChallenge(required=True) insists on a
    code_verifier at the token endpoint for a public client but lets an authorization request
    without code_challenge through; a public client here must send one (OAuth 2.0 for native
    apps, RFC 8252 §8.1)."""

    SUPPORTED_CODE_CHALLENGE_METHOD = ["S256"]

    def validate_code_challenge(self, grant):
        data = grant.request.data
        if grant.request.client.is_public and not data.get("code_challenge"):
            raise InvalidRequestError('Missing "code_challenge": PKCE is required for this client')
        if data.get("code_challenge") and not data.get("code_challenge_method"):
            # The default would be "plain", which this provider does not support.
            raise InvalidRequestError('Missing "code_challenge_method": only S256 is supported')
        super().validate_code_challenge(grant)


class AuthorizationCodeGrant(grants.AuthorizationCodeGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]

    def validate_authorization_request(self):
        try:
            return super().validate_authorization_request()
        except OAuth2Error as error:
            # RFC 6749 §4.1.2.1: an error sent to the redirect URI carries the state. Errors
            # raised by Authlib 1.2's extensions (PKCE, nonce replay) are built without it.
            if error.redirect_uri and not error.state:
                error.state = self.request.state
            raise

    def save_authorization_code(self, code, request):
        nonce = request.data.get("nonce")
        with STATE.lock:
            STATE.codes[code] = AuthorizationCode(code, request, copy.deepcopy(request.user), nonce)
            if nonce:
                STATE.used_nonces.add((request.client_id, nonce))

    def query_authorization_code(self, code, client):
        with STATE.lock:
            item = STATE.codes.get(code)
        if item and item.client_id == client.get_client_id() and time.time() < item.expires_at:
            return item
        return None

    def delete_authorization_code(self, authorization_code):
        with STATE.lock:
            STATE.codes.pop(authorization_code.code, None)

    def authenticate_user(self, authorization_code):
        return authorization_code.user


class RotatingRefreshTokenGrant(grants.RefreshTokenGrant):
    """Every refresh answers a new refresh token and retires the old one (rotation); the access
    token it issues gets the lifetime set now, not the one of the token it replaces."""

    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]
    INCLUDE_NEW_REFRESH_TOKEN = True

    def authenticate_refresh_token(self, refresh_token):
        with STATE.lock:
            item = STATE.by_refresh.get(refresh_token)
        if item and not item.refresh_revoked:
            return item
        return None

    def authenticate_user(self, credential):
        return credential.user

    def revoke_old_credential(self, credential):
        with STATE.lock:
            credential.refresh_revoked = True

    def issue_token(self, user, credential):
        scope = self.request.scope or credential.get_scope()
        return self.generate_token(user=user, scope=scope, include_refresh_token=True)


class DeviceGrant(DeviceCodeGrant):
    def query_device_credential(self, device_code):
        with STATE.lock:
            return STATE.devices.get(device_code)

    def query_user_grant(self, user_code):
        with STATE.lock:
            return STATE.device_grants.get(normalise_user_code(user_code))

    def should_slow_down(self, credential):
        """RFC 8628 §3.5: a poll sooner than `interval` after the previous one gets slow_down,
        and the interval grows by 5 seconds for this and later polls. Authlib leaves this rule
        to the server."""
        now = time.monotonic()
        with STATE.lock:
            last = credential.get("last_poll")
            credential["last_poll"] = now
            if last is not None and now - last < credential["interval"]:
                credential["interval"] += 5
                return True
        return False

    def create_token_response(self):
        result = super().create_token_response()
        # A device code yields tokens once.
        with STATE.lock:
            STATE.devices.pop(self.request.credential["device_code"], None)
        return result


class DeviceAuthorization(DeviceAuthorizationEndpoint):
    """One instance serves every request; the route holds STATE.lock around each, so the
    per-request attributes set here are not shared between threads."""

    def create_endpoint_response(self, request):
        self.EXPIRES_IN = STATE.settings["device_expires_in"]
        self.INTERVAL = STATE.settings["device_interval"]
        self.current_request = request
        return super().create_endpoint_response(request)

    def get_verification_uri(self):
        return STATE.issuer + "/device"

    def save_device_credential(self, client_id, scope, data):
        # Authlib 1.2 passes request.client_id, the client_id *form field*: None for a client
        # that authenticated with client_secret_basic, whose device code then never matched it
        # at the token endpoint (unauthorized_client). The authenticated client is the right one.
        client_id = self.current_request.client.get_client_id()
        credential = DeviceCredentialDict(client_id=client_id, scope=scope, expires_at=time.time() + data["expires_in"], **data)
        with STATE.lock:
            STATE.devices[data["device_code"]] = credential


class Revocation(RevocationEndpoint):
    CLIENT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]

    def query_token(self, token_string, token_type_hint):
        with STATE.lock:
            if token_type_hint != "refresh_token" and token_string in STATE.by_access:
                return STATE.by_access[token_string]
            return STATE.by_refresh.get(token_string) or STATE.by_access.get(token_string)

    def revoke_token(self, token, request):
        # RFC 7009 §2.1: revoking a refresh token also ends the access tokens of the same grant.
        with STATE.lock:
            token.access_revoked = True
            if request.form.get("token") == token.refresh_token:
                token.refresh_revoked = True


class IDToken:
    """The OpenID Connect part shared by the code and the device grants: what Authlib's
    OpenIDToken needs (key, issuer, user claims), and the spoiling a test asked for."""

    def get_jwt_config(self, grant):
        return {"key": STATE.key, "alg": STATE.alg, "iss": STATE.issuer, "exp": ID_TOKEN_LIFETIME}

    def get_audiences(self, request):
        # A single audience as a string, as most providers send it.
        return request.client.get_client_id()

    def generate_user_info(self, user, scope):
        scopes = scope.split()
        info = UserInfo(sub=user["sub"])
        if "profile" in scopes:
            info["name"] = user["name"]
        if "email" in scopes:
            info["email"] = user["email"]
            info["email_verified"] = True
        return info

    def process_token(self, grant, token):
        token = super().process_token(grant, token)
        with STATE.lock:
            mode = STATE.tamper
        if "id_token" in token and mode != "none":
            token["id_token"] = spoil(token["id_token"], mode)
        if "id_token" in token:
            with STATE.lock:
                STATE.last_id_token = token["id_token"]
        return token


class CodeIDToken(IDToken, OpenIDCode):
    def exists_nonce(self, nonce, request):
        with STATE.lock:
            return (request.client_id, nonce) in STATE.used_nonces


class DeviceIDToken(IDToken, OpenIDToken):
    pass


def spoil(id_token, mode):
    """Returns `id_token` spoiled as `mode` says; a verifier must refuse every one of them."""
    header_b64, payload_b64, signature_b64 = id_token.split(".")
    header = json.loads(b64url_decode(header_b64))
    payload = json.loads(b64url_decode(payload_b64))
    jws = JsonWebSignature()
    key = STATE.key
    if mode == "bad_signature":
        signature = bytearray(b64url_decode(signature_b64))
        signature[len(signature) // 2] ^= 0x01
        return ".".join([header_b64, payload_b64, b64url(bytes(signature))])
    if mode == "wrong_aud":
        payload["aud"] = "another-client"
    elif mode == "expired":
        payload["exp"] = int(time.time()) - 600
        payload["iat"] = payload["exp"] - ID_TOKEN_LIFETIME
        payload["auth_time"] = min(payload.get("auth_time", payload["iat"]), payload["iat"])
    elif mode == "wrong_nonce":
        payload["nonce"] = "not-" + generate_token(16)
    elif mode == "wrong_iss":
        payload["iss"] = "https://issuer.invalid"
    elif mode == "unknown_kid":
        key = STATE.rogue_key
        header["kid"] = key.kid
    elif mode == "alg_none":
        header = {"alg": "none", "typ": "JWT", "kid": STATE.key.kid}
        return ".".join([b64url(json.dumps(header).encode()), payload_b64, ""])
    elif mode == "hs256":
        # Key confusion: the public key (PEM, as a naive verifier would hold it) as HMAC secret.
        # OctKey.import_key refuses PEM bytes, so the key is built around them directly.
        header = {"alg": "HS256", "typ": "JWT", "kid": STATE.key.kid}
        key = OctKey(raw_key=STATE.key.as_pem(is_private=False))
    body = json.dumps(payload).encode()
    return jws.serialize_compact(header, body, key).decode()


def normalise_user_code(user_code):
    # RFC 8628 §6.1: compare case-insensitively and ignore punctuation such as the dash.
    return "".join(c for c in (user_code or "").upper() if c.isalnum())


# MARK: - Provider application

def save_token(token, request):
    item = Token(token, request.client.get_client_id(), request.user)
    with STATE.lock:
        STATE.by_access[item.access_token] = item
        if item.refresh_token:
            STATE.by_refresh[item.refresh_token] = item


class TokenGenerator(BearerTokenGenerator):
    """Authlib's bearer token generator with the access-token lifetime of the current settings,
    and refresh tokens only for scope offline_access when the test asked for that rule."""

    def __init__(self):
        super().__init__(lambda **_: generate_token(42), lambda **_: generate_token(48),
                         lambda client, grant_type: STATE.settings["access_token_lifetime"])

    def generate(self, grant_type, client, user=None, scope=None, expires_in=None, include_refresh_token=True):
        with STATE.lock:
            if STATE.settings["offline_access_required"] and "offline_access" not in (scope or "").split():
                include_refresh_token = False
        return super().generate(grant_type, client, user, scope, None, include_refresh_token)


def create_provider_app():
    app = Flask("oidc_provider")
    app.config["OAUTH2_SCOPES_SUPPORTED"] = SCOPES
    server = AuthorizationServer(app, query_client=lambda client_id: STATE.client if client_id == STATE.client.client_id else None,
                                 save_token=save_token)
    server.register_token_generator("default", TokenGenerator())
    server.register_grant(AuthorizationCodeGrant, [LoopbackCodeChallenge(required=True), CodeIDToken(require_nonce=False)])
    server.register_grant(RotatingRefreshTokenGrant)
    server.register_grant(DeviceGrant, [DeviceIDToken()])
    server.register_endpoint(DeviceAuthorization)
    server.register_endpoint(Revocation)

    @app.get("/.well-known/openid-configuration")
    def discovery():
        issuer = STATE.issuer
        return jsonify({
            "issuer": issuer,
            "authorization_endpoint": issuer + "/authorize",
            "token_endpoint": issuer + "/token",
            "jwks_uri": issuer + "/jwks",
            "device_authorization_endpoint": issuer + "/device_authorization",
            "revocation_endpoint": issuer + "/revoke",
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": GRANT_TYPES,
            "code_challenge_methods_supported": ["S256"],
            "id_token_signing_alg_values_supported": [STATE.alg],
            "token_endpoint_auth_methods_supported": STATE.client.auth_methods,
            "revocation_endpoint_auth_methods_supported": STATE.client.auth_methods,
            "scopes_supported": SCOPES,
            "subject_types_supported": ["public"],
            "claims_supported": ["iss", "sub", "aud", "exp", "iat", "auth_time", "nonce", "at_hash", "name", "email", "email_verified"],
        })

    @app.get("/jwks")
    def jwks():
        # as_dict(is_private=False) keeps only the public numbers and the kid; use and alg again.
        return jsonify({"keys": [STATE.key.as_dict(is_private=False, use="sig", alg=STATE.alg)]})

    @app.get("/authorize")
    def authorize():
        STATE.count("authorize")
        with STATE.lock:
            user = None if STATE.settings["deny"] else copy.deepcopy(STATE.user)
        # With no user Authlib answers access_denied to the redirect URI.
        return server.create_authorization_response(grant_user=user)

    @app.post("/token")
    def token():
        grant_type = request.form.get("grant_type")
        counter = {"authorization_code": "token_code", "refresh_token": "token_refresh",
                   DEVICE_CODE_GRANT_TYPE: "token_device"}.get(grant_type, "token_other")
        with STATE.lock:
            STATE.counts[counter] += 1
            STATE.last_token_request = {"form": request.form.to_dict(flat=True),
                                        "authorization": request.headers.get("Authorization"),
                                        "content_type": request.headers.get("Content-Type")}
        if grant_type == "refresh_token":
            with STATE.lock:
                delay = STATE.settings["refresh_delay_ms"]
            if delay:
                time.sleep(delay / 1000)
            with STATE.lock:
                mode = STATE.refresh_mode
            if mode == "401":
                return server.handle_error_response(None, InvalidClientError("Client authentication failed.", status_code=401))
            if mode == "invalid_grant":
                return server.handle_error_response(None, InvalidGrantError("The refresh token is no longer valid."))
            if mode == "500":
                return Response('{"error":"server_error"}', status=500, content_type="application/json")
        with STATE.lock:
            return server.create_token_response()

    @app.post("/device_authorization")
    def device_authorization():
        STATE.count("device_authorization")
        with STATE.lock:
            return server.create_endpoint_response(DeviceAuthorization.ENDPOINT_NAME)

    @app.get("/device")
    def device_page():
        user_code = request.args.get("user_code", "")
        page = ('<!doctype html><title>Device sign-in</title><form method="post">'
                '<input name="user_code" value="%s"><button name="action" value="approve">Approve</button>'
                '<button name="action" value="deny">Deny</button></form>' % "".join(c for c in user_code if c.isalnum() or c == "-"))
        return Response(page, content_type="text/html; charset=utf-8")

    @app.post("/device")
    def device_verification():
        """The user at the verification page: approve or deny the request with this user code."""
        STATE.count("device_verification")
        user_code = normalise_user_code(request.form.get("user_code"))
        action = request.form.get("action")
        if action not in ("approve", "deny"):
            return jsonify(error="invalid_request", error_description="action must be approve or deny"), 400
        with STATE.lock:
            credential = next((c for c in STATE.devices.values() if normalise_user_code(c["user_code"]) == user_code), None)
            if credential is None or credential.is_expired():
                return jsonify(error="invalid_request", error_description="unknown or expired user code"), 400
            if user_code in STATE.device_grants:
                return jsonify(error="invalid_request", error_description="this user code was already used"), 400
            credential["auth_time"] = int(time.time())
            STATE.device_grants[user_code] = (copy.deepcopy(STATE.user), action == "approve")
        return jsonify(status=action + "d")

    @app.post("/revoke")
    def revoke():
        STATE.count("revoke")
        with STATE.lock:
            return server.create_endpoint_response(Revocation.ENDPOINT_NAME)

    @app.post("/control/user")
    def control_user():
        body = request.get_json(force=True)
        with STATE.lock:
            STATE.user = {"sub": str(body["sub"]), "email": str(body.get("email", body["sub"] + "@example.test")),
                          "name": str(body.get("name", body["sub"]))}
            return jsonify(STATE.user)

    @app.post("/control/settings")
    def control_settings():
        body = request.get_json(force=True)
        with STATE.lock:
            for name, value in body.items():
                if name not in STATE.settings:
                    return jsonify(error="unknown setting " + name), 400
                STATE.settings[name] = bool(value) if isinstance(STATE.settings[name], bool) else int(value)
            return jsonify(STATE.settings)

    @app.post("/control/refresh")
    def control_refresh():
        mode = request.get_json(force=True).get("mode")
        if mode not in ("ok", "401", "invalid_grant", "500"):
            return jsonify(error="unknown refresh mode"), 400
        with STATE.lock:
            STATE.refresh_mode = mode
        return jsonify(mode=mode)

    @app.post("/control/tamper")
    def control_tamper():
        mode = request.get_json(force=True).get("mode")
        if mode not in TAMPER_MODES:
            return jsonify(error="unknown tamper mode"), 400
        with STATE.lock:
            STATE.tamper = mode
        return jsonify(mode=mode)

    @app.post("/control/revoke")
    def control_revoke():
        sub = request.get_json(force=True).get("sub")
        revoked = 0
        with STATE.lock:
            for item in STATE.by_access.values():
                if item.user["sub"] == sub and not (item.access_revoked and item.refresh_revoked):
                    item.access_revoked = item.refresh_revoked = True
                    revoked += 1
        return jsonify(revoked=revoked)

    control_api_routes(app)

    @app.get("/control/counts")
    def control_counts():
        with STATE.lock:
            return jsonify(STATE.counts)

    @app.get("/control/last_token_request")
    def control_last_token_request():
        with STATE.lock:
            return jsonify(STATE.last_token_request)

    @app.get("/control/last_id_token")
    def control_last_id_token():
        with STATE.lock:
            return jsonify({"id_token": STATE.last_id_token})

    return app


# MARK: - Resource server

class AccessTokenValidator(BearerTokenValidator):
    def authenticate_token(self, token_string):
        with STATE.lock:
            return STATE.by_access.get(token_string)


def control_api_routes(app):
    @app.post("/control/api")
    def control_api():
        mode = request.get_json(force=True).get("mode")
        if mode not in ("normal", "401", "500", "slow"):
            return jsonify(error="unknown api mode"), 400
        with STATE.lock:
            STATE.api_mode = mode
        return jsonify(mode=mode)


def create_api_app():
    app = Flask("oidc_api")
    protector = ResourceProtector()
    protector.register_token_validator(AccessTokenValidator())

    def refuse(error):
        STATE.count("api_401")
        status, body, headers = error()
        return Response(json.dumps(body), status=status, headers=headers)

    @app.route("/api/redirect", methods=["GET", "POST", "PUT", "DELETE"])
    def api_redirect():
        STATE.count("api")
        return Response("", status=302, headers={"Location": STATE.api + "/api/me"})

    @app.route("/api/<path:rest>", methods=["GET", "POST", "PUT", "DELETE", "PATCH"])
    def api(rest):
        STATE.count("api")
        with STATE.lock:
            mode = STATE.api_mode
        if mode == "401":
            return refuse(InvalidTokenError("The session was ended by the server."))
        if mode == "500":
            return Response('{"error":"server_error"}', status=500, content_type="application/json")
        if mode == "slow":
            # An API that takes its time: the request is counted, its answer comes late.
            time.sleep(20)
        try:
            token = protector.acquire_token()
        except (MissingAuthorizationError, UnsupportedTokenTypeError):
            # Answered like any other bad token, so a client sees one shape of 401.
            return refuse(InvalidTokenError())
        except InvalidTokenError as error:
            return refuse(error)
        except OAuth2Error as error:
            status, body, headers = error()
            return Response(json.dumps(body), status=status, headers=headers)
        return jsonify({
            "sub": token.user["sub"],
            "method": request.method,
            "path": request.path,
            "query": request.query_string.decode(),
            "body": request.get_data(as_text=True),
            "headers": dict(request.headers),
        })

    control_api_routes(app)
    return app


# MARK: - Main

def main():
    global STATE
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--client-id", default="authd-test")
    parser.add_argument("--client-secret", default=None)
    parser.add_argument("--alg", choices=["RS256", "ES256"], default="RS256")
    options = parser.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(name)s %(message)s")

    STATE = State(Client(options.client_id, options.client_secret), options.alg)
    provider = make_server("127.0.0.1", 0, create_provider_app(), threaded=True)
    api = make_server("127.0.0.1", 0, create_api_app(), threaded=True)
    STATE.issuer = "http://127.0.0.1:%d" % provider.server_port
    STATE.api = "http://127.0.0.1:%d" % api.server_port

    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())

    def watch_stdin():
        # The test rig holds the other end of stdin; its end of file means the test is gone.
        while sys.stdin.buffer.read1(4096):
            pass
        done.set()

    threads = [provider.serve_forever, api.serve_forever]
    # Only a pipe or socket on stdin is watched: /dev/null would end the provider at once, and
    # /dev/zero or a terminal never end (reading /dev/zero would spin). Then only SIGTERM stops it.
    stdin_mode = os.fstat(0).st_mode
    if stat.S_ISFIFO(stdin_mode) or stat.S_ISSOCK(stdin_mode):
        threads.append(watch_stdin)
    else:
        log.info("stdin is not a pipe: stop me with SIGTERM")
    for target in threads:
        threading.Thread(target=target, daemon=True).start()
    print("READY issuer=%s api=%s" % (STATE.issuer, STATE.api), flush=True)
    log.info("client %s (%s), %s", options.client_id, "public" if options.client_secret is None else "confidential", options.alg)
    while not done.wait(1):
        pass
    log.info("stopping")
    sys.stderr.flush()
    # No graceful shutdown: serve_forever polls every 0.5 s per server, and nothing here is
    # worth keeping. The servers, their request threads and the stdin watcher are daemon threads.
    os._exit(0)


STATE = None

if __name__ == "__main__":
    main()
