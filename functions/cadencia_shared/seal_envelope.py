"""SEAL's envelope, the signing side (docs/seal.md): what the orchestrator's invokers add to
a tool event under ``selo``. The verifying side, and the single-use ``jti`` it takes, is
``cadencia_shared.seal`` (the tools' edge); kept apart so the orchestrator's code reaches
no ``jti#`` item.
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Mapping
from typing import Any

from .approval_arguments import canonical_arguments
from .ledger.sessions import TurnSession

VERSION = "seal/v1"
ENVELOPE_FIELD = "selo"
IDENTITY_FIELDS = ("conversaId", "clienteId")
APPROVAL_FIELD = "aprovacaoId"  # inside the envelope: the approval record this call claims
ENVELOPE_TTL_MS = 60_000  # an envelope is good for one invoke, not for the whole turn
SIGNED_FIELDS = ("v", "sessao", "jti", "ferramenta", "argsSha256", "conversaId", "clienteId", "emitidoEm",
                 "expiraEm")


def call_arguments(event: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k != ENVELOPE_FIELD and k not in IDENTITY_FIELDS}


def signed_message(fields: Mapping[str, Any]) -> bytes:
    return json.dumps({k: fields[k] for k in SIGNED_FIELDS}, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode()


def seal(event: Mapping[str, Any], *, tool: str, session: TurnSession, now_ms: int,
         approval_id: str | None = None) -> dict[str, Any]:
    """The event with its signed envelope (the orchestrator's invoker calls this)."""
    fields: dict[str, Any] = {
        "v": VERSION, "sessao": session.session_id, "jti": secrets.token_urlsafe(18), "ferramenta": tool,
        "argsSha256": canonical_arguments(call_arguments(event))[1],
        "conversaId": event.get("conversaId"), "clienteId": event.get("clienteId"),
        "emitidoEm": now_ms, "expiraEm": min(now_ms + ENVELOPE_TTL_MS, session.record.expires_at_ms),
    }
    envelope = {**fields, "assinatura": base64.b64encode(session.sign(signed_message(fields))).decode()}
    if approval_id is not None:
        envelope[APPROVAL_FIELD] = approval_id
    return {**call_arguments(event), **{k: event[k] for k in IDENTITY_FIELDS if k in event},
            ENVELOPE_FIELD: envelope}
