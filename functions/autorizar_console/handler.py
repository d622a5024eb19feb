"""The console's cookie authorizer on AWS: an HTTP API ``REQUEST`` Lambda authorizer
(payload format 2.0, simple responses), in front of every ``/console`` page but the
sign-in (orchestrator/api_routes.py, ``AUTH_COOKIE``).

    event (identity source: the Cookie header; its cookies in ``cookies``)
      ─► verification.cookie_claims: one ``cadencia_sessao`` cookie, a Cognito access
         token of the console's app client (RS256, the pool's JWKS, iss, client_id,
         token_use, exp against the clock)
      ─► {"isAuthorized": true, "context": verification.authorizer_context(claims)}
         (API Gateway hands the context to the decision function in
         ``requestContext.authorizer.lambda``), or {"isAuthorized": false} (401)

Configured by ``COGNITO_ISSUER`` (``https://cognito-idp.{region}.amazonaws.com/{pool}``)
and ``CONSOLE_CLIENT_ID``. The key set is fetched once per cold start (and once more
on an unknown kid). The log line says only allowed or refused and which rule refused:
never the token, never a claim.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .verification import KeySet, TokenRefused, authorizer_context, cookie_claims

LOGGER = logging.getLogger("autorizar_console")
LOGGER.setLevel(logging.INFO)


@dataclass
class ConsoleAuthorizer:
    key_set: KeySet
    client_ids: frozenset[str]
    now: Callable[[], float] = time.time

    def decide(self, event: Any) -> dict[str, Any]:
        """The simple response for one authorizer event."""
        cookies = event.get("cookies") if isinstance(event, dict) else None
        try:
            claims = cookie_claims(cookies, self.key_set, client_ids=self.client_ids, now=self.now())
        except TokenRefused as refused:
            LOGGER.info(json.dumps({"authorized": False, "rule": str(refused)}))
            return {"isAuthorized": False}
        LOGGER.info(json.dumps({"authorized": True}))
        return {"isAuthorized": True, "context": authorizer_context(claims)}


_AUTHORIZER: ConsoleAuthorizer | None = None


def authorizer_from_environment() -> ConsoleAuthorizer:
    issuer, client_id = os.environ["COGNITO_ISSUER"], os.environ["CONSOLE_CLIENT_ID"]
    if not issuer.startswith("https://") or not client_id:
        raise RuntimeError("COGNITO_ISSUER must be the pool's https issuer and CONSOLE_CLIENT_ID its app client")
    return ConsoleAuthorizer(KeySet(issuer.rstrip("/")), frozenset({client_id}))


def lambda_handler(event: Any, context: Any) -> dict[str, Any]:
    global _AUTHORIZER
    if _AUTHORIZER is None:  # once per cold start: the key set is cached with it
        _AUTHORIZER = authorizer_from_environment()
    return _AUTHORIZER.decide(event)
