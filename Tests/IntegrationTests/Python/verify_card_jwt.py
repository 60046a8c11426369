#!/usr/bin/python3
"""Independent verification of a card-signed authd token: python3-cryptography checks that the
x5c certificate chains to the test CA, then PyJWT checks the ES384 signature with the
certificate's key, plus exp/iat and aud.

usage: verify_card_jwt.py TOKEN CA_PEM AUDIENCE
prints the claims as JSON; exits 1 with the reason when verification fails."""
import base64
import json
import sys

import jwt
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

token, ca_path, audience = sys.argv[1:4]
try:
    header = jwt.get_unverified_header(token)
    if header.get("alg") != "ES384":
        raise ValueError("alg is %r" % header.get("alg"))
    certificate = x509.load_der_x509_certificate(base64.b64decode(header["x5c"][0]))
    with open(ca_path, "rb") as handle:
        ca = x509.load_pem_x509_certificate(handle.read())
    # The chain: the CA issued the card certificate and its key signed it.
    if certificate.issuer != ca.subject:
        raise ValueError("the certificate was not issued by the test CA")
    ca.public_key().verify(certificate.signature, certificate.tbs_certificate_bytes,
                           ec.ECDSA(certificate.signature_hash_algorithm))
    key = certificate.public_key()
    if not isinstance(key.curve, ec.SECP384R1):
        raise ValueError("the certificate key is not P-384")
    claims = jwt.decode(token, key, algorithms=["ES384"], audience=audience, options={"require": ["exp", "iat", "sub", "jti"]})
except Exception as error:  # every failure is a verification failure
    print("%s: %s" % (type(error).__name__, error), file=sys.stderr)
    sys.exit(1)
print(json.dumps(claims, sort_keys=True, ensure_ascii=False))
