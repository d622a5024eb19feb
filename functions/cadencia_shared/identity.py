"""Who is acting: read from the authorizer API Gateway ran, never from the body.

Behind the HTTP API the platform validates the person's token (a JWT authorizer:
issuer, audience, expiry, signature) before the function runs, and hands the
verified claims in ``requestContext.authorizer.jwt.claims`` (payload format 2.0).
A function reads the person ONLY from there; a body that names an actor is
refused (``ator_no_corpo``) before anything is read or written, so a caller
cannot speak for someone else by writing a name.

API Gateway renders every claim as a string; an array claim such as
``cognito:groups`` arrives as ``"[aprovadores atendentes]"`` (bracketed,
space-separated). Both that and a JSON list are read; anything else is no group.
The console's pages arrive with a cookie instead of a header: a Lambda authorizer
verifies the same token and hands the same claims in ``requestContext.authorizer.lambda``
(docs/decisions/console-auth.md); both places are the platform's, never the caller's.

Direct invocation (no ``requestContext``) is the break-glass path: only the role
the contract names may invoke the functions directly, and every such decision is
audited with ``via = quebra_de_vidro`` (docs/decisions/operator-identity.md).
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from typing import Any

APPROVERS = "aprovadores"
ATTENDANTS = "atendentes"
SUPERVISORS = "supervisores"
GROUPS = (APPROVERS, ATTENDANTS, SUPERVISORS)

# The console's session cookie: the person's access token (HttpOnly; Secure; SameSite=Strict).
SESSION_COOKIE = "cadencia_sessao"

VIA_API = "api"
VIA_BREAK_GLASS = "quebra_de_vidro"

# Body keys that would name who acts: the person is the authorizer's, never the caller's word.
ACTOR_FIELDS = frozenset({"aprovador", "atendente", "supervisor", "autor", "ator", "por", "decididoPor",
                          "usuario", "usuário", "sub", "identidade", "pessoa", "operador"})

# Cognito's sub is a UUID; the local issuer's too. The pattern doubles as the ledger's
# approver id (``decididoPor``), so it must also fit models.APPROVER_PATTERN.
SUBJECT_PATTERN = re.compile(r"\A[a-z0-9][a-z0-9._@-]{0,63}\Z")
NAME_MAX = 80
MAX_BODY_BYTES = 16_384


class IdentityRefused(Exception):
    """The request names no verified person, or a person who may not do this.
    ``status`` is the HTTP status (401: who; 403: may not), ``code`` a wire name."""

    def __init__(self, status: int, code: str) -> None:
        super().__init__(code)
        self.status = status
        self.code = code


@dataclass(frozen=True)
class Person:
    subject: str  # the token's ``sub``: stable, what the ledger records as who decided
    name: str  # shown and audited beside the subject
    groups: frozenset[str]
    via: str = VIA_API

    def require(self, group: str) -> None:
        if group not in self.groups:
            raise IdentityRefused(403, "grupo_nao_autorizado")

    def audit(self) -> dict[str, str]:
        """What every decision's and reply's audit record says about who acted."""
        return {"pessoaSub": self.subject, "pessoaNome": self.name, "via": self.via}


def is_api_event(event: Any) -> bool:
    """An HTTP API (payload 2.0) event, as opposed to a direct invocation."""
    return (isinstance(event, dict) and isinstance(event.get("requestContext"), dict)
            and isinstance(event["requestContext"].get("http"), dict) and isinstance(event.get("routeKey"), str))


def person_from_event(event: dict[str, Any]) -> Person:
    """The verified person of an HTTP API event, or ``IdentityRefused(401)``."""
    authorizer = (event.get("requestContext") or {}).get("authorizer") or {}
    # The JWT authorizer's claims, or (the console's pages, signed in with a cookie) the
    # context of the Lambda authorizer that verified the same token by the same rules.
    claims = (authorizer.get("jwt") or {}).get("claims") if "jwt" in authorizer else authorizer.get("lambda")
    if not isinstance(claims, dict):
        raise IdentityRefused(401, "sem_identidade")
    subject = claims.get("sub")
    if not isinstance(subject, str) or not SUBJECT_PATTERN.match(subject):
        raise IdentityRefused(401, "sem_identidade")
    name = next((v for k in ("name", "cognito:username", "username")
                 if isinstance(v := claims.get(k), str) and v.strip()), subject)
    name = "".join(c for c in name if c.isprintable())[:NAME_MAX] or subject
    return Person(subject=subject, name=name, groups=groups_of(claims.get("cognito:groups")))


def groups_of(value: Any) -> frozenset[str]:
    if isinstance(value, list):
        items = value
    elif isinstance(value, str):
        text = value.strip()
        items = text[1:-1].split() if text.startswith("[") and text.endswith("]") else text.split()
    else:
        return frozenset()
    return frozenset(g for g in items if isinstance(g, str) and g in GROUPS)


def break_glass_person(name: str, allowed: frozenset[str], group: str) -> Person:
    """A direct invocation's actor: the name the break-glass caller gives, in ``group``
    only when on the deploy's allowlist (``APROVADORES``); audited as break-glass."""
    return Person(subject=name, name=name, groups=frozenset({group}) if name in allowed else frozenset(),
                  via=VIA_BREAK_GLASS)


def json_body(event: dict[str, Any]) -> dict[str, Any]:
    """The body as a JSON object (``{}`` when absent), refusing an actor field.
    Raises ``ValueError`` with a short wire code."""
    raw = event.get("body")
    if raw is None or raw == "":
        return {}
    if not isinstance(raw, str) or len(raw) > MAX_BODY_BYTES * 2:
        raise ValueError("corpo_invalido")
    if event.get("isBase64Encoded") is True:
        try:
            raw = base64.b64decode(raw, validate=True).decode()
        except ValueError:
            raise ValueError("corpo_invalido") from None
    if len(raw.encode()) > MAX_BODY_BYTES:
        raise ValueError("corpo_invalido")
    try:
        body = json.loads(raw)
    except ValueError:
        raise ValueError("corpo_invalido") from None
    if not isinstance(body, dict):
        raise ValueError("corpo_invalido")
    if ACTOR_FIELDS.intersection(body):
        raise ValueError("ator_no_corpo")
    return body
