"""RS256 JSON Web Tokens with ``cryptography`` only (PyJWT is not a dependency here):
the local OpenID issuer's keys and signatures.

Verification is not here: it is the console authorizer's module
(``autorizar_console.verification``), the one implementation the deployed cookie
authorizer and the local API adapter both run (``TokenRefused`` is re-exported
for the local tools that catch it).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from autorizar_console.verification import TokenRefused as TokenRefused
from autorizar_console.verification import b64url as b64url


def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def pem(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def load_pem(data: bytes) -> rsa.RSAPrivateKey:
    key = serialization.load_pem_private_key(data, password=None)
    assert isinstance(key, rsa.RSAPrivateKey)
    return key


def jwk(public: rsa.RSAPublicKey) -> dict[str, str]:
    numbers = public.public_numbers()
    n = numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")
    e = numbers.e.to_bytes((numbers.e.bit_length() + 7) // 8, "big")
    kid = hashlib.sha256(n).hexdigest()[:16]
    return {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid, "n": b64url(n), "e": b64url(e)}


def sign(claims: Mapping[str, Any], key: rsa.RSAPrivateKey, *, kid: str | None = None,
         header: Mapping[str, Any] | None = None) -> str:
    head = dict(header or {"alg": "RS256", "typ": "JWT", "kid": kid or jwk(key.public_key())["kid"]})
    signing_input = f"{b64url(json.dumps(head).encode())}.{b64url(json.dumps(dict(claims)).encode())}"
    signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{b64url(signature)}"
