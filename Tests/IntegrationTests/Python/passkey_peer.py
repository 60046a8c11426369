#!/usr/bin/python3
"""The other side of a WebAuthn ceremony with authd, written without any of authd's code.

Run with /usr/bin/python3; needs only Debian's python3-cryptography, python3-cbor2 and
python3-fido2 (0.9.1). Every subcommand reads one JSON object on stdin and writes one JSON
object on stdout. Binary values are base64url without padding, as in WebAuthn's JSON.

  verify-registration  fido2's Fido2Server verifies a RegistrationResponseJSON (authd's
                       `passkey.create`) and reports what it parsed.
      in:  {"rpId", "rpName", "challenge", "credential", "userVerification"?: "required"}
      out: {"ok": true, "credentialId", "credentialData", "publicKeySpki", "publicKeyAlgorithm",
            "authenticatorData", "fmt", "attStmtEmpty", "aaguid", "signCount", "flags", "userPresent",
            "userVerified", "backupEligible", "backupState", "clientData"}
  verify-assertion     fido2's Fido2Server verifies an AuthenticationResponseJSON (authd's
                       `passkey.get`) against the credential of a verify-registration.
      in:  {"rpId", "rpName", "challenge", "credentialData", "credential", "userVerification"?}
      out: {"ok": true, "credentialId", "signCount", "flags", "userPresent", "userVerified",
            "backupEligible", "backupState", "userHandle", "clientData"}
  register             a software authenticator and client answering creation options
                       (authd's `auth.passkey.register.begin`), with tampering knobs.
      in:  {"options", "origin", "key"?: a key from an earlier register (reuses its id and
            private key), knobs}
      out: {"credential": RegistrationResponseJSON, "key": {"credentialId", "privateKey"
            (PKCS#8), "userHandle", "rpId", "signCount", "be", "bs"}}
  assert               the same authenticator answering request options (authd's
                       `auth.passkey.login.begin`) with a key from `register`.
      in:  {"options", "origin", "key", knobs}
      out: {"credential": AuthenticationResponseJSON, "key": the key with its new signCount}

Knobs (all optional; the default is an honest authenticator and client):
  "clientOrigin"      the origin written into clientDataJSON (default: "origin")
  "rpIdHash"          the RP ID whose SHA-256 goes into authenticatorData (default: the options')
  "up", "uv"          the UP and UV flags (default true)
  "be", "bs"          the BE and BS flags (register: default false, then kept in the key;
                      assert: default the key's)
  "signCount"         the counter in authenticatorData (register: default 0; assert: default
                      the key's counter + 1)
  "challenge"         the challenge written into clientDataJSON (default: the options')
  "type"              clientDataJSON.type (default webauthn.create / webauthn.get)
  "crossOrigin"       clientDataJSON.crossOrigin (default false)
  "topOrigin"         clientDataJSON.topOrigin (default: none)
  "fmt", "attStmt"    the attestation statement (default "none", {}); register only
  "corruptSignature"  sign other bytes than authenticatorData ‖ SHA-256(clientDataJSON);
                      assert only (the signature stays well-formed DER)
  "userHandle"        the response's userHandle, base64url, or null to leave it out
                      (default: the key's); assert only
  "credentialId"      the id/rawId sent (default: the key's); assert only
"""
import base64
import hashlib
import json
import os
import struct
import sys

import cbor2
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from fido2.client import ClientData
from fido2.ctap2 import AttestationObject, AttestedCredentialData, AuthenticatorData
from fido2.server import Fido2Server
from fido2.webauthn import PublicKeyCredentialRpEntity, UserVerificationRequirement

UP, UV, BE, BS, AT = 0x01, 0x04, 0x08, 0x10, 0x40


def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64u(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# ---------------------------------------------------------------------------------------------
# The relying party: fido2's Fido2Server

def server(request) -> Fido2Server:
    # The default origin rule of fido2 0.9.1 (rpid.verify_rp_id): https, host == rpId or a
    # subdomain of a rpId that is not a public suffix.
    return Fido2Server(PublicKeyCredentialRpEntity(request["rpId"], request.get("rpName", "authd test")))


def user_verification(request):
    return UserVerificationRequirement(request.get("userVerification", "required"))


def flags_report(auth_data) -> dict:
    return {"signCount": auth_data.counter, "flags": auth_data.flags,
            "userPresent": bool(auth_data.flags & UP), "userVerified": bool(auth_data.flags & UV),
            "backupEligible": bool(auth_data.flags & BE), "backupState": bool(auth_data.flags & BS)}


def verify_registration(request) -> dict:
    rp = server(request)
    _, state = rp.register_begin({"id": b"user", "name": "user"}, challenge=unb64u(request["challenge"]),
                                 user_verification=user_verification(request))
    credential = request["credential"]
    response = credential["response"]
    client_data = ClientData(unb64u(response["clientDataJSON"]))
    attestation = AttestationObject(unb64u(response["attestationObject"]))
    auth_data = rp.register_complete(state, client_data, attestation)
    if credential["type"] != "public-key" or unb64u(credential["rawId"]) != auth_data.credential_data.credential_id:
        raise ValueError("rawId is not the attested credential id")
    cose = auth_data.credential_data.public_key
    public_key = ec.EllipticCurvePublicNumbers(int.from_bytes(cose[-2], "big"), int.from_bytes(cose[-3], "big"),
                                               ec.SECP256R1()).public_key()
    spki = public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return {"credentialId": b64u(auth_data.credential_data.credential_id),
            "credentialData": b64u(auth_data.credential_data),
            "publicKeySpki": b64u(spki), "publicKeyAlgorithm": cose[3], "coseKeyType": cose[1], "coseCurve": cose[-1],
            "authenticatorData": b64u(auth_data), "fmt": attestation.fmt, "attStmtEmpty": attestation.att_statement == {},
            "aaguid": b64u(auth_data.credential_data.aaguid), "clientData": client_data.data, **flags_report(auth_data)}


def verify_assertion(request) -> dict:
    rp = server(request)
    stored = AttestedCredentialData(unb64u(request["credentialData"]))
    _, state = rp.authenticate_begin([stored], challenge=unb64u(request["challenge"]),
                                     user_verification=user_verification(request))
    credential = request["credential"]
    response = credential["response"]
    client_data = ClientData(unb64u(response["clientDataJSON"]))
    auth_data = AuthenticatorData(unb64u(response["authenticatorData"]))
    if credential["type"] != "public-key" or credential["id"] != credential["rawId"]:
        raise ValueError("not a public-key credential, or id is not rawId")
    used = rp.authenticate_complete(state, [stored], unb64u(credential["rawId"]), client_data, auth_data,
                                    unb64u(response["signature"]))
    if auth_data.flags & AT or auth_data.credential_data is not None:
        raise ValueError("an assertion with attested credential data")
    return {"credentialId": b64u(used.credential_id), "userHandle": response.get("userHandle"),
            "clientData": client_data.data, **flags_report(auth_data)}


# ---------------------------------------------------------------------------------------------
# The authenticator and client: a software passkey

def client_data_json(request, typ: str, challenge: str) -> bytes:
    # The member order and spelling of WebAuthn L3 §5.8.1.1 (type, challenge, origin, crossOrigin,
    # then topOrigin when there is one).
    data = {"type": request.get("type", typ), "challenge": request.get("challenge", challenge),
            "origin": request.get("clientOrigin", request["origin"]), "crossOrigin": request.get("crossOrigin", False)}
    if "topOrigin" in request:
        data["topOrigin"] = request["topOrigin"]
    return json.dumps(data, separators=(",", ":")).encode()


def flags(request, key, attested: bool) -> int:
    value = (UP if request.get("up", True) else 0) | (UV if request.get("uv", True) else 0)
    value |= BE if request.get("be", key["be"]) else 0
    value |= BS if request.get("bs", key["bs"]) else 0
    return value | (AT if attested else 0)


def authenticator_data(request, rp_id: str, flag_bits: int, sign_count: int, attested: bytes = b"") -> bytes:
    rp_id_hash = hashlib.sha256(request.get("rpIdHash", rp_id).encode()).digest()
    return rp_id_hash + bytes([flag_bits]) + struct.pack(">I", sign_count) + attested


def private_key(key):
    return serialization.load_der_private_key(unb64u(key["privateKey"]), password=None)


def register(request) -> dict:
    options = request["options"]
    rp_id = options["rp"]["id"]
    if "key" in request:
        key = dict(request["key"])
        secret = private_key(key)
    else:
        secret = ec.generate_private_key(ec.SECP256R1())
        key = {"credentialId": b64u(os.urandom(16)), "privateKey": b64u(secret.private_bytes(
            serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))}
    key.update({"userHandle": options["user"]["id"], "rpId": rp_id, "signCount": request.get("signCount", 0),
                "be": request.get("be", False), "bs": request.get("bs", False)})
    credential_id = unb64u(key["credentialId"])
    numbers = secret.public_key().public_numbers()
    # COSE_Key ES256 in CTAP2 canonical order: 1, 3, -1, -2, -3.
    cose = cbor2.dumps({1: 2, 3: -7, -1: 1, -2: numbers.x.to_bytes(32, "big"), -3: numbers.y.to_bytes(32, "big")})
    attested = bytes(16) + struct.pack(">H", len(credential_id)) + credential_id + cose
    auth_data = authenticator_data(request, rp_id, flags(request, key, attested=True), key["signCount"], attested)
    # Canonical key order: "fmt" < "attStmt" < "authData" (shorter keys first).
    attestation = cbor2.dumps({"fmt": request.get("fmt", "none"), "attStmt": request.get("attStmt", {}), "authData": auth_data})
    client_data = client_data_json(request, "webauthn.create", options["challenge"])
    spki = secret.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    credential = {
        "id": key["credentialId"], "rawId": key["credentialId"], "type": "public-key",
        "authenticatorAttachment": "cross-platform", "clientExtensionResults": {},
        "response": {"clientDataJSON": b64u(client_data), "attestationObject": b64u(attestation),
                     "authenticatorData": b64u(auth_data), "transports": ["usb"],
                     "publicKey": b64u(spki), "publicKeyAlgorithm": -7},
    }
    return {"credential": credential, "key": key}


def assertion(request) -> dict:
    options = request["options"]
    key = dict(request["key"])
    rp_id = options.get("rpId") or key["rpId"]
    key["signCount"] = request.get("signCount", key["signCount"] + 1)
    auth_data = authenticator_data(request, rp_id, flags(request, key, attested=False), key["signCount"])
    client_data = client_data_json(request, "webauthn.get", options["challenge"])
    signed = auth_data + hashlib.sha256(client_data).digest()
    if request.get("corruptSignature", False):
        signed = auth_data + hashlib.sha256(client_data + b" ").digest()
    signature = private_key(key).sign(signed, ec.ECDSA(hashes.SHA256()))  # ASN.1 DER, as WebAuthn wants
    credential_id = request.get("credentialId", key["credentialId"])
    response = {"clientDataJSON": b64u(client_data), "authenticatorData": b64u(auth_data), "signature": b64u(signature)}
    user_handle = request.get("userHandle", key["userHandle"])
    if user_handle is not None:
        response["userHandle"] = user_handle
    credential = {"id": credential_id, "rawId": credential_id, "type": "public-key",
                  "authenticatorAttachment": "cross-platform", "clientExtensionResults": {}, "response": response}
    return {"credential": credential, "key": key}


COMMANDS = {"verify-registration": verify_registration, "verify-assertion": verify_assertion,
            "register": register, "assert": assertion}


def main() -> int:
    if len(sys.argv) != 2 or sys.argv[1] not in COMMANDS:
        print(f"usage: {sys.argv[0]} {'|'.join(COMMANDS)} < request.json", file=sys.stderr)
        return 2
    request = json.load(sys.stdin)
    try:
        answer = COMMANDS[sys.argv[1]](request)
    except Exception as error:  # a verifier's refusal, reported to the test
        json.dump({"ok": False, "error": f"{type(error).__name__}: {error}"}, sys.stdout)
        return 1
    json.dump({"ok": True, **answer}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
