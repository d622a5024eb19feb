"""Repro (not collected): a conversation handed off for its model cost
(``orcamento_de_custo``) and given back by the attendant (``scripts/atendente devolver``)
is handed off again by the very next customer message, before any model call: the
budget is the conversation's for its whole life (``custoModeloMicroUsd``, and a WhatsApp
conversation is ``wa-{clienteId}-{day}``), and giving it back does not give the agent
any room. The customer reads "vou encaminhar para um atendente" again; the attendant's
"devolver" did nothing for the rest of the day.
Run: .venv/bin/python -m pytest tests/repro/repro_cost_hand_off_bounces_after_give_back.py
"""

from __future__ import annotations

from orchestrator.model import Deadline
from scripts.atendente import give_back
from tests.support.anthropic_fake import ScriptedModel, text_reply
from tests.support.orchestrators import CountingInvoker, build
from tests.test_orchestrator_budgets import _request


def test_a_conversation_given_back_after_a_cost_hand_off_reaches_the_agent(mocked_aws):
    ledger = mocked_aws["ledger"]
    model = ScriptedModel(text_reply("Olá!"), text_reply("Posso ajudar com o pedido."))
    orch, _ = build(model, ledger, CountingInvoker(), ORCAMENTO_CUSTO_USD_POR_CONVERSA="0.003")
    assert orch.handle(_request("conv-rt7-bounce"), Deadline.after(60)).status == "ativa"  # spends $0.0035
    second = orch.handle(_request("conv-rt7-bounce", "e agora?"), Deadline.after(60))
    assert second.motivo == "orcamento_de_custo"
    give_back(ledger, "conv-rt7-bounce")  # the person hands it back to the agent
    third = orch.handle(_request("conv-rt7-bounce", "qual o status do pedido 4821?"), Deadline.after(60))
    assert (third.status, len(model.requests)) == ("ativa", 2), (third, len(model.requests))
