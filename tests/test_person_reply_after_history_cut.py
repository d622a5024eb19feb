"""A person's reply is never taken for an earlier one after the history cut brought the
customer-message count back to what it was then: the reply's position is the conversation's
customer-message counter (``ConversationState.customer_messages``), which a cut never lowers,
not the number of ``user`` entries in the stored (cut) history."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

from canal_whatsapp.contacts import ChannelContacts
from orchestrator.events import TurnRequest
from orchestrator.human_reply import HumanReplies, HumanReplyRequest
from orchestrator.model import Deadline
from scripts.atendente import give_back
from tests.support.anthropic_fake import ScriptedModel, final_answer, text_reply
from tests.support.orchestrators import CountingInvoker, build

GREETING = "Olá! Sou a Ana, vou cuidar do seu pedido."


def _say(orch, conv: str, text: str):
    return orch.handle(TurnRequest(conversaId=conv, clienteId=1001, mensagemId=f"wamid.{uuid.uuid4().hex}",
                                   mensagem=text), Deadline.after(60))


def test_a_persons_second_greeting_after_a_cut_is_written(mocked_aws):
    ledger, conv = mocked_aws["ledger"], "conv-rt7-reply-id"
    model = ScriptedModel(default=text_reply("ok"))
    orch, _ = build(model, ledger, CountingInvoker(), HISTORICO_MAX_MENSAGENS="4")
    people = HumanReplies(ledger=ledger, contacts=ChannelContacts(ledger),
                          sender=SimpleNamespace(outbox=SimpleNamespace(read=lambda rid: None)))
    outcomes = []
    for hand_off in range(2):
        for n in range(3):
            _say(orch, conv, f"mensagem {hand_off}.{n}")
        model.then(final_answer("Vou chamar alguém.", precisa_de_pessoa=True))
        assert _say(orch, conv, "quero um atendente").status == "aguardando_humano"
        outcomes.append(people.reply(HumanReplyRequest(conversaId=conv, texto=GREETING)))
        give_back(ledger, conv)
    assert outcomes[1].reply_id != outcomes[0].reply_id and not outcomes[1].repeated, outcomes
    said = [b.get("text") for m in ledger.read_conversation(conv).messages if m["role"] == "assistant"
            for b in m["content"] if isinstance(b, dict)]
    assert GREETING in said  # the second greeting is in the history the model reads
