"""Which approvals a conversation asked for, read from its own history.

Every request left an ``is_error`` tool_result ``{"erro": "aguardando_aprovacao",
"aprovacaoId": …}`` written by the confirmation gate (code, never the model), and the
stored history never drops a tool block, so no index is queried. Shared: the
orchestrator (cancellation, expiry, the resume) and the decision Lambda (a decision
is recorded only for the request its conversation waits on) read it alike.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

AWAITING = "aguardando_aprovacao"  # the gate's refusal while a request waits (ApprovalRefusal.AWAITING)


def requested_approvals(messages: Iterable[dict[str, Any]]) -> list[str]:
    """The approval ids this conversation waited on, oldest first, without repeats."""
    found: dict[str, None] = {}
    for message in messages:
        content = message.get("content") if message.get("role") == "user" else None
        for block in content if isinstance(content, list) else ():
            body = _body(block) if isinstance(block, dict) and block.get("type") == "tool_result" else None
            if body is not None and body.get("erro") == AWAITING and isinstance(body.get("aprovacaoId"), str):
                found[body["aprovacaoId"]] = None
    return list(found)


def awaited_approval(messages: Iterable[dict[str, Any]]) -> str | None:
    """The request the conversation waits on now: the last one it asked for."""
    requested = requested_approvals(messages)
    return requested[-1] if requested else None


def _body(block: dict[str, Any]) -> dict[str, Any] | None:
    content = block.get("content")
    try:
        body = json.loads(content) if isinstance(content, str) else None
    except ValueError:
        return None
    return body if isinstance(body, dict) else None
