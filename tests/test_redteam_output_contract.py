"""Red team (redteam2) on the output contract's narrative check: false refund-done
sentences that reached the customer, and amounts/orders in a true sentence that
were not checked. Each case was seen passing ``narrative_violations`` on main
(19039d6); one goes through the orchestrator with the fake model and the real SDK.
"""

from __future__ import annotations

import uuid

import pytest

from orchestrator.events import TurnRequest
from orchestrator.model import Deadline
from orchestrator.output_contract import FinalAnswer, narrative_violations
from tests.support.anthropic_fake import ScriptedModel, final_answer
from tests.support.orchestrators import CountingInvoker, build

ORDER = "4821"
REFUND = {"tipo": "reembolso_emitido", "pedidoId": ORDER, "valor": 189.9}


def _codes(text: str, actions: list) -> list[str]:
    return [v.code for v in narrative_violations(FinalAnswer(text, False, (ORDER,), tuple(actions)))]


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
    assert _codes(text, []) == ["reembolso_alegado_no_texto"]


@pytest.mark.parametrize(("text", "code"), [
    ("Reembolso de 189,90 emitido, e mais 50,00 emitido.", "valor_no_texto_divergente"),
    ("Reembolso de US$ 500 emitido.", "valor_no_texto_divergente"),
    ("Reembolso de 500 BRL emitido.", "valor_no_texto_divergente"),
    ("Reembolso dos pedidos 4821 e 4822 emitido.", "pedido_no_texto_divergente"),
])
def test_a_true_refund_does_not_carry_a_false_amount_or_order(text, code):
    assert _codes(text, [REFUND]) == [code]


@pytest.mark.parametrize("text", [
    "Reembolso de R$ 189,90 do pedido 4821 executado; cai em até 5 dias úteis.",
    "Reembolso do pedido 4821 efetivado: 189,90 reais.",
    "Não há pendências: o pedido 4821 teve o reembolso de R$ 189,90 concluído.",
    "Seu reembolso ainda não foi executado.",
    "O reembolso não foi efetivado, já chamei uma pessoa.",
    "Seu reembolso precisa ser aprovado por um atendente; te aviso quando for.",  # refused on main
])
def test_true_sentences_still_pass(text):
    actions = [] if "não foi" in text or "precisa" in text else [REFUND]
    assert _codes(text, actions) == []


def test_executado_does_not_reach_the_customer_through_the_orchestrator(mocked_aws):
    """Nothing was refunded in this conversation; the model says it was, in a word the
    check did not know: the customer must get the honest second answer."""
    ledger = mocked_aws["ledger"]
    lie = "Seu reembolso foi executado com sucesso."
    honest = "Ainda não consigo confirmar o reembolso; te aviso quando houver confirmação."
    model = ScriptedModel(final_answer(lie), final_answer(honest))
    orch, _ = build(model, ledger, CountingInvoker())
    conv = f"conv-rt2-{uuid.uuid4().hex[:8]}"
    turn = TurnRequest(conversaId=conv, clienteId=1001, mensagemId=f"wamid.{uuid.uuid4().hex}", mensagem="já caiu?")
    reply = orch.handle(turn, Deadline.after(60))
    assert reply.resposta == honest
