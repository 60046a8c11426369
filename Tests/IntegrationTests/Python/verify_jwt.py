#!/usr/bin/python3
"""Independent verification of an authd token: PyJWT (with python3-cryptography) checks the
ES256 signature with the key the JWKS names, plus exp/nbf/iat, aud and iss.

usage: verify_jwt.py TOKEN JWKS_JSON AUDIENCE ISSUER
prints the claims as JSON; exits 1 with the reason when verification fails."""
import json
import sys

import jwt

token, jwks_json, audience, issuer = sys.argv[1:5]
jwks = json.loads(jwks_json)
try:
    kid = jwt.get_unverified_header(token)["kid"]
    matching = [key for key in jwks["keys"] if key["kid"] == kid]
    if not matching:
        print("no key with kid %s in the JWKS" % kid, file=sys.stderr)
        sys.exit(1)
    key = jwt.PyJWK(matching[0]).key
    claims = jwt.decode(token, key, algorithms=["ES256"], audience=audience, issuer=issuer,
                        options={"require": ["exp", "iat", "nbf", "sub", "jti"]})
except jwt.PyJWTError as error:
    print("%s: %s" % (type(error).__name__, error), file=sys.stderr)
    sys.exit(1)
print(json.dumps(claims, sort_keys=True))
