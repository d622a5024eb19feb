"""The chain's head anchored once per turn: inside
``AuditChain.one_anchor()`` a block's links move the anchor in ONE UpdateItem, after
the last; the anchor never runs ahead of the chain, a writer SIGKILLed inside a
block leaves it behind (accepted, never a false truncation), and a tail deleted
after a block is still reported. Real moto server, separate OS processes."""

from __future__ import annotations

import uuid

import pytest

from cadencia_shared.audit_chain import ANCHOR_PREFIX, AuditChain, Broken, Head
from cadencia_shared.ledger import Ledger
from orchestrator.events import TurnRequest
from orchestrator.model import Deadline
from scripts.local_stack.aws import session_client
from tests.test_audit_chain import CONV, _delete, _fill, anchored, audit, sigkill_writers_after  # noqa: F401

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use
from .support.orchestrators import CountingInvoker, build


class CountingClient:
    """The real client, counting the UpdateItems that move a chain's head anchor."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.updates = 0

    def update_item(self, **kwargs):
        self.updates += kwargs["Key"]["pk"]["S"].startswith(ANCHOR_PREFIX)
        return self.inner.update_item(**kwargs)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _counted(chain: AuditChain) -> AuditChain:
    return AuditChain(chain.table_name, CountingClient(chain.client), anchor_table=chain.anchor_table)


def test_a_blocks_links_move_the_anchor_once_after_the_last(anchored):
    _fill(anchored, 2)
    writer = _counted(anchored)
    with writer.one_anchor():
        for i in range(4):
            writer.append(conversation_id=CONV, event="DECISAO", details={"bloco": i})
        assert anchored.head(CONV).seq == 2  # lags inside the block: no write yet
        assert anchored.verify(CONV) == (6, None)  # and that lag is accepted
    assert writer.client.updates == 1
    last = list(anchored.records(CONV))[-1]
    assert (anchored.head(CONV).seq, anchored.head(CONV).hash) == (6, last["hash"])
    assert anchored.verify(CONV) == (6, None)


def test_a_block_left_by_an_exception_still_anchors_and_the_exception_propagates(anchored):
    writer = _counted(anchored)
    with pytest.raises(ZeroDivisionError), writer.one_anchor():
        _fill(writer, 3)
        _ = 1 / 0
    assert (anchored.head(CONV).seq, writer.client.updates) == (3, 1)


def test_another_writer_anchoring_inside_the_block_leaves_the_anchor_at_the_last_record(anchored):
    """A tool's writer (its own process in AWS) links and anchors in the middle of the
    orchestrator's turn: the turn's single anchor write moves on from the tool's."""
    writer, tool = _counted(anchored), AuditChain(anchored.table_name, anchored.client,
                                                  anchor_table=anchored.anchor_table)
    with writer.one_anchor():
        _fill(writer, 2)
        tool.append(conversation_id=CONV, event="REEMBOLSO", details={})  # anchors seq 3 from seq 0
        writer._appended.clear()  # as a writer whose memory no longer holds: it reads the chain
        writer.append(conversation_id=CONV, event="DECISAO", details={"depois": 1})
    records = list(anchored.records(CONV))
    assert (anchored.head(CONV).seq, anchored.head(CONV).hash) == (4, records[-1]["hash"])
    assert anchored.verify(CONV) == (4, None)


def test_a_tail_deleted_after_a_turns_block_is_reported(anchored):
    with anchored.one_anchor():
        _fill(anchored, 5)
    _delete(anchored, 4, 5)
    checked, broken = anchored.verify(CONV)
    assert (checked, broken.seq, broken.problem) == (3, 4, "cauda_truncada")


def _blocks_forever(endpoint: str, table: str, ledger_table: str) -> None:
    chain = AuditChain(table, session_client("dynamodb", endpoint), anchor_table=ledger_table)
    for turn in range(10_000):
        with chain.one_anchor():
            for i in range(3):
                chain.append(conversation_id=CONV, event="DECISAO", details={"turno": turn, "i": i})


def test_writers_sigkilled_inside_blocks_never_leave_a_false_truncation(anchored, local_stack):
    sigkill_writers_after(anchored, local_stack.aws_endpoint, _blocks_forever, records=30)
    checked, broken = anchored.verify(CONV)
    assert checked >= 30 and broken is None
    head = anchored.head(CONV).seq
    assert 1 <= head <= checked
    _delete(anchored, *range(head, checked + 1))  # the tail from the anchored head on
    assert anchored.verify(CONV) == (head - 1, Broken(CONV, head, "cauda_truncada"))


def test_an_orchestrator_turn_with_two_links_writes_no_anchor_item(anchored):
    """Two status calls in one turn (two decision links): no anchor UpdateItem — the
    conversation's commit anchors the turn's last link (tests/test_audit_commit_anchor.py)."""
    ddb = CountingClient(anchored.client)
    chain = AuditChain(anchored.table_name, ddb, anchor_table=anchored.anchor_table)
    ledger = Ledger(anchored.anchor_table, ddb, audit_chain=chain)
    model = ScriptedModel(tool_use("consultar_status_pedido", {"pedidoId": "4821"}),
                          tool_use("consultar_status_pedido", {"pedidoId": "4822"}), text_reply("Consultei aqui."))
    orch, _ = build(model, ledger, CountingInvoker())
    conv = f"conv-um-ancora-{uuid.uuid4().hex[:8]}"
    orch.handle(TurnRequest(conversaId=conv, clienteId=1001, mensagemId="m-1", mensagem="cadê?"), Deadline.after(60))
    links = list(chain.records(conv))
    assert [link["evento"] for link in links] == ["CHAMADA_DE_FERRAMENTA"] * 2
    assert ddb.updates == 0 and chain.head(conv) is None
    assert chain._anchors.conversation_head(conv) == Head(2, links[-1]["hash"])
    assert chain.verify(conv) == (2, None)
