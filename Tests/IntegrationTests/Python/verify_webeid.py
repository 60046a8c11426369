#!/usr/bin/python3
"""A Web eID relying party's checks, written for the tests on python3-cryptography alone.

usage: verify_webeid.py auth TOKEN_JSON CA_PEM ORIGIN NONCE
       verify_webeid.py sign SIGNATURE_B64 CERTIFICATE_B64 HASH_B64 HASH_FUNCTION CA_PEM

auth: the web-eid:1.0 token's format, its algorithm against the certificate's key, the
certificate issued by the test CA, and the signature with the certificate's key over
H(H(origin) || H(nonce)), both hashed as the strings given, raw r||s in standard base64.
sign: the raw r||s signature over the given hash with the certificate's key.
Prints "ok"; exits 1 with the reason when a check fails."""
import base64
import json
import sys

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, utils

HASHES = {"SHA-256": hashes.SHA256, "SHA-384": hashes.SHA384, "SHA-512": hashes.SHA512}
ALGORITHMS = {"secp256r1": ("ES256", hashes.SHA256), "secp384r1": ("ES384", hashes.SHA384), "secp521r1": ("ES512", hashes.SHA512)}


def issued_by_ca(certificate, ca_path):
    with open(ca_path, "rb") as handle:
        ca = x509.load_pem_x509_certificate(handle.read())
    if certificate.issuer != ca.subject:
        raise ValueError("the certificate was not issued by the test CA")
    ca.public_key().verify(certificate.signature, certificate.tbs_certificate_bytes, ec.ECDSA(certificate.signature_hash_algorithm))


def der_signature(raw, key):
    size = (key.curve.key_size + 7) // 8
    if len(raw) != 2 * size:
        raise ValueError("the signature is %d bytes, not r||s of %d" % (len(raw), 2 * size))
    return utils.encode_dss_signature(int.from_bytes(raw[:size], "big"), int.from_bytes(raw[size:], "big"))


def strict_b64(text):
    return base64.b64decode(text, validate=True)


def check_auth(token_json, ca_path, origin, nonce):
    token = json.loads(token_json)
    expected = {"unverifiedCertificate", "algorithm", "signature", "format", "appVersion"}
    if set(token) != expected:
        raise ValueError("the token's fields are %s" % sorted(token))
    if token["format"] != "web-eid:1.0":
        raise ValueError("format is %r" % token["format"])
    certificate = x509.load_der_x509_certificate(strict_b64(token["unverifiedCertificate"]))
    issued_by_ca(certificate, ca_path)
    key = certificate.public_key()
    algorithm, hash_type = ALGORITHMS[key.curve.name]
    if token["algorithm"] != algorithm:
        raise ValueError("algorithm %r does not match the certificate's key (%s)" % (token["algorithm"], algorithm))
    def digest(text):
        h = hashes.Hash(hash_type())
        h.update(text.encode("utf-8"))
        return h.finalize()
    # verify() hashes once more: the signature is over H(H(origin) || H(nonce)).
    key.verify(der_signature(strict_b64(token["signature"]), key), digest(origin) + digest(nonce), ec.ECDSA(hash_type()))


def check_sign(signature_b64, certificate_b64, hash_b64, function, ca_path):
    certificate = x509.load_der_x509_certificate(strict_b64(certificate_b64))
    issued_by_ca(certificate, ca_path)
    key = certificate.public_key()
    digest = strict_b64(hash_b64)
    key.verify(der_signature(strict_b64(signature_b64), key), digest, ec.ECDSA(utils.Prehashed(HASHES[function]())))


try:
    if sys.argv[1] == "auth":
        check_auth(*sys.argv[2:6])
    elif sys.argv[1] == "sign":
        check_sign(*sys.argv[2:7])
    else:
        raise ValueError("unknown mode %r" % sys.argv[1])
except Exception as error:  # every failure is a verification failure
    print("%s: %s" % (type(error).__name__, error), file=sys.stderr)
    sys.exit(1)
print("ok")
