"""scripts/atendente.py on the local stack: a handed-off conversation is listed by a
reference (never its id), its history shown masked, a person's reply stored in
the conversation, and the conversation returned to the agent (the next customer
message reaches the model again, which sees the person's reply)."""

from __future__ import annotations

import uuid

from cadencia_shared.audit_chain import AUDIT_TABLE, AuditChain
from cadencia_shared.ledger import ConversationStatus, ItemType, Ledger
from orchestrator.events import TurnRequest
from orchestrator.model import Deadline
from scripts import atendente
from scripts.local_stack.aws import session_client

from .support.anthropic_fake import ScriptedModel, fixture, text_reply
from .support.orchestrators import CountingInvoker, build

EMAIL, PHONE = "joana.pessoal@example.org", "+5521998765432"


def _turn(conv: str, text: str) -> TurnRequest:
    return TurnRequest(conversaId=conv, clienteId=1001, mensagemId=f"wamid.{uuid.uuid4().hex}", mensagem=text)


def test_a_person_lists_reads_masked_replies_and_returns_the_conversation(local_stack, capsys):
    ledger = Ledger(local_stack.ledger_table, session_client("dynamodb", local_stack.aws_endpoint))
    conv = f"5521{uuid.uuid4().hex[:8]}"
    orch, _ = build(ScriptedModel(fixture("refusal")), ledger, CountingInvoker())
    assert orch.handle(_turn(conv, f"meu e-mail é {EMAIL} e o telefone {PHONE}"),
                       Deadline.after(60)).status == "aguardando_humano"
    ref = atendente.reference(conv)

    assert atendente.main(["listar"]) == 0
    listed = capsys.readouterr().out
    assert ref in listed and conv not in listed

    assert atendente.main(["mostrar", ref]) == 0
    shown = capsys.readouterr().out
    assert "meu e-mail" in shown and EMAIL not in shown and PHONE not in shown and "[oculto]" in shown

    assert atendente.main(["responder", ref, "--texto", "Oi! Sou a Ana, vou ver seu pedido."]) == 0
    state = ledger.read_conversation(conv)
    assert state.status is ConversationStatus.WAITING_HUMAN
    assert state.messages[-1] == {"role": "assistant", "content": [
        {"type": "text", "text": "Oi! Sou a Ana, vou ver seu pedido."}]}

    assert atendente.main(["devolver", ref]) == 0
    assert ledger.read_conversation(conv).status is ConversationStatus.ACTIVE
    # Given back on the conversation's hash chain, as every writer appends: not a ledger item.
    chain = AuditChain(AUDIT_TABLE, ledger.client, anchor_table=ledger.table_name)
    assert [r["evento"] for r in chain.records(conv)][-1] == "ATENDENTE_DEVOLVEU_AO_AGENTE"
    assert "ATENDENTE_DEVOLVEU_AO_AGENTE" not in [i["evento"] for i in ledger.history(conv, item_type=ItemType.AUDIT)]
    capsys.readouterr()
    assert atendente.main(["listar"]) == 0 and ref not in capsys.readouterr().out

    model = ScriptedModel(text_reply("Certo, sigo daqui."))
    orch, _ = build(model, ledger, CountingInvoker())
    assert orch.handle(_turn(conv, "obrigada"), Deadline.after(60)).status == "ativa"
    sent = model.requests[0]["messages"]
    assert {"type": "text", "text": "Oi! Sou a Ana, vou ver seu pedido."} in sent[-2]["content"]
