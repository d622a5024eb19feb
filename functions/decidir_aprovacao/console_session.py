"""The console's session, CSRF token and form bodies (no AWS, no ledger).

The session is the person's access token in the ``cadencia_sessao`` cookie
(``HttpOnly; Secure; SameSite=Strict; Path=/console``). It is verified on every
request by the platform's authorizer before the function runs (the function reads the
person from ``requestContext.authorizer`` only); the function reads the cookie for one
thing: the CSRF token, ``HMAC-SHA256(key=token, "cadencia-console-csrf")``, which every
form carries and every POST must present. A page on another site can neither read the
cookie nor compute the token, and a new sign-in (a new token) changes it.

Form bodies are strict: urlencoded only, each field at most once, only the fields the
route takes, never an actor (``identity.ACTOR_FIELDS``): any other body is refused
before anything is read or written.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import urllib.parse
from typing import Any

from aws_lambda_powertools.shared.cookies import Cookie, SameSite

from cadencia_shared.identity import ACTOR_FIELDS, MAX_BODY_BYTES, SESSION_COOKIE

CSRF_FIELD = "csrf"
SESSION_MAX_AGE_S = 3600  # Cognito's access tokens live one hour by default
JWT_SHAPE = re.compile(r"\A[A-Za-z0-9_-]{2,2048}\.[A-Za-z0-9_-]{2,4096}\.[A-Za-z0-9_-]{2,1024}\Z")
FORM_TYPE = "application/x-www-form-urlencoded"


class FormRefused(Exception):
    """A body or CSRF token refused: ``status`` and a wire ``code``; nothing was changed."""

    def __init__(self, status: int, code: str) -> None:
        super().__init__(code)
        self.status, self.code = status, code


def session_token(event: dict[str, Any]) -> str | None:
    """The session cookie's value, when exactly one well-formed one was sent."""
    raw: list[str] = []
    cookies = event.get("cookies")
    if isinstance(cookies, list):
        raw = [c for c in cookies if isinstance(c, str)]
    header = (event.get("headers") or {}).get("cookie")
    if not raw and isinstance(header, str):
        raw = header.split(";")
    values = [v for name, _, v in (c.strip().partition("=") for c in raw) if name == SESSION_COOKIE]
    if len(values) != 1 or not JWT_SHAPE.match(values[0]):
        return None  # none, or two (a cookie tossed in beside the real one): no session
    return values[0]


def csrf_token(session: str) -> str:
    return hmac.new(session.encode(), b"cadencia-console-csrf", hashlib.sha256).hexdigest()


def check_csrf(event: dict[str, Any], form: dict[str, str]) -> None:
    session = session_token(event)
    sent = form.get(CSRF_FIELD, "")
    if session is None or not hmac.compare_digest(sent.encode(), csrf_token(session).encode()):
        raise FormRefused(403, "csrf_invalido")


def session_cookie(token: str) -> Cookie:
    """``cadencia_sessao=…; Path=/console; Max-Age=3600; HttpOnly; Secure; SameSite=Strict``."""
    return Cookie(SESSION_COOKIE, token, path="/console", max_age=SESSION_MAX_AGE_S, http_only=True, secure=True,
                  same_site=SameSite.STRICT_MODE)


def cleared_cookie() -> Cookie:
    return Cookie(SESSION_COOKIE, "", path="/console", max_age=0, http_only=True, secure=True,
                  same_site=SameSite.STRICT_MODE)


def form_body(event: dict[str, Any], fields: frozenset[str]) -> dict[str, str]:
    """The urlencoded body's fields (each once; only ``fields``; no actor)."""
    headers = event.get("headers") or {}
    if str(headers.get("content-type", "")).split(";")[0].strip().lower() != FORM_TYPE:
        raise FormRefused(400, "corpo_invalido")
    raw = event.get("body") or ""
    if not isinstance(raw, str) or len(raw) > MAX_BODY_BYTES * 2:
        raise FormRefused(400, "corpo_invalido")
    if event.get("isBase64Encoded") is True:
        try:
            raw = base64.b64decode(raw, validate=True).decode()
        except ValueError:
            raise FormRefused(400, "corpo_invalido") from None
    if len(raw.encode()) > MAX_BODY_BYTES:
        raise FormRefused(400, "corpo_invalido")
    try:
        pairs = urllib.parse.parse_qsl(raw, keep_blank_values=True, strict_parsing=bool(raw), max_num_fields=16,
                                       errors="strict")
    except (ValueError, UnicodeDecodeError):
        raise FormRefused(400, "corpo_invalido") from None
    names = [name for name, _ in pairs]
    if len(set(names)) != len(names):
        raise FormRefused(400, "campo_repetido")
    if ACTOR_FIELDS.intersection(names):
        raise FormRefused(400, "ator_no_corpo")
    if not set(names) <= fields:
        raise FormRefused(400, "campo_desconhecido")
    return dict(pairs)
