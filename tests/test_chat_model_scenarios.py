"""The chat's scripted model (scripts/local_stack/whatsapp_model.py) does what the real
model does, end to end through the chat's channel — the same one scripts/conversa.py
drives: a signed webhook, the ingress, SQS FIFO, the orchestrator's queue consumer
(real loop, gates, ledger, tool Lambdas as their own DB users, the real anthropic
SDK against the scripted Messages API), the fake Cloud API. Every scenario counts the
payment gateway's real debits."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import pytest

from cadencia_shared.ledger import ConversationStatus, Ledger
from canal_whatsapp.conversation import conversation_id
from orchestrator import texts
from scripts.local_stack.aws import session_client
from scripts.local_stack.whatsapp_fake import notification, text_message
from scripts.local_stack.whatsapp_model import NOT_FOUND, NOTHING_ASKED_HERE, PERSON_TEXT
from tests.support.whatsapp import ANA, day_ts, scripted_channel

CUSTOMER = 1001  # Ana (sql/demo.sql)
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def channel(local_stack):
    with scripted_channel(local_stack, consumers=1) as ch:
        yield ch


@pytest.fixture
def ledger(local_stack) -> Ledger:
    return Ledger(local_stack.ledger_table, session_client("dynamodb", local_stack.aws_endpoint))


class Chat:
    """Ana's side of one conversation (one São Paulo day): each message is answered
    before the next is sent, as a person typing in scripts/conversa.py."""

    def __init__(self, channel, day: int) -> None:
        self.channel, self.day, self.sent = channel, day, 0
        self.conversation = conversation_id(CUSTOMER, str(day_ts(day)))

    def say(self, text: str) -> str:
        before = len(self.channel.api.sent_to(ANA))
        self.sent += 1
        message = text_message(ANA, text, timestamp=day_ts(self.day, self.sent))
        assert self.channel.webhook.post(notification([message])) == 200
        replies = self.channel.wait_for_replies(ANA, before + 1, timeout_s=180)
        assert len(replies) == before + 1, f"no reply to {text!r}"
        return replies[-1].body


def _order(erp, order_id: str, value: str) -> str:
    erp.execute("DELETE FROM reembolsos WHERE pedido_id = %s", (order_id,))
    erp.execute("INSERT INTO pedidos (id, cliente_id, status, valor_pedido) VALUES (%s, %s, 'entregue', %s) "
                "ON CONFLICT (id) DO UPDATE SET cliente_id = EXCLUDED.cliente_id, "
                "valor_pedido = EXCLUDED.valor_pedido, "
                "status_reembolso = 'nenhum', valor_reembolsado = 0", (order_id, CUSTOMER, value))
    return order_id


def _debited(gateway, chat: Chat) -> list[Decimal]:
    return [Decimal(d["valor"]) for d in gateway.debits_for(chat.conversation + "#")]


def test_a_refund_without_an_amount_is_the_orders_value_debited_once_however_often_asked(channel, erp, gateway):
    order = _order(erp, "7701", "120.50")
    chat = Chat(channel, 201)
    done = f"O reembolso de R$ 120,50 do pedido {order} foi emitido."
    assert done in chat.say(f"quero reembolso do pedido {order}")
    assert _debited(gateway, chat) == [Decimal("120.50")]
    # Asked again, and asked whether it arrived: the same truth, from the ledger; no second debit.
    assert done in chat.say(f"quero reembolso do pedido {order}")
    assert done in chat.say("já caiu o reembolso?")
    assert _debited(gateway, chat) == [Decimal("120.50")]


def test_a_refund_with_an_amount_debits_that_amount(channel, erp, gateway):
    order = _order(erp, "7702", "80.00")
    chat = Chat(channel, 202)
    assert f"O reembolso de R$ 30,00 do pedido {order} foi emitido." in chat.say(
        f"Quero o reembolso de R$ 30,00 do pedido {order}, por favor")
    assert _debited(gateway, chat) == [Decimal("30.00")]


def test_insisting_after_the_gateway_declined_gets_the_decline_again_and_no_debit(channel, erp, gateway):
    order = _order(erp, "7703", "45.00")
    chat = Chat(channel, 203)
    gateway.inject("recusar")
    first = chat.say(f"quero reembolso do pedido {order}")
    declined = f"O reembolso do pedido {order} foi recusado pelo meio de pagamento."
    assert declined in first
    again = chat.say(f"eu quero o reembolso do pedido {order}!")
    assert declined in again
    arrived = chat.say("e aí, já caiu o reembolso?")
    assert declined in arrived and NOT_FOUND not in arrived
    assert _debited(gateway, chat) == []


def test_a_refund_above_the_approval_threshold_waits_for_a_person_and_moves_no_money(channel, erp, gateway, ledger):
    order = _order(erp, "7704", "750.00")
    chat = Chat(channel, 204)
    assert chat.say(f"quero reembolso do pedido {order}") == texts.NO_APPROVER  # no approver in the local channel
    assert ledger.read_conversation(chat.conversation).status is ConversationStatus.WAITING_HUMAN
    assert _debited(gateway, chat) == []


def test_a_record_field_is_changed_by_the_profile_tool(channel, erp, gateway):
    chat = Chat(channel, 205)
    try:
        assert "Seu e-mail foi atualizado no cadastro." in chat.say("muda meu email para ana.nova@example.com")
        (email,) = erp.execute("SELECT email FROM clientes WHERE id = %s", (CUSTOMER,)).fetchone()
        assert email == "ana.nova@example.com"
    finally:
        erp.execute("UPDATE clientes SET email = 'ana@example.com' WHERE id = %s", (CUSTOMER,))
    assert _debited(gateway, chat) == []


def test_asking_for_a_person_hands_the_conversation_over(channel, ledger, gateway):
    chat = Chat(channel, 206)
    assert chat.say("quero falar com um atendente") == PERSON_TEXT
    assert ledger.read_conversation(chat.conversation).status is ConversationStatus.WAITING_HUMAN
    assert _debited(gateway, chat) == []


def test_asking_whether_a_refund_arrived_with_none_asked_says_so(channel, gateway):
    chat = Chat(channel, 207)
    assert chat.say("já caiu o reembolso?") == NOTHING_ASKED_HERE
    assert _debited(gateway, chat) == []


def test_the_order_status_is_still_answered_and_other_texts_echoed(channel, erp):
    chat = Chat(channel, 208)
    assert "Situação do pedido 4821: entregue" in chat.say("qual o status do pedido 4821?")
    assert chat.say("obrigada") == "Recebi: obrigada"


def test_scripts_conversa_py_refunds_once_and_answers_whether_it_arrived(local_stack, erp, gateway):
    """The chat itself, as a person runs it (stdin piped): Carla asks for the refund of her
    order (no amount: the order's R$ 75,50), insists, then asks whether it arrived —
    one real debit, and every answer says what the ledger shows."""
    carla, order = "5541991234567", "6200"  # sql/demo.sql: customer 1003, order 6200 (R$ 75,50)
    started = int(time.time())
    lines = [f"quero reembolso do pedido {order}", f"quero reembolso do pedido {order}", "já caiu o reembolso?",
             "/sair"]
    env = {**os.environ, "COLUMNS": "250", "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'functions'}"}
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "conversa.py"), "--numero", carla, "--espera", "240"],
                          input="\n".join(lines) + "\n", capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    said = f"O reembolso de R$ 75,50 do pedido {order} foi emitido."
    assert done.stdout.count(said) == 3, done.stdout[-3000:]
    assert NOT_FOUND not in done.stdout
    conversations = {conversation_id(1003, str(t)) for t in (started, int(time.time()))}
    debits = [d for d in gateway.debits() if d["idempotencyKey"].split("#")[0] in conversations]
    assert [(d["pedidoId"], Decimal(d["valor"])) for d in debits] == [(order, Decimal("75.50"))]


def test_asking_whether_an_unconfirmed_refund_arrived_answers_the_claim_as_it_stands_now(channel, erp, gateway):
    """The gateway holds the request in flight past the refund Lambda's timeout: the
    first answer cannot confirm anything. The gateway then debits it (released by the
    test). Asked "já caiu?", the model repeats the same request (the same key): the
    claim is reconciled with the gateway before it is answered, so the customer hears
    it was emitted — and there is exactly one debit."""
    order = _order(erp, "7709", "64.00")
    chat = Chat(channel, 209)
    gateway.inject("processamento_lento", delay_s=600)
    first = chat.say(f"quero reembolso do pedido {order}")
    assert "ainda não foi confirmado pelo meio de pagamento" in first, first
    assert _debited(gateway, chat) == []
    gateway.release()
    assert gateway.wait_for_debit(f"{chat.conversation}#{order}#reembolso")
    assert f"O reembolso de R$ 64,00 do pedido {order} foi emitido." in chat.say("já caiu o reembolso?")
    assert _debited(gateway, chat) == [Decimal("64.00")]
