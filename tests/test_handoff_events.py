"""Hand-offs and approval requests reach a subscriber: the orchestrator publishes
on the stack's bus (moto's EventBridge), the default rule delivers to the queue,
and a subscriber reads typed, masked events. Nothing is announced before it is
committed, and a failed publish never fails the customer's turn."""

from __future__ import annotations

import json
import uuid

import boto3
import pytest

from cadencia_shared.catalog import HANDOFF_BUS_NAME
from cadencia_shared.ledger import ConversationStatus
from orchestrator.events import TurnRequest
from orchestrator.model import Deadline
from scripts.local_stack.aws import REGION, provision_handoffs
from scripts.local_stack.emf import capture_emf

from .support.anthropic_fake import ScriptedModel, fixture, text_reply, tool_use
from .support.orchestrators import CountingInvoker, build

BUS = {"EVENT_BUS_NAME": HANDOFF_BUS_NAME}


@pytest.fixture
def queue(mocked_aws):
    sqs = boto3.client("sqs", region_name=REGION)
    url = provision_handoffs(boto3.client("events", region_name=REGION), sqs)
    sqs.purge_queue(QueueUrl=url)

    def received() -> list[dict]:
        out = []
        while True:
            msgs = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
            if not msgs:
                return out
            for m in msgs:
                out.append(json.loads(m["Body"]))
                sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return received


def _turn(conv: str) -> TurnRequest:
    return TurnRequest(conversaId=conv, clienteId=1001, mensagemId=f"wamid.{uuid.uuid4().hex}", mensagem="oi")


def test_a_refusal_hand_off_reaches_the_queue_masked(mocked_aws, queue):
    conv = f"5521998765432{uuid.uuid4().hex[:4]}"  # a conversation id that holds a phone number
    orch, _ = build(ScriptedModel(fixture("refusal")), mocked_aws["ledger"], CountingInvoker(), **BUS)
    reply = orch.handle(_turn(conv), Deadline.after(60))
    assert reply.status == "aguardando_humano"
    (event,) = queue()
    assert (event["source"], event["detail-type"]) == ("cadencia.agente", "ConversaEncaminhada")
    assert event["detail"]["motivo"] == "recusa_do_modelo" and event["detail"]["tipo"] == "ConversaEncaminhada"
    assert "5521998765432" not in json.dumps(event) and event["detail"]["conversaId"].endswith(conv[-4:])


def test_a_ceiling_hand_off_and_an_approval_request_are_published_once(mocked_aws, queue):
    ledger = mocked_aws["ledger"]
    conv = f"evt-{uuid.uuid4().hex[:8]}"
    model = ScriptedModel(tool_use("emitir_reembolso", {"pedidoId": "4821", "valor": 900.0}), text_reply("x"))
    orch, _ = build(model, ledger, CountingInvoker(), APROVADORES="ana.operadora", **BUS)
    assert orch.handle(_turn(conv), Deadline.after(60)).status == "aguardando_aprovacao"
    again, _ = build(ScriptedModel(), ledger, CountingInvoker(), APROVADORES="ana.operadora", **BUS)
    again.handle(_turn(conv), Deadline.after(60))  # still waiting: no second event
    (event,) = queue()
    assert event["detail-type"] == "AprovacaoSolicitada"
    detail = event["detail"]
    assert (detail["ferramenta"], detail["pedidoId"], detail["valor"], detail["motivo"]) == \
        ("emitir_reembolso", "4821", "900.00", "acima_do_limite")
    assert conv not in json.dumps(event)
    # The ceiling's hand-off, in another conversation.
    conv2 = f"evt-{uuid.uuid4().hex[:8]}"
    insist = lambda _: tool_use("consultar_status_pedido", {"pedidoId": "4821"})  # noqa: E731
    orch, _ = build(ScriptedModel(default=insist), ledger, CountingInvoker(), MAX_RODADAS_POR_TURNO="20", **BUS)
    assert orch.handle(_turn(conv2), Deadline.after(60)).motivo == "teto"
    assert [(e["detail-type"], e["detail"]["motivo"]) for e in queue()] == [("ConversaEncaminhada", "teto")]


def test_a_failed_publish_never_fails_the_turn(mocked_aws):
    """No bus exists (provisioning skipped): the hand-off is committed anyway."""
    conv = f"evt-{uuid.uuid4().hex[:8]}"
    orch, _ = build(ScriptedModel(fixture("refusal")), mocked_aws["ledger"], CountingInvoker(),
                    EVENT_BUS_NAME="barramento-inexistente")
    with capture_emf() as emf:
        assert orch.handle(_turn(conv), Deadline.after(60)).status == "aguardando_humano"
    assert mocked_aws["ledger"].read_conversation(conv).status is ConversationStatus.WAITING_HUMAN
    assert emf.totals()[("ErrosDePublicacao", (("Tipo", "ConversaEncaminhada"),))] == 1
