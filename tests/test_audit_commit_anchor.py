"""The orchestrator's turn anchors its audit chain in the conversation's commit:
the fenced UpdateItem of ``conversa#{id}`` also sets the turn's last
link (``cadeiaSeq``/``cadeiaHash``), so a turn writes no ``auditoria-cabeca#`` item
and, seeded from the lease, reads no chain head. ``verify`` checks both anchors.
Real moto server, real orchestrator, separate OS processes, SIGKILL."""

from __future__ import annotations

import itertools
import multiprocessing as mp
import os
import random
import signal
import time

import pytest

from cadencia_shared.audit_anchors import CONVERSATION_PREFIX, Head
from cadencia_shared.audit_chain import ANCHOR_PREFIX, AuditChain, Broken
from cadencia_shared.ledger import Ledger
from cadencia_shared.ledger.table import conversation_pk
from orchestrator.events import TurnRequest
from orchestrator.loop import ConversationBusyError
from orchestrator.model import Deadline
from scripts.local_stack.aws import session_client
from tests.test_audit_chain import CONV, _anchored_verifier, _delete, _fill, anchored, audit, sigkill_writers_after  # noqa: F401

from .support import anthropic_fake
from .support.anthropic_fake import ScriptedModel, text_reply, tool_use
from .support.orchestrators import CountingInvoker, build


class CountingClient:
    """The real client, counting anchor-item writes and Queries of the audit table."""

    def __init__(self, inner, audit_table: str) -> None:
        self.inner, self.audit_table = inner, audit_table
        self.anchor_writes = self.audit_queries = 0

    def update_item(self, **kwargs):
        self.anchor_writes += kwargs["Key"]["pk"]["S"].startswith(ANCHOR_PREFIX)
        return self.inner.update_item(**kwargs)

    def query(self, **kwargs):
        self.audit_queries += kwargs["TableName"] == self.audit_table
        return self.inner.query(**kwargs)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _instance(chain: AuditChain, client=None) -> tuple[Ledger, AuditChain]:  # noqa: ANN001
    """A fresh environment's ledger and writer (no head memory)."""
    client = client or chain.client
    writer = AuditChain(chain.table_name, client, anchor_table=chain.anchor_table)
    return Ledger(chain.anchor_table, client, audit_chain=writer), writer


def _turn(ledger: Ledger, message: str, *orders: str) -> None:
    """One real orchestrator turn: a status call per order (one link each), then a reply."""
    model = ScriptedModel(*[tool_use("consultar_status_pedido", {"pedidoId": o}) for o in orders],
                          text_reply("Consultei aqui."))
    orch, _ = build(model, ledger, CountingInvoker())
    orch.handle(TurnRequest(conversaId=CONV, clienteId=1001, mensagemId=message, mensagem="cadê?"),
                Deadline.after(60))


def _conversation_anchor(chain: AuditChain) -> Head | None:
    return chain._anchors.conversation_head(CONV)


def _last(chain: AuditChain) -> Head:
    record = list(chain.records(CONV))[-1]
    return Head(record["seq"], record["hash"])


def _expire_lease(chain: AuditChain) -> None:
    """As if the lease's time had passed (a process killed inside its turn)."""
    chain.client.update_item(TableName=chain.anchor_table, Key={"pk": {"S": conversation_pk(CONV)}},
                             UpdateExpression="SET leaseAteMs = :z", ExpressionAttributeValues={":z": {"N": "0"}})


def test_a_turn_anchors_in_its_commit_and_the_next_reads_no_head(anchored):
    counted = CountingClient(anchored.client, anchored.table_name)
    ledger, _ = _instance(anchored, counted)
    _turn(ledger, "m-1", "4821", "4822")
    assert counted.anchor_writes == 0 and anchored.head(CONV) is None  # no auditoria-cabeca# write
    assert _conversation_anchor(anchored) == _last(anchored) == Head(2, _last(anchored).hash)
    assert anchored.verify(CONV) == (2, None)

    counted = CountingClient(anchored.client, anchored.table_name)  # another, cold environment
    ledger, _ = _instance(anchored, counted)
    _turn(ledger, "m-2", "4823")
    assert (counted.anchor_writes, counted.audit_queries) == (0, 0)  # the lease's anchor was the head
    assert _conversation_anchor(anchored) == _last(anchored) and _last(anchored).seq == 3
    assert anchored.verify(CONV) == (3, None)


def test_a_tail_deleted_after_a_turn_is_reported_by_the_conversations_anchor(anchored, local_stack):
    _turn(_instance(anchored)[0], "m-1", "4821", "4822")
    _delete(anchored, 2)
    assert anchored.verify(CONV) == (1, Broken(CONV, 2, "cauda_truncada"))
    out = _anchored_verifier(local_stack, anchored, "--conversa", CONV)
    assert out.returncode == 1 and "seq=2 (cauda_truncada)" in out.stdout, out.stdout


def test_a_chain_anchored_only_on_its_conversation_is_found_by_the_full_pass(anchored, local_stack):
    _turn(_instance(anchored)[0], "m-1", "4821")
    _delete(anchored, 1)
    assert anchored.chains() == [] and anchored.anchored_chains() == [CONV]
    out = _anchored_verifier(local_stack, anchored)
    assert out.returncode == 1 and f"{CONV}: QUEBRADA no registro seq=1 (cauda_truncada)" in out.stdout


@pytest.mark.parametrize("reappended", [1, 2])
def test_a_tail_deleted_and_reappended_stays_reported_after_the_next_turn(anchored, reappended):
    """Turn 1 anchors seq 2 on the conversation; seq 2 is deleted and a tool's writer
    re-appends over it (moving its own, empty, anchor item); the next turn must not
    move the conversation's anchor onto the rewritten chain."""
    _turn(_instance(anchored)[0], "m-1", "4821", "4822")
    _delete(anchored, 2)
    tool = AuditChain(anchored.table_name, anchored.client, anchor_table=anchored.anchor_table)
    for i in range(reappended):
        tool.append(conversation_id=CONV, event="REESCRITO", details={"i": i})
    assert anchored.verify(CONV)[1] == Broken(CONV, 2, "ancora_divergente")
    anchored_before = _conversation_anchor(anchored)
    _turn(_instance(anchored)[0], "m-2", "4823")
    _checked, broken = anchored.verify(CONV)
    assert broken is not None, "the rewritten tail was healed"
    if reappended == 2:  # the turn linked after the rewritten seq 3: the anchor must stay
        assert _conversation_anchor(anchored) == anchored_before
        assert broken == Broken(CONV, 2, "ancora_divergente")
    else:  # the turn's guess linked after the deleted record: its own link breaks
        assert broken.problem in {"elo_quebrado", "ancora_divergente"}


def test_a_commit_that_fails_leaves_the_links_to_the_anchor_item(anchored):
    """``head_for_commit`` without ``anchored_by_commit`` (the commit was refused):
    the block's end anchors the item as before."""
    with anchored.one_anchor():
        _fill(anchored, 3)
        assert anchored.head_for_commit(CONV, None) == _last(anchored)
    assert anchored.head(CONV) == _last(anchored)


def test_another_writer_appending_between_turns_costs_one_query_and_keeps_the_anchor_moving(anchored):
    counted = CountingClient(anchored.client, anchored.table_name)
    _turn(_instance(anchored)[0], "m-1", "4821")
    AuditChain(anchored.table_name, anchored.client, anchor_table=anchored.anchor_table).append(
        conversation_id=CONV, event="DECISAO_DE_APROVACAO", details={})
    ledger, _ = _instance(anchored, counted)
    _turn(ledger, "m-2", "4822")
    assert _conversation_anchor(anchored) == _last(anchored) and _last(anchored).seq == 3
    assert counted.anchor_writes == 0 and counted.audit_queries == 2  # the chain's last, the anchor holds
    assert anchored.verify(CONV) == (3, None)


def _own_tool_use_ids() -> None:
    """A spawned process restarts the fake's id counter: ids already in the
    conversation would be refused as repeated (and leave no link)."""
    anthropic_fake._ids = itertools.count(os.getpid() * 1_000_000)


def _turns_forever(endpoint: str, table: str, ledger_table: str) -> None:
    """An orchestrator process running turn after turn on CONV (busy: try again)."""
    _own_tool_use_ids()
    ledger, _ = _instance(AuditChain(table, session_client("dynamodb", endpoint), anchor_table=ledger_table))
    for turn in range(10_000):
        orders = [str(random.randint(10**6, 10**7)) for _ in range(random.randint(1, 2))]
        try:
            _turn(ledger, f"m-{os.getpid()}-{turn}", *orders)
        except ConversationBusyError:
            time.sleep(0.05)


def _tool_forever(endpoint: str, table: str, ledger_table: str) -> None:
    """A tool's writer appending to the same chain (its own anchor item)."""
    chain = AuditChain(table, session_client("dynamodb", endpoint), anchor_table=ledger_table)
    for i in range(10_000):
        chain.append(conversation_id=CONV, event="FERRAMENTA", details={"i": i})
        time.sleep(random.random() / 10)


def test_turns_and_a_tool_in_separate_processes_sigkilled_leave_no_false_truncation(anchored, local_stack):
    """Two orchestrator processes (serialized by the lease) and a tool's writer append
    to one chain at once and are all SIGKILLed mid-flight: the chain verifies against
    both anchors (neither ahead of it); the next turn anchors past everything; then
    a deleted tail is reported."""
    sigkill_writers_after(anchored, local_stack.aws_endpoint, (_turns_forever, _turns_forever, _tool_forever),
                          records=30)
    checked, broken = anchored.verify(CONV)
    assert checked >= 30 and broken is None
    assert {"CHAMADA_DE_FERRAMENTA", "FERRAMENTA"} <= {r["evento"] for r in anchored.records(CONV)}
    heads = [anchored.head(CONV), _conversation_anchor(anchored)]
    assert heads[1] is not None and all(h is None or h.seq <= checked for h in heads)

    _expire_lease(anchored)  # a killed turn may hold it
    _turn(_instance(anchored)[0], "m-depois", "4840")
    last = _last(anchored)
    assert _conversation_anchor(anchored) == last and anchored.verify(CONV) == (last.seq, None)
    _delete(anchored, last.seq)
    assert anchored.verify(CONV) == (last.seq - 1, Broken(CONV, last.seq, "cauda_truncada"))


def _turn_killed_before_its_commit(endpoint: str, table: str, ledger_table: str) -> None:
    _own_tool_use_ids()
    ledger, _ = _instance(AuditChain(table, session_client("dynamodb", endpoint), anchor_table=ledger_table))
    ledger.commit_conversation = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
    _turn(ledger, "m-morto", "4830", "4831")


def test_a_turn_sigkilled_between_its_last_link_and_its_commit(anchored, local_stack):
    """Its links are in the chain, neither anchor moved (they lag: accepted); the
    next turn links after them and moves the conversation's anchor past them."""
    _turn(_instance(anchored)[0], "m-1", "4821")
    proc = mp.get_context("spawn").Process(target=_turn_killed_before_its_commit,
                                           args=(local_stack.aws_endpoint, anchored.table_name, anchored.anchor_table))
    proc.start()
    proc.join(timeout=120)
    assert proc.exitcode == -signal.SIGKILL
    assert _last(anchored).seq == 3 and _conversation_anchor(anchored).seq == 1
    assert anchored.verify(CONV) == (3, None)
    _expire_lease(anchored)
    _turn(_instance(anchored)[0], "m-2", "4832")
    assert _conversation_anchor(anchored) == _last(anchored) and _last(anchored).seq == 4
    assert anchored.verify(CONV) == (4, None)
    _delete(anchored, 4)
    assert anchored.verify(CONV) == (3, Broken(CONV, 4, "cauda_truncada"))


def test_the_anchor_names_are_the_ledgers():
    assert conversation_pk(CONV) == CONVERSATION_PREFIX + CONV


def test_a_tools_writer_moves_a_lagging_anchor_item_without_reading_it(anchored):
    """Since turns no longer move the ``auditoria-cabeca#`` item, a tool's append after
    a turn finds it behind: the refused UpdateItem returns the anchor it saw (no
    GetItem), one Query proves it still holds, and the item moves to the tool's link."""
    tool = AuditChain(anchored.table_name, anchored.client, anchor_table=anchored.anchor_table)
    tool.append(conversation_id=CONV, event="FERRAMENTA", details={})  # the item anchors seq 1
    _turn(_instance(anchored)[0], "m-1", "4821", "4822")  # seqs 2, 3: the item stays at 1

    calls: list[str] = []

    class Recording:
        def __getattr__(self, name):
            calls.append(name)
            return getattr(anchored.client, name)

    AuditChain(anchored.table_name, Recording(), anchor_table=anchored.anchor_table).append(
        conversation_id=CONV, event="FERRAMENTA", details={})
    # last link, put, refused, holds, moved
    assert calls == ["query", "put_item", "update_item", "query", "update_item"]
    assert anchored.head(CONV) == _last(anchored) and _last(anchored).seq == 4
    assert anchored.verify(CONV) == (4, None)


def test_a_conversations_first_turn_guesses_an_empty_chain_and_reads_no_head(anchored):
    """No anchor on the conversation yet: the writer guesses the empty chain (no Query)."""
    counted = CountingClient(anchored.client, anchored.table_name)
    ledger, _ = _instance(anchored, counted)
    _turn(ledger, "m-1", "4821")
    assert (counted.anchor_writes, counted.audit_queries) == (0, 0)
    assert _conversation_anchor(anchored) == _last(anchored) == Head(1, _last(anchored).hash)
    assert anchored.verify(CONV) == (1, None)


def test_a_wrong_empty_chain_guess_costs_a_failed_put_and_links_after_the_real_head(anchored):
    """Another writer appended before the conversation's first anchored turn (or the
    conversation is from before anchors rode on commits): the guess's put fails, the
    writer reads the head, links after it, and the commit anchors there."""
    AuditChain(anchored.table_name, anchored.client, anchor_table=anchored.anchor_table).append(
        conversation_id=CONV, event="DECISAO_DE_APROVACAO", details={})
    counted = CountingClient(anchored.client, anchored.table_name)
    ledger, _ = _instance(anchored, counted)
    _turn(ledger, "m-1", "4821")
    assert counted.audit_queries >= 1  # the head, read after the guess failed
    assert _conversation_anchor(anchored) == _last(anchored) and _last(anchored).seq == 2
    assert anchored.verify(CONV) == (2, None)
