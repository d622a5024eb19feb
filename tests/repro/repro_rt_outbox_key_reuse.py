"""An approval id is reused when an expired/voided record is replaced by a fresh request;
the resume's WhatsApp message is keyed envio#aprovacao-{id}, recorded ONCE: the fresh
decision's message is swallowed by the expiry message's record."""
from __future__ import annotations

from cadencia_shared.approvals import ApprovalStatus, ApprovalStore
from canal_whatsapp.contacts import ChannelContacts, Contact
from canal_whatsapp.outbox import Outbox
from orchestrator.model import Deadline
from orchestrator.resume import Resumer
from orchestrator.whatsapp_replies import WhatsAppMessages
from tests.support.anthropic_fake import ScriptedModel, text_reply
from tests.support.orchestrators import build
from tests.test_approval_lifecycle import POLICY, _approval, _ask, _clocked, _conv, _decide, _invoker, _turn


class Queue:
    def __init__(self):
        self.keys = []

    def schedule(self, key, delay_s):
        self.keys.append(key)


def test_fresh_request_after_expiry_is_never_told(mocked_aws, gateway, tools):
    ledger, clock = _clocked(mocked_aws)
    conv = _conv("rt-outbox")
    ChannelContacts(ledger).remember(conv, Contact(wa_id="5511999990000", phone_number_id="123"))
    invoker = _invoker(tools)
    _, orch = _ask(ledger, invoker, conv, APROVACAO_VALIDADE_S="600")
    approval = _approval(ledger, conv)
    clock[0] += 601
    queue = Queue()
    resumer = Resumer(orch.settings, ledger, orch.tool_round, orch.events, WhatsAppMessages(ledger, queue))
    done = resumer.resume(approval, Deadline.after(60))
    assert done.reason == "aprovacao_expirada"
    first_text = Outbox(ledger).read(f"aprovacao-{approval}")["texto"]
    assert "expirou" in first_text
    # the customer talks again; the agent asks the same refund again -> same approval id
    model = ScriptedModel(text_reply("ok"))
    build(model, ledger, invoker, **POLICY)[0].handle(_turn(conv, "ok"), Deadline.after(60))
    reply, orch = _ask(ledger, invoker, conv, APROVACAO_VALIDADE_S="600")
    assert reply.status == "aguardando_aprovacao"
    assert ApprovalStore(ledger).get(approval).status is ApprovalStatus.PENDING  # same id, fresh
    assert _decide(ledger, approval)["ok"] is True
    resumer = Resumer(orch.settings, ledger, orch.tool_round, orch.events, WhatsAppMessages(ledger, queue))
    done = resumer.resume(approval, Deadline.after(60))
    assert done.reason == "aprovada_executada", done
    assert len(gateway.debits_for(conv)) == 1
    told = Outbox(ledger).read(f"aprovacao-{approval}")["texto"]
    print("\nqueue keys:", queue.keys)
    print("outbox text:", told)
    print("resume reply:", done.reply)
    # what the WhatsApp customer will receive for the approved, debited refund:
    assert told == done.reply, "the approved-and-debited message was swallowed: outbox still holds the expiry text"
