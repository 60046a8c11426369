#!/usr/bin/python3
"""An independent JOSE peer for authd's end-to-end encryption tests: python3-jwcrypto, which
must read what authd writes and write what authd reads (DESIGN §13).

  decrypt --key KEY.der --kid KID [--signer SIGNER.der]
      Reads a JWE (general or flattened JSON serialisation) on stdin, or with --signer a
      compact JWS over one (ES256, cty jose+json) whose signature is verified first, and
      prints the plaintext. KID must be one of the JWE's recipients.
  encrypt --to KEY.der --kid KID [--to KEY.der --kid KID ...]
      Reads the plaintext on stdin and prints a JWE in JSON serialisation, protected header
      {"enc":"A256GCM"}, each recipient's header {"alg":"ECDH-ES+A256KW","kid":KID} (jwcrypto
      adds the epk there). One recipient gives the flattened syntax, more the general one.

Keys are DER: a private key as PKCS #8 or RFC 5915, a public key as SubjectPublicKeyInfo.
Exit status 0 on success, 1 when the input is refused (why, on stderr), 2 for usage errors.
"""
import argparse
import json
import sys

from cryptography.hazmat.primitives import serialization
from jwcrypto import jwe, jwk, jws
from jwcrypto.common import json_encode


def private_key(path):
    with open(path, "rb") as file:
        return jwk.JWK.from_pyca(serialization.load_der_private_key(file.read(), password=None))


def public_key(path):
    with open(path, "rb") as file:
        return jwk.JWK.from_pyca(serialization.load_der_public_key(file.read()))


def decrypt(args):
    text = sys.stdin.buffer.read().decode("utf-8")
    if args.signer:
        envelope = jws.JWS()
        envelope.deserialize(text.strip())
        envelope.verify(public_key(args.signer), alg="ES256")
        header = envelope.jose_header
        if header.get("cty") != "jose+json":
            raise ValueError("the envelope's cty is not jose+json")
        text = envelope.payload.decode("utf-8")
    serialization_object = json.loads(text)
    recipients = serialization_object.get("recipients", [serialization_object])
    if args.kid not in [recipient.get("header", {}).get("kid") for recipient in recipients]:
        raise ValueError("no recipient has the kid " + args.kid)
    token = jwe.JWE()
    token.deserialize(text)
    token.decrypt(private_key(args.key))
    sys.stdout.buffer.write(token.payload)


def encrypt(args):
    if len(args.to) != len(args.kid):
        raise SystemExit("jose_peer: give one --kid per --to")
    token = jwe.JWE(sys.stdin.buffer.read(), protected=json_encode({"enc": "A256GCM"}))
    for path, kid in zip(args.to, args.kid):
        token.add_recipient(public_key(path), header=json_encode({"alg": "ECDH-ES+A256KW", "kid": kid}))
    sys.stdout.write(token.serialize())


def main():
    parser = argparse.ArgumentParser(description="JOSE peer for authd's tests (jwcrypto)")
    commands = parser.add_subparsers(dest="command", required=True)
    reader = commands.add_parser("decrypt")
    reader.add_argument("--key", required=True)
    reader.add_argument("--kid", required=True)
    reader.add_argument("--signer")
    writer = commands.add_parser("encrypt")
    writer.add_argument("--to", action="append", required=True)
    writer.add_argument("--kid", action="append", required=True)
    args = parser.parse_args()
    try:
        decrypt(args) if args.command == "decrypt" else encrypt(args)
    except Exception as error:  # any refusal: the test reads the status, a person the reason
        print("jose_peer: %s: %s" % (type(error).__name__, error), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
