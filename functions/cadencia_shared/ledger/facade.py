"""``Ledger``: every item kind's operations on one table, as one object.

Kept because it removes churn: about forty call sites (the Lambdas' adapters, the
orchestrator, the scripts, the tests — and code on other branches) build one
``Ledger(table_name, client)`` and pass it around. New code should ask for the
small Protocol it uses (``AttemptRecorder``, ``RefundClaims``, ``Conversations``,
``AuditTrail``, ``ConversationCancellation``, ``SwitchReader``); this object
satisfies all of them, and each store also works alone over a ``LedgerTable``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..dynamo_types import DynamoClient
from .attempts import (
    CALL_EVENT,
    CEILING_EVENT,
    AttemptStore,
    attempt_records,
    link_series,
    read_decided_records,
    with_outcomes,
)
from .audit import AuditChain, AuditStore, timed_event_details
from .claims import ClaimStore
from .conversations import ConversationStore
from .switches import SwitchStore
from .table import LedgerTable


class Ledger(ClaimStore, AttemptStore, ConversationStore, AuditStore, SwitchStore):
    """Typed operations on the ledger table. ``client``: a botocore DynamoDB client."""

    def __init__(self, table_name: str, client: DynamoClient | None = None, *, clock: Callable[[], float] = time.time,
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

    def attempts(self, conversation_id: str, *, chain: Iterable[dict[str, Any]] | None = None
                 ) -> Iterator[dict[str, Any]]:
        """Every listed attempt of one conversation, in time order, with its call's
        outcome: the counters' records (the decisions, written before the invoke)
        joined with the conversation's ``CHAMADA_DE_FERRAMENTA`` links (the outcomes,
        written once after it); an allowed record with no link is ``pendente``. A
        refusal decided without the counter (``exhausted`` module) has only its
        ``TETO_DE_TENTATIVAS_ATINGIDO`` link: it is listed from that link. One read
        of the chain serves both; ``chain``: its records, when the caller read them already."""
        events = (CALL_EVENT, CEILING_EVENT)
        linked = (self.timed_links(conversation_id, events) if chain is None
                  else timed_event_details(chain, events))
        calls = [details for event, _, details in linked if event == CALL_EVENT]
        refusals = [(at, details) for event, at, details in linked if event == CEILING_EVENT]
        named = {series for series in map(link_series, [*calls, *(d for _, d in refusals)]) if series}
        counters = self.counters_of(conversation_id, named)
        records = [*(record for counter in counters for record in attempt_records(counter, conversation_id)),
                   *read_decided_records(conversation_id, refusals, counters)]
        records.sort(key=lambda r: (r["timestamp"], r["tentativaNumero"]))
        return iter(with_outcomes(records, calls))

    def attempt_results(self, *, conversation_id: str, subject: str, tool: str, limit: int) -> list[str]:
        """The outcomes of the invoked calls numbered 1..``limit`` at (conversation,
        subject, tool) — with ``limit`` = the ceiling, the calls that were allowed to
        run — in number order, from their links alone (one Query of the chain; the
        orchestrator's role has it). A call killed before its link is absent."""
        links = [link for link in self.links(conversation_id, CALL_EVENT)
                 if (link.get("ferramenta"), link.get("assunto")) == (tool, subject)
                 and type(link.get("tentativaNumero")) is int and 1 <= link["tentativaNumero"] <= limit]
        return [str(link["resultado"]) for link in sorted(links, key=lambda link: link["tentativaNumero"])]
