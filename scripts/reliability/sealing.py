"""The turn's part in a reliability run: every event a child sends is signed as the
orchestrator signs a tool call (docs/seal.md), so the handlers' own logic is what the
run attacks, not SEAL's refusal of an unsigned call (``scripts/selo.py`` attacks that).

Each call gets its own session and envelope, as each turn would: N racers are N turns,
and a single-use ``jti`` shared between them would leave one racer to run.
"""

from __future__ import annotations

import re
from typing import Any

from cadencia_shared.ledger import Ledger
from cadencia_shared.ledger.sessions import SessionLimits, SessionStore
from cadencia_shared.seal import seal

from ..local_stack.aws import session_client

SEAL_PREFIXES = ("sessao#", "jti#")  # SEAL's own items: not the business ledger
SESSION_S = 600  # longer than any scenario's wait (claim leases, held gateway posts)
_CONVERSATION = re.compile(r"\A[A-Za-z0-9._:=+/\-]{1,256}\Z")


class Sealer:
    """Signs events for one ledger table; built from plain strings so a child can make its own."""

    def __init__(self, table: str, endpoint: str) -> None:
        self.table = table
        self.endpoint = endpoint
        self._ledger: Ledger | None = None

    @property
    def ledger(self) -> Ledger:
        if self._ledger is None:
            self._ledger = Ledger(self.table, session_client("dynamodb", self.endpoint))
        return self._ledger

    def __call__(self, tool: str, event: dict[str, Any], fallback: dict[str, Any] | None = None) -> dict[str, Any]:
        """``event`` signed for ``tool``. A hostile event's identity may not be one a session
        can hold: the session is then the ``fallback``'s, and the edge sees the mismatch."""
        conversation, customer = event.get("conversaId"), event.get("clienteId")
        if not _session_identity(conversation, customer):
            conversation, customer = (fallback or {}).get("conversaId"), (fallback or {}).get("clienteId")
        session = SessionStore(self.ledger.table).open_session(
            conversation_id=conversation, customer_id=customer, tools={tool}, limits=SessionLimits(),
            expires_at_ms=self.ledger.now_ms() + SESSION_S * 1000)
        return seal(event, tool=tool, session=session, now_ms=self.ledger.now_ms())


def _session_identity(conversation: Any, customer: Any) -> bool:
    return (isinstance(conversation, str) and bool(_CONVERSATION.match(conversation))
            and isinstance(customer, int) and not isinstance(customer, bool) and 0 < customer < 2**53)
