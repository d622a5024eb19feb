"""The cost budget's hand-off, a person's reply, the conversation given back, the cost
hand-off again and an operator's cancellation, on a CHAINED, anchored ledger (as deployed):
the audit verifier (scripts/auditoria) finds every chain intact, no record outside it."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

from cadencia_shared.audit_anchors import LedgerAnchors
from cadencia_shared.audit_chain import AUDIT_TABLE, AuditChain
from cadencia_shared.ledger import Ledger
from canal_whatsapp.contacts import ChannelContacts
from orchestrator.events import TurnRequest
from orchestrator.human_reply import HumanReplies, HumanReplyRequest
from orchestrator.model import Deadline
from scripts import auditoria
from scripts.atendente import give_back

from .support.anthropic_fake import ScriptedModel, text_reply
from .support.orchestrators import CountingInvoker, build


def test_cost_hand_offs_replies_and_a_cancellation_leave_every_chain_intact(mocked_aws, capsys):
    client, table = mocked_aws["dynamodb"], mocked_aws["ledger"].table_name
    ledger = Ledger(table, client, audit_chain=AuditChain(AUDIT_TABLE, client, anchor_table=table))
    orch, _ = build(ScriptedModel(default=text_reply("Olá!")), ledger, CountingInvoker(),
                    ORCAMENTO_CUSTO_USD_POR_CONVERSA="0.003")
    people = HumanReplies(ledger=ledger, contacts=ChannelContacts(ledger),
                          sender=SimpleNamespace(outbox=SimpleNamespace(read=lambda rid: None)))
    conv = "conv-rt7-chain"

    def say(text: str):
        return orch.handle(TurnRequest(conversaId=conv, clienteId=1001, mensagemId=f"wamid.{uuid.uuid4().hex}",
                                       mensagem=text), Deadline.after(60))

    assert say("oi").status == "ativa"
    assert say("e o pedido?").motivo == "orcamento_de_custo"
    people.reply(HumanReplyRequest(conversaId=conv, texto="Oi, sou a Ana."))
    give_back(ledger, conv)
    assert say("obrigado").motivo == "orcamento_de_custo"
    ledger.request_cancellation(conv)
    assert say("alô?").status == "aguardando_humano"
    code = auditoria.verify(AuditChain(AUDIT_TABLE, client, anchor_table=table), None,
                            LedgerAnchors(client, table).unchained_records())
    out = capsys.readouterr().out
    assert code == 0, out
    assert "íntegra" in out
    print(out)
