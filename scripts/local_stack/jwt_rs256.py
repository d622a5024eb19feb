"""RS256 JSON Web Tokens with ``cryptography`` only (PyJWT is not a dependency here).

Signing is the local OpenID issuer's; verification is the local API adapter's and
applies the rules API Gateway's JWT authorizer applies, in its order: a readable
token, an RSA algorithm (RS256; ``none`` and HMAC refused, so a public key can never
be used as an HMAC secret), a ``kid`` found in the issuer's key set, the signature,
then ``iss`` exact, ``aud`` (or ``client_id`` when there is no ``aud``) one of the
configured audiences, ``exp`` in the future, ``nbf`` and ``iat`` not in the future.
The clock is passed in (tests never wait on a wall clock).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

MAX_TOKEN_CHARS = 8192


class TokenRefused(Exception):
    """Any reason a token is not accepted; the adapter answers 401 whatever it is."""


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    if not isinstance(text, str) or any(c not in _B64URL for c in text):
        raise TokenRefused("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


_B64URL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


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


def _public(entry: Mapping[str, Any]) -> rsa.RSAPublicKey:
    n = int.from_bytes(unb64url(entry["n"]), "big")
    e = int.from_bytes(unb64url(entry["e"]), "big")
    return rsa.RSAPublicNumbers(e, n).public_key()


def verify(token: str, *, keys: list[Mapping[str, Any]], issuer: str, audiences: frozenset[str],
           now: float) -> dict[str, Any]:
    """The token's claims when API Gateway's JWT authorizer would accept it; else TokenRefused."""
    if not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS or token.count(".") != 2:
        raise TokenRefused("malformed")
    head_b64, body_b64, sig_b64 = token.split(".")
    try:
        header = json.loads(unb64url(head_b64))
        claims = json.loads(unb64url(body_b64))
    except (ValueError, UnicodeDecodeError):
        raise TokenRefused("malformed") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise TokenRefused("malformed")
    if header.get("alg") != "RS256":
        raise TokenRefused("algorithm")
    entry = next((k for k in keys if k.get("kid") == header.get("kid") and k.get("kty") == "RSA"), None)
    if entry is None:
        raise TokenRefused("unknown key")
    try:
        _public(entry).verify(unb64url(sig_b64), f"{head_b64}.{body_b64}".encode(), padding.PKCS1v15(),
                              hashes.SHA256())
    except InvalidSignature:
        raise TokenRefused("signature") from None
    if claims.get("iss") != issuer:
        raise TokenRefused("issuer")
    aud = claims.get("aud", claims.get("client_id"))
    aud_values = aud if isinstance(aud, list) else [aud]
    if not any(isinstance(a, str) and a in audiences for a in aud_values):
        raise TokenRefused("audience")
    exp = claims.get("exp")
    if isinstance(exp, bool) or not isinstance(exp, int | float) or exp <= now:
        raise TokenRefused("expired")
    for name in ("nbf", "iat"):
        value = claims.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value > now):
            raise TokenRefused(name)
    return claims
