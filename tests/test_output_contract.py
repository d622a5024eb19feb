"""The output contract (DESIGN invariant 11): the customer reads
only a final answer whose claims the ledger shows as done.

The model is the fake one, through the real ``anthropic`` SDK; the evidence is the
real ledger (moto's DynamoDB), the claims and attempts written with the ledger's
own operations; audit records go to a real hash-chained audit table.
"""

from __future__ import annotations

import json
import uuid
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cadencia_shared.audit_chain import AuditChain
from cadencia_shared.audit_chain import table_definition as audit_table_definition
from cadencia_shared.ledger import AttemptResult, ClaimStatus, Ledger, refund_idempotency_key
from cadencia_shared.outcomes import Outcome
from orchestrator import texts
from orchestrator.events import TurnRequest
from orchestrator.model import Deadline
from orchestrator.output_contract import FinalAnswer, LedgerEvidence, narrative_violations, review, tool_definition
from scripts.local_stack.emf import capture_emf
from tests.support.anthropic_fake import ScriptedModel, final_answer
from tests.support.call_links import answer
from tests.support.orchestrators import CountingInvoker, build

ORDER, AMOUNT = "4821", Decimal("189.90")
REFUND = {"tipo": "reembolso_emitido", "pedidoId": ORDER, "valor": 189.9}
LIE = "Pronto! Seu reembolso de R$ 189,90 já foi feito e cai em até 5 dias úteis."
HONEST = "Ainda não consigo confirmar o reembolso por aqui; te aviso assim que houver confirmação."


@pytest.fixture
def audited(mocked_aws):
    """The ledger of ``mocked_aws`` with its audit records in a hash-chained table."""
    ddb = mocked_aws["dynamodb"]
    ddb.create_table(**audit_table_definition("auditoria-contrato"))
    chain = AuditChain("auditoria-contrato", ddb)
    return Ledger(mocked_aws["ledger"].table_name, ddb, audit_chain=chain), chain


def _conv() -> str:
    return f"conv-contrato-{uuid.uuid4().hex[:8]}"


def _turn(conv: str, text: str = "já caiu?") -> TurnRequest:
    return TurnRequest(conversaId=conv, clienteId=1001, mensagemId=f"wamid.{uuid.uuid4().hex}", mensagem=text)


def _refund(ledger: Ledger, conv: str, status: ClaimStatus, amount: Decimal = AMOUNT) -> None:
    """A refund claim in the state the refund tool leaves it (its own ledger calls)."""
    claim = ledger.claim_refund(key=refund_idempotency_key(conv, ORDER), conversation_id=conv, order_id=ORDER,
                                customer_id=1001, amount=amount, lease_s=60)
    if status is not ClaimStatus.IN_PROGRESS:  # claimed, nothing sent yet: left as claimed
        ledger.settle_claim(claim, status, gateway_transaction="tx-1" if status is ClaimStatus.EXECUTED else None)


def _profile_attempt(ledger: Ledger, conv: str, outcome: Outcome = Outcome.EXECUTED) -> None:
    attempt = ledger.register_attempt(conversation_id=conv, subject="cliente-1001", tool="atualizar_cadastro",
                                      ceiling=4)
    answer(ledger, attempt, AttemptResult(outcome.value))


def _review(ledger: Ledger, answer, conversation: str):
    return review(answer, conversation_id=conversation, customer_id=1001, evidence=LedgerEvidence(ledger, ceiling=4))


def _events(chain: AuditChain, conv: str) -> list[tuple[str, dict]]:
    return [(r["evento"], json.loads(r["detalhes"])) for r in chain.records(conv)]


def _contract_metrics(emf) -> dict[str, int]:
    return {dict(dims)["Resultado"]: int(v) for (name, dims), v in emf.totals().items() if name == "ContratoDeSaida"}


# --- through the orchestrator ------------------------------------------------------


def test_a_true_refund_claim_is_delivered_and_the_history_stays_valid(audited):
    ledger, chain = audited
    conv = _conv()
    _refund(ledger, conv, ClaimStatus.EXECUTED)
    model = ScriptedModel(final_answer(LIE, acoes=[REFUND], pedidos=[ORDER]), final_answer("De nada!"))
    orch, _ = build(model, ledger, CountingInvoker())
    reply = orch.handle(_turn(conv), Deadline.after(60))
    assert (reply.resposta, reply.motivo, reply.status) == (LIE, "resposta", "ativa")
    assert len(model.requests) == 1
    orch.handle(_turn(conv, "obrigado"), Deadline.after(60))
    sent = model.requests[-1]["messages"]
    answered = sent[-1]["content"]
    assert answered[0]["type"] == "tool_result" and answered[0]["is_error"] is False
    assert answered[0]["tool_use_id"] == sent[-2]["content"][0]["id"] and answered[-1]["text"] == "obrigado"
    assert not [e for e, _ in _events(chain, conv) if e.startswith("CONTRATO")]


def test_a_false_refund_done_is_corrected_on_the_second_attempt(audited):
    ledger, chain = audited
    conv = _conv()
    model = ScriptedModel(final_answer(LIE, pedidos=[ORDER]), final_answer(HONEST, pedidos=[ORDER]))
    orch, _ = build(model, ledger, CountingInvoker())
    with capture_emf() as emf:
        reply = orch.handle(_turn(conv), Deadline.after(60))
    assert reply.resposta == HONEST and len(model.requests) == 2
    (refused,) = model.tool_results(1)
    assert refused["is_error"] is True and "reembolso_alegado_no_texto" in refused["content"]
    assert LIE not in refused["content"]  # the feedback names the problem, not the text
    assert [(e, d["violacoes"]) for e, d in _events(chain, conv)] == [
        ("CONTRATO_DE_SAIDA_VIOLADO", ["reembolso_alegado_no_texto"])]
    assert _contract_metrics(emf) == {"violacao": 1}


def test_k_false_attempts_end_with_the_fallback_and_nothing_false_is_sent(audited):
    ledger, chain = audited
    conv = _conv()
    model = ScriptedModel(default=final_answer(LIE, acoes=[REFUND], pedidos=[ORDER]))
    orch, _ = build(model, ledger, CountingInvoker(), CONTRATO_SAIDA_TENTATIVAS="2")
    with capture_emf() as emf:
        reply = orch.handle(_turn(conv), Deadline.after(60))
    assert (reply.resposta, reply.motivo) == (texts.OUTPUT_CONTRACT_FALLBACK, "contrato_de_saida")
    assert len(model.requests) == 2
    assert [e for e, _ in _events(chain, conv)] == ["CONTRATO_DE_SAIDA_VIOLADO", "CONTRATO_DE_SAIDA_FALLBACK"]
    assert _contract_metrics(emf) == {"violacao": 2, "fallback": 1}
    stored = ledger.read_conversation(conv).messages
    assert stored[-1]["content"][0]["is_error"] is True  # the refused answer stays answered in the history


def test_the_default_attempts_are_three(audited):
    ledger, _ = audited
    model = ScriptedModel(default=final_answer(LIE, pedidos=[ORDER]))
    orch, _ = build(model, ledger, CountingInvoker())
    assert orch.handle(_turn(_conv()), Deadline.after(60)).resposta == texts.OUTPUT_CONTRACT_FALLBACK
    assert len(model.requests) == 3


# --- each claim against the ledger -----------------------------------------------------


@pytest.mark.parametrize(("status", "claimed", "same_conversation", "code"), [
    (ClaimStatus.EXECUTED, 150.0, True, "valor_divergente"),
    (ClaimStatus.EXECUTED, 189.9, False, "reembolso_nao_executado"),
    (ClaimStatus.DECLINED, 189.9, True, "reembolso_nao_executado"),
    (ClaimStatus.UNKNOWN, 189.9, True, "reembolso_nao_executado"),
    (ClaimStatus.IN_PROGRESS, 189.9, True, "reembolso_nao_executado"),
    (ClaimStatus.FAILED_BEFORE_GATEWAY, 189.9, True, "reembolso_nao_executado"),
])
def test_a_refund_claim_the_ledger_does_not_show_is_a_violation(audited, status, claimed, same_conversation, code):
    ledger, _ = audited
    conv, other = _conv(), _conv()
    _refund(ledger, conv, status)
    answer = {"texto": "Seu reembolso foi emitido.", "precisaDePessoa": False, "pedidos": [ORDER],
              "acoes": [{**REFUND, "valor": claimed}]}
    verdict = _review(ledger, answer, conv if same_conversation else other)
    assert [v.code for v in verdict] == [code]


def test_the_true_refund_passes_with_the_amount_in_any_spelling(audited):
    ledger, _ = audited
    conv = _conv()
    _refund(ledger, conv, ClaimStatus.EXECUTED)
    for valor, text in ((189.9, "Reembolso de R$ 189,90 emitido."), (189.90, "Estornei R$189.90 hoje; o estorno foi feito.")):
        answer = {"texto": text, "precisaDePessoa": False, "pedidos": [ORDER], "acoes": [{**REFUND, "valor": valor}]}
        assert isinstance(_review(ledger, answer, conv), FinalAnswer)
    wrong_in_text = {"texto": "Seu reembolso de R$ 1.899,00 foi feito.", "precisaDePessoa": False,
                     "pedidos": [ORDER], "acoes": [REFUND]}
    verdict = _review(ledger, wrong_in_text, conv)
    assert [v.code for v in verdict] == ["valor_no_texto_divergente"]


def test_a_profile_update_claim_needs_an_executed_update_in_this_conversation(audited):
    ledger, _ = audited
    conv, other = _conv(), _conv()
    _profile_attempt(ledger, other, Outcome.REFUSED_BY_TOOL)  # refused by the tool: nothing changed
    _profile_attempt(ledger, conv)
    answer = {"texto": "Pronto, seu endereço foi atualizado.", "precisaDePessoa": False, "pedidos": [],
              "acoes": [{"tipo": "cadastro_atualizado"}]}
    assert isinstance(_review(ledger, answer, conv), FinalAnswer)
    assert [v.code for v in _review(ledger, answer, other)] == [
        "cadastro_nao_atualizado"]
    unclaimed = {**answer, "acoes": []}
    assert [v.code for v in _review(ledger, unclaimed, conv)] == [
        "cadastro_alegado_no_texto"]


# --- the schema ----------------------------------------------------------------------

VALID = {"texto": "Seu pedido saiu para entrega.", "precisaDePessoa": False, "pedidos": [ORDER], "acoes": []}


class _Nothing:
    def refund_claim(self, conversation_id, order_id):
        raise AssertionError("a reply that fails the schema is never checked against the ledger")

    def profile_updated(self, conversation_id, customer_id):
        raise AssertionError("a reply that fails the schema is never checked against the ledger")


@pytest.mark.parametrize("answer", [
    {k: v for k, v in VALID.items() if k != "texto"},  # missing fields
    {k: v for k, v in VALID.items() if k != "acoes"},
    {**VALID, "extra": 1},  # an extra field
    {**VALID, "acoes": [{**REFUND, "nota": "x"}]},  # an extra field inside an action
    {**VALID, "texto": 7},  # wrong types
    {**VALID, "texto": ""},
    {**VALID, "texto": "x" * 1501},
    {**VALID, "precisaDePessoa": "false"},
    {**VALID, "precisaDePessoa": 0},
    {**VALID, "pedidos": [True]},  # a bool as an id
    {**VALID, "pedidos": [4821]},
    {**VALID, "pedidos": ["48 21"]},  # the order pattern, anchored
    {**VALID, "pedidos": ["4821\n"]},
    {**VALID, "acoes": [{**REFUND, "valor": "189.90"}]},  # no string-to-number
    {**VALID, "acoes": [{**REFUND, "valor": True}]},
    {**VALID, "acoes": [{**REFUND, "valor": -1}]},
    {**VALID, "acoes": [{"tipo": "reembolso_emitido", "pedidoId": ORDER}]},
    {**VALID, "acoes": [{"tipo": "desconto_aplicado"}]},
    {**VALID, "acoes": [REFUND, REFUND]},
    "Seu reembolso foi feito",
    None,
    [],
])
def test_schema_violations_are_rejected_before_any_ledger_read(answer):
    verdict = review(answer, conversation_id="c-1", customer_id=1001, evidence=_Nothing())
    assert verdict and {v.code for v in verdict} == {"esquema"}


def test_the_model_sees_the_schema_without_the_keywords_the_api_does_not_enforce():
    schema = json.dumps(tool_definition(strict=True)["input_schema"])
    assert "maxLength" not in schema and "minLength" not in schema and "maxItems" not in schema
    assert r"\A" not in schema and '"pattern": "^[A-Za-z0-9._-]{1,64}$"' in schema  # ECMA-262 spelling
    assert tool_definition(strict=True)["strict"] is True and "strict" not in tool_definition(strict=False)


# --- hostile answers -------------------------------------------------------------------

DONE_WORDS = ["feito", "realizado", "processado", "emitido", "estornado", "concluído", "efetuado", "aprovado",
              "creditado", "devolvido", "PRONTO", "caiu", "confirmado", "Done", "issued"]
NOUNS = ["reembolso", "Reembolso", "REEMBOLSO", "estorno", "devolução do valor", "ressarcimento", "refund"]
INVISIBLE = ["", "\u200b", "\u00ad", "\u2060", "\ufeff"]


@st.composite
def false_sentence(draw) -> str:
    noun = draw(st.sampled_from(NOUNS))
    cut = draw(st.integers(0, len(noun)))
    noun = noun[:cut] + draw(st.sampled_from(INVISIBLE)) + noun[cut:]
    done = draw(st.sampled_from(DONE_WORDS))
    template = draw(st.sampled_from([
        "Seu {n} foi {d}!", "{n} {d} com sucesso.", "Oi! O {n} do pedido 4821 já foi {d}",
        "Tudo certo: {n} {d}; qualquer coisa me chame", "Não se preocupe, seu {n} foi {d}.",
    ]))
    return template.format(n=noun, d=done)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sentence=false_sentence(), prefix=st.text(max_size=30), order=st.text(min_size=1, max_size=8),
       valor=st.floats(min_value=0.01, max_value=99999, allow_nan=False), claim=st.booleans())
def test_hostile_answers_never_let_a_false_claim_out(audited, sentence, prefix, order, valor, claim):
    """One conversation where order 4821 was refunded R$ 189.90, and one where nothing
    was: an answer passes only if every claimed refund is that one, in that conversation."""
    ledger, _ = audited
    conv = "conv-hostil-refunded"
    if ledger.get_claim(refund_idempotency_key(conv, ORDER)) is None:
        _refund(ledger, conv, ClaimStatus.EXECUTED)
    actions = [{"tipo": "reembolso_emitido", "pedidoId": order, "valor": valor}] if claim else []
    answer = {"texto": prefix.replace(".", " ") + " " + sentence, "precisaDePessoa": False,
              "pedidos": [order] if claim else [], "acoes": actions}
    for conversation in (conv, "conv-hostil-nothing"):
        verdict = _review(ledger, answer, conversation)
        if isinstance(verdict, FinalAnswer):
            assert conversation == conv and claim and order == ORDER and Decimal(str(valor)) == AMOUNT


# --- narrative claims, case by case ---------------------------------------------------

PROFILE = {"tipo": "cadastro_atualizado"}


@pytest.mark.parametrize(("text", "actions", "codes"), [
    ("Seu reembolso. Foi feito!", [], ["reembolso_alegado_no_texto"]),  # across a sentence end
    ("Já estornamos o valor do seu pedido.", [], ["reembolso_alegado_no_texto"]),
    ("Estornei o valor.", [], ["reembolso_alegado_no_texto"]),
    ("O valor já foi devolvido.", [], ["reembolso_alegado_no_texto"]),
    ("O reembolso está a caminho!", [], ["reembolso_alegado_no_texto"]),
    ("Não se preocupe, seu reembolso foi feito.", [], ["reembolso_alegado_no_texto"]),
    ("Seu REEMBOLSO foi PROCESSADO.", [], ["reembolso_alegado_no_texto"]),
    ("Seu endereço foi alterado.", [], ["cadastro_alegado_no_texto"]),
    ("Reembolso de R$ 189,90 do pedido 9999 emitido.", [REFUND], ["pedido_no_texto_divergente"]),
    ("Reembolso de R$ 1.899,00 emitido.", [REFUND], ["valor_no_texto_divergente"]),
    ("Reembolso de 50 reais emitido.", [REFUND], ["valor_no_texto_divergente"]),
    ("Reembolso sem juros creditado.", [], ["reembolso_alegado_no_texto"]),  # "sem" does not negate
    # true or harmless sentences pass
    ("Reembolso de R$ 189,90 do pedido 4821 emitido.", [REFUND], []),
    ("Devolvemos R$189.90 no seu cartão.", [REFUND], []),
    ("Emiti o reembolso do seu pedido. Qualquer coisa, estou por aqui!", [REFUND], []),  # prova's text
    ("Reembolso do pedido nº 4821 emitido.", [REFUND], []),
    ("Reembolso do pedido nº 4822 emitido.", [REFUND], ["pedido_no_texto_divergente"]),
    ("Seu reembolso ainda não foi processado.", [], []),
    ("Seu cadastro foi atualizado; o reembolso ainda está em análise.", [PROFILE], []),
    ("Ainda não consigo confirmar o seu reembolso por aqui; te aviso assim que houver confirmação.", [], []),
    ("Seu pedido saiu para entrega.", [], []),
])
def test_narrative_claims(text, actions, codes):
    final = FinalAnswer(text, False, (ORDER,), tuple(actions))
    assert [v.code for v in narrative_violations(final)] == codes


def test_the_output_schema_is_valid_json_schema():
    """Checked here, not at import (the module builds its validator from a constant)."""
    from jsonschema import Draft202012Validator

    from orchestrator.output_contract import SCHEMA

    Draft202012Validator.check_schema(SCHEMA)
