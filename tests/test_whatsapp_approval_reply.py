"""A WhatsApp customer whose refund was approved or denied is told, through the
channel's outbox and resend queue (the WhatsApp consumer sends it: it holds the
token), once whatever the resume's retries; a conversation that did not come from
WhatsApp records nothing."""

from __future__ import annotations

import json
import uuid

import pytest

from cadencia_shared.approvals import ApprovalStore
from cadencia_shared.ledger import ItemType, Ledger
from canal_whatsapp.contacts import ChannelContacts, Contact
from canal_whatsapp.delivery import Sender
from canal_whatsapp.graph import GraphClient
from canal_whatsapp.outbox import Outbox, OutboxStatus
from canal_whatsapp.resends import ResendRequest
from orchestrator import handler
from orchestrator.events import TurnRequest
from orchestrator.invokers.local import InProcessInvoker, LocalContext, function_environment
from orchestrator.model import Deadline
from scripts.local_stack.aws import session_client
from scripts.local_stack.whatsapp_fake import BUSINESS_PHONE_NUMBER_ID, FakeCloudApi, FakeCloudApiServer

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use
from .support.orchestrators import build
from .support.whatsapp import ANA

POLICY = {"APROVACAO_LIMITE_REAIS": "100", "APROVADORES": "ana.operadora"}


@pytest.fixture
def resend_queue(local_stack):
    sqs = session_client("sqs", local_stack.aws_endpoint)
    url = sqs.create_queue(QueueName=f"cadencia-whatsapp-reenvios-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    yield sqs, url
    sqs.delete_queue(QueueUrl=url)


def _scheduled(queue) -> list[str]:
    sqs, url = queue
    keys = []
    while got := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get("Messages", []):
        for m in got:
            keys.append(ResendRequest.model_validate_json(m["Body"]).reenvio)
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return keys


def _waiting_approval(local_stack, ledger, *, whatsapp: bool) -> tuple[str, str]:
    conv = f"wa-1001-aprov{uuid.uuid4().hex[:8]}"
    if whatsapp:  # what the WhatsApp consumer writes before each turn
        ChannelContacts(ledger).remember(conv, Contact(wa_id=ANA, phone_number_id=BUSINESS_PHONE_NUMBER_ID))
    model = ScriptedModel(tool_use("emitir_reembolso", {"pedidoId": "4821", "valor": 150.0}), text_reply("x"))
    orch, _ = build(model, ledger, InProcessInvoker(local_stack.function_environments()), **POLICY)
    orch.handle(TurnRequest(conversaId=conv, clienteId=1001, mensagemId=f"wamid.{uuid.uuid4().hex}",
                            mensagem="reembolso"), Deadline.after(60))
    (item,) = list(ledger.history(conv, item_type=ItemType.APPROVAL))
    return conv, item["aprovacaoId"]


def _resume(local_stack, tmp_path, queue_url: str, approval: str) -> dict:
    envs = tmp_path / "tools.json"
    envs.write_text(json.dumps(local_stack.function_environments()))
    env = {**local_stack.aws_environment(), "LEDGER_TABLE": local_stack.ledger_table, "TOOL_INVOKER": "local",
           "LOCAL_TOOL_ENVIRONMENTS": str(envs), "ANTHROPIC_API_KEY": "sk-ant-never-called",
           "WHATSAPP_RESEND_QUEUE_URL": queue_url, **POLICY}
    handler.reset()
    with function_environment(env):
        return handler.lambda_handler({"acao": "retomar_aprovacao", "aprovacaoId": approval},
                                      LocalContext("cadencia-orquestrador", timeout_s=60))


@pytest.mark.parametrize("approve", [True, False])
def test_the_decision_reaches_the_whatsapp_customer_once(local_stack, erp, gateway, tmp_path, resend_queue, approve):
    ledger = Ledger(local_stack.ledger_table, session_client("dynamodb", local_stack.aws_endpoint))
    conv, approval = _waiting_approval(local_stack, ledger, whatsapp=True)
    ApprovalStore(ledger).decide(approval, approve=approve, approver="ana.operadora", justification="ok",
                                 allowed_approvers=frozenset({"ana.operadora"}))
    answer = _resume(local_stack, tmp_path, resend_queue[1], approval)
    assert answer["motivo"] == ("aprovada_executada" if approve else "aprovacao_negada") and answer["resposta"]
    assert _resume(local_stack, tmp_path, resend_queue[1], approval)["motivo"] == "nada_a_retomar"
    [key] = _scheduled(resend_queue)
    record = Outbox(ledger).read(key)
    assert (record["para"], record["phoneNumberId"], record["texto"], record["conversa"]) == (
        ANA, BUSINESS_PHONE_NUMBER_ID, answer["resposta"], conv)
    # The consumer's part: the resend is sent once, whatever the queue delivers twice.
    api = FakeCloudApi(access_token="token-de-teste")
    with FakeCloudApiServer(api) as server:
        sender = Sender(outbox=Outbox(ledger), graph=GraphClient(server.graph_url, 2.0),
                        access_token=lambda: "token-de-teste")
        assert sender.deliver_recorded(key) is OutboxStatus.SENT
        assert sender.deliver_recorded(key) is OutboxStatus.SENT
    assert [(m.to, m.body, m.context_message_id) for m in api.sent] == [(ANA, answer["resposta"], None)]
    assert len(gateway.debits_for(conv)) == (1 if approve else 0)


def test_a_conversation_not_from_whatsapp_records_nothing(local_stack, erp, gateway, tmp_path, resend_queue):
    ledger = Ledger(local_stack.ledger_table, session_client("dynamodb", local_stack.aws_endpoint))
    _conv, approval = _waiting_approval(local_stack, ledger, whatsapp=False)
    ApprovalStore(ledger).decide(approval, approve=False, approver="ana.operadora", justification="não",
                                 allowed_approvers=frozenset({"ana.operadora"}))
    assert _resume(local_stack, tmp_path, resend_queue[1], approval)["resposta"]
    assert _scheduled(resend_queue) == []
