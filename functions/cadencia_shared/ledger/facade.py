"""``Ledger``: every item kind's operations on one table, as one object.

Kept because it removes churn: about forty call sites (the Lambdas' adapters, the
orchestrator, the scripts, the tests — and code on other branches) build one
``Ledger(table_name, client)`` and pass it around. New code should ask for the
small Protocol it uses (``AttemptRecorder``, ``RefundClaims``, ``Conversations``,
``AuditTrail``, ``ConversationCancellation``); this object
satisfies all of them, and each store also works alone over a ``LedgerTable``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from .attempts import CALL_EVENT, AttemptStore, with_outcomes
from .audit import AuditChain, AuditStore
from .claims import ClaimStore
from .conversations import ConversationStore
from .table import LedgerTable


class Ledger(ClaimStore, AttemptStore, ConversationStore, AuditStore):
    """Typed operations on the ledger table. ``client`` is a boto3 DynamoDB client."""

    def __init__(self, table_name: str, client: Any | None = None, *, clock: Callable[[], float] = time.time,
                 audit_chain: AuditChain | None = None) -> None:
        """``audit_chain``: given, audit records go to its hash-chained table instead
        of ``auditoria#`` items here."""
        self.table = LedgerTable(table_name, client, clock=clock)
        self.audit_chain = audit_chain

    @property
    def table_name(self) -> str:
        return self.table.name

    @property
    def client(self) -> Any:
        return self.table.client

    def now_ms(self) -> int:
        return self.table.now_ms()

    def attempts(self, conversation_id: str, *, links: list[dict[str, Any]] | None = None
                 ) -> Iterator[dict[str, Any]]:
        """Every listed attempt of one conversation, in time order, with its call's
        outcome: the counters' records (the decisions, written before the invoke)
        joined with the conversation's ``CHAMADA_DE_FERRAMENTA`` links (the outcomes,
        written once after it); an allowed record with no link is ``pendente``.
        ``links``: those links, from a chain the caller read already (``event_details``)."""
        if links is None:
            links = self.links(conversation_id, CALL_EVENT)
        named = {(link["assunto"], link["ferramenta"]) for link in links
                 if isinstance(link.get("assunto"), str) and isinstance(link.get("ferramenta"), str)}
        return iter(with_outcomes(self.attempt_records_of(conversation_id, named), links))

    def attempt_results(self, *, conversation_id: str, subject: str, tool: str, limit: int) -> list[str]:
        """The outcomes of the invoked calls numbered 1..``limit`` at (conversation,
        subject, tool) — with ``limit`` = the ceiling, the calls that were allowed to
        run — in number order, from their links alone (one Query of the chain; the
        orchestrator's role has it). A call killed before its link is absent."""
        links = [link for link in self.links(conversation_id, CALL_EVENT)
                 if (link.get("ferramenta"), link.get("assunto")) == (tool, subject)
                 and type(link.get("tentativaNumero")) is int and 1 <= link["tentativaNumero"] <= limit]
        return [str(link["resultado"]) for link in sorted(links, key=lambda link: link["tentativaNumero"])]
