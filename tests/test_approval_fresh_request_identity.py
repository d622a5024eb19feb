"""A fresh approval request for the same call (after the old one was voided by a
cancellation or closed by its expiry) is a NEW identity: its own approval id, so its
resumed ``tool_use`` block id, its WhatsApp outbox key and its decision never collide
with the old request's. The old id stays closed: a late or replayed decision of it is
refused, and it authorises nothing.

Real ledger on moto, the real refund Lambda handler, real PostgreSQL and the gateway
(every debit counted on the gateway itself)."""
from __future__ import annotations

from collections import Counter
from decimal import Decimal

from cadencia_shared.approvals import ApprovalStatus, ApprovalStore
from cadencia_shared.ledger import ItemType, Ledger
from canal_whatsapp.contacts import ChannelContacts, Contact
from canal_whatsapp.outbox import Outbox
from orchestrator.model import Deadline
from orchestrator.resume import Resumer
from orchestrator.whatsapp_replies import WhatsAppMessages

from .support.anthropic_fake import ScriptedModel, text_reply, tool_use
from .support.orchestrators import build
from .test_approval_lifecycle import (
    POLICY,
    _ask,
    _audit,
    _clocked,
    _conv,
    _decide,
    _details,
    _give_back,
    _invoker,
    _turn,
)


def _approvals(ledger: Ledger, conv: str) -> list[str]:
    """The conversation's approval records, oldest first."""
    return [item["aprovacaoId"] for item in ledger.history(conv, item_type=ItemType.APPROVAL)]


def _tool_use_ids(ledger: Ledger, conv: str) -> Counter:
    state = ledger.read_conversation(conv)
    return Counter(block["id"] for message in state.messages if message["role"] == "assistant"
                   and isinstance(message["content"], list)
                   for block in message["content"] if block.get("type") == "tool_use")


def test_approve_cancel_give_back_ask_again_approve_runs_the_fresh_request_once(mocked_aws, gateway, tools):
    ledger, conv = mocked_aws["ledger"], _conv("nova-identidade")
    invoker = _invoker(tools)
    _, orch = _ask(ledger, invoker, conv)
    (old,) = _approvals(ledger, conv)
    assert _decide(ledger, old)["ok"] is True
    assert ledger.request_cancellation(conv)
    cancelled = Resumer.of(orch).resume(old, Deadline.after(60))
    assert cancelled.status == "aguardando_humano"
    assert ApprovalStore(ledger).get(old).status is ApprovalStatus.VOIDED
    _give_back(ledger, conv)

    reply, orch = _ask(ledger, invoker, conv)
    assert reply.status == "aguardando_aprovacao"
    approvals = _approvals(ledger, conv)
    assert len(approvals) == 2 and approvals[0] == old
    fresh = approvals[1]
    assert fresh != old  # a new request is a new identity
    assert ApprovalStore(ledger).get(old).status is ApprovalStatus.VOIDED  # the old record is kept, closed
    # A replayed decision of the old request is refused; it approves nothing.
    replay = _decide(ledger, old)
    assert replay == {"ok": False, "erro": {"codigo": "aprovacao_anulada"}}
    assert ApprovalStore(ledger).get(fresh).status is ApprovalStatus.PENDING

    assert _decide(ledger, fresh)["ok"] is True
    done = Resumer.of(orch).resume(fresh, Deadline.after(60))
    assert (done.reason, done.status) == ("aprovada_executada", "ativa")
    assert len(gateway.debits_for(conv)) == 1
    assert ApprovalStore(ledger).get(fresh).status is ApprovalStatus.CONSUMED
    ids = _tool_use_ids(ledger, conv)
    assert f"toolu_aprovacao_{fresh}" in ids and f"toolu_aprovacao_{old}" in ids
    assert max(ids.values()) == 1, f"a tool_use id repeats in the stored history: {ids}"
    consumed = [_details(a)["aprovacaoId"] for a in _audit(ledger, conv) if a["evento"] == "APROVACAO_CONSUMIDA"]
    assert consumed == [fresh]


class _Queue:
    def __init__(self) -> None:
        self.keys: list[str] = []

    def schedule(self, key: str, delay_s: float) -> None:
        self.keys.append(key)


def test_the_fresh_request_after_an_expiry_is_told_to_the_customer(mocked_aws, gateway, tools):
    ledger, clock = _clocked(mocked_aws)
    conv = _conv("nova-chave-envio")
    ChannelContacts(ledger).remember(conv, Contact(wa_id="5511999990000", phone_number_id="123"))
    invoker = _invoker(tools)
    _, orch = _ask(ledger, invoker, conv, APROVACAO_VALIDADE_S="600")
    (old,) = _approvals(ledger, conv)
    clock[0] += 601
    queue = _Queue()
    expired = Resumer(orch.settings, ledger, orch.tool_round, orch.events, WhatsAppMessages(ledger, queue))
    assert expired.resume(old, Deadline.after(60)).reason == "aprovacao_expirada"
    assert "expirou" in Outbox(ledger).read(f"aprovacao-{old}")["texto"]

    build(ScriptedModel(text_reply("ok")), ledger, invoker, **POLICY)[0].handle(_turn(conv, "ok"), Deadline.after(60))
    reply, orch = _ask(ledger, invoker, conv, APROVACAO_VALIDADE_S="600")
    assert reply.status == "aguardando_aprovacao"
    fresh = _approvals(ledger, conv)[-1]
    assert fresh != old and ApprovalStore(ledger).get(old).status is ApprovalStatus.EXPIRED
    assert _decide(ledger, fresh)["ok"] is True
    resumer = Resumer(orch.settings, ledger, orch.tool_round, orch.events, WhatsAppMessages(ledger, queue))
    done = resumer.resume(fresh, Deadline.after(60))
    assert done.reason == "aprovada_executada"
    assert len(gateway.debits_for(conv)) == 1
    # Each request's message has its own outbox key: the approved-and-debited one is sent.
    assert Outbox(ledger).read(f"aprovacao-{fresh}")["texto"] == done.reply
    assert "expirou" in Outbox(ledger).read(f"aprovacao-{old}")["texto"]


def test_a_decision_of_a_request_the_conversation_no_longer_waits_on_is_refused(mocked_aws, gateway, tools):
    """Request A waits; the conversation goes to a person and back (no cancellation: A
    stays pending) and the agent asks another refund, B. Approving A would approve a
    call nobody will run (the resume acts only on the request the conversation waits
    on): the decision is refused, A stays pending, and B is decided and run."""
    from .test_approval_lifecycle import _hand_to_person

    ledger, conv = mocked_aws["ledger"], _conv("espera-outra")
    invoker = _invoker(tools)
    _ask(ledger, invoker, conv)
    (first,) = _approvals(ledger, conv)
    _hand_to_person(ledger, conv)
    _give_back(ledger, conv)
    model = ScriptedModel(tool_use("emitir_reembolso", {"pedidoId": "4821", "valor": 120.0}), text_reply("x"))
    orch, _ = build(model, ledger, invoker, **POLICY)
    assert orch.handle(_turn(conv), Deadline.after(60)).status == "aguardando_aprovacao"
    second = _approvals(ledger, conv)[-1]
    assert second != first
    assert _decide(ledger, first) == {"ok": False, "erro": {"codigo": "conversa_nao_aguarda_aprovacao"}}
    assert ApprovalStore(ledger).get(first).status is ApprovalStatus.PENDING
    assert _decide(ledger, second)["ok"] is True
    done = Resumer.of(orch).resume(second, Deadline.after(60))
    assert done.reason == "aprovada_executada"
    assert [Decimal(d["valor"]) for d in gateway.debits_for(conv)] == [Decimal("120")]
