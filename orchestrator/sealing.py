"""The turn's SEAL session: every tool call of a turn carries an envelope signed by it
(docs/seal.md, docs/decisions/seal-at-the-edge.md).

``turn(...)`` scopes one turn (the loop's, or the resume of an approved call): the
conversation, the customer the channel bound to it, the turn's deadline and, for a
resume, the approval that authorizes the call. The session is opened lazily, at the
turn's first tool invocation (a turn that calls no tool writes nothing), and closed
when the scope ends, however it ends; its expiry is the turn's deadline, so a crash
that skips the close leaves a session that verifies nothing after it.

``sealed(tool, event)`` is what the invokers (``invokers/aws.py``, ``invokers/local.py``)
call on every event: inside a turn, the event with its ``selo``; outside one, the
event unchanged — which the tool's edge refuses (code 1001). The scope is a context
variable: the order reads the feasibility check and the confirmation gate make
through the invoker are sealed by the same session as the call they precede.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from cadencia_shared.catalog import TOOLS
from cadencia_shared.ledger import Ledger
from cadencia_shared.ledger.sessions import SessionLimits, SessionStore, TurnSession
from cadencia_shared.seal_envelope import seal

from .model import Deadline

_log = logging.getLogger(__name__)


@dataclass
class _TurnScope:
    ledger: Ledger
    conversation_id: str
    customer_id: int
    expires_at_ms: int
    limits: SessionLimits
    approval_id: str | None
    session: TurnSession | None = None

    def open(self) -> TurnSession:
        if self.session is None:
            self.session = SessionStore(self.ledger.table).open_session(
                conversation_id=self.conversation_id, customer_id=self.customer_id, tools=TOOLS,
                limits=self.limits, expires_at_ms=self.expires_at_ms)
        return self.session


_current: ContextVar[_TurnScope | None] = ContextVar("cadencia_seal_turn", default=None)


def limits_for(threshold: Decimal | None) -> SessionLimits:
    """The session's limits: the confirmation gate's threshold (``APROVACAO_LIMITE_REAIS``,
    else the refund's catalog default), so the edge and the gate agree on what needs a person."""
    policy = TOOLS["emitir_reembolso"].approval
    default = policy.default_threshold if policy is not None else Decimal("500")
    return SessionLimits(refund_max_without_approval=default if threshold is None else threshold)


@contextmanager
def turn(ledger: Ledger, *, conversation_id: str, customer_id: int, deadline: Deadline,
         threshold: Decimal | None, approval_id: str | None = None) -> Iterator[None]:
    scope = _TurnScope(ledger, conversation_id, customer_id,
                       ledger.now_ms() + max(0, deadline.remaining_ms()), limits_for(threshold), approval_id)
    token = _current.set(scope)
    try:
        yield
    finally:
        _current.reset(token)
        if scope.session is not None:
            _close(scope)


def _close(scope: _TurnScope) -> None:
    assert scope.session is not None
    try:
        SessionStore(scope.ledger.table).close_session(scope.session.session_id)
    except (ClientError, BotoCoreError) as err:
        # Not raised over the turn's own outcome: the session still dies at its expiry
        # (the turn's deadline), so it verifies nothing after the turn in any case.
        _log.warning("seal session not closed", extra={"erro": type(err).__name__})


def sealed(tool: str, event: dict[str, Any]) -> dict[str, Any]:
    """``event`` with its envelope when a turn is in scope; unchanged otherwise."""
    scope = _current.get()
    if scope is None:
        return event
    spec = TOOLS.get(tool)
    approval = scope.approval_id if spec is not None and spec.approval is not None else None
    return seal(event, tool=tool, session=scope.open(), now_ms=scope.ledger.now_ms(), approval_id=approval)
