"""The sparse work-list index holds keys only (``pendenciasPorVisita``, KEYS_ONLY):
its readers take the keys from it and read each item by key, so what they act on is
the item as it stands, never the index's copy. On the moto server, with a private
table of the real definition.

What is pinned: the index returns nothing but keys (a reader relying on a projected
attribute would fail here); the reconciler's and the approvals' lists come whole, in
the index's order, from strongly consistent reads; an entry whose item has since
left the list (settled, decided, deleted by TTL) — what a lagging index returns — is
skipped; the attendant's list reads no conversation item."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

import pytest

from cadencia_shared.approvals import ApprovalStore
from cadencia_shared.ledger import (
    GSI_UNSETTLED,
    GSI_UNSETTLED_PARTITION,
    HUMAN_PENDING_MARK,
    UNSETTLED_MARK,
    ConversationStatus,
    Ledger,
    refund_idempotency_key,
    table_definition,
)
from tests.support.approval_wait import awaiting
from tests.test_refund_inflight import _dynamodb

KEYS = {"pk", GSI_UNSETTLED_PARTITION, "visitadoEm"}


class Recording:
    """The real client, with its calls recorded; ``replay`` makes the next Query
    answer what an earlier one did (an index lagging behind the table)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.replay: dict[str, Any] | None = None

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.client, name)

        def recorded(**kwargs: Any) -> Any:
            self.calls.append((name, kwargs))
            if name == "query" and self.replay is not None:
                answer, self.replay = self.replay, None
                return answer
            return method(**kwargs)
        return recorded


@pytest.fixture
def world(local_stack) -> Any:
    client = _dynamodb(local_stack)
    name = f"cadencia-pendencias-{uuid.uuid4().hex[:10]}"
    client.create_table(**table_definition(name))
    recording = Recording(client)
    clock = {"now": 1_800_000_000.0}
    yield Ledger(name, recording, clock=lambda: clock["now"]), recording, clock
    client.delete_table(TableName=name)


def _claims(ledger: Ledger, clock: dict[str, float], count: int) -> list[str]:
    keys = []
    for n in range(count):
        conv = f"pend-{n}-{uuid.uuid4().hex[:6]}"
        key = refund_idempotency_key(conv, "PED-1001")
        ledger.claim_refund(key=key, conversation_id=conv, order_id="PED-1001", customer_id=1001,
                            amount=Decimal("10.00"), lease_s=30)
        clock["now"] += 1
        keys.append(key)
    return keys


def _query(ledger: Ledger, recording: Recording, mark: str) -> dict[str, Any]:
    """The index's answer, straight from the real client (not counted as the reader's)."""
    return recording.client.query(
        TableName=ledger.table.name, IndexName=GSI_UNSETTLED, KeyConditionExpression="#p = :m",
        ExpressionAttributeNames={"#p": GSI_UNSETTLED_PARTITION}, ExpressionAttributeValues={":m": {"S": mark}})


def _index_entries(ledger: Ledger, recording: Recording, mark: str) -> list[dict[str, Any]]:
    return _query(ledger, recording, mark)["Items"]


def test_the_index_holds_only_keys_and_the_reconciler_reads_each_claim_whole(world):
    ledger, recording, clock = world
    keys = _claims(ledger, clock, 3)
    entries = _index_entries(ledger, recording, UNSETTLED_MARK)
    assert [set(e) for e in entries] == [KEYS] * 3
    recording.calls.clear()
    claims = ledger.unsettled_claims(limit=10)
    assert [c.key for c in claims] == keys  # oldest visit first, as the index orders them
    gets = [kw for name, kw in recording.calls if name == "get_item"]
    assert len(gets) == 3 and all(kw["ConsistentRead"] is True for kw in gets)
    assert claims == [ledger.get_claim(k) for k in keys]
    assert {c.amount for c in claims} == {Decimal("10.00")} and all(c.order_id == "PED-1001" for c in claims)


def test_an_entry_whose_claim_left_the_list_since_is_skipped(world):
    ledger, recording, clock = world
    settled, deleted, pending = _claims(ledger, clock, 3)
    stale = _query(ledger, recording, UNSETTLED_MARK)
    # after the index answered: one claim settled (its mark removed), one deleted (TTL)
    recording.client.update_item(TableName=ledger.table.name, Key={"pk": {"S": f"reivindicacao#{settled}"}},
                                 UpdateExpression="SET #st = :ok REMOVE #p",
                                 ExpressionAttributeNames={"#st": "status", "#p": GSI_UNSETTLED_PARTITION},
                                 ExpressionAttributeValues={":ok": {"S": "executado"}})
    recording.client.delete_item(TableName=ledger.table.name, Key={"pk": {"S": f"reivindicacao#{deleted}"}})
    recording.replay = stale
    assert [c.key for c in ledger.unsettled_claims(limit=10)] == [pending]


def test_approvals_are_listed_whole_and_a_decided_one_is_not(world):
    ledger, recording, clock = world
    store = ApprovalStore(ledger)
    first, _ = store.request(tool="emitir_reembolso", version="v1", arguments={"valor": Decimal("600")},
                             conversation_id="conv-a", customer_id=7, amount=Decimal("600.00"),
                             reason="acima_do_limite", validity_s=600)
    clock["now"] += 1
    second, _ = store.request(tool="emitir_reembolso", version="v1", arguments={"valor": Decimal("700")},
                              conversation_id="conv-b", customer_id=8, amount=Decimal("700.00"),
                              reason="acima_do_limite", validity_s=600)
    assert [set(e) for e in _index_entries(ledger, recording, "aprovacao")] == [KEYS] * 2
    assert store.pending() == [first, second]
    stale = _query(ledger, recording, "aprovacao")
    # A decision is recorded only while its conversation waits for it.
    waiting = ledger.acquire_conversation(conversation_id="conv-a", customer_id=7, lease_s=60)
    ledger.commit_conversation(waiting, messages=[awaiting(first.id)], status=ConversationStatus.WAITING_APPROVAL)
    store.decide(first.id, approve=False, approver="ana", justification="não", allowed_approvers=frozenset({"ana"}))
    recording.replay = stale
    assert store.pending() == [second]


def test_the_attendants_list_reads_no_conversation_item(world):
    ledger, recording, clock = world
    state = ledger.acquire_conversation(conversation_id="conv-h", customer_id=1001, lease_s=60)
    clock["now"] += 1
    ledger.commit_conversation(state, messages=[{"role": "user", "content": "x" * 3000}],
                               status=ConversationStatus.WAITING_HUMAN)
    (entry,) = _index_entries(ledger, recording, HUMAN_PENDING_MARK)
    assert set(entry) == KEYS  # the history (mensagensZ) is not in the index
    recording.calls.clear()
    assert ledger.waiting_for_a_person() == [("conv-h", "2027-01-15T08:00:01.000Z")]
    assert [name for name, _ in recording.calls] == ["query"]
