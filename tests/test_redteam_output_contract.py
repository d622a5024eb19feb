"""Red team (redteam2) on the output contract: false refund-done sentences that once
reached the customer past a word-list check, and amounts/orders inside a true
sentence that were not checked. The free text may now carry none of them: the
detector (``money_detector``) refuses each, and the true facts are rendered by code
from typed statements. One case goes through the orchestrator with the fake model
and the real SDK.
"""

from __future__ import annotations

import uuid

import pytest

from orchestrator.events import TurnRequest
from orchestrator.model import Deadline
from orchestrator.money_detector import MONEY, findings
from tests.support.anthropic_fake import ScriptedModel, final_answer
from tests.support.orchestrators import CountingInvoker, build


@pytest.mark.parametrize("text", [
    "Seu reembolso foi executado com sucesso.",
    "Estorno efetivado.",
    "Reembolso finalizado!",
    "Reembolso concedido.",
    "Reembolso autorizado.",
    "Você já recebeu o estorno.",
    "Não demorou: reembolso feito.",  # the negation belongs to another clause
    "Não, reembolso feito.",
    "Re-embolso feito.",
])
def test_a_false_refund_done_in_other_words_is_refused(text):
    assert MONEY in findings(text)


@pytest.mark.parametrize("text", [
    "Reembolso de 189,90 emitido, e mais 50,00 emitido.",
    "Reembolso de US$ 500 emitido.",
    "Reembolso de 500 BRL emitido.",
    "Reembolso dos pedidos 4821 e 4822 emitido.",
    "Reembolso de R$ 189,90 do pedido 4821 executado; cai em até 5 dias úteis.",  # true, but the model's words
    "Não há pendências: o pedido 4821 teve o reembolso de R$ 189,90 concluído.",
    "compra 4822 também", "#4822", "mais 50 já estão a caminho",
])
def test_no_amount_nor_order_reaches_the_customer_in_the_models_words(text):
    assert MONEY in findings(text)


def test_executado_does_not_reach_the_customer_through_the_orchestrator(mocked_aws):
    """Nothing was refunded in this conversation; the model says it was, in a word the
    old check did not know: the customer gets the second answer, its fact rendered."""
    ledger = mocked_aws["ledger"]
    lie = "Seu reembolso foi executado com sucesso."
    honest = final_answer("Verifiquei aqui.", declaracoes=[{"tipo": "reembolso_nao_feito", "pedidoId": "4821",
                                                            "motivo": "nao_solicitado"}])
    model = ScriptedModel(final_answer(lie), honest)
    orch, _ = build(model, ledger, CountingInvoker())
    conv = f"conv-rt2-{uuid.uuid4().hex[:8]}"
    turn = TurnRequest(conversaId=conv, clienteId=1001, mensagemId=f"wamid.{uuid.uuid4().hex}", mensagem="já caiu?")
    reply = orch.handle(turn, Deadline.after(60))
    assert reply.resposta == "Verifiquei aqui.\n\nNenhum reembolso do pedido 4821 foi feito nesta conversa."
