"""Audit records and a conversation's history.

``append_audit`` appends one event, never overwriting (DESIGN invariant 6). Given an
``audit_chain`` (``cadencia_shared.audit_chain.AuditChain``), events go to its
hash-chained table (invariant 12); without one, to ``auditoria#{uuid}`` items here
(``PutItem attribute_not_exists``). ``history`` reads one conversation's indexed
items (claims, attempts, audit items) in time order: their keys from the
``historicoPorConversa`` GSI (keys and ``tipo`` only), the items by key — what
operators and the harness print.

A conversation's chain is also anchored on the conversation's item, by the turn's
own commit (``cadencia_shared.audit_anchors``): ``resume_chain`` after the lease,
``chain_head_for_commit`` before the commit, ``chain_anchored_by_commit`` after it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Collection, Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol

from ..audit_anchors import EMPTY_CHAIN, Head
from .table import (
    GSI_BY_CONVERSATION,
    GSI_PARTITION,
    GSI_SORT,
    TABLE_KEY,
    ItemType,
    LedgerTable,
    audit_pk,
    claim_pk,
    history_sort,
)


def timed_event_details(records: Iterable[dict[str, Any]], events: Collection[str]
                        ) -> list[tuple[str, str, dict[str, Any]]]:
    """(event, when it was recorded, details) of the audit ``records`` of any of
    ``events``, in order (``AuditStore.timed_links`` on records a caller has read already).
    When: a ledger ``auditoria#`` item's ``timestamp`` (its ``registradoEm`` is the
    history index's sort key, ``{time}#auditoria#{id}``), else a chain link's ``registradoEm``."""
    timed = [(record["evento"], str(record.get("timestamp") or record.get("registradoEm") or ""),
              json.loads(record["detalhes"])) for record in records if record.get("evento") in events]
    # Every writer appends an object; one that is not (a forged or damaged record, which
    # ``scripts/auditoria verificar`` reports) is no link of any event: skipped, so the
    # readers' ``.get`` on details cannot crash a whole conversation's listing.
    return [(event, at, details) for event, at, details in timed if isinstance(details, dict)]


class AuditChain(Protocol):
    """The hash-chained audit table's writer (``cadencia_shared.audit_chain``)."""

    def append(self, *, conversation_id: str | None, event: str, details: dict[str, Any]) -> int: ...

    def one_anchor(self) -> AbstractContextManager[None]: ...

    def seed_head(self, chain: str, anchored: Head) -> None: ...

    def head_for_commit(self, chain: str, anchored: Head | None) -> Head | None: ...

    def anchored_by_commit(self, chain: str, head: Head | None) -> None: ...

    def records(self, chain: str) -> Iterator[dict[str, Any]]: ...


class AuditTrail(Protocol):
    """What a control, a tool or a script needs to leave an audit record."""

    def append_audit(self, *, conversation_id: str | None, event: str, details: dict[str, Any]) -> str: ...


class AuditStore:
    """Audit records and history, on ``self.table`` (a ``LedgerTable``) and ``self.audit_chain``."""

    table: LedgerTable
    audit_chain: AuditChain | None

    def append_audit(self, *, conversation_id: str | None, event: str, details: dict[str, Any]) -> str:
        """Append one audit event; never overwrites. Returns its id (the chain's seq, or the item's uuid)."""
        if self.audit_chain is not None:
            return str(self.audit_chain.append(conversation_id=conversation_id, event=event, details=details))
        event_id = uuid.uuid4().hex
        now = self.table.iso()
        self.table.put_new({
            TABLE_KEY: audit_pk(event_id), "tipo": ItemType.AUDIT.value, "evento": event,
            "conversaId": conversation_id, "timestamp": now,
            "detalhes": json.dumps(details, ensure_ascii=False, default=str),
            GSI_SORT: history_sort(now, ItemType.AUDIT, event_id) if conversation_id else None,
        })
        return event_id

    def one_anchor_per_block(self) -> AbstractContextManager[None]:
        """A block whose chain links move the head's anchor once, at its end (a turn:
        ``AuditChain.one_anchor``); nothing to defer without a chain."""
        return nullcontext() if self.audit_chain is None else self.audit_chain.one_anchor()

    def resume_chain(self, conversation_id: str, anchored: Head | None) -> None:
        """After the lease: the conversation's anchored head is the writer's guess
        of the chain's last link (``AuditChain.seed_head``). A conversation with no
        anchor yet (new, or last committed before anchors rode on commits) is guessed
        an empty chain: wrong only when another writer appended first, and then the
        put's condition fails (1 unit) and the writer reads the head it would have
        read anyway."""
        if self.audit_chain is not None:
            self.audit_chain.seed_head(conversation_id, anchored or EMPTY_CHAIN)

    def chain_head_for_commit(self, conversation_id: str, anchored: Head | None) -> Head | None:
        """What the turn's commit sets as the conversation's anchor (None: nothing)."""
        return None if self.audit_chain is None else self.audit_chain.head_for_commit(conversation_id, anchored)

    def chain_anchored_by_commit(self, conversation_id: str, head: Head | None) -> None:
        """The commit carrying ``head`` succeeded: the block's end skips that anchor write."""
        if self.audit_chain is not None:
            self.audit_chain.anchored_by_commit(conversation_id, head)

    def links(self, conversation_id: str, event: str) -> list[dict[str, Any]]:
        """The details of one conversation's audit records of ``event``, in order: one
        Query of its chain (the chain's key is the conversation), or, without a chain,
        its ``auditoria#`` items through ``history``."""
        return [details for _, _, details in self.timed_links(conversation_id, (event,))]

    def timed_links(self, conversation_id: str, events: Collection[str]) -> list[tuple[str, str, dict[str, Any]]]:
        """(event, when it was recorded, details) of the records of any of ``events``,
        in order, from the same single read as ``links``."""
        if self.audit_chain is not None:
            records: Iterator[dict[str, Any]] = self.audit_chain.records(conversation_id)
        else:
            records = self.history(conversation_id, item_type=ItemType.AUDIT)
        return timed_event_details(records, events)

    def history(self, conversation_id: str, *, item_type: ItemType | None = None) -> Iterator[dict[str, Any]]:
        """Every indexed item of one conversation in time order: the index gives the
        keys in order, one BatchGetItem per 100 keys the items (strongly consistent,
        so an update the index never saw is read as written). A refund claim has no
        entry of its own (one index write fewer per refund): it is read by the key its
        counter names (``chaveIdempotencia``; the counter is in the index) and placed
        at its creation time, where its own entry used to sort. Claims written with an
        entry (before this change) are found either way, once."""
        follow = item_type in (None, ItemType.CLAIM)
        entries = list(self.table.query_index(GSI_BY_CONVERSATION, GSI_PARTITION, conversation_id,
                                              item_type=None if follow else item_type))
        items = self.table.get_many([entry[TABLE_KEY] for entry in entries])
        timed = [(str(entry[GSI_SORT]), items[entry[TABLE_KEY]]) for entry in entries if entry[TABLE_KEY] in items]
        if follow:
            named = sorted({claim_pk(item["chaveIdempotencia"]) for _, item in timed
                            if item.get("tipo") == ItemType.COUNTER.value and item.get("chaveIdempotencia")}
                           - items.keys())
            claims = self.table.get_many(named) if named else {}
            timed += [(str(claim["criadoEm"]), claim) for claim in claims.values()
                      if claim.get("conversaId") == conversation_id]
            timed.sort(key=lambda pair: pair[0])
        return iter([item for _, item in timed if item_type is None or item.get("tipo") == item_type.value])
