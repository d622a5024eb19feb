"""An access token verified by the rules of API Gateway's JWT authorizer, with
``cryptography`` only: one implementation, run by the console's Lambda authorizer on
AWS (``autorizar_console.handler``) and by the local stack's API adapter
(scripts/local_stack/api_adapter.py), for the JSON routes' header and the console's cookie.

``verify`` applies the JWT authorizer's rules, in its order: a readable token, an RSA
algorithm (RS256; ``none`` and HMAC refused, so a public key can never be used as an
HMAC secret), a ``kid`` found in the issuer's key set, the signature, then ``iss``
exact, ``aud`` (or ``client_id`` when there is no ``aud``) one of the configured
audiences, ``exp`` in the future, ``nbf`` and ``iat`` not in the future. The clock is
passed in (tests never wait on a wall clock).

``cookie_claims`` is the console's authorizer: exactly one ``cadencia_sessao`` cookie,
its token verified by ``verify`` through the issuer's key set (``KeySet``: fetched from
``{issuer}/.well-known/jwks.json`` once, and once more when a token names an unknown
key), and then a Cognito *access* token of the app client: ``token_use == "access"``
and ``client_id`` one of the client ids (an access token carries no ``aud``; an id
token, which does, is refused). ``authorizer_context`` is what it hands on, as text.
Nothing here logs; a refusal says only which rule refused (``TokenRefused``'s text).
"""

from __future__ import annotations

import base64
import json
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from cadencia_shared.identity import SESSION_COOKIE

MAX_TOKEN_CHARS = 8192
MAX_JWKS_BYTES = 65_536
JWKS_TIMEOUT_S = 3
# What the console's authorizer hands on of the verified claims (its simple response's
# ``context``: strings only, as API Gateway passes a Lambda authorizer's context on to
# ``requestContext.authorizer.lambda``, where cadencia_shared.identity reads the person).
COOKIE_CONTEXT_CLAIMS = ("sub", "name", "cognito:username", "username", "cognito:groups")
_B64URL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


class TokenRefused(Exception):
    """Any reason a token is not accepted (its text names the rule, never the token)."""


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    if not isinstance(text, str) or any(c not in _B64URL for c in text):
        raise TokenRefused("not base64url")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:  # binascii.Error: a length no encoding has (4n + 1 characters)
        raise TokenRefused("not base64url") from None


def _public(entry: Mapping[str, Any]) -> rsa.RSAPublicKey:
    try:
        n = int.from_bytes(unb64url(entry["n"]), "big")
        e = int.from_bytes(unb64url(entry["e"]), "big")
        return rsa.RSAPublicNumbers(e, n).public_key()
    except (KeyError, ValueError):
        raise TokenRefused("unusable key") from None


def verify(token: str, *, keys: Iterable[Mapping[str, Any]], issuer: str, audiences: frozenset[str],
           now: float) -> dict[str, Any]:
    """The token's claims when API Gateway's JWT authorizer would accept it; else TokenRefused."""
    header, claims = _read(token)
    if header.get("alg") != "RS256":
        raise TokenRefused("algorithm")
    entry = next((k for k in keys if k.get("kid") == header.get("kid") and k.get("kty") == "RSA"), None)
    if entry is None:
        raise TokenRefused("unknown key")
    signing_input, _, signature = token.rpartition(".")
    try:
        _public(entry).verify(unb64url(signature), signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    except InvalidSignature:
        raise TokenRefused("signature") from None
    _check_claims(claims, issuer=issuer, audiences=audiences, now=now)
    return claims


def _read(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The header and the claims of a token of three base64url parts (unverified)."""
    if not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS or token.count(".") != 2:
        raise TokenRefused("malformed")
    head_b64, body_b64, _ = token.split(".")
    try:
        header = json.loads(unb64url(head_b64))
        claims = json.loads(unb64url(body_b64))
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: JSON nested thousands deep
        raise TokenRefused("malformed") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise TokenRefused("malformed")
    return header, claims


def _is_time(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_claims(claims: Mapping[str, Any], *, issuer: str, audiences: frozenset[str], now: float) -> None:
    if claims.get("iss") != issuer:
        raise TokenRefused("issuer")
    aud = claims.get("aud", claims.get("client_id"))
    aud_values = aud if isinstance(aud, list) else [aud]
    if not any(isinstance(a, str) and a in audiences for a in aud_values):
        raise TokenRefused("audience")
    exp = claims.get("exp")
    if not _is_time(exp) or exp <= now:
        raise TokenRefused("expired")
    for name in ("nbf", "iat"):
        value = claims.get(name)
        if value is not None and (not _is_time(value) or value > now):
            raise TokenRefused(name)


def fetch_jwks(url: str) -> list[dict[str, Any]]:
    """The key set at ``url`` (HTTPS to Cognito; the local issuer on loopback)."""
    try:
        with urllib.request.urlopen(url, timeout=JWKS_TIMEOUT_S) as resp:  # noqa: S310 - the configured issuer
            body = json.loads(resp.read(MAX_JWKS_BYTES))
    except (OSError, ValueError):  # unreachable, an HTTP error, a body that is not JSON (or too long)
        raise TokenRefused("key set unavailable") from None
    keys = body.get("keys") if isinstance(body, dict) else None
    if not isinstance(keys, list):
        raise TokenRefused("no key set")
    return [k for k in keys if isinstance(k, dict)]


REFRESH_EVERY_S = 300  # a rotated key is picked up within five minutes


@dataclass
class KeySet:
    """The issuer's public keys, fetched on first use and kept (per cold start on AWS)."""

    issuer: str
    fetch: Callable[[str], list[dict[str, Any]]] = fetch_jwks
    _keys: list[dict[str, Any]] | None = field(default=None, repr=False)
    _refreshed_at: float | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"{self.issuer}/.well-known/jwks.json"

    def keys(self) -> list[dict[str, Any]]:
        if self._keys is None:
            self._keys = self.fetch(self.url)
        return self._keys

    def refresh(self, now: float) -> list[dict[str, Any]]:
        """Re-read the keys for a token naming an unknown one — at most once per
        ``REFRESH_EVERY_S``: anyone can send a made-up ``kid``, and each must not cost a fetch."""
        if self._keys is None or self._refreshed_at is None or now - self._refreshed_at >= REFRESH_EVERY_S:
            self._refreshed_at = now
            self._keys = self.fetch(self.url)
        return self._keys


def verify_with(token: str, key_set: KeySet, *, audiences: frozenset[str], now: float) -> dict[str, Any]:
    """``verify`` against the issuer's keys, re-reading them once when the token names an
    unknown key (the issuer may have rotated its key)."""
    try:
        return verify(token, keys=key_set.keys(), issuer=key_set.issuer, audiences=audiences, now=now)
    except TokenRefused as refused:
        if str(refused) != "unknown key":
            raise
    return verify(token, keys=key_set.refresh(now), issuer=key_set.issuer, audiences=audiences, now=now)


def session_cookie(cookies: object) -> str:
    """The one ``cadencia_sessao`` value among ``cookies`` (payload 2.0's list of
    ``name=value``; an element holding ``a=1; b=2`` is read as two): none, or two, refused."""
    if not isinstance(cookies, list):
        raise TokenRefused("missing")
    pairs = (part.strip().partition("=") for c in cookies if isinstance(c, str) for part in c.split(";"))
    values = [value for name, _, value in pairs if name == SESSION_COOKIE]
    if len(values) != 1:
        raise TokenRefused("missing" if not values else "two sessions")
    return values[0]


def cookie_claims(cookies: object, key_set: KeySet, *, client_ids: frozenset[str], now: float) -> dict[str, Any]:
    """The console's cookie authorizer: the session cookie's token, verified as the app
    client's Cognito access token. Raises ``TokenRefused``."""
    claims = verify_with(session_cookie(cookies), key_set, audiences=client_ids, now=now)
    if claims.get("token_use") != "access":
        raise TokenRefused("not an access token")
    client_id = claims.get("client_id")
    if not isinstance(client_id, str) or client_id not in client_ids or "aud" in claims:
        raise TokenRefused("client")
    return claims


def claim_text(value: Any) -> str:
    """A claim as API Gateway hands it on (every value a string; an array as ``"[a b]"``)."""
    if isinstance(value, list):
        return "[" + " ".join(claim_text(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value)


def authorizer_context(claims: Mapping[str, Any]) -> dict[str, str]:
    """What the console's authorizer hands on: ``COOKIE_CONTEXT_CLAIMS`` present, as text."""
    return {k: claim_text(claims[k]) for k in COOKIE_CONTEXT_CLAIMS if k in claims}
