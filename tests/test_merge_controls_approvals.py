"""Where approvals and hand-off events meet the turn budgets, cancellation and the
circuit breaker, and the reconciler's rotating visits: one control chain
in DESIGN's order, every hand-off announced (the limits' included, and the
cancellation the commit catches), and the sparse index shared by refund claims,
approval requests and conversations waiting for a person (its sort key is the
claims' ``visitadoEm``: an item without it is not in the index)."""

from __future__ import annotations

import json
import uuid

import boto3
import pytest

from cadencia_shared.approvals import ApprovalStore
from cadencia_shared.catalog import HANDOFF_BUS_NAME
from cadencia_shared.ledger import GSI_UNSETTLED_SORT, ConversationStatus, ItemType
from cadencia_shared.settings import ApprovalSettings
from orchestrator.approval_gate import ConfirmationGate
from orchestrator.breaker import CircuitBreaker
from orchestrator.controls import (
    CallTimeBudget,
    Cancellation,
    DecisionAudit,
    RetryCeiling,
    TokenBudget,
    ToolCallBudget,
    default_controls,
)
from orchestrator.events import TurnRequest
from orchestrator.feasibility import Feasibility
from orchestrator.model import Deadline
from orchestrator.switches import ToolSwitches
from scripts.local_stack.aws import REGION, provision_handoffs

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use, tool_uses
from .support.orchestrators import CountingInvoker, build

BUS = {"EVENT_BUS_NAME": HANDOFF_BUS_NAME}


@pytest.fixture
def queue(mocked_aws):
    sqs = boto3.client("sqs", region_name=REGION)
    url = provision_handoffs(boto3.client("events", region_name=REGION), sqs)
    sqs.purge_queue(QueueUrl=url)

    def received() -> list[tuple[str, str]]:
        out = []
        while True:
            msgs = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
            if not msgs:
                return out
            for m in msgs:
                body = json.loads(m["Body"])
                out.append((body["detail-type"], body["detail"]["motivo"]))
                sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return received


def _turn(conv: str, text: str = "oi") -> TurnRequest:
    return TurnRequest(conversaId=conv, clienteId=1001, mensagemId=f"wamid.{uuid.uuid4().hex}", mensagem=text)


def test_the_default_chain_is_designs_order_with_the_gate_last(mocked_aws):
    chain = default_controls(mocked_aws["ledger"], ceiling=4, reserve_s=3.0, invoker=CountingInvoker(),
                             approval=ApprovalSettings())
    assert [type(c) for c in chain] == [DecisionAudit, CallTimeBudget, TokenBudget, ToolCallBudget, Cancellation,
                                        ToolSwitches, CircuitBreaker, RetryCeiling, Feasibility, ConfirmationGate]


def test_a_tool_call_budget_hand_off_is_published(mocked_aws, queue):
    conv = f"merge-{uuid.uuid4().hex[:8]}"
    calls = [("consultar_status_pedido", {"pedidoId": str(n)}) for n in range(3)]
    orch, _ = build(ScriptedModel(tool_uses(*calls), text_reply("x")), mocked_aws["ledger"], CountingInvoker(),
                    MAX_FERRAMENTAS_POR_TURNO="2", **BUS)
    assert orch.handle(_turn(conv), Deadline.after(60)).motivo == "orcamento_de_ferramentas"
    assert queue() == [("ConversaEncaminhada", "orcamento_de_ferramentas")]


def test_a_cancellation_caught_by_the_commit_is_published_instead_of_the_turns_event(mocked_aws, queue):
    """The refund above the limit would make the turn wait for approval (an
    AprovacaoSolicitada event); the operator cancels before the commit: the commit
    ends it cancelled, and only the cancellation's hand-off is announced."""
    ledger = mocked_aws["ledger"]
    conv = f"merge-{uuid.uuid4().hex[:8]}"
    orch, _ = build(ScriptedModel(text_reply("Olá!")), ledger, CountingInvoker(), **BUS)
    orch.handle(_turn(conv), Deadline.after(60))

    class CancelOnInvoke(CountingInvoker):
        def invoke(self, *args, **kwargs):  # the gate reads the order's status: cancel meanwhile
            ledger.request_cancellation(conv)
            return super().invoke(*args, **kwargs)

    model = ScriptedModel(tool_use("emitir_reembolso", {"pedidoId": "4821", "valor": 900.0}), text_reply("x"))
    orch, _ = build(model, ledger, CancelOnInvoke(), APROVADORES="ana.operadora", **BUS)
    reply = orch.handle(_turn(conv, "reembolsa"), Deadline.after(60))
    assert (reply.status, reply.motivo) == ("aguardando_humano", "cancelada")
    assert not ledger.cancellation_pending(conv)
    assert queue() == [("ConversaEncaminhada", "cancelada")]


def test_the_sparse_index_lists_approvals_and_waiting_people_and_the_reconciler_only_claims(mocked_aws):
    ledger = mocked_aws["ledger"]
    waiting, approving = f"merge-h-{uuid.uuid4().hex[:6]}", f"merge-a-{uuid.uuid4().hex[:6]}"
    orch, _ = build(ScriptedModel(tool_use("emitir_reembolso", {"pedidoId": "4821", "valor": 10.0})), ledger,
                    CountingInvoker(), MAX_RODADAS_POR_TURNO="1")
    assert orch.handle(_turn(waiting), Deadline.after(60)).status == "aguardando_humano"
    model = ScriptedModel(tool_use("emitir_reembolso", {"pedidoId": "4822", "valor": 900.0}))
    orch, _ = build(model, ledger, CountingInvoker(), APROVADORES="ana.operadora")
    assert orch.handle(_turn(approving), Deadline.after(60)).status == "aguardando_aprovacao"

    conversation = ledger.client.get_item(TableName=ledger.table_name, Key=ledger.table.key(f"conversa#{waiting}"))
    assert GSI_UNSETTLED_SORT in conversation["Item"]
    assert waiting in [c for c, _ in ledger.waiting_for_a_person()]
    (pending,) = [r for r in ApprovalStore(ledger).pending() if r.conversation_id == approving]
    assert pending.arguments["pedidoId"] == "4822"
    assert ledger.unsettled_claims() == []  # neither is a refund claim

    # Back to the agent: out of the index (status, sort key and mark removed).
    state = ledger.acquire_conversation(conversation_id=waiting, customer_id=1001, lease_s=30)
    ledger.commit_conversation(state, messages=list(state.messages), status=ConversationStatus.ACTIVE)
    assert waiting not in [c for c, _ in ledger.waiting_for_a_person()]
    item = ledger.client.get_item(TableName=ledger.table_name, Key=ledger.table.key(f"conversa#{waiting}"))["Item"]
    assert GSI_UNSETTLED_SORT not in item and "pendencia" not in item
    assert [a for a in ledger.history(waiting, item_type=ItemType.AUDIT) if a["evento"] == "TURNO_INTERROMPIDO"]
