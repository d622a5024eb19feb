"""Tests that call a tool handler directly stand where the orchestrator stands: they
seal the event with a session of their own (docs/seal.md), as a turn would.

The harness's session allows every tool, binds the event's conversation and customer,
and sets a refund limit above any amount (the confirmation gate, which decides what
needs a person, is the orchestrator's and is tested there). An event whose identity
cannot open a session (a malformed ``conversaId`` or ``clienteId``, a forged shape)
is sent as given: the edge refuses it unsealed.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from cadencia_shared.catalog import LEDGER_TABLE, TOOLS
from cadencia_shared.ledger import Ledger
from cadencia_shared.ledger.sessions import SessionLimits, SessionStore, TurnSession
from cadencia_shared.seal import ENVELOPE_FIELD, seal

NO_LIMIT = SessionLimits(refund_max_without_approval=Decimal("99999999999"))
SESSION_S = 3600


def open_session(ledger: Ledger, conversation_id: str, customer_id: int, *,
                 limits: SessionLimits = NO_LIMIT, expires_at_ms: int | None = None) -> TurnSession:
    expiry = ledger.now_ms() + SESSION_S * 1000 if expires_at_ms is None else expires_at_ms
    return SessionStore(ledger.table).open_session(conversation_id=conversation_id, customer_id=customer_id,
                                                   tools=TOOLS, limits=limits, expires_at_ms=expiry)


def seal_as_turn(ledger: Ledger, tool: str, event: Any, *, approval_id: str | None = None) -> Any:
    if not isinstance(event, dict) or ENVELOPE_FIELD in event:
        return event
    conversation, customer = event.get("conversaId"), event.get("clienteId")
    if not isinstance(conversation, str) or type(customer) is not int or not -(2**63) < customer < 2**63:
        return event
    try:
        session = open_session(ledger, conversation, customer)
    except ValueError:
        return event
    return seal(event, tool=tool, session=session, now_ms=ledger.now_ms(), approval_id=approval_id)


SEAL_PREFIXES = ("sessao#", "jti#")  # the sessions and the used envelopes: SEAL's own bookkeeping


def ledger_items(ddb: Any, table: str = LEDGER_TABLE) -> list[dict[str, Any]]:
    """The ledger's items but SEAL's own (a session the harness opened, the envelope the
    edge used up): what a tool's logic wrote."""
    items: list[dict[str, Any]] = ddb.scan(TableName=table)["Items"]
    return [i for i in items if not i["pk"]["S"].startswith(SEAL_PREFIXES)]

